//! Host closures that see CPU-backend memory: one replayable operation that declares the
//! byte ranges it reads and writes, locks their allocations while it runs, and lets the
//! closure load and store them.

use std::sync::Arc;

use super::memory::{Memory, lock_all};
use super::op::{NodeKind, Op};
use super::stream::Stream;
use super::work::Range;
use crate::vocab::access::Access;
use crate::vocab::fault::CpuFault;

/// How a host-data closure reaches its ranges while it runs: `io(k, buf, false)` copies range
/// `k` into `buf`, `io(k, buf, true)` copies `buf` into range `k` (a written range only).
pub(crate) type RegionIo<'a> = dyn FnMut(usize, &mut [u8], bool) -> Result<(), String> + 'a;

/// The closure: gets the I/O function of its ranges.
pub(crate) type HostDataFn = Arc<dyn Fn(&mut RegionIo<'_>) -> Result<(), String> + Send + Sync>;

impl Stream {
    /// Enqueues `run` with `regions` (each a range and whether the closure writes it): a host
    /// function for the race detector and the capture, which records one host node.
    pub(crate) fn host_data_fn(
        &self,
        regions: Vec<(Range, bool)>,
        run: HostDataFn,
    ) -> Result<(), CpuFault> {
        let locks: Vec<(Arc<Memory>, Access)> = regions
            .iter()
            .map(|(range, write)| {
                let access = if *write { Access::Write } else { Access::Read };
                (range.memory.clone(), access)
            })
            .collect();
        let ranges = regions.clone();
        let mut op = Op::replayable("host function", move || {
            let mut locked = lock_all(&locks)?;
            let mut io = |k: usize, buf: &mut [u8], store: bool| -> Result<(), String> {
                let (range, write) = ranges.get(k).ok_or("no such range")?;
                let end = range
                    .offset
                    .checked_add(buf.len())
                    .filter(|&end| end <= range.memory.bytes())
                    .ok_or("a range lies outside its allocation")?;
                let (_, lock) = locked
                    .iter_mut()
                    .find(|(m, _)| m.id() == range.memory.id())
                    .ok_or("a range is not locked")?;
                if store {
                    if !write {
                        return Err("a range the closure only reads was stored to".to_owned());
                    }
                    let bytes = lock
                        .bytes_mut()
                        .ok_or("a written range is not write-locked")?;
                    bytes[range.offset..end].copy_from_slice(buf);
                } else {
                    buf.copy_from_slice(&lock.bytes()[range.offset..end]);
                }
                Ok(())
            };
            run(&mut io)
        })
        .host_function()
        .kind(NodeKind::Host);
        for (range, write) in &regions {
            let access = if *write { Access::Write } else { Access::Read };
            op = op.touches_span(&range.memory, access, range.span());
        }
        // As every enqueue that touches memory: the free rule learns where it was used.
        let captured = self.enqueue_tracked(op)?;
        for (range, _) in &regions {
            range.memory.note_use(self.id(), captured);
        }
        Ok(())
    }
}

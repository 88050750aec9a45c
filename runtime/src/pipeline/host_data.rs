//! Host closures that see data: `host |snapshot: &[f32]| { .. } reads(snapshot);`.
//!
//! The closure runs in stream order, at every eager step and every replay of a captured
//! graph, and receives the pinned buffers it declares as slices. It sees a copy: when it runs,
//! the bytes of each declared buffer are copied into storage the closure owns (kept from one
//! run to the next), the closure reads them (and changes those it writes), and the written
//! ones are copied back. On CUDA the copies are relaxed atomic loads and stores of the pinned
//! memory, and the enqueue fences it like a copy does; on the CPU backend the operation locks
//! the memory and declares its byte ranges to the race detector. See `cuda/host_data.rs`.

use std::any::Any;
use std::sync::{Arc, Mutex, PoisonError};

use bytemuck::Pod;

use crate::cpu;
use crate::cuda;
use crate::error::{Error, Result};
use crate::memory::PinnedBuffer;
use crate::memory::alloc::PinnedMemory as PinnedAlloc;
use crate::memory::view::sealed::PinnedMemory as _;
use crate::stream::{Stream, StreamBackend, mixed};

/// Where a region's bytes live.
enum Memory {
    Cuda(Arc<cuda::PinnedMemory>, usize),
    Cpu(cpu::Range),
}

/// One pinned buffer a host closure declares, with how it uses it.
pub struct HostRegion {
    memory: Memory,
    ctx: crate::context::Context,
    bytes: usize,
    write: bool,
    slot: fn(usize) -> Slot,
}

impl std::fmt::Debug for HostRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostRegion")
            .field("bytes", &self.bytes)
            .field("write", &self.write)
            .finish_non_exhaustive()
    }
}

/// The closure's own copy of one region: a `Vec<T>` of the region's elements, and how to see
/// it as bytes.
struct Slot {
    data: Box<dyn Any + Send>,
    len: usize,
    bytes: fn(&mut (dyn Any + Send), usize) -> &mut [u8],
}

fn slot_of<T: Pod + Send>(len: usize) -> Slot {
    fn bytes<T: Pod + Send>(data: &mut (dyn Any + Send), len: usize) -> &mut [u8] {
        match data.downcast_mut::<Vec<T>>() {
            Some(elements) => {
                // A closure that panicked after `take` left the storage empty: renew it.
                if elements.len() != len {
                    *elements = vec![T::zeroed(); len];
                }
                bytemuck::cast_slice_mut(elements.as_mut_slice())
            }
            None => &mut [],
        }
    }
    Slot {
        data: Box::new(vec![T::zeroed(); len]),
        len,
        bytes: bytes::<T>,
    }
}

impl HostRegion {
    fn new<T: Pod + Send>(buffer: &PinnedBuffer<T>, write: bool) -> HostRegion {
        let region = buffer.pinned_region();
        let memory = match &region.alloc.memory {
            PinnedAlloc::Cuda(memory) => Memory::Cuda(memory.clone(), region.offset),
            PinnedAlloc::Cpu(memory) => Memory::Cpu(cpu::Range {
                memory: memory.clone(),
                offset: region.offset,
                bytes: region.bytes,
            }),
        };
        HostRegion {
            memory,
            ctx: buffer.context().clone(),
            bytes: region.bytes,
            write,
            slot: |bytes| slot_of::<T>(bytes / std::mem::size_of::<T>().max(1)),
        }
    }

    /// A buffer the closure reads (`reads(name)`): it gets `&[T]`.
    pub fn read<T: Pod + Send>(buffer: &PinnedBuffer<T>) -> HostRegion {
        HostRegion::new(buffer, false)
    }

    /// A buffer the closure writes (`writes(name)`): it gets `&mut [T]`, holding the buffer's
    /// contents, and what it leaves there is copied back.
    pub fn write<T: Pod + Send>(buffer: &mut PinnedBuffer<T>) -> HostRegion {
        HostRegion::new(buffer, true)
    }
}

/// What a host closure's declared buffers hold while it runs: take each as a `Vec<T>`, and
/// put it back when done.
pub struct HostFrame {
    slots: Vec<Slot>,
}

impl std::fmt::Debug for HostFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostFrame")
            .field("slots", &self.slots.len())
            .finish()
    }
}

impl HostFrame {
    /// The elements of region `k` (empty if `k` holds another element type).
    pub fn take<T: Pod + Send>(&mut self, k: usize) -> Vec<T> {
        self.slots
            .get_mut(k)
            .and_then(|slot| slot.data.downcast_mut::<Vec<T>>())
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Gives region `k` its elements back.
    pub fn put<T: Pod + Send>(&mut self, k: usize, elements: Vec<T>) {
        if let Some(slot) = self.slots.get_mut(k)
            && let Some(held) = slot.data.downcast_mut::<Vec<T>>()
        {
            *held = elements;
        }
    }
}

/// Runs `f` over `frame` between loading every region and storing the written ones, through
/// `io` (`io(k, bytes, store)`).
fn run_frame(
    frame: &Mutex<HostFrame>,
    writes: &[bool],
    io: &mut cpu::RegionIo<'_>,
    f: &(dyn Fn(&mut HostFrame) + Send + Sync),
) -> std::result::Result<(), String> {
    let mut frame = frame.lock().unwrap_or_else(PoisonError::into_inner);
    for (k, slot) in frame.slots.iter_mut().enumerate() {
        let len = slot.len;
        io(k, (slot.bytes)(&mut *slot.data, len), false)?;
    }
    f(&mut frame);
    for (k, slot) in frame.slots.iter_mut().enumerate() {
        if writes.get(k).copied().unwrap_or(false) {
            let len = slot.len;
            io(k, (slot.bytes)(&mut *slot.data, len), true)?;
        }
    }
    Ok(())
}

/// `host |a: &[T], b: &mut [U]| { .. } reads(a) writes(b);`: enqueues `f` on `stream`; when it
/// runs it finds each region's elements in its [`HostFrame`] (region `k` at index `k`).
pub fn host_closure_with<F>(stream: &Stream, regions: Vec<HostRegion>, f: F) -> Result<()>
where
    F: Fn(&mut HostFrame) + Send + Sync + 'static,
{
    const CALL: &str = "host closure";
    if regions
        .iter()
        .any(|r| !r.ctx.shares_memory_with(stream.context()))
    {
        return Err(Error::mismatch(
            CALL,
            "a buffer belongs to another context than the stream",
        ));
    }
    let writes: Vec<bool> = regions.iter().map(|r| r.write).collect();
    let frame = Mutex::new(HostFrame {
        slots: regions.iter().map(|r| (r.slot)(r.bytes)).collect(),
    });
    let f: Box<dyn Fn(&mut HostFrame) + Send + Sync> = Box::new(f);
    match stream.kind() {
        StreamBackend::Cuda(s) => {
            let mut pinned = Vec::new();
            let mut places = Vec::new();
            for region in &regions {
                match &region.memory {
                    Memory::Cuda(memory, offset) => {
                        pinned.push(memory.clone());
                        places.push((memory.clone(), *offset, region.write));
                    }
                    Memory::Cpu(_) => return Err(mixed(CALL, "buffer")),
                }
            }
            let run = move || {
                let mut io =
                    |k: usize, buf: &mut [u8], store: bool| -> std::result::Result<(), String> {
                        let (memory, offset, write) = places.get(k).ok_or("no such region")?;
                        let done = if store && *write {
                            memory.store_bytes(*offset, buf)
                        } else if store {
                            return Err("a region the closure only reads was stored to".to_owned());
                        } else {
                            memory.load_bytes(*offset, buf)
                        };
                        done.map_err(|e| e.to_string())
                    };
                if let Err(message) = run_frame(&frame, &writes, &mut io, &*f) {
                    // Reported like a panic of the closure: at the next synchronize.
                    panic!("a host closure could not reach its buffers: {message}");
                }
            };
            s.launch_repeat_touching(Arc::new(run), &pinned)
        }
        StreamBackend::Cpu(s) => {
            let mut ranges = Vec::new();
            for region in &regions {
                match &region.memory {
                    Memory::Cpu(range) => ranges.push((range.clone(), region.write)),
                    Memory::Cuda(..) => return Err(mixed(CALL, "buffer")),
                }
            }
            let run: cpu::HostDataFn =
                Arc::new(move |io: &mut cpu::RegionIo<'_>| run_frame(&frame, &writes, io, &*f));
            Ok(s.host_data_fn(ranges, run)?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Context;
    use crate::memory::DeviceBuffer;

    #[test]
    fn a_host_closure_reads_and_writes_pinned_buffers_in_stream_order() {
        let ctx = Context::cpu_checked();
        let stream = Stream::non_blocking(&ctx).unwrap();
        let field = DeviceBuffer::from_slice(&stream, &[1.0f32, 2.0, 3.0]).unwrap();
        let mut snapshot = PinnedBuffer::<f32>::zeros(&ctx, 3).unwrap();
        let mut sums = PinnedBuffer::<f64>::zeros(&ctx, 1).unwrap();
        stream.copy_dtoh(&field, &mut snapshot).unwrap();
        let regions = vec![HostRegion::read(&snapshot), HostRegion::write(&mut sums)];
        host_closure_with(&stream, regions, |frame| {
            let snapshot: Vec<f32> = frame.take(0);
            let mut sums: Vec<f64> = frame.take(1);
            sums[0] += snapshot.iter().map(|&x| f64::from(x)).sum::<f64>();
            frame.put(0, snapshot);
            frame.put(1, sums);
        })
        .unwrap();
        stream.synchronize().unwrap();
        assert_eq!(sums.to_vec().unwrap(), [6.0]);
        assert!(ctx.races().is_empty(), "{:?}", ctx.races());
    }
}

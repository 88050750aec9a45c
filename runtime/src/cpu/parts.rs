//! One operation over several ranges ("parts") of CPU-backend memory at once: what a
//! pipeline stage's sends, receives and collectives become on the CPU backend, where they
//! run on the stage's stream worker and exchange bytes with the other ranks' workers.
//!
//! The operation declares every part's access for the race detector, locks each allocation
//! once (a write wins over a read), and hands its work one byte slice per part, in the
//! order given: a written part as `&mut [u8]`, a read one as `&[u8]`. Several parts may lie
//! in one allocation (a halo row received next to the row sent); written parts must not
//! overlap any other part of their allocation, so each written slice is carved out on its
//! own, and the read parts of a written allocation are copied out before the work runs.

use std::sync::Arc;

use super::memory::{Memory, lock_all};
use super::op::{Keep, Op};
use super::stream::Stream;
use super::work::Range;
use crate::vocab::access::{Access, Span};
use crate::vocab::fault::CpuFault;

/// One range an operation touches, and how.
#[derive(Clone, Debug)]
pub(crate) struct Part {
    /// The bytes.
    pub(crate) range: Range,
    /// Read or written.
    pub(crate) access: Access,
}

/// The bytes of one part, as the operation's work sees them.
#[derive(Debug)]
pub(crate) enum PartBytes<'a> {
    /// A part the operation reads.
    Read(&'a [u8]),
    /// A part the operation writes.
    Write(&'a mut [u8]),
}

/// The work of a parts operation: called with one [`PartBytes`] per part, in order.
pub(crate) type PartsWork = Arc<dyn Fn(&mut [PartBytes<'_>]) -> Result<(), String> + Send + Sync>;

impl Stream {
    /// Enqueues `work` over `parts` (see the module docs), labelled `label` in reports, with
    /// `keep` held by the operation (and by a graph node it is captured into).
    pub(crate) fn parts(
        &self,
        label: String,
        parts: Vec<Part>,
        work: PartsWork,
        keep: Option<Keep>,
    ) -> Result<(), CpuFault> {
        let op = parts_op(label, parts, work);
        self.submit(match keep {
            Some(keep) => op.keep(keep),
            None => op,
        })
    }
}

/// The byte span of a part in its allocation, checked against the allocation's size.
fn span(part: &Part) -> Result<std::ops::Range<usize>, String> {
    let range = &part.range;
    range
        .offset
        .checked_add(range.bytes)
        .filter(|&end| end <= range.memory.bytes())
        .map(|end| range.offset..end)
        .ok_or_else(|| format!("a range of `{}` lies outside it", range.memory.name()))
}

/// Whether every written part overlaps no other part of its allocation.
pub(crate) fn overlapping_write(parts: &[Part]) -> Option<(usize, usize)> {
    for (i, a) in parts.iter().enumerate() {
        for (j, b) in parts.iter().enumerate() {
            if i == j
                || !(a.access.is_write() || b.access.is_write())
                || !Arc::ptr_eq(&a.range.memory, &b.range.memory)
            {
                continue;
            }
            let (a_end, b_end) = (
                a.range.offset + a.range.bytes,
                b.range.offset + b.range.bytes,
            );
            if a.range.offset < b_end && b.range.offset < a_end {
                return Some((i, j));
            }
        }
    }
    None
}

fn parts_op(label: String, parts: Vec<Part>, work: PartsWork) -> Op {
    let accesses: Vec<(Arc<Memory>, Access)> = parts
        .iter()
        .map(|p| (p.range.memory.clone(), p.access))
        .collect();
    let mut op = {
        let parts = parts.clone();
        Op::replayable(label, move || run(&parts, &accesses, &work))
    };
    for part in &parts {
        op = op.touches_span(
            &part.range.memory,
            part.access,
            Span::bytes(part.range.offset, part.range.bytes),
        );
    }
    op
}

/// One run: lock, carve, work.
fn run(parts: &[Part], accesses: &[(Arc<Memory>, Access)], work: &PartsWork) -> Result<(), String> {
    if let Some((a, b)) = overlapping_write(parts) {
        return Err(format!(
            "parts {a} and {b} of `{}` overlap and one is written",
            parts[a].range.memory.name()
        ));
    }
    let spans = parts.iter().map(span).collect::<Result<Vec<_>, _>>()?;
    let mut locks = lock_all(accesses)?;
    let lock_of = |part: &Part| {
        locks
            .iter()
            .position(|(memory, _)| std::ptr::eq(*memory, &*part.range.memory))
    };
    let owners: Vec<usize> = parts
        .iter()
        .map(|p| lock_of(p).ok_or("a part's allocation is not locked"))
        .collect::<Result<_, _>>()?;
    // Read parts of written allocations, copied out first: the written slices are carved
    // from the same bytes.
    let mut copies: Vec<(usize, Vec<u8>)> = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let written_allocation = locks[owners[i]].1.bytes_mut().is_some();
        if !part.access.is_write() && written_allocation {
            copies.push((i, locks[owners[i]].1.bytes()[spans[i].clone()].to_vec()));
        }
    }
    let mut slices: Vec<Option<PartBytes<'_>>> = (0..parts.len()).map(|_| None).collect();
    for (index, (_, locked)) in locks.iter_mut().enumerate() {
        let mine = (0..parts.len()).filter(|&i| owners[i] == index);
        match locked {
            super::memory::Locked::Read(_) => {
                let bytes: &[u8] = locked.bytes();
                for i in mine {
                    slices[i] = Some(PartBytes::Read(&bytes[spans[i].clone()]));
                }
            }
            super::memory::Locked::Write(_) => {
                let Some(bytes) = locked.bytes_mut() else {
                    return Err("a written allocation is not write-locked".to_owned());
                };
                let mut writes: Vec<usize> = mine.filter(|&i| parts[i].access.is_write()).collect();
                writes.sort_by_key(|&i| spans[i].start);
                let mut rest: &mut [u8] = bytes;
                let mut consumed = 0;
                for i in writes {
                    let span = spans[i].clone();
                    let (_, tail) = std::mem::take(&mut rest).split_at_mut(span.start - consumed);
                    let (slice, tail) = tail.split_at_mut(span.len());
                    slices[i] = Some(PartBytes::Write(slice));
                    rest = tail;
                    consumed = span.end;
                }
            }
        }
    }
    for (i, copy) in &copies {
        slices[*i] = Some(PartBytes::Read(copy));
    }
    let mut slices: Vec<PartBytes<'_>> = slices
        .into_iter()
        .map(|s| s.ok_or("a part got no bytes"))
        .collect::<Result<_, _>>()?;
    work(&mut slices)
}

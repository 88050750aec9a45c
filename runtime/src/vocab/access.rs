//! How operations touch buffers: the vocabulary the race detector and the locks share.

use std::sync::atomic::{AtomicU64, Ordering};

/// How an operation touches a buffer. A read-modify-write is a [`Access::Write`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Access {
    /// The operation only reads the buffer.
    Read,
    /// The operation writes (and possibly also reads) the buffer.
    Write,
}

impl Access {
    /// Whether this access writes.
    pub(crate) fn is_write(self) -> bool {
        self == Access::Write
    }
}

/// A buffer as the host backend knows it: a small id, unique in the process, whose name the
/// context keeps for race reports (see `Context::register_buffer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BufferId(u64);

impl BufferId {
    /// A process-unique id, so buffers of different contexts never collide in a graph.
    pub(crate) fn fresh() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        BufferId(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The raw id, for logs and DOT output.
    pub(crate) fn get(self) -> u64 {
        self.0
    }
}

/// The bytes of an allocation one access touches: `start..end`, [`Span::ALL`] for the whole
/// allocation. Two accesses to one buffer conflict only where their spans overlap, so work on
/// disjoint views of one allocation never races.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Span {
    /// The first byte.
    pub(crate) start: usize,
    /// One past the last byte.
    pub(crate) end: usize,
}

impl Span {
    /// Every byte of the allocation.
    pub(crate) const ALL: Span = Span {
        start: 0,
        end: usize::MAX,
    };

    /// `len` bytes from `offset`.
    pub(crate) fn bytes(offset: usize, len: usize) -> Span {
        Span {
            start: offset,
            end: offset.saturating_add(len),
        }
    }

    /// Whether the two spans share a byte (an empty span shares none).
    pub(crate) fn overlaps(self, other: Span) -> bool {
        self.start < self.end
            && other.start < other.end
            && self.start < other.end
            && other.start < self.end
    }
}

/// One access of an operation: the buffer, how, and which of its bytes.
pub(crate) type Touch = (BufferId, Access, Span);

/// Sorts accesses by buffer and span and merges repeats of one span (a write wins over a
/// read). One operation never races with itself either way: its accesses share one epoch.
pub(crate) fn merge_accesses(mut all: Vec<Touch>) -> Vec<Touch> {
    // Sorting by (id, span, access) puts a span's Write after its Read; keep the last of a run.
    all.sort_unstable_by_key(|&(buffer, access, span)| (buffer, span, access));
    let mut merged: Vec<Touch> = Vec::with_capacity(all.len());
    for (buffer, access, span) in all {
        match merged.last_mut() {
            Some(last) if last.0 == buffer && last.2 == span => last.1 = access,
            _ => merged.push((buffer, access, span)),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_overlap_where_they_share_a_byte() {
        let a = Span::bytes(0, 8);
        assert!(a.overlaps(Span::bytes(4, 8)));
        assert!(!a.overlaps(Span::bytes(8, 8)));
        assert!(!a.overlaps(Span::bytes(2, 0)));
        assert!(Span::ALL.overlaps(a));
    }

    #[test]
    fn merging_keeps_one_entry_per_span_with_writes_winning() {
        let b = BufferId::fresh();
        let merged = merge_accesses(vec![
            (b, Access::Read, Span::bytes(0, 4)),
            (b, Access::Write, Span::bytes(0, 4)),
            (b, Access::Read, Span::bytes(4, 4)),
        ]);
        assert_eq!(
            merged,
            vec![
                (b, Access::Write, Span::bytes(0, 4)),
                (b, Access::Read, Span::bytes(4, 4))
            ]
        );
    }
}

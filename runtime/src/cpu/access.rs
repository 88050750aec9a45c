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

/// Sorts accesses by buffer and merges repeats (a write wins over a read): one entry per
/// buffer, so one operation never races with itself.
pub(crate) fn merge_accesses(mut all: Vec<(BufferId, Access)>) -> Vec<(BufferId, Access)> {
    // Sorting by (id, access) puts a buffer's Write after its Read; keep the last of each run.
    all.sort_unstable();
    let mut merged: Vec<(BufferId, Access)> = Vec::with_capacity(all.len());
    for (buffer, access) in all {
        match merged.last_mut() {
            Some(last) if last.0 == buffer => last.1 = access,
            _ => merged.push((buffer, access)),
        }
    }
    merged
}

//! When freed memory may be released without waiting for the whole context: the rule both
//! backends follow for [`Stream::free_async`](crate::Stream::free_async), as pure functions.

use std::sync::atomic::{AtomicU64, Ordering};

/// How a device allocation was made, which decides how it may be freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AllocKind {
    /// `cuMemAlloc`: usable on any stream at once; freed after a context synchronize.
    Plain,
    /// `cuMemAllocAsync` / `cuMemAllocFromPoolAsync`: valid from its allocating stream's
    /// point on; may be freed in stream order (see [`plan_free`]).
    StreamOrdered,
    /// `cuMemAllocManaged` (attached globally): one address for host and device.
    Managed,
    /// Memory another library allocated and owns (a cudarc `CudaSlice` moved in): never
    /// freed here; its owner is dropped after a context synchronize.
    Foreign,
}

/// How [`Stream::free_async`](crate::Stream::free_async) released a buffer.
///
/// ```
/// use gpu_pipeline::{CaptureMode, Context, FreeMode, Stream};
/// let ctx = Context::cpu();
/// let (a, b) = (Stream::new(&ctx)?, Stream::new(&ctx)?);
/// // Used on its allocating stream only: freed in stream order, without waiting.
/// let mut x = a.alloc_async::<u32>(1024)?;
/// a.memset_u32(&mut x, 0)?;
/// assert_eq!(a.free_async(x)?, FreeMode::StreamOrdered);
/// // Used on a second stream too: the context is synchronized first.
/// let mut y = a.alloc_async::<u32>(1024)?;
/// a.memset_u32(&mut y, 0)?;
/// b.join(&a)?;
/// b.memset_u32(&mut y, 1)?;
/// assert_eq!(a.free_async(y)?, FreeMode::Synchronized);
/// // Held by a captured graph: the graph's drop frees it.
/// let mut z = a.alloc_async::<u32>(1024)?;
/// a.memset_u32(&mut z, 0)?; // valid from here on `a`
/// let graph = a.capture(CaptureMode::ThreadLocal, |s| s.memset_u32(&mut z, 2))?;
/// assert_eq!(a.free_async(z)?, FreeMode::Deferred);
/// drop(graph);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FreeMode {
    /// `cuMemFreeAsync` on the given stream: the allocation was stream-ordered, every piece
    /// of work that touched it was enqueued on that stream, and nothing else held it. The
    /// call returned without waiting.
    StreamOrdered,
    /// The context was synchronized and the memory freed at once: the allocation was used on
    /// more than one stream (or inside a capture), or was not stream-ordered.
    Synchronized,
    /// Something else still holds the allocation (a captured graph, the graph being captured
    /// on this stream, or queued CPU-backend work); the last holder frees it, by the rules
    /// above.
    Deferred,
}

/// The streams an allocation's work has been enqueued on, folded into one word: none yet,
/// exactly one (its id + 1), or several ([`StreamUse::SHARED`]). Work enqueued during a
/// capture counts as shared: the graph may later be launched on any stream.
#[derive(Debug)]
pub(crate) struct StreamUse(AtomicU64);

impl StreamUse {
    pub(crate) const UNUSED: u64 = 0;
    pub(crate) const SHARED: u64 = u64::MAX;

    pub(crate) fn new(first: u64) -> StreamUse {
        StreamUse(AtomicU64::new(first))
    }

    /// The word for work on the stream with this driver id. The two ids that would collide
    /// with the markers (never seen in practice) count as shared, which is always safe.
    pub(crate) fn tag(stream_id: u64) -> u64 {
        match stream_id.checked_add(1) {
            Some(tag) if tag != Self::SHARED => tag,
            _ => Self::SHARED,
        }
    }

    /// The word for work enqueued on the stream with this id, inside a capture or not.
    pub(crate) fn tag_for(stream_id: u64, captured: bool) -> u64 {
        if captured {
            Self::SHARED
        } else {
            Self::tag(stream_id)
        }
    }

    /// The state after one more use with `tag`.
    pub(crate) fn merge(current: u64, tag: u64) -> u64 {
        if current == Self::UNUSED || current == tag {
            tag
        } else {
            Self::SHARED
        }
    }

    /// Folds one more use in.
    pub(crate) fn record(&self, tag: u64) {
        // The closure never declines when the state changes; an unchanged state needs no store.
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                let next = Self::merge(current, tag);
                (next != current).then_some(next)
            });
    }

    /// The folded state.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// The stream-ordered free rule, for an allocation nobody else holds (`kind`, its folded
/// stream use `uses`, the freeing stream's tag, and whether that stream is capturing):
/// - capturing: hand it to the graph being captured (freeing there would add a free node,
///   which CUDA accepts only for memory the graph itself allocated);
/// - stream-ordered and every use on exactly the freeing stream: `cuMemFreeAsync` there, since
///   all work that touches it precedes the free in that stream's order;
/// - otherwise: synchronize the context, then free (work on another stream, or a graph
///   launched anywhere, may still use it).
pub(crate) fn plan_free(kind: AllocKind, uses: u64, stream_tag: u64, capturing: bool) -> FreeMode {
    if capturing {
        FreeMode::Deferred
    } else if kind == AllocKind::StreamOrdered
        && uses == stream_tag
        && stream_tag != StreamUse::SHARED
    {
        FreeMode::StreamOrdered
    } else {
        FreeMode::Synchronized
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_use_folds_to_one_stream_or_shared() {
        let (a, b) = (StreamUse::tag(7), StreamUse::tag(9));
        assert_ne!(a, b);
        assert_eq!(StreamUse::merge(StreamUse::UNUSED, a), a);
        assert_eq!(StreamUse::merge(a, a), a);
        assert_eq!(StreamUse::merge(a, b), StreamUse::SHARED);
        assert_eq!(StreamUse::merge(StreamUse::SHARED, a), StreamUse::SHARED);
        assert_eq!(StreamUse::merge(a, StreamUse::SHARED), StreamUse::SHARED);
        // Ids that would collide with the markers count as shared.
        assert_eq!(StreamUse::tag(u64::MAX), StreamUse::SHARED);
        assert_eq!(StreamUse::tag(u64::MAX - 1), StreamUse::SHARED);
        assert_ne!(StreamUse::tag(0), StreamUse::UNUSED);
    }

    #[test]
    fn stream_use_records_atomically() {
        let uses = StreamUse::new(StreamUse::UNUSED);
        uses.record(StreamUse::tag(1));
        uses.record(StreamUse::tag(1));
        assert_eq!(uses.get(), StreamUse::tag(1));
        uses.record(StreamUse::tag(2));
        assert_eq!(uses.get(), StreamUse::SHARED);
        uses.record(StreamUse::tag(1));
        assert_eq!(uses.get(), StreamUse::SHARED);
    }

    #[test]
    fn free_plan_is_stream_ordered_only_for_single_stream_pool_memory() {
        use AllocKind::*;
        let s = StreamUse::tag(3);
        let t = StreamUse::tag(4);
        assert_eq!(
            plan_free(StreamOrdered, s, s, false),
            FreeMode::StreamOrdered
        );
        assert_eq!(
            plan_free(StreamOrdered, t, s, false),
            FreeMode::Synchronized
        );
        assert_eq!(
            plan_free(StreamOrdered, StreamUse::SHARED, s, false),
            FreeMode::Synchronized
        );
        assert_eq!(
            plan_free(StreamOrdered, StreamUse::SHARED, StreamUse::SHARED, false),
            FreeMode::Synchronized
        );
        assert_eq!(plan_free(StreamOrdered, s, s, true), FreeMode::Deferred);
        assert_eq!(plan_free(Plain, s, s, false), FreeMode::Synchronized);
        assert_eq!(plan_free(Managed, s, s, false), FreeMode::Synchronized);
        assert_eq!(plan_free(Plain, s, s, true), FreeMode::Deferred);
    }
}

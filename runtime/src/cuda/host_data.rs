//! Host closures that see pinned memory: the closure runs in stream order (a host function,
//! or a host node of a captured graph) and copies the bytes it reads out of the allocation,
//! and those it writes back in, with relaxed atomic loads and stores.
//!
//! Atomic accesses are what make this sound without trusting the ordering of the work around
//! it: the device's copies into or out of the memory are not Rust accesses, other host
//! closures touching it use atomics too, and the only non-atomic accesses, through host slices
//! ([`HostSlice`](crate::HostSlice)), are kept apart by the fences (an eager enqueue fences the
//! memory, so a slice taken later waits for the closure) and the gates (an enqueue or a graph
//! launch is refused while a slice is alive). The pipeline's ordering is what makes the bytes
//! the ones the user expects; atomics make a mistake there a wrong value, never undefined
//! behaviour.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use crate::error::{Error, Result};

use super::graph::borrowed_error;
use super::host_fn::Refused;
use super::keep::{self, Keep};
use super::{PinnedMemory, Stream};

impl Stream {
    /// Enqueues `f`, a closure that loads or stores bytes of `pinned` allocations
    /// ([`PinnedMemory::load_bytes`], [`PinnedMemory::store_bytes`]) when it runs: the eager
    /// enqueue fences them (the host waits for the closure before it touches them), and a
    /// capture keeps them in the graph, whose launches fence them.
    pub(crate) fn launch_repeat_touching(
        &self,
        f: Arc<dyn Fn() + Send + Sync>,
        pinned: &[Arc<PinnedMemory>],
    ) -> Result<()> {
        // A closure the driver refused drops past the stream's gate (its drop runs user code,
        // which may enqueue on this stream).
        let mut refused = None;
        let result = self.launch_repeat_touching_gated(f, pinned, &mut refused);
        drop(refused);
        result
    }

    fn launch_repeat_touching_gated(
        &self,
        f: Arc<dyn Fn() + Send + Sync>,
        pinned: &[Arc<PinnedMemory>],
        refused: &mut Refused,
    ) -> Result<()> {
        const CALL: &str = "Stream::launch_host_fn_with";
        let mut memories: Vec<&Arc<PinnedMemory>> = pinned.iter().collect();
        if memories
            .iter()
            .any(|m| m.context().raw() != self.context().raw())
        {
            return Err(Error::mismatch(
                CALL,
                "the pinned memory belongs to another context than the stream",
            ));
        }
        // Gates in address order, as graph launches take them.
        memories.sort_by_key(|m| Arc::as_ptr(m) as usize);
        memories.dedup_by_key(|m| Arc::as_ptr(m) as usize);
        let _gate = self.gate();
        let capture = self.capture_now()?;
        let mut gates: Vec<_> = memories.iter().map(|m| m.gate()).collect();
        if gates.iter().any(|g| g.is_borrowed()) {
            return Err(borrowed_error(CALL, "pinned"));
        }
        match capture {
            Some(id) => {
                for memory in &memories {
                    keep::keep(id, Keep::Pinned((*memory).clone()));
                }
            }
            None => {
                if !gates.is_empty() {
                    self.fence_clock().prepare()?;
                }
            }
        }
        self.launch_repeat_held(f, capture, refused)?;
        if capture.is_none() {
            let fence = self.fence_clock().mark();
            for gate in &mut gates {
                gate.keep_fence(fence.as_ref());
            }
        }
        Ok(())
    }
}

/// The byte `offset..offset + len` of an allocation of `size` bytes, or an error.
fn within(offset: usize, len: usize, size: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::invalid(
            "host closure",
            format!("bytes {offset}..{offset}+{len} lie outside a pinned allocation of {size}"),
        )),
    }
}

impl PinnedMemory {
    /// Copies `out.len()` bytes from byte `offset` into `out`, with relaxed atomic loads.
    pub(crate) fn load_bytes(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        within(offset, out.len(), self.bytes())?;
        let base = self.addr(offset);
        let mut at = 0;
        while at < out.len() {
            let ptr = base.wrapping_add(at);
            if (ptr as usize).is_multiple_of(8) && out.len() - at >= 8 {
                // SAFETY: `ptr..ptr + 8` lies in the allocation (checked above), which the
                // `Arc` our caller holds keeps alive; it is 8-aligned; every concurrent access
                // of it is atomic or comes from the device (see the module docs).
                let word = unsafe { AtomicU64::from_ptr(ptr.cast::<u64>()) };
                out[at..at + 8].copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
                at += 8;
            } else {
                // SAFETY: as above, for one byte.
                let byte = unsafe { AtomicU8::from_ptr(ptr) };
                out[at] = byte.load(Ordering::Relaxed);
                at += 1;
            }
        }
        Ok(())
    }

    /// Copies `src` to byte `offset`, with relaxed atomic stores.
    pub(crate) fn store_bytes(&self, offset: usize, src: &[u8]) -> Result<()> {
        within(offset, src.len(), self.bytes())?;
        let base = self.addr(offset);
        let mut at = 0;
        while at < src.len() {
            let ptr = base.wrapping_add(at);
            if (ptr as usize).is_multiple_of(8) && src.len() - at >= 8 {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&src[at..at + 8]);
                // SAFETY: as in `load_bytes`.
                let word = unsafe { AtomicU64::from_ptr(ptr.cast::<u64>()) };
                word.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
                at += 8;
            } else {
                // SAFETY: as in `load_bytes`, for one byte.
                let byte = unsafe { AtomicU8::from_ptr(ptr) };
                byte.store(src[at], Ordering::Relaxed);
                at += 1;
            }
        }
        Ok(())
    }
}

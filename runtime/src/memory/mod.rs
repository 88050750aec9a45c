//! Memory the device works on: device, pinned host and managed buffers, views of them, the
//! stream-ordered pool, and flag cells.
//!
//! | type | memory | host access |
//! | --- | --- | --- |
//! | [`DeviceBuffer`] | device (`cuMemAlloc`, or stream-ordered from a [`MemoryPool`]) | none; copy through a [`PinnedBuffer`] |
//! | [`PinnedBuffer`] | page-locked host (allocated, or a `Vec` registered in place) | [`PinnedBuffer::as_slice`] ([`HostView`]) after its fences |
//! | [`ManagedBuffer`] | managed (unified) | [`ManagedBuffer::as_slice`] ([`HostView`]) after a context synchronize |
//! | [`FlagCell`] | one mapped host word | atomics, any time |
//!
//! Copies and memsets are [`Stream`](crate::Stream) methods (`copy_htod`, `copy_dtoh`,
//! `copy_dtod`, `memset_u8`, `memset_u32`) taking whole buffers or views through
//! [`DeviceSource`] / [`DeviceDest`] / [`PinnedSource`] / [`PinnedDest`]. The soundness rule
//! (no safe code lets the host touch memory that pending device work uses, or frees memory
//! under it) lives with each backend: `cuda/memory.rs` and `cuda/pinned.rs` on CUDA,
//! `cpu/memory.rs` on the CPU backend, where every buffer is a heap allocation registered
//! with the race detector and locked by the operations that touch it, so that operations no
//! event orders stay memory-safe while the detector reports them.

pub(crate) mod alloc;
pub(crate) mod check;
mod device;
pub(crate) mod flag;
mod managed;
mod pinned;
mod pool;
mod slice;
pub(crate) mod view;

pub use crate::free_rule::FreeMode;
pub use device::DeviceBuffer;
pub use flag::{FlagCell, FlagWord};
pub use managed::{AttachScope, ManagedBuffer};
pub use pinned::{PinnedBuffer, RegisterError};
pub use pool::MemoryPool;
#[allow(deprecated)]
pub use slice::{HostSlice, HostSliceMut, HostView, HostViewMut};
pub use view::{
    DeviceDest, DeviceSource, DeviceView, DeviceViewMut, PinnedDest, PinnedSource, PinnedView,
    PinnedViewMut,
};

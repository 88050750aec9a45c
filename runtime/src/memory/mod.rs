//! Memory the device works on: device, pinned host and managed buffers, views of them, the
//! stream-ordered pool, and flag cells.
//!
//! | type | memory | host access |
//! | --- | --- | --- |
//! | [`DeviceBuffer`] | device (`cuMemAlloc`, or stream-ordered from a [`MemoryPool`]) | none; copy through a [`PinnedBuffer`] |
//! | [`PinnedBuffer`] | page-locked host | [`PinnedBuffer::as_slice`] after its fences |
//! | [`ManagedBuffer`] | managed (unified) | [`ManagedBuffer::as_slice`] after a context synchronize |
//! | [`FlagCell`] | one mapped host word | atomics, any time |
//!
//! Copies and memsets are [`Stream`](crate::Stream) methods (`copy_htod`, `copy_dtoh`,
//! `copy_dtod`, `memset_u8`, `memset_u32`) taking whole buffers or views through
//! [`DeviceSource`] / [`DeviceDest`] / [`PinnedSource`] / [`PinnedDest`]. The soundness rule
//! (no safe code lets the host touch memory that pending device work uses, or frees memory
//! under it) lives in `alloc.rs`.

pub(crate) mod alloc;
pub(crate) mod check;
mod device;
pub(crate) mod flag;
mod managed;
mod pinned;
mod pool;
pub(crate) mod view;

pub use alloc::FreeMode;
pub use device::DeviceBuffer;
pub use flag::{FlagCell, FlagWord};
pub use managed::{AttachScope, ManagedBuffer};
pub use pinned::PinnedBuffer;
pub use pool::MemoryPool;
pub use view::{
    DeviceDest, DeviceSource, DeviceView, DeviceViewMut, PinnedDest, PinnedSource, PinnedView,
    PinnedViewMut,
};

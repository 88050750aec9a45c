//! Asynchronous copies and memsets, and managed-memory attachment.
//!
//! Around each enqueue, under the stream's gate (so the enqueue is wholly inside or wholly
//! outside a capture):
//! - device memory notes the use on this stream (the stream-ordered free rule) and is kept
//!   alive by the graph being captured, if any;
//! - pinned memory gets a fence recorded after an eager enqueue, which the host waits on
//!   before touching it; inside a capture nothing runs yet, so it is kept alive by the graph
//!   instead (whose launches fence it).

use std::sync::Arc;

use crate::driver::check;
use crate::error::{Error, Result};
use crate::sys;

use super::keep::{self, Keep};
use super::{DeviceMemory, PinnedMemory, Stream};

/// A byte range of device memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceRange<'a> {
    /// The allocation.
    pub(crate) memory: &'a Arc<DeviceMemory>,
    /// Bytes from its start.
    pub(crate) offset: usize,
    /// Bytes covered.
    pub(crate) bytes: usize,
}

/// A byte range of pinned memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PinnedRange<'a> {
    /// The allocation.
    pub(crate) memory: &'a Arc<PinnedMemory>,
    /// Bytes from its start.
    pub(crate) offset: usize,
    /// Bytes covered.
    pub(crate) bytes: usize,
}

fn within(call: &'static str, offset: usize, bytes: usize, size: usize) -> Result<()> {
    match offset.checked_add(bytes) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::invalid(
            call,
            format!("bytes {offset}..{offset}+{bytes} lie outside an allocation of {size} bytes"),
        )),
    }
}

impl DeviceRange<'_> {
    /// The device address of the first byte.
    pub(crate) fn ptr(&self) -> sys::CUdeviceptr {
        self.memory.ptr() + self.offset as u64
    }

    fn check(&self, call: &'static str, stream: &Stream) -> Result<()> {
        within(call, self.offset, self.bytes, self.memory.bytes())?;
        if self.memory.context().raw() != stream.context().raw() {
            return Err(Error::mismatch(
                call,
                "the device memory belongs to another context than the stream",
            ));
        }
        Ok(())
    }
}

impl PinnedRange<'_> {
    fn check(&self, call: &'static str, stream: &Stream) -> Result<()> {
        within(call, self.offset, self.bytes, self.memory.bytes())?;
        if self.memory.context().raw() != stream.context().raw() {
            return Err(Error::mismatch(
                call,
                "the pinned memory belongs to another context than the stream",
            ));
        }
        Ok(())
    }
}

/// The bookkeeping of one enqueue, taken under the stream's gate.
struct Enqueue<'a> {
    stream: &'a Stream,
    capture: Option<u64>,
    pinned: Option<&'a Arc<PinnedMemory>>,
}

impl<'a> Enqueue<'a> {
    /// Prepares work touching `device` ranges and at most one `pinned` one: notes the uses,
    /// keeps them alive in the capture, and makes sure a pinned fence can be recorded.
    fn begin(
        stream: &'a Stream,
        device: &[DeviceRange<'a>],
        pinned: Option<PinnedRange<'a>>,
    ) -> Result<Self> {
        let capture = stream.capture_now()?;
        let pinned = pinned.map(|p| p.memory);
        if let Some(memory) = pinned {
            match capture {
                Some(id) => keep::keep(id, Keep::Pinned(memory.clone())),
                None => memory.prepare_fence(stream)?,
            }
        }
        for range in device {
            range.memory.note_use(stream);
            if let Some(id) = capture {
                keep::keep(id, Keep::Device(range.memory.clone()));
            }
        }
        Ok(Enqueue {
            stream,
            capture,
            pinned,
        })
    }

    /// After a successful eager enqueue: fences the pinned memory.
    fn finish(self) {
        if let (Some(memory), None) = (self.pinned, self.capture) {
            memory.fence_after_enqueue(self.stream);
        }
    }
}

impl Stream {
    /// Copies `src` (pinned) to `dst` (device), in this stream's order.
    pub(crate) fn copy_htod(&self, src: PinnedRange<'_>, dst: DeviceRange<'_>) -> Result<()> {
        const CALL: &str = "Stream::copy_htod";
        src.check(CALL, self)?;
        dst.check(CALL, self)?;
        same_len(CALL, src.bytes, dst.bytes)?;
        let _gate = self.gate();
        let enqueue = Enqueue::begin(self, &[dst], Some(src))?;
        let d = self.bind()?;
        // SAFETY: in-bounds ranges (checked above) of live allocations of this stream's
        // context. The device reads the pinned memory after this call returns: its fence
        // (recorded in `finish`, or by every launch of the graph capturing it) keeps the host
        // from writing it before the copy ends, and the `Arc`s (held by the buffer, or the
        // graph) keep both allocations alive.
        check("cuMemcpyHtoDAsync", unsafe {
            (d.cuMemcpyHtoDAsync)(
                dst.ptr(),
                src.memory.addr(src.offset).cast_const().cast(),
                src.bytes,
                self.raw(),
            )
        })?;
        enqueue.finish();
        Ok(())
    }

    /// Copies `src` (device) to `dst` (pinned), in this stream's order.
    pub(crate) fn copy_dtoh(&self, src: DeviceRange<'_>, dst: PinnedRange<'_>) -> Result<()> {
        const CALL: &str = "Stream::copy_dtoh";
        src.check(CALL, self)?;
        dst.check(CALL, self)?;
        same_len(CALL, src.bytes, dst.bytes)?;
        let _gate = self.gate();
        let enqueue = Enqueue::begin(self, &[src], Some(dst))?;
        let d = self.bind()?;
        // SAFETY: as in `copy_htod`, with the device writing the pinned memory: its fence
        // keeps the host from reading it before the copy ends, and the caller holds the
        // destination exclusively for the enqueue, so no host slice of it is alive.
        check("cuMemcpyDtoHAsync", unsafe {
            (d.cuMemcpyDtoHAsync)(
                dst.memory.addr(dst.offset).cast(),
                src.ptr(),
                src.bytes,
                self.raw(),
            )
        })?;
        enqueue.finish();
        Ok(())
    }

    /// Copies device memory to device memory, in this stream's order.
    pub(crate) fn copy_dtod(&self, src: DeviceRange<'_>, dst: DeviceRange<'_>) -> Result<()> {
        const CALL: &str = "Stream::copy_dtod";
        src.check(CALL, self)?;
        dst.check(CALL, self)?;
        same_len(CALL, src.bytes, dst.bytes)?;
        let _gate = self.gate();
        let enqueue = Enqueue::begin(self, &[src, dst], None)?;
        let d = self.bind()?;
        // SAFETY: in-bounds ranges of live device allocations of this context, kept alive by
        // their `Arc`s.
        check("cuMemcpyDtoDAsync", unsafe {
            (d.cuMemcpyDtoDAsync)(dst.ptr(), src.ptr(), src.bytes, self.raw())
        })?;
        enqueue.finish();
        Ok(())
    }

    /// Copies device memory to device memory of another device (`cuMemcpyPeerAsync`: direct
    /// over NVLink or PCIe where peer access is enabled, staged by the driver otherwise), in
    /// this stream's order. The stream belongs to one of the two contexts; the memory of the
    /// other notes this stream's context, so freeing it waits for that context too.
    pub(crate) fn copy_peer(&self, src: DeviceRange<'_>, dst: DeviceRange<'_>) -> Result<()> {
        const CALL: &str = "Stream::copy_peer";
        within(CALL, src.offset, src.bytes, src.memory.bytes())?;
        within(CALL, dst.offset, dst.bytes, dst.memory.bytes())?;
        same_len(CALL, src.bytes, dst.bytes)?;
        let own = self.context().raw();
        let ours = |range: &DeviceRange<'_>| range.memory.context().raw() == own;
        if !ours(&src) && !ours(&dst) {
            return Err(Error::mismatch(
                CALL,
                "the stream belongs to neither buffer's device; enqueue a peer copy on a stream \
                 of the source's or the destination's device",
            ));
        }
        let _gate = self.gate();
        let capture = self.capture_now()?;
        for range in [&src, &dst] {
            // The other device's memory counts this as a peer use (see `note_use`).
            range.memory.note_use(self);
            if let Some(id) = capture {
                keep::keep(id, Keep::Device(range.memory.clone()));
            }
        }
        let d = self.bind()?;
        if capture.is_some() {
            // A capture refuses `cuMemcpyPeerAsync` (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, on
            // two H200s): the unified-address copy records the same transfer as a memcpy
            // node, the devices told apart by the addresses.
            // SAFETY: in-bounds ranges (checked above) of live device allocations, which the
            // graph being captured keeps alive (kept above); both addresses are unified
            // (every device allocation of a 64-bit process is), so the driver finds each
            // one's device.
            return check("cuMemcpyAsync", unsafe {
                (d.cuMemcpyAsync)(dst.ptr(), src.ptr(), src.bytes, self.raw())
            });
        }
        let copy = d.optional(d.cuMemcpyPeerAsync, "cuMemcpyPeerAsync")?;
        // SAFETY: in-bounds ranges (checked above) of live device allocations of the two
        // contexts, kept alive by their `Arc`s (or the graph being captured); both noted
        // their use on this stream under its gate, so neither is freed before the copy ends
        // (the other device's memory synchronizes this context when freed).
        check("cuMemcpyPeerAsync", unsafe {
            copy(
                dst.ptr(),
                dst.memory.context().raw(),
                src.ptr(),
                src.memory.context().raw(),
                src.bytes,
                self.raw(),
            )
        })
    }

    /// Sets every byte of `dst` to `value`, in this stream's order.
    pub(crate) fn memset_u8(&self, dst: DeviceRange<'_>, value: u8) -> Result<()> {
        const CALL: &str = "Stream::memset_u8";
        dst.check(CALL, self)?;
        let _gate = self.gate();
        let enqueue = Enqueue::begin(self, &[dst], None)?;
        let d = self.bind()?;
        // SAFETY: an in-bounds range of a live device allocation of this context.
        check("cuMemsetD8Async", unsafe {
            (d.cuMemsetD8Async)(dst.ptr(), value, dst.bytes, self.raw())
        })?;
        enqueue.finish();
        Ok(())
    }

    /// Sets every 32-bit word of `dst` (4-byte aligned, a multiple of 4 bytes long) to
    /// `value`, in this stream's order.
    pub(crate) fn memset_u32(&self, dst: DeviceRange<'_>, value: u32) -> Result<()> {
        const CALL: &str = "Stream::memset_u32";
        dst.check(CALL, self)?;
        if !dst.ptr().is_multiple_of(4) || !dst.bytes.is_multiple_of(4) {
            return Err(Error::invalid(
                CALL,
                "the range is not 4-byte aligned or not a whole number of 32-bit words",
            ));
        }
        let _gate = self.gate();
        let enqueue = Enqueue::begin(self, &[dst], None)?;
        let d = self.bind()?;
        // SAFETY: an in-bounds, 4-byte aligned range of `bytes / 4` words of a live device
        // allocation of this context.
        check("cuMemsetD32Async", unsafe {
            (d.cuMemsetD32Async)(dst.ptr(), value, dst.bytes / 4, self.raw())
        })?;
        enqueue.finish();
        Ok(())
    }

    /// Attaches a whole managed allocation with raw `CU_MEM_ATTACH_*` flags, in this
    /// stream's order.
    pub(crate) fn attach_mem(&self, memory: &Arc<DeviceMemory>, flags: u32) -> Result<()> {
        const CALL: &str = "Stream::attach_mem_async";
        let range = DeviceRange {
            memory,
            offset: 0,
            bytes: memory.bytes(),
        };
        range.check(CALL, self)?;
        let _gate = self.gate();
        let enqueue = Enqueue::begin(self, &[range], None)?;
        let d = self.bind()?;
        // SAFETY: a live stream and the base address of a live managed allocation of this
        // context (kept alive by its `Arc`); length 0 means the whole allocation, which the
        // driver requires for managed memory.
        check("cuStreamAttachMemAsync", unsafe {
            (d.cuStreamAttachMemAsync)(self.raw(), memory.ptr(), 0, flags)
        })?;
        enqueue.finish();
        Ok(())
    }
}

fn same_len(call: &'static str, src: usize, dst: usize) -> Result<()> {
    if src == dst {
        Ok(())
    } else {
        Err(Error::invalid(
            call,
            format!("the source has {src} bytes and the destination {dst}"),
        ))
    }
}

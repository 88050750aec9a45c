//! Asynchronous copies and memsets on a stream, typed by element.
//!
//! Every method takes whole buffers or views: `&` for what the device reads, `&mut` for
//! what it writes (held for the enqueue call; the allocation's fences and stream tracking
//! cover the time after). Lengths are checked before anything is enqueued, and an operation
//! on zero elements enqueues nothing. Around each enqueue:
//! - device allocations note the use on this stream (the stream-ordered free rule) and are
//!   kept alive by the graph being captured, if any;
//! - pinned allocations get a fence recorded after the enqueue, which the host waits on
//!   before touching them; inside a capture nothing runs yet, so they are kept alive by the
//!   graph instead (whose launches fence them).
//!
//! On the host backend each copy or memset is one replayable host operation, labelled with
//! what it does and the buffers' names (`copy_dtoh next -> snapshot`), declaring what it reads
//! and writes for the race detector, holding the allocations it touches (`Arc`s) and locking
//! them while it runs (see `memory/host_mem.rs`). Pinned fences work as on CUDA; whether the
//! operation was captured or queued is decided by the engine atomically with the enqueue.

use std::sync::Arc;

use bytemuck::Pod;

use super::Stream;
use super::capture::register_capture_keepalive;
use crate::context::Context;
use crate::driver::check;
use crate::error::{Error, Result};
use crate::graph::HostNodeKind;
use crate::host::{Access, HostOp, HostStream};
use crate::memory::alloc::{KeepAlive, PinnedAlloc, same_memory_space};
use crate::memory::check as args;
use crate::memory::host_mem::{HostAccessSet, HostMem, declare};
use crate::memory::view::{DeviceRegion, PinnedRegion};
use crate::memory::{DeviceDest, DeviceSource, PinnedDest, PinnedSource};
use crate::sys::CUgraphNodeType;

/// One region of host-backend memory an operation touches.
struct HostPart {
    mem: Arc<HostMem>,
    offset: usize,
    bytes: usize,
    keep: KeepAlive,
}

impl HostPart {
    fn device(call: &'static str, region: &DeviceRegion<'_>) -> Result<HostPart> {
        let mem = region.alloc.host.clone().ok_or_else(|| not_host(call))?;
        Ok(HostPart {
            mem,
            offset: region.offset,
            bytes: region.bytes,
            keep: KeepAlive::Device(Arc::clone(region.alloc)),
        })
    }

    fn pinned(call: &'static str, region: &PinnedRegion<'_>) -> Result<HostPart> {
        let mem = region.alloc.host.clone().ok_or_else(|| not_host(call))?;
        Ok(HostPart {
            mem,
            offset: region.offset,
            bytes: region.bytes,
            keep: KeepAlive::Pinned(Arc::clone(region.alloc)),
        })
    }

    /// How labels name the region: the buffer's name, with the element range of a view.
    fn describe(&self, elem_size: usize) -> String {
        let name = self.mem.name();
        if self.offset == 0 && self.bytes == self.mem.bytes() || elem_size == 0 {
            return name.to_string();
        }
        let start = self.offset / elem_size;
        format!("{name}[{start}..{}]", start + self.bytes / elem_size)
    }
}

#[cold]
fn not_host(call: &'static str) -> Error {
    Error::invalid(
        call,
        "the buffer is CUDA memory and the stream runs on the host backend",
    )
}

/// A host-backend copy of `bytes` bytes from `src` to `dst`: a replayable op that locks both
/// (`src` read, `dst` written) while it copies.
fn host_copy_op(label: String, src: HostPart, dst: HostPart) -> HostOp {
    let set = HostAccessSet::new(vec![
        (src.mem.clone(), Access::Read),
        (dst.mem.clone(), Access::Write),
    ]);
    let (bytes, ids) = (src.bytes, set.ids());
    let (from, to) = (src.mem.clone(), dst.mem.clone());
    let (from_offset, to_offset) = (src.offset, dst.offset);
    let op = HostOp::replayable(label, move || {
        let _locks = set.lock();
        // SAFETY: both regions lie within their allocations (checked when the buffers and
        // views were made), which this closure keeps alive; the locks exclude every other
        // host operation writing `to` or touching `from`'s bytes being written, and host
        // slices are excluded by the fences and borrow rules of the buffer types. `copy`
        // (memmove) also covers two regions of one allocation.
        unsafe { std::ptr::copy(from.at(from_offset), to.at(to_offset), bytes) };
        Ok(())
    });
    // The closure holds the memory; a graph node also holds the buffers, as on CUDA.
    declare(op, &ids)
        .retain_in_graph(Arc::new(src.keep))
        .retain_in_graph(Arc::new(dst.keep))
        .retain_in_graph(Arc::new(HostNodeKind(CUgraphNodeType::MEMCPY)))
}

/// The bookkeeping around one enqueue: which capture (as tracked) the stream was in before,
/// so that a capture that began or ended on another thread during the enqueue is handled
/// conservatively afterwards.
struct Enqueue<'a> {
    stream: &'a Stream,
    capture: Option<u64>,
    device: [Option<DeviceRegion<'a>>; 2],
    pinned: Option<&'a Arc<PinnedAlloc>>,
}

impl<'a> Enqueue<'a> {
    /// Prepares for work touching `device` regions and at most one `pinned` one: notes the
    /// uses, keeps them alive in the capture, and makes sure a pinned fence can be recorded.
    fn begin(
        stream: &'a Stream,
        device: [Option<DeviceRegion<'a>>; 2],
        pinned: Option<PinnedRegion<'a>>,
    ) -> Result<Self> {
        let capture = stream.tracked_capture();
        let pinned = pinned.map(|p| p.alloc);
        if let Some(alloc) = pinned {
            match capture {
                Some(_) => stream.keep_alive_in_capture(|| KeepAlive::Pinned(Arc::clone(alloc))),
                None => alloc.prepare_fence(stream)?,
            }
        }
        for region in device.iter().flatten() {
            region.enqueued_on(stream);
        }
        Ok(Enqueue {
            stream,
            capture,
            device,
            pinned,
        })
    }

    /// After a successful enqueue: fences the pinned memory unless the whole enqueue was
    /// inside one capture, and hands everything to a capture that began meanwhile.
    fn finish(self) {
        let now = self.stream.tracked_capture();
        if let Some(id) = now.filter(|id| self.capture != Some(*id)) {
            for region in self.device.iter().flatten() {
                region.alloc.note_use(self.stream);
                register_capture_keepalive(id, KeepAlive::Device(Arc::clone(region.alloc)));
            }
            if let Some(alloc) = self.pinned {
                register_capture_keepalive(id, KeepAlive::Pinned(Arc::clone(alloc)));
            }
        }
        if let Some(alloc) = self.pinned
            && (self.capture.is_none() || self.capture != now)
        {
            // Possibly eager work: fence it. (Recorded inside a capture that began meanwhile,
            // the fence makes host access fail until re-recorded, which is safe.)
            alloc.fence_after_enqueue(self.stream);
        }
    }
}

impl Stream {
    /// Hands `object` to the capture `capture_id` (as the driver reports it for this stream,
    /// so also one our own tracking missed): the graph it ends in keeps it alive.
    pub(crate) fn keep_alive_in_capture_id(&self, capture_id: u64, object: KeepAlive) {
        register_capture_keepalive(capture_id, object);
    }

    /// Enqueues a host-backend op; pinned memory it touches is fenced when the op was queued
    /// to run (not captured), exactly as on CUDA.
    fn host_submit(
        &self,
        h: &HostStream,
        op: HostOp,
        pinned: Option<&Arc<PinnedAlloc>>,
        device: &[&DeviceRegion<'_>],
    ) -> Result<()> {
        if let Some(alloc) = pinned {
            alloc.prepare_fence(self)?;
        }
        for region in device {
            region.alloc.note_use(self);
        }
        let captured = h.enqueue_tracked(op)?;
        if let Some(alloc) = pinned
            && !captured
        {
            alloc.fence_after_enqueue(self);
        }
        Ok(())
    }

    fn owns(&self, call: &'static str, ctx: &Context) -> Result<()> {
        if same_memory_space(&self.ctx, ctx) {
            Ok(())
        } else {
            Err(Error::invalid(
                call,
                "the buffer belongs to another context than the stream",
            ))
        }
    }

    /// Copies pinned host memory to device memory, in this stream's order. `src` and `dst`
    /// must have the same length; the host waits for the copy before writing `src` again
    /// (see [`PinnedBuffer::as_mut_slice`](crate::PinnedBuffer::as_mut_slice)).
    ///
    /// ```no_run
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// # use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream};
    /// # let ctx = Context::cuda(0)?;
    /// # let stream = Stream::non_blocking(&ctx)?;
    /// let input = PinnedBuffer::from_slice(&ctx, &[1u32, 2, 3, 4])?;
    /// let mut field = DeviceBuffer::<u32>::alloc(&ctx, 8)?;
    /// stream.copy_htod(&input, &mut field.slice_mut(4..)?)?;
    /// # Ok(()) }
    /// ```
    pub fn copy_htod<T: Pod>(
        &self,
        src: &impl PinnedSource<T>,
        dst: &mut impl DeviceDest<T>,
    ) -> Result<()> {
        let call = "Stream::copy_htod";
        let (s, d) = (src.pinned_region(), dst.device_region());
        args::same_len(call, s.len, d.len)?;
        self.owns(call, &s.alloc.ctx)?;
        self.owns(call, &d.alloc.ctx)?;
        if s.bytes == 0 {
            return Ok(());
        }
        if let Some(h) = &self.host {
            let (src, dst) = (HostPart::pinned(call, &s)?, HostPart::device(call, &d)?);
            let size = std::mem::size_of::<T>();
            let label = format!("copy_htod {} -> {}", src.describe(size), dst.describe(size));
            return self.host_submit(h, host_copy_op(label, src, dst), Some(s.alloc), &[&d]);
        }
        let enqueue = Enqueue::begin(self, [Some(d), None], Some(s))?;
        let (c, raw) = self.cuda(call)?;
        // SAFETY: `s` and `d` are in-bounds regions of `s.bytes` bytes of live allocations of
        // this context. The device reads the pinned memory after this call returns: its
        // fence (recorded in `finish`) keeps the host from writing it before the copy ends,
        // and the `Arc`s (held by the buffer, or the graph) keep both allocations alive.
        check("cuMemcpyHtoDAsync", unsafe {
            (c.driver.cuMemcpyHtoDAsync)(d.ptr(), s.ptr().cast_const().cast(), s.bytes, raw)
        })?;
        enqueue.finish();
        Ok(())
    }

    /// Copies device memory to pinned host memory, in this stream's order. `src` and `dst`
    /// must have the same length; the host sees the data once
    /// [`PinnedBuffer::as_slice`](crate::PinnedBuffer::as_slice) (which waits) returns.
    pub fn copy_dtoh<T: Pod>(
        &self,
        src: &impl DeviceSource<T>,
        dst: &mut impl PinnedDest<T>,
    ) -> Result<()> {
        let call = "Stream::copy_dtoh";
        let (s, d) = (src.device_region(), dst.pinned_region());
        args::same_len(call, s.len, d.len)?;
        self.owns(call, &s.alloc.ctx)?;
        self.owns(call, &d.alloc.ctx)?;
        if s.bytes == 0 {
            return Ok(());
        }
        if let Some(h) = &self.host {
            let (src, dst) = (HostPart::device(call, &s)?, HostPart::pinned(call, &d)?);
            let size = std::mem::size_of::<T>();
            let label = format!("copy_dtoh {} -> {}", src.describe(size), dst.describe(size));
            return self.host_submit(h, host_copy_op(label, src, dst), Some(d.alloc), &[&s]);
        }
        let enqueue = Enqueue::begin(self, [Some(s), None], Some(d))?;
        let (c, raw) = self.cuda(call)?;
        // SAFETY: as in `copy_htod`, with the device writing the pinned memory: no host slice
        // of it is alive (`dst` is borrowed mutably), and its fence keeps the host from
        // reading it before the copy ends.
        check("cuMemcpyDtoHAsync", unsafe {
            (c.driver.cuMemcpyDtoHAsync)(d.ptr().cast(), s.ptr(), s.bytes, raw)
        })?;
        enqueue.finish();
        Ok(())
    }

    /// Copies device memory to device memory (`memcpy_dtod(&src, &mut dst)`), in this
    /// stream's order. The lengths must match. Managed buffers work on either side.
    pub fn copy_dtod<T: Pod>(
        &self,
        src: &impl DeviceSource<T>,
        dst: &mut impl DeviceDest<T>,
    ) -> Result<()> {
        let call = "Stream::copy_dtod";
        let (s, d) = (src.device_region(), dst.device_region());
        args::same_len(call, s.len, d.len)?;
        self.owns(call, &s.alloc.ctx)?;
        self.owns(call, &d.alloc.ctx)?;
        if s.bytes == 0 {
            return Ok(());
        }
        if let Some(h) = &self.host {
            let (src, dst) = (HostPart::device(call, &s)?, HostPart::device(call, &d)?);
            let size = std::mem::size_of::<T>();
            let label = format!("copy_dtod {} -> {}", src.describe(size), dst.describe(size));
            return self.host_submit(h, host_copy_op(label, src, dst), None, &[&s, &d]);
        }
        let enqueue = Enqueue::begin(self, [Some(s), Some(d)], None)?;
        let (c, raw) = self.cuda(call)?;
        // SAFETY: in-bounds regions of `s.bytes` bytes of live device allocations of this
        // context, kept alive by their `Arc`s; `&mut dst` rules out overlap with `src`.
        check("cuMemcpyDtoDAsync", unsafe {
            (c.driver.cuMemcpyDtoDAsync)(d.ptr(), s.ptr(), s.bytes, raw)
        })?;
        enqueue.finish();
        Ok(())
    }

    /// Sets every byte of `dst` to `value`, in this stream's order.
    pub fn memset_u8<T: Pod>(&self, dst: &mut impl DeviceDest<T>, value: u8) -> Result<()> {
        let call = "Stream::memset_u8";
        let d = dst.device_region();
        self.owns(call, &d.alloc.ctx)?;
        if d.bytes == 0 {
            return Ok(());
        }
        if let Some(h) = &self.host {
            let dst = HostPart::device(call, &d)?;
            let label = format!("memset_u8 {}", dst.describe(std::mem::size_of::<T>()));
            let op = host_memset_op(label, dst, move |ptr, bytes| {
                // SAFETY: see `host_memset_op`.
                unsafe { std::ptr::write_bytes(ptr, value, bytes) }
            });
            return self.host_submit(h, op, None, &[&d]);
        }
        let enqueue = Enqueue::begin(self, [Some(d), None], None)?;
        let (c, raw) = self.cuda(call)?;
        // SAFETY: an in-bounds region of `d.bytes` bytes of a live device allocation of this
        // context, kept alive by its `Arc`.
        check("cuMemsetD8Async", unsafe {
            (c.driver.cuMemsetD8Async)(d.ptr(), value, d.bytes, raw)
        })?;
        enqueue.finish();
        Ok(())
    }

    /// Sets every 32-bit word of `dst` to `value` (e.g. `1.0f32.to_bits()`), in this stream's
    /// order. Only for elements whose size is a multiple of 4 bytes; an error otherwise
    /// (use [`Stream::memset_u8`]).
    pub fn memset_u32<T: Pod>(&self, dst: &mut impl DeviceDest<T>, value: u32) -> Result<()> {
        let call = "Stream::memset_u32";
        let d = dst.device_region();
        self.owns(call, &d.alloc.ctx)?;
        let words = args::memset_u32_words(call, std::mem::size_of::<T>(), d.bytes, d.ptr())?;
        if words == 0 {
            return Ok(());
        }
        if let Some(h) = &self.host {
            let dst = HostPart::device(call, &d)?;
            let label = format!("memset_u32 {}", dst.describe(std::mem::size_of::<T>()));
            let op = host_memset_op(label, dst, move |ptr, bytes| {
                // SAFETY: see `host_memset_op`; the region is 4-byte aligned and `bytes` a
                // multiple of 4 (both checked by `memset_u32_words`).
                unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u32>(), bytes / 4) }.fill(value);
            });
            return self.host_submit(h, op, None, &[&d]);
        }
        let enqueue = Enqueue::begin(self, [Some(d), None], None)?;
        let (c, raw) = self.cuda(call)?;
        // SAFETY: an in-bounds, 4-byte aligned region of `words * 4` bytes of a live device
        // allocation of this context, kept alive by its `Arc`.
        check("cuMemsetD32Async", unsafe {
            (c.driver.cuMemsetD32Async)(d.ptr(), value, words, raw)
        })?;
        enqueue.finish();
        Ok(())
    }
}

/// A host-backend memset: a replayable op that write-locks `dst` and calls `fill` with the
/// region's first byte and length. `fill` may write exactly those bytes: they lie within the
/// allocation (kept alive by the op), and the write lock excludes every other host operation.
fn host_memset_op(
    label: String,
    dst: HostPart,
    fill: impl Fn(*mut u8, usize) + Send + Sync + 'static,
) -> HostOp {
    let set = HostAccessSet::new(vec![(dst.mem.clone(), Access::Write)]);
    let (bytes, id) = (dst.bytes, dst.mem.id());
    let HostPart {
        mem, offset, keep, ..
    } = dst;
    // Only the memory is captured: the buffer handle (`keep`) goes to a graph node alone.
    let op = HostOp::replayable(label, move || {
        let _locks = set.lock();
        fill(mem.at(offset), bytes);
        Ok(())
    });
    op.writes(id)
        .retain_in_graph(Arc::new(keep))
        .retain_in_graph(Arc::new(HostNodeKind(CUgraphNodeType::MEMSET)))
}

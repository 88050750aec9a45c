//! Asynchronous copies and memsets on a stream, typed by element.
//!
//! Every method takes whole buffers or views: `&` for what the device reads, `&mut` for what
//! it writes (held for the enqueue call; the backends' rules cover the time after). Lengths
//! and contexts are checked before anything is enqueued, and an operation on zero elements
//! enqueues nothing. The bookkeeping around each enqueue (keeping memory alive in a capture,
//! fencing pinned memory) is each backend's: `cuda/copy.rs`, `cpu/work.rs`.
//!
//! On the CPU backend each copy or memset is one replayable operation, labelled with what it
//! does and the buffers' names (`copy_dtoh next -> snapshot`), declaring what it reads and
//! writes for the race detector.

use bytemuck::Pod;

use super::{Stream, StreamBackend, mixed};
use crate::context::Context;
use crate::cpu;
use crate::error::{Error, Result};
use crate::memory::check as args;
use crate::memory::{DeviceDest, DeviceSource, PinnedDest, PinnedSource};

impl Stream {
    fn owns(&self, call: &'static str, ctx: &Context) -> Result<()> {
        if self.ctx.shares_memory_with(ctx) {
            Ok(())
        } else {
            Err(Error::mismatch(
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
        const CALL: &str = "Stream::copy_htod";
        let (s, d) = (src.pinned_region(), dst.device_region());
        self.check_copy(CALL, &s.alloc.ctx, &d.alloc.ctx, s.len, d.len)?;
        if s.bytes == 0 {
            return Ok(());
        }
        match (&self.backend, s.cuda(), d.cuda(), s.cpu(), d.cpu()) {
            (StreamBackend::Cuda(stream), Some(src), Some(dst), ..) => stream.copy_htod(src, dst),
            (StreamBackend::Cpu(stream), .., Some(src), Some(dst)) => {
                Ok(stream.copy(copy_label::<T>("copy_htod", &src, &dst), src, dst)?)
            }
            _ => Err(mixed(CALL, "buffers")),
        }
    }

    /// Copies device memory to pinned host memory, in this stream's order. `src` and `dst`
    /// must have the same length; the host sees the data once
    /// [`PinnedBuffer::as_slice`](crate::PinnedBuffer::as_slice) (which waits) returns.
    pub fn copy_dtoh<T: Pod>(
        &self,
        src: &impl DeviceSource<T>,
        dst: &mut impl PinnedDest<T>,
    ) -> Result<()> {
        const CALL: &str = "Stream::copy_dtoh";
        let (s, d) = (src.device_region(), dst.pinned_region());
        self.check_copy(CALL, &s.alloc.ctx, &d.alloc.ctx, s.len, d.len)?;
        if s.bytes == 0 {
            return Ok(());
        }
        match (&self.backend, s.cuda(), d.cuda(), s.cpu(), d.cpu()) {
            (StreamBackend::Cuda(stream), Some(src), Some(dst), ..) => stream.copy_dtoh(src, dst),
            (StreamBackend::Cpu(stream), .., Some(src), Some(dst)) => {
                Ok(stream.copy(copy_label::<T>("copy_dtoh", &src, &dst), src, dst)?)
            }
            _ => Err(mixed(CALL, "buffers")),
        }
    }

    /// Copies device memory to device memory, in this stream's order. The lengths must
    /// match. Managed buffers work on either side.
    pub fn copy_dtod<T: Pod>(
        &self,
        src: &impl DeviceSource<T>,
        dst: &mut impl DeviceDest<T>,
    ) -> Result<()> {
        const CALL: &str = "Stream::copy_dtod";
        let (s, d) = (src.device_region(), dst.device_region());
        self.check_copy(CALL, &s.alloc.ctx, &d.alloc.ctx, s.len, d.len)?;
        if s.bytes == 0 {
            return Ok(());
        }
        match (&self.backend, s.cuda(), d.cuda(), s.cpu(), d.cpu()) {
            (StreamBackend::Cuda(stream), Some(src), Some(dst), ..) => stream.copy_dtod(src, dst),
            (StreamBackend::Cpu(stream), .., Some(src), Some(dst)) => {
                Ok(stream.copy(copy_label::<T>("copy_dtod", &src, &dst), src, dst)?)
            }
            _ => Err(mixed(CALL, "buffers")),
        }
    }

    /// Sets every byte of `dst` to `value`, in this stream's order.
    pub fn memset_u8<T: Pod>(&self, dst: &mut impl DeviceDest<T>, value: u8) -> Result<()> {
        const CALL: &str = "Stream::memset_u8";
        let d = dst.device_region();
        self.owns(CALL, &d.alloc.ctx)?;
        if d.bytes == 0 {
            return Ok(());
        }
        let size = std::mem::size_of::<T>();
        match (&self.backend, d.cuda(), d.cpu()) {
            (StreamBackend::Cuda(stream), Some(range), _) => stream.memset_u8(range, value),
            (StreamBackend::Cpu(stream), _, Some(range)) => {
                let label = format!("memset_u8 {}", range.describe(size));
                Ok(stream.memset_u8(label, range, value)?)
            }
            _ => Err(mixed(CALL, "buffer")),
        }
    }

    /// Sets every 32-bit word of `dst` to `value` (e.g. `1.0f32.to_bits()`), in this stream's
    /// order. Only for elements whose size is a multiple of 4 bytes; an error otherwise
    /// (use [`Stream::memset_u8`]).
    pub fn memset_u32<T: Pod>(&self, dst: &mut impl DeviceDest<T>, value: u32) -> Result<()> {
        const CALL: &str = "Stream::memset_u32";
        let d = dst.device_region();
        self.owns(CALL, &d.alloc.ctx)?;
        let address = d.ptr().unwrap_or(d.offset as u64);
        let words = args::memset_u32_words(CALL, std::mem::size_of::<T>(), d.bytes, address)?;
        if words == 0 {
            return Ok(());
        }
        let size = std::mem::size_of::<T>();
        match (&self.backend, d.cuda(), d.cpu()) {
            (StreamBackend::Cuda(stream), Some(range), _) => stream.memset_u32(range, value),
            (StreamBackend::Cpu(stream), _, Some(range)) => {
                let label = format!("memset_u32 {}", range.describe(size));
                Ok(stream.memset_u32(label, range, value)?)
            }
            _ => Err(mixed(CALL, "buffer")),
        }
    }

    fn check_copy(
        &self,
        call: &'static str,
        src: &Context,
        dst: &Context,
        src_len: usize,
        dst_len: usize,
    ) -> Result<()> {
        args::same_len(call, src_len, dst_len)?;
        self.owns(call, src)?;
        self.owns(call, dst)
    }
}

fn copy_label<T>(what: &str, src: &cpu::Range, dst: &cpu::Range) -> String {
    let size = std::mem::size_of::<T>();
    format!("{what} {} -> {}", src.describe(size), dst.describe(size))
}

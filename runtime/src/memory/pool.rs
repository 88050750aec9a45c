//! Stream-ordered allocation: device memory allocated and freed in a stream's order from a
//! memory pool (`cuMemAllocAsync`, `cuMemFreeAsync`), without synchronizing.
//!
//! The free rule: [`Stream::free_async`] frees with `cuMemFreeAsync` on the given stream only
//! when the buffer came from the stream-ordered allocator, nothing else holds it (no
//! captured graph), the stream is not capturing, and every enqueue that ever touched the
//! buffer went to that same stream (outside any capture). Each allocation folds the streams
//! of its uses into one atomic word to know this. In every other case the context is
//! synchronized and the memory freed at once, or, while a graph still holds the memory, the
//! free is left to the graph. Dropping a buffer always takes the synchronizing path.

use std::sync::Arc;

use bytemuck::Pod;

use super::alloc::{DeviceAlloc, DeviceMemory};
use super::check;
use super::device::DeviceBuffer;
use crate::context::Context;
use crate::cpu;
use crate::cuda;
use crate::error::{Error, Result};
use crate::free_rule::{AllocKind, FreeMode, StreamUse};
use crate::stream::{Stream, StreamBackend};
use crate::sys::{self, CUmemPool_attribute};

/// A device's memory pool, which stream-ordered allocations come from and return to.
///
/// Freed memory stays reserved by the pool for reuse until a synchronize finds more than
/// the [release threshold](Self::set_release_threshold) unused, or until
/// [`trim_to`](Self::trim_to).
///
/// ```
/// use gpu_pipeline::{Backend, Context, MemoryPool, Stream};
/// let ctx = Context::auto()?; // CUDA device 0 when there is one, else the CPU backend
/// if ctx.backend() == Backend::Cuda {
///     let pool = MemoryPool::default_for(&ctx)?;
///     pool.set_release_threshold(64 << 20)?; // keep up to 64 MiB for reuse
///     assert_eq!(pool.release_threshold()?, 64 << 20);
///     let stream = Stream::new(&ctx)?;
///     let scratch = stream.alloc_from_pool::<f32>(&pool, 1 << 20)?;
///     stream.synchronize()?;
///     assert!(pool.used_bytes()? >= 4 << 20);
///     stream.free_async(scratch)?;
///     stream.synchronize()?;
/// } else {
///     // The CPU backend has no device pool; `Stream::alloc_async` works on both.
///     assert!(MemoryPool::default_for(&ctx).is_err());
/// }
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub struct MemoryPool {
    ctx: Context,
    pool: cuda::MemoryPool,
}

impl MemoryPool {
    /// The default pool of `ctx`'s device (`cuDeviceGetDefaultMemPool`), which
    /// [`Stream::alloc_async`] uses unless the device's current pool was changed elsewhere.
    pub fn default_for(ctx: &Context) -> Result<MemoryPool> {
        let c = ctx.cuda_only("MemoryPool::default_for")?;
        Ok(MemoryPool {
            ctx: ctx.clone(),
            pool: cuda::MemoryPool::default_for(c)?,
        })
    }

    /// The raw handle, for interop. The default pool is owned by the device.
    pub fn handle(&self) -> sys::CUmemoryPool {
        self.pool.raw()
    }

    /// The context the pool was obtained through.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    fn get_u64(&self, _call: &'static str, attribute: CUmemPool_attribute) -> Result<u64> {
        self.pool.get_u64(attribute)
    }

    fn set_u64(
        &self,
        _call: &'static str,
        attribute: CUmemPool_attribute,
        value: u64,
    ) -> Result<()> {
        self.pool.set_u64(attribute, value)
    }

    /// How many unused bytes the pool keeps reserved across synchronizations.
    pub fn release_threshold(&self) -> Result<u64> {
        self.get_u64(
            "MemoryPool::release_threshold",
            CUmemPool_attribute::RELEASE_THRESHOLD,
        )
    }

    /// Sets how many unused bytes the pool keeps reserved across synchronizations
    /// (`u64::MAX`: never release on its own).
    pub fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        self.set_u64(
            "MemoryPool::set_release_threshold",
            CUmemPool_attribute::RELEASE_THRESHOLD,
            bytes,
        )
    }

    /// Releases unused reserved memory until at most `keep_bytes` stay reserved (memory in
    /// use, or freed but not yet past its free in stream order, is kept).
    pub fn trim_to(&self, keep_bytes: usize) -> Result<()> {
        self.pool.trim_to(keep_bytes)
    }

    /// Bytes of the pool currently allocated to buffers (`USED_MEM_CURRENT`).
    pub fn used_bytes(&self) -> Result<u64> {
        self.get_u64(
            "MemoryPool::used_bytes",
            CUmemPool_attribute::USED_MEM_CURRENT,
        )
    }

    /// Bytes the pool currently reserves from the device (`RESERVED_MEM_CURRENT`).
    pub fn reserved_bytes(&self) -> Result<u64> {
        self.get_u64(
            "MemoryPool::reserved_bytes",
            CUmemPool_attribute::RESERVED_MEM_CURRENT,
        )
    }

    /// The most bytes in use since the last reset (`USED_MEM_HIGH`).
    pub fn used_high_water(&self) -> Result<u64> {
        self.get_u64(
            "MemoryPool::used_high_water",
            CUmemPool_attribute::USED_MEM_HIGH,
        )
    }

    /// The most bytes reserved since the last reset (`RESERVED_MEM_HIGH`).
    pub fn reserved_high_water(&self) -> Result<u64> {
        self.get_u64(
            "MemoryPool::reserved_high_water",
            CUmemPool_attribute::RESERVED_MEM_HIGH,
        )
    }

    /// Resets both high-water marks to the current values.
    pub fn reset_high_water(&self) -> Result<()> {
        // The driver accepts only 0 here, meaning "reset".
        self.set_u64(
            "MemoryPool::reset_high_water",
            CUmemPool_attribute::USED_MEM_HIGH,
            0,
        )?;
        self.set_u64(
            "MemoryPool::reset_high_water",
            CUmemPool_attribute::RESERVED_MEM_HIGH,
            0,
        )
    }
}

impl std::fmt::Debug for MemoryPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryPool")
            .field("raw", &self.pool.raw())
            .finish()
    }
}

impl Stream {
    /// `len` elements of device memory with unspecified contents, allocated in this stream's
    /// order from the device's current pool (`cuMemAllocAsync`).
    ///
    /// The memory is valid for work enqueued on this stream from now on; work on another
    /// stream must first wait for this one (e.g. [`Stream::join`]), as for any data this
    /// stream produces. Free it without waiting with [`Stream::free_async`] (see the
    /// [free rule](crate::FreeMode)); dropping it synchronizes the context instead.
    /// Not available during a capture (the graph would own the allocation).
    pub fn alloc_async<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        self.alloc_ordered("Stream::alloc_async", len, None)
    }

    /// Like [`Stream::alloc_async`], from `pool` (`cuMemAllocFromPoolAsync`).
    pub fn alloc_from_pool<T: Pod>(
        &self,
        pool: &MemoryPool,
        len: usize,
    ) -> Result<DeviceBuffer<T>> {
        if !pool.ctx.shares_memory_with(self.context()) {
            return Err(Error::mismatch(
                "Stream::alloc_from_pool",
                "the pool was obtained through another context than the stream's",
            ));
        }
        self.alloc_ordered("Stream::alloc_from_pool", len, Some(&pool.pool))
    }

    /// Like [`Stream::alloc_async`], zeroed in this stream's order.
    pub fn alloc_zeros_async<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let mut buffer = self.alloc_async(len)?;
        self.memset_u8(&mut buffer, 0)?;
        Ok(buffer)
    }

    fn alloc_ordered<T: Pod>(
        &self,
        call: &'static str,
        len: usize,
        pool: Option<&cuda::MemoryPool>,
    ) -> Result<DeviceBuffer<T>> {
        let bytes = check::byte_len(call, len, std::mem::size_of::<T>())?;
        let memory = match self.kind() {
            StreamBackend::Cuda(s) => {
                DeviceMemory::Cuda(Arc::new(cuda::DeviceMemory::alloc_async(s, bytes, pool)?))
            }
            StreamBackend::Cpu(s) => {
                if s.is_capturing() {
                    return Err(Error::invalid(
                        call,
                        "the stream is capturing; a captured allocation belongs to the graph \
                         and cannot become a buffer (allocate before the capture)",
                    ));
                }
                // The heap needs no stream order: the memory is valid at once. It counts as
                // used on this stream, as CUDA's does.
                let shared = s.context_shared();
                let uses = StreamUse::tag(s.id());
                DeviceMemory::Cpu(
                    cpu::Memory::with_alloc(
                        shared,
                        bytes,
                        cpu::MemoryKind::Device,
                        AllocKind::StreamOrdered,
                        uses,
                    )
                    .map_err(|m| Error::invalid(call, m))?,
                )
            }
        };
        let alloc = DeviceAlloc {
            ctx: self.context().clone(),
            memory,
        };
        Ok(DeviceBuffer::from_alloc(alloc, len))
    }

    /// Frees `buffer` in this stream's order when that is sound, and says how it was freed.
    ///
    /// The rule ([`FreeMode`]): `cuMemFreeAsync` on this stream, without waiting, only when the
    /// buffer was allocated in stream order ([`Stream::alloc_async`],
    /// [`Stream::alloc_from_pool`]), nothing else holds it, this stream is not capturing,
    /// and every piece of work that ever touched it was enqueued on this stream outside a
    /// capture ([`FreeMode::StreamOrdered`]). When a graph still holds it, or this stream is
    /// capturing, the graph frees it when dropped ([`FreeMode::Deferred`]). Otherwise the
    /// context is synchronized and the memory freed now ([`FreeMode::Synchronized`]).
    ///
    /// Work enqueued through [`DeviceBuffer::device_ptr`] by other libraries is not seen by
    /// the rule: synchronize such work before freeing.
    pub fn free_async<T: Pod>(&self, buffer: DeviceBuffer<T>) -> Result<FreeMode> {
        const CALL: &str = "Stream::free_async";
        let alloc = buffer.into_alloc();
        if !alloc.ctx.shares_memory_with(self.context()) {
            return Err(Error::mismatch(
                CALL,
                "the buffer belongs to another context than the stream",
            ));
        }
        match (self.kind(), alloc.memory) {
            (StreamBackend::Cuda(s), DeviceMemory::Cuda(m)) => {
                cuda::DeviceMemory::free_async(m, s, |capture, memory| {
                    cuda::keep_in_capture(capture, cuda::Keep::Device(memory))
                })
            }
            (StreamBackend::Cpu(s), DeviceMemory::Cpu(m)) => {
                Ok(cpu::Memory::free_async(m, s.id(), s.is_capturing())?)
            }
            _ => Err(crate::stream::mixed(CALL, "buffer")),
        }
    }
}

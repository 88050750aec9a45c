//! The allocations behind the buffer types: one backend's memory, and the context it belongs
//! to. The soundness rules live with each backend (`cuda/memory.rs`, `cuda/pinned.rs`,
//! `cpu/memory.rs`); this module only holds and dispatches.

use std::sync::Arc;

use bytemuck::Pod;

use crate::context::{Context, ContextBackend};
use crate::cpu;
use crate::cuda;
use crate::error::{Error, Result};
use crate::sys;

/// Device or managed memory of one backend.
#[derive(Clone, Debug)]
pub(crate) enum DeviceMemory {
    /// CUDA memory.
    Cuda(Arc<cuda::DeviceMemory>),
    /// CPU-backend memory.
    Cpu(Arc<cpu::Memory>),
}

/// The allocation behind a [`DeviceBuffer`](crate::DeviceBuffer) or
/// [`ManagedBuffer`](crate::ManagedBuffer).
#[derive(Clone, Debug)]
pub(crate) struct DeviceAlloc {
    pub(crate) ctx: Context,
    pub(crate) memory: DeviceMemory,
}

/// Pinned host memory of one backend.
#[derive(Clone, Debug)]
pub(crate) enum PinnedMemory {
    /// CUDA page-locked memory.
    Cuda(Arc<cuda::PinnedMemory>),
    /// CPU-backend memory.
    Cpu(Arc<cpu::Memory>),
}

/// The allocation behind a [`PinnedBuffer`](crate::PinnedBuffer).
#[derive(Clone, Debug)]
pub(crate) struct PinnedAlloc {
    pub(crate) ctx: Context,
    pub(crate) memory: PinnedMemory,
}

/// What every byte of new device memory with unspecified contents holds on a checked CPU
/// context.
const UNSPECIFIED_BYTE: u8 = 0xFF;

fn cpu_error(call: &'static str) -> impl FnOnce(String) -> Error {
    move |message| Error::invalid(call, message)
}

impl DeviceAlloc {
    /// `bytes` of device memory.
    pub(crate) fn new(call: &'static str, ctx: &Context, bytes: usize) -> Result<DeviceAlloc> {
        let memory = match ctx.kind() {
            ContextBackend::Cuda(c) => {
                DeviceMemory::Cuda(Arc::new(cuda::DeviceMemory::alloc(c, bytes)?))
            }
            ContextBackend::Cpu(c) => DeviceMemory::Cpu(
                cpu::Memory::new(c.shared(), bytes, cpu::MemoryKind::Device)
                    .map_err(cpu_error(call))?,
            ),
        };
        Ok(DeviceAlloc {
            ctx: ctx.clone(),
            memory,
        })
    }

    /// `bytes` of device memory with unspecified contents. On a checked CPU context every
    /// byte is `0xFF` (a NaN in every float, the largest value of every unsigned integer,
    /// -1 of every signed one), as `cuMemAlloc` leaves whatever was there: a program that
    /// reads elements it never wrote sees it there rather than the zeros of new CPU memory.
    pub(crate) fn new_unspecified(
        call: &'static str,
        ctx: &Context,
        bytes: usize,
    ) -> Result<DeviceAlloc> {
        let alloc = DeviceAlloc::new(call, ctx, bytes)?;
        if let (DeviceMemory::Cpu(memory), true) = (&alloc.memory, ctx.is_checked()) {
            memory.fill_bytes(UNSPECIFIED_BYTE);
        }
        Ok(alloc)
    }

    /// `bytes` of zeroed device memory, zero before any stream can reach it (CPU-backend
    /// memory starts zeroed).
    pub(crate) fn new_zeroed(
        call: &'static str,
        ctx: &Context,
        bytes: usize,
    ) -> Result<DeviceAlloc> {
        let memory = match ctx.kind() {
            ContextBackend::Cuda(c) => {
                DeviceMemory::Cuda(Arc::new(cuda::DeviceMemory::alloc_zeroed(c, bytes)?))
            }
            ContextBackend::Cpu(_) => return DeviceAlloc::new(call, ctx, bytes),
        };
        Ok(DeviceAlloc {
            ctx: ctx.clone(),
            memory,
        })
    }

    /// `bytes` of device memory being zeroed on CUDA's legacy stream, which no other stream
    /// waits for: only for memory a graph's nodes alone use, whose graph is told
    /// (`Graph::zeroed_on_legacy`) and waits before it is instantiated. CPU-backend memory
    /// starts zeroed.
    pub(crate) fn new_zeroing(
        call: &'static str,
        ctx: &Context,
        bytes: usize,
    ) -> Result<DeviceAlloc> {
        let memory = match ctx.kind() {
            ContextBackend::Cuda(c) => {
                DeviceMemory::Cuda(Arc::new(cuda::DeviceMemory::alloc_zeroing(c, bytes)?))
            }
            ContextBackend::Cpu(_) => return DeviceAlloc::new(call, ctx, bytes),
        };
        Ok(DeviceAlloc {
            ctx: ctx.clone(),
            memory,
        })
    }

    /// `bytes` of zeroed managed memory.
    pub(crate) fn new_managed(
        call: &'static str,
        ctx: &Context,
        bytes: usize,
    ) -> Result<DeviceAlloc> {
        let memory = match ctx.kind() {
            ContextBackend::Cuda(c) => {
                DeviceMemory::Cuda(Arc::new(cuda::DeviceMemory::alloc_managed(c, bytes)?))
            }
            ContextBackend::Cpu(c) => DeviceMemory::Cpu(
                cpu::Memory::new(c.shared(), bytes, cpu::MemoryKind::Managed)
                    .map_err(cpu_error(call))?,
            ),
        };
        Ok(DeviceAlloc {
            ctx: ctx.clone(),
            memory,
        })
    }

    /// The size in bytes.
    pub(crate) fn bytes(&self) -> usize {
        match &self.memory {
            DeviceMemory::Cuda(m) => m.bytes(),
            DeviceMemory::Cpu(m) => m.bytes(),
        }
    }

    /// The device address of the first byte; `None` on the CPU backend.
    pub(crate) fn ptr(&self) -> Option<sys::CUdeviceptr> {
        match &self.memory {
            DeviceMemory::Cuda(m) => Some(m.ptr()),
            DeviceMemory::Cpu(_) => None,
        }
    }

    /// The device address of the first byte, handed out for use the crate does not track
    /// (a user's raw pointer, a library the memory is lent to): from now on the memory
    /// counts as used on every stream, so its drop waits for the whole context. `None` on the
    /// CPU backend.
    pub(crate) fn escaped_ptr(&self) -> Option<sys::CUdeviceptr> {
        match &self.memory {
            DeviceMemory::Cuda(m) => {
                m.note_escape();
                Some(m.ptr())
            }
            DeviceMemory::Cpu(_) => None,
        }
    }

    /// Names the memory in the CPU backend's race reports; no effect on CUDA.
    pub(crate) fn name(&self, name: &str) {
        if let DeviceMemory::Cpu(m) = &self.memory {
            m.set_name(name);
        }
    }

    /// Names the memory after the pipeline param it is passed as, unless it was named.
    pub(crate) fn name_as_param(&self, name: &str) {
        if let DeviceMemory::Cpu(m) = &self.memory {
            m.name_as_param(name);
        }
    }
}

impl PinnedAlloc {
    /// `bytes` zeroed bytes of pinned memory.
    pub(crate) fn new(call: &'static str, ctx: &Context, bytes: usize) -> Result<PinnedAlloc> {
        PinnedAlloc::with_data(call, ctx, bytes, None)
    }

    /// Pinned memory holding `data` (or `bytes` zeroed bytes).
    pub(crate) fn with_data(
        call: &'static str,
        ctx: &Context,
        bytes: usize,
        data: Option<&[u8]>,
    ) -> Result<PinnedAlloc> {
        let memory = match ctx.kind() {
            ContextBackend::Cuda(c) => PinnedMemory::Cuda(Arc::new(match data {
                Some(data) => cuda::PinnedMemory::alloc_copy(c, data)?,
                None => cuda::PinnedMemory::alloc(c, bytes)?,
            })),
            ContextBackend::Cpu(c) => {
                let memory = cpu::Memory::new(c.shared(), bytes, cpu::MemoryKind::Pinned)
                    .map_err(cpu_error(call))?;
                if let Some(data) = data {
                    memory.fill_from(0, data);
                }
                PinnedMemory::Cpu(memory)
            }
        };
        Ok(PinnedAlloc {
            ctx: ctx.clone(),
            memory,
        })
    }

    /// `data` itself as pinned memory (registered in place on CUDA); on failure the error,
    /// with `data` untouched.
    pub(crate) fn register<T: Pod + Send + Sync>(
        ctx: &Context,
        data: Vec<T>,
    ) -> std::result::Result<PinnedAlloc, cuda::Refused<T>> {
        let memory = match ctx.kind() {
            ContextBackend::Cuda(c) => {
                PinnedMemory::Cuda(Arc::new(cuda::PinnedMemory::register(c, data)?))
            }
            ContextBackend::Cpu(c) => PinnedMemory::Cpu(cpu::Memory::from_vec(
                c.shared(),
                data,
                cpu::MemoryKind::Pinned,
            )),
        };
        Ok(PinnedAlloc {
            ctx: ctx.clone(),
            memory,
        })
    }

    /// The first `len` elements as a `Vec`, giving up this handle: the registered `Vec`
    /// itself where this was the last holder, a copy otherwise (see the backends'
    /// `into_vec`).
    pub(crate) fn into_vec<T: Pod + Send + Sync>(self, len: usize) -> Result<Vec<T>> {
        match self.memory {
            PinnedMemory::Cuda(m) => cuda::PinnedMemory::into_vec(m, len),
            PinnedMemory::Cpu(m) => Ok(m.take_vec(len)?),
        }
    }

    /// Names the memory in the CPU backend's race reports; no effect on CUDA.
    pub(crate) fn name(&self, name: &str) {
        if let PinnedMemory::Cpu(m) = &self.memory {
            m.set_name(name);
        }
    }

    /// Names the memory after the pipeline param it is passed as, unless it was named.
    pub(crate) fn name_as_param(&self, name: &str) {
        if let PinnedMemory::Cpu(m) = &self.memory {
            m.name_as_param(name);
        }
    }

    /// Whether enqueued work that touches the memory is still pending.
    pub(crate) fn is_busy(&self) -> Result<bool> {
        match &self.memory {
            PinnedMemory::Cuda(m) => m.is_busy(),
            PinnedMemory::Cpu(m) => Ok(m.is_busy()),
        }
    }

    /// Blocks until no enqueued work touches the memory any more.
    pub(crate) fn wait_for_device(&self) -> Result<()> {
        match &self.memory {
            PinnedMemory::Cuda(m) => m.wait_for_device(),
            PinnedMemory::Cpu(m) => Ok(m.wait_for_work()?),
        }
    }
}

/// Waits for memory [`DeviceAlloc::new_zeroing`] gave on `ctx` to be zeroed (nothing to wait
/// for on the CPU backend).
pub(crate) fn settle_zeroing(ctx: &Context) -> Result<()> {
    match ctx.kind() {
        ContextBackend::Cuda(c) => cuda::settle_legacy_zeroing(c),
        ContextBackend::Cpu(_) => Ok(()),
    }
}

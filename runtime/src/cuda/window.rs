//! One-sided windows between processes on CUDA: device memory this process exports with a
//! CUDA IPC handle (`cuIpcGetMemHandle`), other processes' windows mapped into this context
//! (`cuIpcOpenMemHandle`), and the stream memory operations on device words that order the
//! exchange (`cuStreamWriteValue32` / `cuStreamWaitValue32`, both captured as mem-op nodes).
//!
//! The lifetime rule, enforced here: an exporter never frees memory a neighbour may still
//! write. CUDA IPC memory must not be freed by its exporter while an importer still has it
//! open (undefined behaviour, says the driver's documentation), so each window carries one
//! *detach word* per rank. An importer's mapping, once every holder of it dropped and its
//! context was synchronized (so none of its work can touch the memory any more), writes its
//! detach word in the exporter's memory and closes the handle. The exporter's allocation, once
//! every holder dropped, waits for the detach word of every rank that mapped it, up to the
//! job's communication deadline, and frees the memory only then: an importer that never
//! detaches (it hung, or exited without dropping its window) makes the exporter leak the
//! memory instead, never free it under a writer.

use std::any::Any;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::driver::check;
use crate::error::{Error, Result};
use crate::sys;

use super::keep::{self, Keep};
use super::{Context, DeviceMemory, Stream};

/// The bytes of a CUDA IPC handle.
pub(crate) const HANDLE_BYTES: usize = 64;

/// This process's window allocation, exported to other processes.
///
/// Invariant: `base` is a live `cuMemAlloc` allocation of `bytes` bytes in `ctx`, whose
/// 32-bit words from `detach` on (one per rank) are written only by importers' teardown; it is
/// freed once, in `Drop`, only after every rank in `importers` wrote its detach word (so no
/// importer can touch it any more), and leaked otherwise.
pub(crate) struct Exported {
    ctx: Arc<Context>,
    base: sys::CUdeviceptr,
    bytes: usize,
    detach: usize,
    importers: Mutex<Vec<usize>>,
    deadline: Duration,
}

// SAFETY: a device address is a plain integer usable from any thread; the allocation is freed
// once (the type's invariant).
unsafe impl Send for Exported {}
// SAFETY: as above; the interior mutability is a mutex.
unsafe impl Sync for Exported {}

impl Exported {
    /// `bytes` of zeroed device memory whose detach words start at byte `detach` (one per
    /// rank of a world of `ranks`); freed as the module says, after waiting up to `deadline`.
    pub(crate) fn alloc(
        ctx: &Arc<Context>,
        bytes: usize,
        detach: usize,
        ranks: usize,
        deadline: Duration,
    ) -> Result<Arc<Exported>> {
        let end = ranks.checked_mul(4).and_then(|n| n.checked_add(detach));
        if end.is_none_or(|end| end > bytes) || !detach.is_multiple_of(4) {
            return Err(Error::invalid(
                "Window::new",
                "the window's signal words do not fit its allocation",
            ));
        }
        let d = ctx.bind()?;
        let mut base = 0;
        // SAFETY: a valid out-pointer; freed in Drop by the type's rule.
        check("cuMemAlloc", unsafe { (d.cuMemAlloc)(&mut base, bytes) })?;
        let exported = Arc::new(Exported {
            ctx: ctx.clone(),
            base,
            bytes,
            detach,
            importers: Mutex::new(Vec::new()),
            deadline,
        });
        let memset = d.optional(d.cuMemsetD32, "cuMemsetD32")?;
        // SAFETY: the whole fresh allocation (a whole number of words: `bytes` is rounded up
        // by the caller), which no work has been given yet.
        check("cuMemsetD32", unsafe { memset(base, 0, bytes / 4) })?;
        // The memset runs on the legacy stream: finish it before any work can see the memory.
        ctx.synchronize()?;
        Ok(exported)
    }

    /// The IPC handle other processes of this host open to map the allocation.
    pub(crate) fn handle(&self) -> Result<[u8; HANDLE_BYTES]> {
        let d = self.ctx.bind()?;
        let get = d.optional(d.cuIpcGetMemHandle, "cuIpcGetMemHandle")?;
        let mut handle = sys::CUipcMemHandle {
            reserved: [0; HANDLE_BYTES],
        };
        // SAFETY: a valid out-pointer and the base of a live cuMemAlloc allocation.
        check("cuIpcGetMemHandle", unsafe { get(&mut handle, self.base) })?;
        Ok(handle.reserved)
    }

    /// The ranks that mapped the allocation: its free waits for each one's detach word.
    pub(crate) fn set_importers(&self, ranks: Vec<usize>) {
        *self
            .importers
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = ranks;
    }

    /// `bytes` bytes from `offset` as device memory of this context, holding the allocation.
    pub(crate) fn memory(self: &Arc<Self>, offset: usize, bytes: usize) -> Result<DeviceMemory> {
        in_bounds(offset, bytes, self.bytes)?;
        let owner: Box<dyn Any + Send + Sync> = Box::new(self.clone());
        // SAFETY: `offset..offset + bytes` lies within the live allocation (checked), which
        // `owner` keeps allocated (it is freed only when the last `Arc` drops); its contents
        // were zeroed. Other processes write it too, but only Pod elements and only through
        // device work; the host reads it only through copies in stream order.
        Ok(unsafe { DeviceMemory::foreign(&self.ctx, self.base + offset as u64, bytes, owner) })
    }

    /// Reads the detach word of every importer; the ranks that have not written theirs.
    fn attached(&self, importers: &[usize]) -> Result<Vec<usize>> {
        let d = self.ctx.bind()?;
        let read = d.optional(d.cuMemcpyDtoH, "cuMemcpyDtoH")?;
        let mut still = Vec::new();
        for &rank in importers {
            let mut word = 0u32;
            let at = self.base + (self.detach + 4 * rank) as u64;
            // SAFETY: one aligned word within the live allocation (checked at creation: the
            // detach words of every rank fit), copied into a local.
            check("cuMemcpyDtoH", unsafe {
                read((&raw mut word).cast(), at, 4)
            })?;
            if word == 0 {
                still.push(rank);
            }
        }
        Ok(still)
    }
}

impl Drop for Exported {
    fn drop(&mut self) {
        let importers = std::mem::take(
            &mut *self
                .importers
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if let Err(e) = self.ctx.synchronize() {
            tracing::warn!(error = %e, "a window's context failed to synchronize; leaking it");
            return;
        }
        let start = Instant::now();
        let mut still = importers;
        loop {
            match self.attached(&still) {
                Ok(left) if left.is_empty() => break,
                Ok(left) => still = left,
                Err(e) => {
                    tracing::warn!(error = %e, "reading a window's detach words failed; leaking it");
                    return;
                }
            }
            if start.elapsed() >= self.deadline {
                tracing::warn!(
                    ranks = ?still,
                    deadline = ?self.deadline,
                    "ranks still map this window after the deadline; leaking it so their work \
                     cannot write freed memory"
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let Ok(d) = self.ctx.bind() else {
            return;
        };
        // SAFETY: allocated by cuMemAlloc in `alloc`; every importer detached (its work is
        // done and its mapping closed) and every holder in this process dropped after a
        // context synchronize.
        let code = unsafe { (d.cuMemFree)(self.base) };
        if !code.is_success() {
            tracing::warn!(?code, "cuMemFree failed while dropping a window");
        }
    }
}

/// Another process's window, mapped into this context.
///
/// Invariant: `base` is the address `cuIpcOpenMemHandle` returned in `ctx` for an allocation
/// of `bytes` bytes whose exporter keeps it allocated until the word at `detach_word` (this
/// rank's detach word) is nonzero, or forever; the mapping is closed once, in `Drop`, after
/// a context synchronize and the detach write.
pub(crate) struct Mapping {
    ctx: Arc<Context>,
    base: sys::CUdeviceptr,
    bytes: usize,
    detach_word: sys::CUdeviceptr,
}

// SAFETY: as for `Exported`.
unsafe impl Send for Mapping {}
// SAFETY: as above; no interior mutability.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Opens `handle` (exported by another process of this host) in `ctx`. The exporter's
    /// allocation is `bytes` long and this rank's detach word is at byte `detach_word`.
    pub(crate) fn open(
        ctx: &Arc<Context>,
        handle: &[u8; HANDLE_BYTES],
        bytes: usize,
        detach_word: usize,
    ) -> Result<Arc<Mapping>> {
        in_bounds(detach_word, 4, bytes)?;
        let d = ctx.bind()?;
        let open = d.optional(d.cuIpcOpenMemHandle, "cuIpcOpenMemHandle")?;
        let mut base = 0;
        let handle = sys::CUipcMemHandle { reserved: *handle };
        // SAFETY: a valid out-pointer, a handle the exporter's driver produced (the driver
        // validates it and fails on a stale or foreign one), a documented flag.
        check("cuIpcOpenMemHandle", unsafe {
            open(&mut base, handle, sys::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
        })?;
        Ok(Arc::new(Mapping {
            ctx: ctx.clone(),
            base,
            bytes,
            detach_word: base + detach_word as u64,
        }))
    }

    /// `bytes` bytes from `offset` of the mapped window as device memory of this context,
    /// holding the mapping.
    pub(crate) fn memory(self: &Arc<Self>, offset: usize, bytes: usize) -> Result<DeviceMemory> {
        in_bounds(offset, bytes, self.bytes)?;
        let owner: Box<dyn Any + Send + Sync> = Box::new(self.clone());
        // SAFETY: within the mapped allocation (checked), which the exporter keeps allocated
        // until this mapping detaches (the module's rule) and `owner` keeps mapped; zeroed by
        // the exporter before its handle was shared. Written by several processes' device
        // work only (Pod elements), as in `Exported::memory`.
        Ok(unsafe { DeviceMemory::foreign(&self.ctx, self.base + offset as u64, bytes, owner) })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // Work of this context may still write the exporter's memory: wait for it, or keep
        // the mapping (and never detach, so the exporter leaks rather than frees).
        if let Err(e) = self.ctx.synchronize() {
            tracing::warn!(error = %e, "a mapped window's context failed to synchronize; keeping it");
            return;
        }
        let Ok(d) = self.ctx.bind() else {
            return;
        };
        if let Ok(memset) = d.optional(d.cuMemsetD32, "cuMemsetD32") {
            // SAFETY: this rank's detach word, within the live mapping; no work of ours
            // touches the window any more (synchronized above).
            let code = unsafe { memset(self.detach_word, 1, 1) };
            let synced = self.ctx.synchronize();
            if !code.is_success() || synced.is_err() {
                tracing::warn!(
                    ?code,
                    "writing a window's detach word failed; the exporter will leak it"
                );
            }
        }
        if let Ok(close) = d.optional(d.cuIpcCloseMemHandle, "cuIpcCloseMemHandle") {
            // SAFETY: opened by cuIpcOpenMemHandle in `open`, closed once; nothing of ours
            // uses it any more.
            let code = unsafe { close(self.base) };
            if !code.is_success() {
                tracing::warn!(?code, "cuIpcCloseMemHandle failed while dropping a window");
            }
        }
    }
}

fn in_bounds(offset: usize, bytes: usize, total: usize) -> Result<()> {
    match offset.checked_add(bytes) {
        Some(end) if end <= total => Ok(()),
        _ => Err(Error::invalid(
            "Window",
            format!("{bytes} bytes at {offset} do not fit a window of {total} bytes"),
        )),
    }
}

/// One stream memory operation on a 32-bit word of device memory.
#[derive(Clone, Copy, Debug)]
pub(crate) enum SignalOp<'a> {
    /// Write `value` to the word, after a memory fence over the stream's earlier writes.
    Write {
        memory: &'a Arc<DeviceMemory>,
        offset: usize,
        value: u32,
    },
    /// Wait until the word equals `value`.
    WaitEq {
        memory: &'a Arc<DeviceMemory>,
        offset: usize,
        value: u32,
    },
}

impl SignalOp<'_> {
    /// The driver's encoding of the operation, for a batch.
    fn encode(&self) -> sys::CUstreamBatchMemOpParams {
        let (operation, memory, offset, value, flags) = match *self {
            SignalOp::Write {
                memory,
                offset,
                value,
            } => (
                sys::CU_STREAM_MEM_OP_WRITE_VALUE_32,
                memory,
                offset,
                value,
                sys::CU_STREAM_WRITE_VALUE_DEFAULT,
            ),
            SignalOp::WaitEq {
                memory,
                offset,
                value,
            } => (
                sys::CU_STREAM_MEM_OP_WAIT_VALUE_32,
                memory,
                offset,
                value,
                sys::CU_STREAM_WAIT_VALUE_EQ,
            ),
        };
        sys::CUstreamBatchMemOpParams {
            waitValue: sys::CUstreamMemOpValueParams {
                operation,
                address: memory.ptr() + offset as u64,
                value64: u64::from(value),
                flags,
                alias: 0,
            },
        }
    }
}

impl Stream {
    /// Enqueues `ops` in order: one driver call for a single operation, one batch
    /// (`cuStreamBatchMemOp`, captured as one batch mem-op node) for several, which the
    /// driver performs in array order, each wait holding back the operations after it.
    /// The memory is noted as used here and kept alive by a capture.
    pub(crate) fn signal_ops(&self, ops: &[SignalOp<'_>]) -> Result<()> {
        for op in ops {
            let (SignalOp::Write { memory, offset, .. } | SignalOp::WaitEq { memory, offset, .. }) =
                *op;
            in_bounds(offset, 4, memory.bytes())?;
            if memory.context().raw() != self.context().raw() || !offset.is_multiple_of(4) {
                return Err(Error::mismatch(
                    "Window signal",
                    "the signal word is not an aligned word of this stream's context",
                ));
            }
        }
        let _gate = self.gate();
        let capture = self.capture_now()?;
        for op in ops {
            let (SignalOp::Write { memory, .. } | SignalOp::WaitEq { memory, .. }) = *op;
            memory.note_use(self);
            if let Some(id) = capture {
                keep::keep(id, Keep::Device(memory.clone()));
            }
        }
        let d = self.bind()?;
        if ops.len() > 1 {
            let mut params: Vec<sys::CUstreamBatchMemOpParams> =
                ops.iter().map(SignalOp::encode).collect();
            let count = u32::try_from(params.len()).map_err(|_| {
                Error::invalid("Window signal", "more than u32::MAX signal operations")
            })?;
            // SAFETY: a live stream; `params` holds `count` initialised operations on aligned
            // words within live device memory of the stream's context (checked above), kept
            // alive past the operations (their free synchronizes the context; a capture keeps
            // them); the driver reads the array during the call; flags must be 0.
            let code = unsafe { (d.cuStreamBatchMemOp)(self.raw(), count, params.as_mut_ptr(), 0) };
            return check("cuStreamBatchMemOp", code);
        }
        for op in ops {
            // Each call: a live stream and an aligned word within live device memory of its
            // context (checked above), kept alive past the operation (its free synchronizes
            // the context; a capture keeps it).
            let (call, code) = match *op {
                SignalOp::Write {
                    memory,
                    offset,
                    value,
                } => ("cuStreamWriteValue32", {
                    let at = memory.ptr() + offset as u64;
                    let flags = sys::CU_STREAM_WRITE_VALUE_DEFAULT;
                    // SAFETY: see above.
                    unsafe { (d.cuStreamWriteValue32)(self.raw(), at, value, flags) }
                }),
                SignalOp::WaitEq {
                    memory,
                    offset,
                    value,
                } => ("cuStreamWaitValue32", {
                    let at = memory.ptr() + offset as u64;
                    let flags = sys::CU_STREAM_WAIT_VALUE_EQ;
                    // SAFETY: see above.
                    unsafe { (d.cuStreamWaitValue32)(self.raw(), at, value, flags) }
                }),
            };
            check(call, code)?;
        }
        Ok(())
    }
}

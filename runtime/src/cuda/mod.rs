//! The CUDA backend: every driver call, every raw driver handle, and every `unsafe` block of
//! the safe API but the user's own promises (`interop/`), with no CPU-backend code.
//!
//! Each type here owns one kind of driver object and states, on the type, the invariant that
//! makes its driver calls sound (the handle is live and belongs to the context the type holds;
//! what it points at outlives every piece of enqueued work that uses it). The `// SAFETY:`
//! comments cite those invariants. The public types of the crate (`Context`, `Stream`, the
//! buffers, ...) hold one of these or the CPU backend's counterpart and dispatch once per
//! method; the pipeline machinery and argument checks live above, in the public-type modules,
//! and the values both backends name (launch configuration, condition forms, attributes)
//! below, in the shared vocabulary. Nothing here imports a public type or `cpu/`
//! (docs/DESIGN.md, "Layers"; `runtime/tests/layers.rs` checks it).
//!
//! Layers inside, each using only the ones before it: `context` and `device`, `event`,
//! `stream` (with `capture`, `host_fn`, `memop`, `attribute`), the memory types (`memory`,
//! `pinned`, `flag`, `pool`), then what enqueues work on memory (`copy`, `module`, `launch`,
//! `graph`).

pub(crate) mod attribute;
mod backend;
mod capture;
mod context;
mod copy;
mod device;
mod event;
mod fence;
mod flag;
mod graph;
mod held;
mod host_data;
mod host_fn;
mod keep;
mod launch;
mod memop;
mod memory;
mod module;
#[cfg(feature = "nvrtc")]
pub mod nvrtc;
pub mod nvtx;
mod pinned;
mod pool;
pub(crate) mod quiesced;
mod slab;
mod stream;
mod window;

pub(crate) use capture::open_captures;
pub(crate) use context::Context;
pub(crate) use copy::{DeviceRange, PinnedRange};
pub use device::{Device, DeviceAttribute};
pub(crate) use event::Event;
pub(crate) use fence::{Fence, FenceClock};
pub(crate) use flag::FlagWord;
pub(crate) use graph::{
    ConditionArgs, ConditionKind, CopyEnd, Graph, GraphExec, KernelNodeInfo, KernelUpdates,
    NodeRef, keep_condition_module,
};
pub(crate) use keep::{Keep, keep as keep_in_capture};
pub(crate) use launch::{CudaArgs, launch};
pub(crate) use memop::MemOp;
pub(crate) use memory::{DeviceMemory, HostSlice, HostSliceMut, settle_legacy_zeroing};
pub(crate) use module::{Function, FunctionId, Module, ModuleImage};
pub(crate) use pinned::{PinnedMemory, Refused};
pub(crate) use pool::MemoryPool;
pub(crate) use stream::Stream;
pub(crate) use window::{Exported, HANDLE_BYTES, Mapping, SignalOp};

/// Capture entry points, for the public layer's `impl Stream` in `graph/capture.rs`.
pub(crate) mod capture_api {
    pub(crate) use super::capture::{begin, end, status};
}

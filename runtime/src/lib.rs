//! gpu-pipeline: safe multi-stream CUDA.
//!
//! Three layers, unsafe confined to the lower two: [`sys`] (raw driver types), `driver` (the
//! function table, loaded once at run time with `libloading`), and the safe API on top
//! ([`Device`], [`Context`], [`Stream`], [`Event`], ...).

pub use gpu_pipeline_macros::gpu_pipeline;

pub mod sys;

pub mod collective;
pub mod launcher;
// NCCL lives with the CUDA backend (`cuda/nccl/`).
#[path = "cuda/nccl/mod.rs"]
pub mod nccl;
pub mod rendezvous;

mod context;
mod device;
mod driver;
mod error;
mod event;
mod graph;
mod host;
mod launch;
mod memory;
mod module;
mod pipeline;
/// Hidden: what `gpu_pipeline!` expansions name. Not a public API. The version in its name
/// changes whenever what it holds does, so a mismatched macro crate fails to resolve it.
#[doc(hidden)]
pub mod __private_0_1 {
    pub use crate::private::*;
}
#[cfg(feature = "nvrtc")]
pub mod nvrtc;
mod private;
mod stream;

pub use context::{BACKEND_ENV, Backend, Context, StreamPriorityRange};
pub use device::{Device, DeviceAttribute};
pub use driver::{
    DEFAULT_DRIVER_PATHS, DRIVER_PATH_ENV, is_available as driver_is_available,
    version as driver_version,
};
pub use error::{DriverError, Error, LibraryAttempt, Result};
pub use event::{Event, EventFlags};
pub use graph::{
    Graph, GraphExec, GraphNode, GraphNodeType, GraphUpdate, GraphUpdateResult, KernelNode,
};
pub use host::{Hazard, HostFault, OpSite, RaceReport};
pub use launch::{
    DEFAULT_DYNAMIC_SHARED_LIMIT, DeviceRepr, Dim3, KernelArg, KernelArgs, KernelArgsFor,
    KernelParam, LaunchConfig, LaunchConfigError, LaunchLimits, ParamLayout, PassedAs, Signature,
    TypedKernel, check_param_sizes,
};
pub use launch::{HostKernel, HostKernelFn, HostParam};
pub use memory::*;
pub use module::{FunctionAttribute, Kernel, KernelAttributes, Module};
pub use pipeline::{StageTiming, StepProfile, StreamPriority, TypedStream};
pub use stream::{
    AccessPolicyWindow, AccessProperty, CaptureMode, CaptureStatus, MemOp, Stream, StreamAttribute,
    StreamAttributeId, StreamFlags, SyncPolicy, WaitCondition, exchange_thread_capture_mode,
};

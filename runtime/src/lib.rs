//! gpu-pipeline: safe multi-stream CUDA.
//!
//! The layers, with `unsafe` confined to the lowest three: [`sys`] (raw driver types),
//! `driver` (the function table, loaded once at run time with `libloading`), and `cuda` (every
//! driver call and raw handle, each type stating its invariant). Beside `cuda`, `cpu` is the
//! CPU backend, in safe Rust. The public types ([`Context`], [`Stream`], [`Event`], the
//! buffers, [`Module`], [`Graph`], ...) each hold one backend's value and dispatch once per
//! method; objects of two backends or two contexts never mix (an [`Error::ContextMismatch`]).

pub use gpu_pipeline_macros::gpu_pipeline;

pub mod sys;

pub mod collective;
pub mod launcher;
pub mod rendezvous;

mod communicator;
mod context;
mod cpu;
mod cuda;
mod driver;
mod error;
mod event;
mod free_rule;
mod graph;
pub mod image;
mod launch;
mod memory;
mod module;
mod panic_log;
mod peer;
mod pipeline;
/// Hidden: what `gpu_pipeline!` expansions name. Not a public API. The version in its name
/// changes whenever what it holds does, so a mismatched macro crate fails to resolve it.
#[doc(hidden)]
pub mod __private_0_1 {
    pub use crate::private::*;
}
#[cfg(feature = "nvrtc")]
pub use cuda::nvrtc;
mod private;
mod stream;

pub use communicator::Communicator;
pub use context::{BACKEND_ENV, Backend, Context, StreamPriorityRange};
/// [`CpuFault`] under the name of earlier versions.
#[doc(hidden)]
pub use cpu::CpuFault as HostFault;
/// [`CpuKernel`] under the name of earlier versions.
#[doc(hidden)]
pub use cpu::CpuKernel as HostKernel;
/// [`CpuKernelFn`] under the name of earlier versions.
#[doc(hidden)]
pub use cpu::CpuKernelFn as HostKernelFn;
/// [`CpuParam`] under the name of earlier versions.
#[doc(hidden)]
pub use cpu::CpuParam as HostParam;
pub use cpu::{
    CpuFault, CpuKernel, CpuKernelFn, CpuKernelGeometryFn, CpuParam, Hazard, OpSite, RaceReport,
};
pub use cuda::nccl;
pub use cuda::{Device, DeviceAttribute};
pub use driver::{
    DEFAULT_DRIVER_PATHS, DRIVER_PATH_ENV, is_available as driver_is_available,
    version as driver_version,
};
pub use error::{DriverError, Error, LibraryAttempt, Result};
pub use event::{Event, EventFlags};
pub use graph::{CaptureMode, CaptureStatus, exchange_thread_capture_mode};
pub use graph::{
    Graph, GraphExec, GraphNode, GraphNodeType, GraphUpdate, GraphUpdateResult, KernelNode,
    KernelUpdates,
};
pub use image::{ImageError, ImageFormat};
pub use launch::{
    ArgRef, DEFAULT_DYNAMIC_SHARED_LIMIT, DeviceRepr, Dim3, KernelArg, KernelArgs, KernelArgsFor,
    KernelParam, LaunchConfig, LaunchConfigError, LaunchLimits, ParamLayout, PassedAs, Signature,
    TypedKernel, check_param_sizes,
};
pub use memory::*;
pub use module::{FunctionAttribute, Kernel, KernelAttributes, Module};
pub use pipeline::{
    CommStage, Rank, StageTiming, StepProfile, StreamPriority, TRACK_FAULTS_ENV, TypedStream,
};
pub use stream::{
    AccessPolicyWindow, AccessProperty, MemOp, Stream, StreamAttribute, StreamAttributeId,
    StreamFlags, SyncPolicy, WaitCondition,
};

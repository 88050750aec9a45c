//! gpu-pipeline: safe multi-stream CUDA.
//!
//! The layers, with `unsafe` confined to the lowest three: [`sys`] (raw driver types),
//! `driver` (the function table, loaded once at run time with `libloading`), and `cuda` (every
//! driver call and raw handle, each type stating its invariant). Beside `cuda`, `cpu` is the
//! CPU backend, in safe Rust. The public types ([`Context`], [`Stream`], [`Event`], the
//! buffers, [`Module`], [`Graph`], ...) each hold one backend's value and dispatch once per
//! method; objects of two backends or two contexts never mix (an [`Error::ContextMismatch`]).
//!
//! # What the `unsafe` kernel declarations promise
//!
//! Safe code cannot make a kernel touch memory it was not given, except through one promise
//! the user makes about code the compiler cannot see: `unsafe kernels` in
//! [`gpu_pipeline!`], or [`Kernel::typed_with_bounds`] (and [`Kernel::typed`]) at this level.
//! It says:
//!
//! - the signature matches the kernel: one parameter per C parameter, in order; each scalar of
//!   the C type's layout; `&[T]` for a `const T*` it only reads, `&mut [T]` for a `T*` it may
//!   write;
//! - each buffer with a declared bound ([`Bounds`]; `y: &mut [f32; n]` in the macro) is
//!   indexed only below the bound's value, in elements of `T`: what a reader verifies in the
//!   kernel (`if (i < n) y[i] = ...`);
//! - each buffer without one is indexed only within the buffer passed, whatever the scalar
//!   arguments are (a promise a kernel that takes its length as a parameter cannot keep:
//!   declare a bound for it instead).
//!
//! The rest is checked: every launch ([`TypedKernel::launch`]), graph kernel node
//! ([`Graph::add_kernel_node`]) and kernel-node update ([`GraphExec::set_kernel_params`])
//! first checks that each bounded buffer passed is at least as long as its bound, and refuses
//! with [`Error::KernelBound`], having changed nothing, when one is not (or when a scalar in a
//! bound is negative, or the bound overflows). Generated pipelines check every bounded launch
//! of a step before enqueuing any of it, so a refused step, capture or setter leaves nothing
//! half done. [`Kernel::launch`] is the one unchecked way in: its caller vouches for
//! everything at every call.

pub use gpu_pipeline_macros::gpu_pipeline;

pub mod sys;

pub mod collective;
pub mod launcher;
pub mod rendezvous;

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
    Comparison, Condition, ConditionValue, Graph, GraphBody, GraphExec, GraphNode, GraphNodeType,
    GraphUpdate, GraphUpdateResult, KernelNode, KernelUpdates, LoopState, WhileNode,
};
pub use image::{ImageError, ImageFormat};
pub use launch::{
    ArgRef, Bound, BoundProblem, BoundViolation, Bounds, DEFAULT_DYNAMIC_SHARED_LIMIT, DeviceRepr,
    Dim3, IndexType, KernelArg, KernelArgs, KernelArgsFor, KernelParam, LaunchConfig,
    LaunchConfigError, LaunchLimits, MAX_BOUND_FACTORS, ParamKind, ParamLayout, PassedAs,
    Signature, TypedKernel, check_param_sizes,
};
pub use memory::*;
pub use module::{FunctionAttribute, Kernel, KernelAttributes, Module};
pub use pipeline::{StageTiming, StepProfile, StreamPriority, TRACK_FAULTS_ENV, TypedStream};
pub use stream::{
    AccessPolicyWindow, AccessProperty, MemOp, Stream, StreamAttribute, StreamAttributeId,
    StreamFlags, SyncPolicy, WaitCondition,
};

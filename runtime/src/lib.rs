//! gpu-pipeline: safe multi-stream CUDA.
//!
//! The layers, with `unsafe` confined to the lowest three: [`sys`] (raw driver types),
//! `driver` (the function table, loaded once at run time with `libloading`), and `cuda` (every
//! driver call and raw handle, each type stating its invariant). Beside `cuda`, `cpu` is the
//! CPU backend, in safe Rust. The public types ([`Context`], [`Stream`], [`Event`], the
//! buffers, [`Module`], [`Graph`], ...) each hold one backend's value and dispatch once per
//! method; objects of two backends or two contexts never mix (an [`Error::ContextMismatch`]).

pub use gpu_pipeline_macros::gpu_pipeline;

/// The `bytemuck` crate this one builds on: buffer elements are [`Pod`], kernel scalars are
/// [`DeviceRepr`] (which requires [`Pod`]). Its derives name `::bytemuck` unless told
/// otherwise; without a `bytemuck` dependency of your own, write
/// `#[bytemuck(crate = "gpu_pipeline::bytemuck")]` beside `#[derive(Pod, Zeroable)]`.
pub use bytemuck;
/// Plain old data: any bit pattern is a valid value. The bound on buffer elements.
///
/// With `bytemuck`'s `derive` (which this crate enables), also the derive macro:
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, DeviceRepr, Pod, Stream, Zeroable};
///
/// #[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
/// #[bytemuck(crate = "gpu_pipeline::bytemuck")]
/// #[repr(C)]
/// struct Particle { x: f32, y: f32, mass: f32 }
/// // SAFETY: `#[repr(C)]`, matching `struct Particle { float x, y, mass; }`.
/// unsafe impl DeviceRepr for Particle {}
///
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let p = Particle { x: 1.0, y: 2.0, mass: 0.5 };
/// let buffer = DeviceBuffer::from_slice(&stream, &[p; 4])?;
/// assert_eq!(buffer.to_vec(&stream)?, vec![p; 4]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub use bytemuck::Pod;
/// The all-zero bit pattern is a valid value. A supertrait of [`Pod`].
///
/// With `bytemuck`'s `derive` (which this crate enables), also the derive macro.
pub use bytemuck::Zeroable;
/// The `half` crate (feature `half`): [`half::f16`] and [`half::bf16`] are buffer elements
/// and kernel scalars ([`DeviceRepr`]), CUDA's `__half` and `__nv_bfloat16`.
///
/// ```
/// # #[cfg(feature = "half")] {
/// use gpu_pipeline::half::f16;
/// use gpu_pipeline::{Context, DeviceBuffer, Stream};
///
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let data: Vec<f16> = [0.5f32, 1.0, 65504.0].into_iter().map(f16::from_f32).collect();
/// let buffer = DeviceBuffer::from_slice(&stream, &data)?;
/// assert_eq!(buffer.to_vec(&stream)?, data);
/// # }
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[cfg(feature = "half")]
pub use half;

#[cfg(feature = "cudarc")]
pub use cuda::cudarc::{CudarcStream, CudarcView, CudarcViewMut, IntoCudarcError};
/// The `cudarc` crate (feature `cudarc`), as this crate sees it: convert streams and device
/// memory with [`Stream::to_cudarc`], [`Stream::from_cudarc`],
/// [`DeviceBuffer::cudarc_view`], [`DeviceBuffer::cudarc_view_mut`],
/// [`DeviceBuffer::from_cudarc`] and [`DeviceBuffer::into_cudarc`]. Depend on `cudarc`
/// yourself for its other features (cuBLAS, a CUDA version); versions 0.19.10 and later of
/// 0.19 are the same crate as this one.
#[cfg(feature = "cudarc")]
pub use cudarc;

pub mod sys;

pub mod collective;
pub mod launcher;
pub mod rendezvous;

mod call_scope;
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
pub use cpu::{CpuFault, CpuKernel, CpuKernelFn, CpuParam, Hazard, OpSite, RaceReport};
pub use cuda::nccl;
pub use cuda::{Device, DeviceAttribute};
pub use driver::{
    DEFAULT_DRIVER_PATHS, DRIVER_PATH_ENV, is_available as driver_is_available,
    version as driver_version,
};
pub use error::{DriverError, Error, ErrorReport, LibraryAttempt, Result};
pub use event::{Event, EventFlags};
pub use graph::{CaptureMode, CaptureStatus, exchange_thread_capture_mode};
pub use graph::{
    Graph, GraphExec, GraphNode, GraphNodeType, GraphUpdate, GraphUpdateResult, KernelNode,
};
pub use image::{ImageError, ImageFormat};
pub use launch::{
    ArgRef, DEFAULT_DYNAMIC_SHARED_LIMIT, DeviceRepr, Dim3, KernelArg, KernelArgs, KernelArgsFor,
    KernelParam, LaunchConfig, LaunchConfigError, LaunchLimits, ParamLayout, PassedAs, Signature,
    TypedKernel, check_param_sizes,
};
pub use memory::*;
pub use module::{FunctionAttribute, Kernel, KernelAttributes, Module};
pub use pipeline::{StageTiming, StepProfile, StreamPriority, TypedStream};
pub use stream::{
    AccessPolicyWindow, AccessProperty, MemOp, Stream, StreamAttribute, StreamAttributeId,
    StreamFlags, SyncPolicy, WaitCondition,
};

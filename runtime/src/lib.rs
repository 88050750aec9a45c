//! Safe multi-stream CUDA for Rust. Declare the stages of one time step of a GPU program
//! (which stream each runs on, which kernels it launches, what it reads and writes), and the
//! [`gpu_pipeline!`] macro derives exactly the events that ordering needs, captures the step
//! as a CUDA graph to replay thousands of times, and turns stream-ordering and borrow
//! mistakes into compile errors. Without a GPU the same program runs on the CPU backend (CPU
//! threads with CUDA's semantics), with a race detector.
//!
//! ```toml
//! [dependencies]
//! gpu-pipeline = "0.1"
//! ```
//!
//! # A first pipeline
//!
//! The kernel is CUDA C compiled to PTX ahead of time (`nvcc -ptx -arch=compute_75
//! saxpy.cu`, or the repository's `tools/build-ptx`, which needs no toolkit) and embedded
//! with `include_str!`, here from a `kernels/` folder beside `src/`. `cpu =` names what the
//! CPU backend runs instead.
//!
//! ```standalone_crate
//! use gpu_pipeline::{gpu_pipeline, Context, DeviceBuffer, PinnedBuffer, Stream};
//!
//! gpu_pipeline! {
//!     /// `y += a * x` on one stream, then `y` copied back to the host on another.
//!     pub pipeline Saxpy {
//!         streams { compute(priority = high), copy(non_blocking) }
//!         unsafe kernels k = ptx(include_str!("../kernels/saxpy.ptx")) {
//!             fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = saxpy_on_cpu;
//!         }
//!         params {
//!             n: u32,
//!             a: f32,
//!             x: &DeviceBuffer<f32>,
//!             y: &mut DeviceBuffer<f32>,
//!             out: &mut PinnedBuffer<f32>,
//!         }
//!         stage axpy on compute { launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256; }
//!         stage download on copy { copy y -> out; } // reads `y` after `axpy` wrote it: one event
//!     }
//! }
//!
//! /// What the CPU backend runs for `saxpy`: plain Rust over the whole buffers.
//! fn saxpy_on_cpu(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
//!     for i in 0..n as usize {
//!         y[i] += a * x[i];
//!     }
//! }
//!
//! # fn main() -> gpu_pipeline::Result<()> {
//! let ctx = Context::cpu(); // or Context::auto()?: CUDA device 0 when there is one
//! let stream = Stream::non_blocking(&ctx)?;
//! let n = 1000;
//! let x = DeviceBuffer::from_slice(&stream, &vec![1.0f32; n])?;
//! let mut y = DeviceBuffer::from_slice(&stream, &vec![2.0f32; n])?;
//! let mut out = PinnedBuffer::<f32>::zeros(&ctx, n)?;
//!
//! let mut saxpy = Saxpy::new(&ctx)?; // creates the streams, loads the module
//! let (n, a) = (n as u32, 3.0);
//! saxpy.run(SaxpyParams { n, a, x: &x, y: &mut y, out: &mut out })?.wait()?; // y = 2 + 3 * 1
//! assert!(out.as_slice()?.iter().all(|&v| v == 5.0));
//!
//! // Captured once as a graph, replayed; `set_a` updates the kernel node in place.
//! let mut step = saxpy.capture(SaxpyParams { n, a, x: &x, y: &mut y, out: &mut out })?;
//! step.launch()?; // y = 8
//! step.set_a(-1.0)?;
//! step.launch()?; // y = 7
//! step.synchronize()?;
//! drop(step);
//! assert!(out.as_slice()?.iter().all(|&v| v == 7.0));
//! # Ok(()) }
//! ```
//!
//! Declare `x` as `&DeviceBuffer<f32>` but pass it where the kernel writes, and the build
//! stops at your token: ``error: `x` is declared `&` but `saxpy` writes its `y`; declare it
//! `&mut DeviceBuffer<f32>` ``.
//!
//! # The `gpu_pipeline!` language
//!
//! ```text
//! INPUT     := ATTR* VIS pipeline NAME { ITEM* }            one pipeline per invocation
//! ITEM      := streams { STREAM,* }                          exactly one block, >= 1 stream
//!            | unsafe kernels MODULE = FORMAT(EXPR) { KERNEL* }    one module per block
//!            | params { NAME: TYPE,* }                       at most one block
//!            | scratch { NAME: TYPE [= LEN],* }              at most one block
//!            | STAGE_ITEM
//!            | step NAME { STAGE_ITEM* }                     a kind of step
//!            | swap(NAME, NAME);                             two buffer params, at most 4 swaps
//!            | devices { DEVICE,+ }                          at most one block
//! STAGE_ITEM:= stage NAME on STREAM_REF [after STAGE,+] { STATEMENT* }
//!            | for NAME in EXPR..EXPR { (let NAME = EXPR;)* STAGE_ITEM* }   no nesting
//!            | concurrent(STAGE, STAGE,+);                   checked, not assumed
//! STREAM    := NAME [[COUNT]] [( STREAM_OPT,* )] [on DEVICE]  NAME[COUNT]: a stream array
//! STREAM_REF:= NAME | NAME[EXPR]                             NAME[EXPR]: one of an array
//! STREAM_OPT:= priority = (high | low | default | [-]INT) | non_blocking
//! FORMAT    := ptx | cubin | fatbin | cuda_c                 cuda_c: NVRTC, on CUDA only
//! KERNEL    := fn NAME(NAME: KTYPE,*) [cpu = PATH];          `host = PATH` is accepted too
//! KTYPE     := TYPE | &[T] | &mut [T] | &[T; BOUND] | &mut [T; BOUND]    TYPE: a scalar
//! BOUND     := PRODUCT [+ INT] | INT + PRODUCT               see "Kernel bounds" below
//! PRODUCT   := FACTOR (* FACTOR)*                            at most 4 parameters
//! FACTOR    := NAME | INT | ( PRODUCT )                      NAME: an integer parameter
//! STATEMENT := launch MODULE::KERNEL(ARG,*) grid DIM block DIM [shared EXPR];
//!            | copy BUF -> BUF;
//!            | fill BUF = EXPR;
//!            | wait FLAG (== | >= | &) EXPR;                  `&`: until any bit is set
//!            | write FLAG = EXPR;
//!            | host CLOSURE [reads(NAME,*)] [writes(NAME,*)];
//!            | call PATH(EXPR,*) [reads(NAME,*)] [writes(NAME,*)];
//!            | while COND max EXPR { STATEMENT* }             decided on the device
//!            | if COND { STATEMENT* }
//!            | send CBUF to EXPR;                             point to point, by rank
//!            | recv CBUF from EXPR;
//!            | all_reduce(OP) CBUF [-> CBUF];                 OP: sum prod max min avg
//!            | broadcast CBUF [-> CBUF] from EXPR;
//!            | all_gather CBUF -> CBUF;
//!            | reduce_scatter(OP) CBUF -> CBUF;
//! COND      := NAME (> | >= | < | <= | == | !=) EXPR         first element of a DeviceBuffer
//!            | step % EXPR == EXPR                           `if` only: the step counter
//! BUF       := NAME | NAME[EXPR] | NAME[RANGE] | NAME[EXPR][RANGE]   (also as a launch ARG)
//! RANGE     := [EXPR]..[EXPR]                                half-open elements lo..hi
//! CBUF      := NAME [ [RANGE] ]                              communication: a whole buffer's range
//! PARAM     := NAME: TYPE [on DEVICE]                        SCRATCH: NAME: TYPE [on DEVICE] [= LEN]
//! DIM       := EXPR                                          x, (x, y) or (x, y, z)
//! ```
//!
//! The [`gpu_pipeline!`] macro's own documentation explains each construct: stream arrays
//! and `for` loops over ranges (N chunks on N streams), `step` kinds, `swap` (ping-pong
//! buffers a graph exchanges between replays), device-side `while`/`if`, communication and
//! devices, and what `run_ahead` and a graph's `window()` give a time-step loop. What
//! follows is the core.
//!
//! The first stream is the *origin*: a step begins and ends there. Params are scalars (any
//! `Clone` type, by value) or borrowed memory: `&`/`&mut` [`DeviceBuffer`], [`PinnedBuffer`] or
//! [`FlagCell`]; a reference to any other type (a library handle) may appear only in `call`
//! and `host` statements. Only `&mut` params and scratch buffers may be written. `unsafe`
//! on `kernels` is your promise that each declared signature is the kernel's and that it
//! indexes each buffer within the buffer passed.
//!
//! Ordering: stages are in program order. For stages on different streams that touch one
//! buffer where either writes, the later waits for the earlier; `after` adds such pairs. The
//! macro emits the transitive reduction of those waits, one event per stage another stream
//! waits on, and a minimal fork from and join to the origin. A `call` hands the function the
//! stage's stream as a [`TypedStream`] (typed by a marker of that stream, `SaxpyCompute`
//! above, and offering only what a graph can replay) followed by its arguments; library
//! calls (cuBLAS, NCCL, your own) go there.
//!
//! Compile errors, each on your token and saying what to write instead: unknown or duplicate
//! names, `after` cycles, wrong argument counts or scalar types, a `&` buffer something
//! writes, one buffer passed twice where one use writes, pageable host memory in a copy,
//! anything a graph cannot capture (a synchronize, a blocking copy, an event from outside),
//! a `concurrent` claim the accesses contradict. The repository's `ui-tests/README.md` lists
//! every one.
//!
//! # What a pipeline generates
//!
//! For `pipeline P` with streams `a` and `b`:
//!
//! | item | what it is |
//! | --- | --- |
//! | `PParams<'a>` | the params, one field each, borrowed for the step |
//! | `P::new(&ctx)` | creates the streams, the events and scratch buffers, loads the modules |
//! | `p.run(params)` | enqueues one step; the returned `PRun` keeps the params borrowed until `wait()` (or its drop, which waits) |
//! | `p.run_steps(params, n)` | `n` consecutive steps with one guard |
//! | `p.capture(params)` | records one step as a graph and instantiates it: `PGraph` with `launch()`, `synchronize()`, and `set_<name>(value)` for each scalar the step reads (kernel nodes updated in place; a scalar that anything else reads re-captures) |
//! | `p.profile(params)` | one step with timing events around each stage: a [`StepProfile`], exportable as a Chrome trace for Perfetto |
//! | `P::DOT`, `P::STAGES`, `P::NAME` | the stage graph in Graphviz DOT with its event edges, the stage names in order, the name |
//! | `p.a_stream()`, `p.b_stream()` | each [`Stream`], e.g. to make the origin wait for a producer before a step |
//! | `PA`, `PB` | the stream markers of [`TypedStream`]s |
//! | `p.set_fault_tracking(on)` | off by default (each stage then costs one more stream memory operation); when on, a fault at a wait names the first stage that did not complete; `GPU_PIPELINE_TRACK_FAULTS=1` turns it on for every pipeline created afterwards |
//!
//! ```standalone_crate
//! use gpu_pipeline::{gpu_pipeline, Context, DeviceBuffer, PinnedBuffer, Result, TypedStream};
//! # fn saxpy_on_cpu(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
//! #     for i in 0..n as usize { y[i] += a * x[i]; }
//! # }
//!
//! gpu_pipeline! {
//!     /// Upload, clear, `y += a * x`, a library call, download.
//!     pub pipeline Step {
//!         streams { compute, copy(non_blocking) }
//!         unsafe kernels k = ptx(include_str!("../kernels/saxpy.ptx")) {
//!             fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = saxpy_on_cpu;
//!         }
//!         params {
//!             n: u32,
//!             a: f32,
//!             input: &PinnedBuffer<f32>,
//!             x: &mut DeviceBuffer<f32>,
//!             y: &mut DeviceBuffer<f32>,
//!             out: &mut PinnedBuffer<f32>,
//!         }
//!         stage upload on copy { copy input -> x; }
//!         stage clear on compute { fill y = 1.0; }
//!         concurrent(upload, clear);
//!         stage axpy on compute { launch k::saxpy(n, a, x, y) grid n.div_ceil(128) block 128; }
//!         stage mirror on compute { call library_copy(y, x) reads(y) writes(x); }
//!         stage download on copy { copy x -> out; }
//!     }
//! }
//!
//! /// Stands for a library call: it gets the stage's stream, typed by its marker.
//! fn library_copy(
//!     stream: &TypedStream<'_, StepCompute>,
//!     src: &DeviceBuffer<f32>,
//!     dst: &mut DeviceBuffer<f32>,
//! ) -> Result<()> {
//!     stream.copy_dtod(src, dst)
//! }
//!
//! # fn main() -> Result<()> {
//! let ctx = Context::cpu_checked(); // with the race detector
//! let n = 256;
//! let input = PinnedBuffer::from_slice(&ctx, &vec![2.0f32; n])?;
//! let mut x = DeviceBuffer::<f32>::alloc(&ctx, n)?;
//! let mut y = DeviceBuffer::<f32>::alloc(&ctx, n)?;
//! let mut out = PinnedBuffer::<f32>::zeros(&ctx, n)?;
//! let mut step = Step::new(&ctx)?;
//! assert_eq!(Step::STAGES, ["upload", "clear", "axpy", "mirror", "download"]);
//! assert!(Step::DOT.starts_with("digraph Step"));
//!
//! let (n, a) = (n as u32, 0.5);
//! let params = StepParams { n, a, input: &input, x: &mut x, y: &mut y, out: &mut out };
//! step.run_steps(params, 3)?.wait()?;
//! assert!(out.as_slice()?.iter().all(|&v| v == 2.0)); // 1 + 0.5 * 2
//!
//! let params = StepParams { n, a, input: &input, x: &mut x, y: &mut y, out: &mut out };
//! let profile = step.profile(params)?;
//! assert_eq!(profile.stages.len(), 5);
//! assert!(profile.to_chrome_trace().contains("\"name\":\"axpy\""));
//! assert!(ctx.races().is_empty());
//! # Ok(()) }
//! ```
//!
//! # Backends
//!
//! - **CUDA**: [`Context::cuda`]`(ordinal)` or [`Context::new`] on a [`Device`]. The driver
//!   (`libcuda.so.1`) is loaded at run time, so building needs no CUDA; a driver for CUDA 12.0
//!   or newer is needed to run. Without one, CUDA calls return [`Error::DriverNotFound`].
//! - **CPU**: [`Context::cpu`] runs everything on CPU threads with CUDA's semantics: each
//!   stream an in-order queue, events, host functions, copies, capture and replay; kernels run
//!   the `cpu =` implementation their declaration names. [`Context::cpu_checked`] adds a
//!   vector-clock race detector that names the buffer, both operations and both streams of
//!   any unordered conflict.
//! - [`Context::auto`] picks CUDA device 0 when a driver loads and sees a device, the CPU
//!   backend otherwise; [`BACKEND_ENV`] (`GPU_PIPELINE_BACKEND=cuda|cpu|cpu-checked`) forces
//!   one.
//!
//! The same types serve both: a [`Context`], its [`Stream`]s and [`Event`]s, [`DeviceBuffer`],
//! [`PinnedBuffer`], [`ManagedBuffer`], [`FlagCell`], [`Module`]s and typed kernels
//! ([`TypedKernel`]), [`Graph`] and [`GraphExec`]. Hand-written multi-stream code gets the
//! race detector too:
//!
//! ```
//! use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream};
//! # fn main() -> gpu_pipeline::Result<()> {
//! let ctx = Context::cpu_checked();
//! let (a, b) = (Stream::non_blocking(&ctx)?, Stream::non_blocking(&ctx)?);
//! let input = PinnedBuffer::from_slice(&ctx, &[1u32; 64])?;
//! let mut field = DeviceBuffer::<u32>::alloc(&ctx, 64)?.named("field");
//! a.copy_htod(&input, &mut field)?;
//! b.memset_u32(&mut field, 0)?; // forgot `b.join(&a)?`
//! let err = ctx.synchronize().unwrap_err();
//! assert!(err.to_string().contains("CPU backend"), "{err}");
//! assert!(ctx.races().iter().any(|race| race.to_string().contains("field")));
//! # Ok(()) }
//! ```
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
//! bound is negative, or the bound overflows). A pipeline returns it wrapped in an
//! [`Error::Stage`] that names the stage; its message includes the cause, and
//! [`Error::kernel_bound`] (or a `match` on [`Error::root`]) reaches the violation. Generated pipelines check every bounded launch
//! of a step before enqueuing any of it, so a refused step, capture or setter leaves nothing
//! half done. [`Kernel::launch`] is the one unchecked way in: its caller vouches for
//! everything at every call.
//!
//! # Soundness
//!
//! No safe code, [`std::mem::forget`] of any guard included, lets the host read or write host
//! memory, or free any memory, that enqueued work may still touch: buffers are shared (an
//! `Arc`) with every graph captured while using them; dropping memory waits for the work that
//! may use it, or frees it in the order of the one stream that used it; the host sees pinned
//! memory only after the fences of the copies and graph launches that touch it. The contents
//! of device memory are ordered by the guards instead: a step's guard waits (or joins) before
//! its borrows end, so forgetting one (`mem::forget` of a run) lets a copy of a buffer the
//! step writes, enqueued on another stream, run while the step does and read torn values,
//! never memory that was freed, nor host memory under a write. The same holds for a buffer
//! read through a guard's `params()` before the guard waited, and for device work the caller
//! orders by hand (a `Stream` of the runtime API): the checked CPU backend reports each such
//! read as a race. An asynchronous fault
//! surfaces at the next wait as an [`Error::Step`] naming the pipeline and, with fault
//! tracking on (off by default: `set_fault_tracking(true)` or `GPU_PIPELINE_TRACK_FAULTS=1`),
//! the first stage that did not complete.
//!
//! # Interop with cudarc
//!
//! With the `cudarc` feature, streams and memory cross to and from
//! [cudarc](https://docs.rs/cudarc) (what cuBLAS, cuDNN and candle users have):
//! `Stream::to_cudarc` lends a stream (say, a pipeline stream a `CudaBlas` works on) and
//! `Stream::from_cudarc` borrows one; `DeviceBuffer::cudarc_view` and
//! `DeviceBuffer::cudarc_view_mut` lend a buffer as cudarc views for the duration of a
//! borrow; `DeviceBuffer::from_cudarc` takes a `CudaSlice` in without a copy, for as long
//! as anything uses it, and `DeviceBuffer::into_cudarc` gives it back. A library's kernels
//! inside a captured step become nodes of its graph; the step's setters still find their own.
//! The stream conversions are `unsafe` for one reason: a capture begun through cudarc on the
//! shared stream would record our work into a graph that keeps none of its memory alive.
//! Buffer views are refused where cudarc's event tracking manages synchronization (its events
//! would be recorded inside captures, cudarc#590): call `unsafe { ctx.disable_event_tracking() }`
//! on cudarc's context first. The repository's `cublas` example runs cuBLAS SGEMM between two
//! of our kernels in a captured step.
//!
//! # Features
//!
//! | feature | adds |
//! | --- | --- |
//! | `nvrtc` | `cuda_c(...)` modules and `Module::from_cuda_source`, compiled at run time by NVRTC (loaded at run time) on CUDA; the CPU backend compiles nothing and needs neither the feature nor a CUDA toolchain |
//! | `half` | `half::f16` and `half::bf16` as buffer elements and kernel scalars |
//! | `cudarc` | the conversions above; `cudarc` re-exported |
//!
//! # Layers
//!
//! `unsafe` is confined to the lowest three: [`sys`] (raw driver types), `driver` (the
//! function table, loaded once at run time with `libloading`), and `cuda` (every driver call
//! and raw handle, each type stating its invariant). Beside `cuda`, `cpu` is the CPU backend,
//! in safe Rust. The public types each hold one backend's value and dispatch once per method;
//! objects of two backends or two contexts never mix (an [`Error::ContextMismatch`]).

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

/// The `cudarc` crate (feature `cudarc`), as this crate sees it: convert streams and device
/// memory with [`Stream::to_cudarc`], [`Stream::from_cudarc`],
/// [`DeviceBuffer::cudarc_view`], [`DeviceBuffer::cudarc_view_mut`],
/// [`DeviceBuffer::from_cudarc`] and [`DeviceBuffer::into_cudarc`]. Depend on `cudarc`
/// yourself for its other features (cuBLAS, a CUDA version); versions 0.19.10 and later of
/// 0.19 are the same crate as this one.
#[cfg(feature = "cudarc")]
pub use cudarc;
#[cfg(feature = "cudarc")]
pub use interop::cudarc::{CudarcStream, CudarcView, CudarcViewMut, IntoCudarcError};

pub mod sys;

pub mod collective;
pub mod launcher;
pub mod nccl;
pub mod rendezvous;

mod call_scope;
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
mod interop;
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
mod vocab;
mod window;

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
/// NVTX ranges for profilers: each pipeline stage is a `Pipeline/stage` range in Nsight
/// Systems (see `docs/PERFORMANCE.md`, "Profiling").
pub use cuda::nvtx;
pub use cuda::{Device, DeviceAttribute};
pub use driver::{
    DEFAULT_DRIVER_PATHS, DRIVER_PATH_ENV, is_available as driver_is_available,
    version as driver_version,
};
pub use error::{DriverError, Error, ErrorReport, LibraryAttempt, Result};
pub use event::{Event, EventFlags};
pub use graph::{
    CONDITION_HEADER, Comparison, Condition, ConditionBytes, ConditionHandle, ConditionSetter,
    ConditionValue, Graph, GraphBody, GraphExec, GraphNode, GraphNodeType, GraphUpdate,
    GraphUpdateResult, HandleKind, KernelNode, KernelUpdates, LoopState, SetsCondition, WhileNode,
};
pub use graph::{CaptureMode, CaptureStatus, exchange_thread_capture_mode};
pub use image::{ImageError, ImageFormat};
pub use launch::{
    ArgRef, Bound, BoundProblem, BoundViolation, Bounds, DEFAULT_DYNAMIC_SHARED_LIMIT, DeviceRepr,
    Dim3, IndexType, KernelArg, KernelArgs, KernelArgsFor, KernelParam, LaunchConfig,
    LaunchConfigError, LaunchLimits, MAX_BOUND_FACTORS, ParamKind, ParamLayout, PassedAs,
    Signature, TypedKernel, check_param_sizes,
};
pub use memory::*;
pub use module::{FunctionAttribute, Kernel, KernelAttributes, Module};
pub use pipeline::{
    CommStage, HostWrite, Rank, Recaptured, StageTiming, StepProfile, StreamPriority,
    TRACK_FAULTS_ENV, TypedStream,
};
pub use stream::{
    AccessPolicyWindow, AccessProperty, MemOp, Stream, StreamAttribute, StreamAttributeId,
    StreamFlags, SyncPolicy, WaitCondition,
};
pub use window::{MAX_WINDOW_PEERS, SignalStream, Window};

/// The repository's README, whose programs run as doctests of this crate: its first
/// program is the getting-started example, so it is checked with every `cargo test`.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

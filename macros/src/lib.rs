//! The `gpu_pipeline!` procedural macro. Users depend on the `gpu-pipeline` crate, which
//! re-exports it.
//!
//! A pipeline declares the stages of one step of a multi-stream GPU program: which stream each
//! stage runs on and what it reads and writes. The macro derives the ordering from those
//! accesses, emits exactly the events that ordering needs, and rejects at compile time what
//! would be a race, an aliasing bug or an operation a CUDA graph cannot capture.
//!
//! # Example
//!
//! ```text
//! gpu_pipeline! {
//!     /// One explicit Euler step of 2-D heat diffusion, with a snapshot streamed back.
//!     pub pipeline HeatStep {
//!         streams { compute(priority = high), copy(non_blocking) }
//!         unsafe kernels heat = ptx(include_str!("../kernels/heat.ptx")) {
//!             fn stencil(nx: u32, ny: u32, alpha: f32, src: &[f32; nx * ny],
//!                        dst: &mut [f32; nx * ny])
//!                 cpu = crate::heat_cpu::stencil;
//!         }
//!         params {
//!             nx: u32, ny: u32, alpha: f32,
//!             field: &mut DeviceBuffer<f32>,
//!             next: &mut DeviceBuffer<f32>,
//!             snapshot: &mut PinnedBuffer<f32>,
//!             done: &mut FlagCell,
//!         }
//!         scratch { tmp: DeviceBuffer<f32> = (nx * ny) as usize }
//!         stage step on compute {
//!             launch heat::stencil(nx, ny, alpha, field, next)
//!                 grid (nx * ny).div_ceil(256) block 256;
//!         }
//!         stage save on copy { copy next -> snapshot; }   // reads `next`: waits for `step`
//!         stage clear on compute { fill tmp = 0; }       // shares nothing with `save`
//!         stage publish on copy after clear { write done = 1; }
//!         concurrent(save, clear);                       // verified, not assumed
//!     }
//! }
//! ```
//!
//! Here `save` waits on an event `step` records (read after write of `next`); `publish` waits
//! on one `clear` records (`after`); the origin stream `compute` waits at the end of the step
//! for `publish`, the last stage of `copy`. `copy` needs no fork: its first stage already
//! waits for `step`.
//!
//! # Grammar
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
//! STAGE_ITEM:= stage NAME on STREAM_REF [after STAGE,+] { STATEMENT* }
//!            | for NAME in EXPR..EXPR { (let NAME = EXPR;)* STAGE_ITEM* }   no nesting
//!            | concurrent(STAGE, STAGE,+);
//!            | devices { DEVICE,+ }                        at most one block
//! STREAM    := NAME [[COUNT]] [( STREAM_OPT,* )] [on DEVICE]  NAME[COUNT]: a stream array
//! STREAM_REF:= NAME | NAME[EXPR]                             NAME[EXPR]: one of an array
//! STREAM_OPT:= priority = (high | low | default | [-]INT) | non_blocking
//! FORMAT    := ptx | cubin | fatbin | cuda_c                 cuda_c is compiled with NVRTC
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
//! Items may come in any order; the first declared stream is the *origin*. Only doc comments
//! may annotate items inside the pipeline. Options and clauses (`priority`, `non_blocking`,
//! `cpu =`, `grid`, `block`, `shared`, `reads`, `writes`) come in any order, each once.
//!
//! Params are scalars (any `Clone` type, by value) or borrowed memory: `&`/`&mut
//! DeviceBuffer<T>`, `&`/`&mut PinnedBuffer<T>`, `&`/`&mut FlagCell`, or an array of buffers
//! `&`/`&mut [DeviceBuffer<T>]` (or of `PinnedBuffer<T>`). A reference to any other type (a
//! library handle) may appear only in `call`/`host` accesses. `Vec<T>` and `[T]` are pageable host
//! memory, which no kernel, copy or fill accepts. Scratch buffers are owned by the pipeline:
//! `DeviceBuffer<T> = LEN` or `PinnedBuffer<T> = LEN` (LEN an expression over the params) or
//! `FlagCell`. Only `&mut` params and scratch may be written.
//!
//! A `launch` argument for a slice parameter is the bare name of a device buffer of the same
//! element type (compared by the compiler, so `type Real = f32` works); for a scalar it is any
//! expression. `copy` goes device→pinned, pinned→device or device→device, and `fill` sets a
//! `DeviceBuffer`. A `call` passes the stage's stream first, as a `&TypedStream<'_, Marker>`
//! that offers only what a captured graph can replay (launches, asynchronous copies and
//! memsets, flag waits and writes, host functions, the raw handle for other CUDA libraries),
//! then its arguments; every buffer an argument names must be listed in `reads(...)` or
//! `writes(...)`, and is passed as listed (`&` for `reads`). A `host` closure runs on the CPU
//! in stream order, borrows no buffer, and declares the host memory it orders against.
//! A stage without statements is allowed only with `after`: a barrier for its stream.
//!
//! A host closure may take the pinned buffers it declares as parameters, by name:
//! `host |snapshot: &[f32]| { .. } reads(snapshot);` gets the buffer's elements as `&[T]`, and
//! one listed in `writes(...)` as `&mut [T]` (what it leaves there is written back). It runs
//! in stream order at every step and replay, on a copy of the elements taken when it runs (so
//! it never aliases memory a copy engine may write). Scalar params a closure names are cloned
//! into it, so a param that is not `Copy` works, such as an `Arc<Mutex<Vec<f32>>>` log; each
//! step gets its own copy of every scalar param, which must be `Clone`.
//! `synchronize`, `sync`, `copy_blocking`, `copy_sync`, `wait_event`, `record_event`, `alloc`,
//! `malloc` and `free` are recognised and rejected with the reason and the alternative.
//!
//! `while` and `if` run their body on the device: a captured step becomes a CUDA conditional
//! node (12.4+ driver) whose condition the library's own kernel decides, so a convergence loop
//! never returns to the host; an eager step decides each test on the host instead (copying the
//! value back). A condition compares the first element of a `DeviceBuffer<f32>`, `<f64>` or
//! `<u32>` (a residual, a flag a kernel sets) with a host value, or tests `step`, the number of
//! steps (eager and replayed) before this one: `if step % k == 0 { copy field -> snapshot; }`.
//! A `while` needs `max N`: a loop still running after `N` iterations stops, and the step fails
//! with `Error::IterationLimit` (eagerly at once, for a graph at its `synchronize`). A body
//! holds what a conditional node may hold: launches, copies, fills and nested `while`/`if`; a
//! host closure, `call`, `wait` or `write` there is an error on it that says where to move it.
//!
//! # Several GPUs
//!
//! **Ranks** (one process per GPU, NCCL's recommendation; or threads on the CPU backend):
//! a pipeline with one `comm: &Communicator` param may `send`, `recv`, `all_reduce`,
//! `broadcast`, `all_gather` and `reduce_scatter` device buffers (or element ranges of
//! them). Each run of consecutive communication statements of a stage is one group
//! (`ncclGroupStart` ... `ncclGroupEnd`), so a halo exchange's sends and receives progress
//! together in any order; a group may not write a range another of its statements uses.
//! Every communication statement reads what it sends and writes what it receives, and
//! writes the communicator too, so communication stages are ordered in program order on
//! every rank, and captured into the step's graph like any other statement. Every rank runs
//! the same expansion, so every rank enqueues and captures the same operations in the same
//! order, as NCCL requires; peers and roots are host expressions (scalars, or the
//! communicator's `rank()` and `size()`), and which rank a peer names is the program's.
//!
//! **Devices** (several GPUs driven by one process): `devices { gpu0, gpu1 }` makes `new`
//! take one context per device; `on DEVICE` puts a stream, buffer param, scratch buffer or
//! the communicator on one (the first device otherwise). A kernel, `fill`, flag operation,
//! `call` or communication statement reaches only its own stage's device's memory; a copy
//! between two devices is a peer copy (direct where peer access can be enabled, staged by
//! the driver otherwise) on a stream of either. Cross-device ordering is derived like any
//! other: events work across devices.
//!
//! Every appearance of a buffer is an access the macro orders: outside the places above, a
//! buffer may appear only as its length (`x.len()`), since scalar arguments, launch dimensions
//! and `fill`/`wait`/`write` values are computed on the host when the step is enqueued.
//! Constant launch dimensions and dynamic shared memory must fit CUDA's limits (1024 threads
//! per block, 64 in z; 227 KiB of shared memory), and a numeric stream priority is 0 or
//! negative (CUDA runs lower numbers first).
//!
//! # Kernel bounds: what `unsafe kernels` promises
//!
//! A kernel block declares code the compiler cannot see, so it is `unsafe`, as `unsafe
//! extern` is. Writing `unsafe kernels` promises, for each kernel:
//!
//! 1. the signature matches the image's kernel: one parameter per C parameter, in order; each
//!    scalar of the C type's layout; `&[T]` for a `const T*` the kernel only reads, `&mut [T]`
//!    for a `T*` it may write;
//! 2. for a buffer with a bound, `y: &mut [f32; n]`: the kernel indexes `y` only below the
//!    bound's value (`y[i]` only for `i < n`), in elements of `T`;
//! 3. for a buffer without a bound, `y: &mut [f32]`: the kernel indexes `y` only within the
//!    buffer passed, whatever the scalar arguments are.
//!
//! The second is what a reader of the kernel can check (`if (i < n) y[i] = ...`); the rest,
//! that every buffer passed is at least as long as its bound, the runtime checks before every
//! step (`run`, `run_steps`, `profile`), every `capture`, and every setter: a launch that
//! would break a bound is refused with `Error::KernelBound` (inside `Error::Stage`, naming the
//! stage) before anything of the step is enqueued, and a setter that would break one returns
//! that error and changes nothing (the graph keeps its previous parameters, the params their
//! previous value). The third is a promise a kernel that takes its length as a parameter
//! cannot keep: declare a bound for every buffer such a kernel indexes.
//!
//! A bound is `scale × p₁ × … × pₖ + offset` over the kernel's integer parameters (`u8` to
//! `u64`, `usize`, `i8` to `i64`, `isize`; an alias is checked by the compiler, at the name
//! in the bound): `n`, `nx * ny`, `nx * ny * nz`, `4 * n` (a `float4` per element seen as
//! `f32`s), `n + 1` (a kernel that reads `x[i + 1]`), `1` (a kernel that writes `out[0]`).
//! Scalars are converted without loss; a negative one, or a product that overflows `u64`, is
//! refused. Any other extent (`(nx + 2) * (ny + 2)`, `n / 2`) is passed to the kernel as a
//! parameter of its own, which it then indexes below. A bound checks lengths only: the
//! launch's grid is still the user's to choose (a kernel that indexes by thread id without a
//! guard is one whose bound is not `n`).
//!
//! So that a refused step leaves nothing half done, the scalar arguments of a launch whose
//! kernel has bounds are evaluated once per stage instance when the step starts (before any
//! stage is enqueued, with the loop variable and `let`s of its iteration bound), rather than
//! when their stage is enqueued; they are host values computed from the params either way.
//! A buffer passed as a range (`x[lo..hi]`) is checked with the range's length. The runtime
//! checks each launch again when it enqueues it. Swapping buffers (`swap_a_b`) checks the
//! bounds of the new arrangement too, and refuses the swap where one breaks.
//!
//! # Beyond one straight-line step
//!
//! **Ranges of one buffer.** `x[lo..hi]` (either bound may be left out) names elements `lo`
//! to `hi - 1` of a device or pinned buffer wherever a buffer goes: a launch argument (the
//! kernel gets the view's address and may index it from 0), a copy's source or destination,
//! a fill's destination. Two stages that touch disjoint ranges of one buffer do not conflict
//! and run concurrently; overlapping ranges are ordered like whole buffers. Constant ranges
//! (`x[0..512]`) are ordered, and an inverted one rejected, when the program compiles; others
//! are evaluated before each step is enqueued, checked against the buffer's length, and
//! ordered then. One statement may name two ranges of one buffer only if they are apart
//! (checked before the step is enqueued) or both read.
//!
//! **Repetition.** `streams { main, work[n] }` declares an array of `n` streams (`n` an
//! expression over the params; the first stream, the origin, is never an array); a stage runs
//! on one of them, `on work[i % n]`. A param `xs: &mut [DeviceBuffer<T>]` is an array of
//! buffers, each statement naming one element, `xs[k]` (or a range of one, `xs[k][lo..hi]`).
//! `for i in START..END { ... }` repeats its stages for each `i` (a `usize` in the body, as are
//! the `let`s that may open it); each instance is ordered and checked like any stage (an
//! `after` inside the loop means the same iteration's stage; a `concurrent` claim inside the
//! loop claims the stages of one iteration). Loop bounds, `let`s, stream counts and indices,
//! and subscripts are the *shape* of a step: a step whose shape depends on params is described
//! before it is enqueued, instance by instance, and ordered by the same analysis the macro
//! runs at compile time (the `gpu-pipeline-schedule` crate), its `concurrent` claims checked
//! on the instances; the plan is cached until the shape changes. `P::plan_dot(&params)` draws
//! that plan.
//!
//! **Kinds of step.** `step iterate { ... } step finish { ... }` declares kinds of step over
//! the same streams, kernels, params and scratch buffers (with `step` blocks every stage
//! belongs to one). Each kind has its own methods: `run_iterate`, `run_iterate_steps`,
//! `run_iterate_ahead`, `profile_iterate`, `plan_dot_iterate`, and `launch_iterate` on the
//! captured graph; the eager guard enqueues more steps of any kind with `then_iterate()`,
//! ordered on the GPU after those before, with no host wait. `capture` captures every kind.
//!
//! **Steps that run ahead.** `run_ahead(params, n)` (and `run_<step>_ahead`) enqueues `n`
//! steps in which each stage waits only for the stages of the step before that it conflicts
//! with (a two-step application of the ordering; `after`s need no wait across steps), instead
//! of a closed fork–join per step: the first step forks from the origin, the last joins it.
//! Consecutive steps use two sets of events alternately. Graph replays never overlap on their
//! stream, so running ahead is for eager steps.
//!
//! **New input each replay.** `graph.window()` waits for the launches so far and returns a
//! `PWindow` holding the graph exclusively: each pinned param `x` has `x()` (its elements, to
//! read the last replay's output) and, when declared `&mut`, `x_mut()` (to write the next
//! replay's input), and `window.launch()` ends the window with the next replay. While the
//! window lives nothing can launch the graph, and its slices wait for device work and block
//! launches on their own (runtime guards that `mem::forget` cannot turn into a race).
//!
//! **Buffer swaps.** `swap(a, b);` declares two buffer params of one type that a captured graph
//! exchanges between replays with `graph.swap_a_b()`: afterwards the step reads and writes `b`
//! where it declares `a`, and the other way round (`graph.params()` shows the arrangement).
//! The graph keeps one instantiation per kind of step and arrangement, captured the first
//! time the arrangement is needed, so a swap costs nothing at replay time, as two hand-made
//! graphs (one per parity) would; both buffers stay borrowed by the graph for its whole life.
//! Eager steps swap by passing the buffers the other way round.
//!
//! # Ordering
//!
//! Stages are in program order. A launch reads buffers passed as `&[T]` and writes those passed
//! as `&mut [T]`; `copy` reads its source and writes its destination; `fill` and `write` write;
//! `wait` reads; `call` and `host` access what they declare. For stages `i < j` on different
//! streams that touch one buffer where either writes, `j` waits for `i`; `after` adds such
//! pairs (and may name a later stage if that closes no cycle). Stages on one stream are ordered
//! for free. The macro emits the transitive reduction of these waits given stream order, one
//! event per stage some other stream waits for, and a minimal fork from and join to the origin
//! so that each step is a closed fork–join region (what graph capture requires, and what orders
//! consecutive eager steps). `concurrent(a, b, ...)` claims that no two of the stages are
//! ordered; a contradicted claim is an error that names the ordering.
//!
//! On that order: a `wait` must be satisfiable by a write ordered before it (a param flag
//! that nothing in the pipeline could satisfy is left to the world outside), or the stream
//! would wait for ever; and a scratch `DeviceBuffer` must be written before anything reads it.
//!
//! `capture` builds the step's graph straight from its plan rather than by stream capture: a
//! chain of nodes per stage instance, and between instances exactly the reduced edges (stream
//! order and the waits, transitively reduced together; `GRAPH_EDGES` counts them where the
//! step's shape is fixed), so the graph has no edge the data does not need and no fork or join
//! events. Ranges become copy, memset and kernel nodes on views. A `call`, a communication
//! group and a host closure that receives buffers are still captured, from their stage's stream
//! into the graph being built; fault-tracking marks are memory-operation nodes beside the
//! stages. A pipeline with `devices` is captured from its streams instead (its graph spans
//! several contexts). `run` enqueues on the streams with events, as before.
//!
//! A captured graph has a `set_<name>` for each scalar param the step reads: it updates the
//! kernel nodes in place when only launches read the scalar, and builds the step again when
//! anything a replay cannot change does (a `fill` or flag value, a host closure, a `call`, a
//! scratch length, a `while`/`if` condition or body, the shape of the step). Either way a value
//! that breaks a kernel's bound is refused and changes nothing.
//!
//! # Phases
//!
//! In `gpu-pipeline-macros-core`, in this order: `ast` parses (keeping the user's tokens for
//! spans); `scope` indexes every declaration by name, once; `check::declarations` validates
//! names, types and statements; `lower` builds the stage graph, each statement resolved and
//! referring to its source; `check::ordering` validates what needs the derived order; `expand`
//! generates code, one function per item. Each check reports every error on the user's tokens,
//! all together, and nothing is generated unless it passed.
//!
//! The generated code enqueues every step from a *plan*: `__describe` lists the stage
//! instances of a kind of step (stream, and each subscripted buffer resolved to an element and
//! a range), the runtime schedules them (`gpu-pipeline-schedule`, the analysis the macro ran)
//! and caches the plan, and `__enqueue` walks it, waiting and recording exactly the plan's
//! events, each stage's statements generated once. The statements use the plan's resolved
//! ranges, so what runs is what was ordered.
#![forbid(unsafe_code)]

use proc_macro::TokenStream;

/// Declares a multi-stream GPU pipeline; see the crate documentation for the language.
#[proc_macro]
pub fn gpu_pipeline(input: TokenStream) -> TokenStream {
    gpu_pipeline_macros_core::gpu_pipeline(input.into()).into()
}

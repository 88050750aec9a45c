//! The CPU backend: CUDA stream semantics on CPU threads, with an optional race detector.
//!
//! This module is the engine behind the public `Context`, `Stream`, `Event`, buffer and graph
//! types when no CUDA driver is used. It is crate-private; its faults ([`CpuFault`], in the
//! shared vocabulary: `vocab/fault.rs`) are wrapped into the crate's `Error`. It is the CUDA
//! backend's peer: it imports neither `cuda/` nor a public type (docs/DESIGN.md, "Layers").
//!
//! # API
//!
//! - [`Context`] (`Clone`, an `Arc` inside): `new(ContextOptions { checked })`,
//!   `is_checked()`, `priority_range() -> (least, greatest)`,
//!   `create_stream(StreamOptions { name, priority, non_blocking }) -> Result<Stream>`,
//!   `create_event(EventOptions { name, timing }) -> Event`,
//!   `register_buffer(name) -> BufferId`, `name_buffer(BufferId, name)`,
//!   `release_buffer(BufferId)`,
//!   `host_access(label, &[(BufferId, Access)]) -> Result<()>`, `synchronize() -> Result<()>`,
//!   `wait_idle() -> bool` (waits without taking faults; `false` inside an op),
//!   `races() -> Vec<RaceReport>`, `dropped_races() -> usize`.
//! - [`Stream`]: `enqueue(Op)`, `enqueue_tracked(Op) -> Result<bool>` (whether
//!   it was captured), `record(&Event)`, `wait(&Event)`,
//!   `wait_stream(&Stream)`, `begin_capture()` (all `-> Result<()>`),
//!   `end_capture() -> Result<Graph>`, `synchronize() -> Result<()>`, `query() -> bool`,
//!   `is_capturing() -> bool`, `id()`, `name()`, `priority()`, `is_non_blocking()`.
//! - `Stream::parts(label, Vec<Part>, PartsWork, Option<Keep>)`: one operation over several
//!   ranges at once, each handed to the work as a read or written byte slice (a stage's
//!   collectives), keeping what the last argument names.
//! - `on_worker_thread()`: whether the caller runs inside a stream's operation (where
//!   blocking calls and enqueues fail).
//! - `OnLaunch` / `LaunchHook`: what a graph node does when a launch of its graph is
//!   enqueued (an event record or wait node, a communication group's issue-order ticket),
//!   and `PerLaunch`, what a hook queued for each launch until that launch's replay takes it.
//! - [`Event`]: `query() -> bool`, `synchronize() -> Result<()>`,
//!   `Event::elapsed_time(&start, &end) -> Result<f32>` (milliseconds), `name()`,
//!   `has_timing()`.
//! - [`Op`]: `replayable(label, Fn() -> Result<(), String>)`,
//!   `kernel(label, KernelFn, Vec<KernelArgValue>)` (a `KernelFn` receives the launch's
//!   `LaunchConfig` and the arguments), `once(label, FnOnce() -> Result<(), String>)`,
//!   then `.reads(id)`, `.writes(id)`, `.access(id, Access)`, `.retain(Arc<dyn Any>)` (kept
//!   alive with the op or its graph node), `.retain_in_graph(Arc<dyn Any>)` (kept only by
//!   its graph node); kernel buffer arguments declare
//!   their own accesses. [`KernelArgValue`] is `Scalar(bytes)` (`scalar(v)`, `as_scalar::<T>()`)
//!   or `Buffer(BufferArg { address, byte_len, elem_size, writable, buffer })`.
//! - [`Graph`]: `node_count()`, `nodes() -> &[Node]` (topological order; each
//!   [`Node`] has `label()`, `captured_on()`, `dependencies()`, `accesses()`,
//!   `is_kernel()`, `kernel_args()`, `retained()`), `instantiate() -> GraphExec`,
//!   `to_dot()`.
//! - [`GraphExec`]: `launch(&Stream) -> Result<()>`, `launch_tracked` (whether it was
//!   captured), `node_count()`,
//!   `kernel_args(i)`, `set_kernel_args(i, args) -> Result<()>`, `update(&Graph) -> Result<()>`.
//!
//! # Semantics
//!
//! Each stream is an in-order queue run by its own worker thread. Operations that fail or
//! panic are caught; the first fault since the last synchronize is returned by the stream's
//! next `synchronize`, and later operations still run (so events recorded after a failure
//! still complete and nothing waits forever). Waiting on a never-recorded event is a no-op.
//! Dropping a stream returns at once, as `cuStreamDestroy` does: its worker finishes the
//! queued work and ends (the context's synchronize still waits for it; `close` waits itself
//! and returns the stream's last fault); dropping the context is fine
//! at any time (streams and events keep it alive). Blocking calls from inside an operation
//! (synchronizes) return [`CpuFault::BlockingCallInsideOp`] instead of deadlocking, and work
//! enqueued there [`CpuFault::EnqueueInsideOp`], as CUDA refuses driver calls in a host
//! function.
//!
//! Capture follows CUDA: `begin_capture` on an origin stream; an event recorded there and
//! waited on by another stream makes that stream join the capture (fork), and the origin must
//! wait on an event recorded on every forked stream after its last work (join) before
//! `end_capture`, which otherwise fails with [`CpuFault::CaptureUnjoined`]. One-shot ops,
//! synchronizes and waits on outside events invalidate the capture. A graph launch enqueues
//! one queue item that replays the nodes serially in capture (topological) order; on a
//! capturing stream the launch is captured instead. `set_kernel_args` and `update` build a new
//! snapshot, so launches already queued keep their arguments.
//!
//! # Race detector (checked mode)
//!
//! Vector clocks are computed at enqueue time, so reports depend on the program, not on
//! thread timing: an op ticks its stream's clock after joining the host's clock; `record`
//! snapshots the stream clock into the event; `wait` joins it into the waiting stream;
//! stream/event synchronizes, and queries that return complete, join into the host clock.
//! Each buffer remembers, per timeline, the accesses the host has not synchronized past;
//! every conflicting pair (at least one write) where neither happens before the other is
//! reported, naming the buffer, both operations, both streams and the hazard. Races are faults
//! at the next synchronize of the later op's stream and are kept in `Context::races`; host
//! accesses return theirs at once. A graph launch checks every node's accesses with the clock
//! of the launch (the replay is ordered in the launching stream), and reports once per
//! executable snapshot the node pairs of the graph itself that conflict with no path between
//! them.
//!
//! # Performance structure
//!
//! One OS thread per stream; a queue is a `Mutex<VecDeque>` plus a condvar, so an enqueue is
//! one uncontended lock, a push and a notify. Waits on events already reached are elided at
//! enqueue; a whole graph replay is one queue item and snapshots share nodes through `Arc`s.
//! Unchecked mode never touches the detector; checked mode takes one context-wide lock per
//! enqueue and, per access, scans only the accesses its clock has not seen (none in a correct
//! program), with history pruned at synchronizes and bounded per stream and buffer.

mod backend;
mod build;
mod capture;
mod clock;
mod condition;
mod context;
mod event;
mod geometry;
mod graph;
mod host_data;
mod kernel;
mod memory;
mod op;
mod parts;
mod peer;
mod race;
mod shared;
mod signal;
mod stage;
mod stream;
pub(crate) mod work;

#[cfg(test)]
mod tests;

pub(crate) use crate::vocab::access::Access;
#[cfg(test)]
pub(crate) use crate::vocab::access::BufferId;
pub use crate::vocab::fault::{CpuFault, Hazard, OpSite, RaceReport};
pub(crate) use clock::VectorClock;
pub(crate) use condition::{Condition, ValueKind};
pub(crate) use context::{Context, ContextOptions};
pub(crate) use event::{Event, EventOptions};
pub use geometry::CpuKernelGeometryFn;
pub(crate) use graph::{Form, Graph, GraphExec, Node};
pub(crate) use host_data::{HostDataFn, RegionIo};
pub(crate) use kernel::KernelArg as CpuKernelArg;
pub(crate) use kernel::missing_cpu_impl;
pub use kernel::{CpuKernel, CpuKernelFn, CpuParam};
pub(crate) use memory::{HostSlice, HostSliceMut, Memory, MemoryKind};
#[cfg(test)]
pub(crate) use op::KernelFn;
pub(crate) use op::communication_failed;
pub(crate) use op::{
    BufferArg, Keep, KernelArgValue, KernelTag, LaunchHook, NodeKind, OnLaunch, Op, PerLaunch,
};
pub(crate) use parts::{Part, PartBytes, PartsWork, overlapping_write};
pub(crate) use signal::Signal;
pub(crate) use stage::StageScope;
pub(crate) use stream::{Stream, StreamOptions};
pub(crate) use work::{MemOp, Range, WaitCondition};

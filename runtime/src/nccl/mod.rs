//! NCCL: collectives and point-to-point transfers between GPUs, one rank per process, loaded
//! at run time like the CUDA driver (a missing library is an error value listing every path
//! tried, never a panic).
//!
//! - [`Communicator`]: one rank's communicator, from a [`UniqueId`] or from the launcher's
//!   environment ([`Communicator::from_env`], with [`crate::rendezvous`]); its methods
//!   enqueue `send`/`recv`, `all_reduce`, `broadcast`, `all_gather` and `reduce_scatter` on
//!   a [`Stream`](crate::Stream) over device buffers or views, and
//!   [`group`](Communicator::group) fuses several (a halo exchange).
//! - Element types are [`Element`](crate::collective::Element)s and operators
//!   [`ReduceOp`](crate::collective::ReduceOp)s, shared with the CPU backend's
//!   [`World`](crate::collective::World), which runs the same programs on threads.
//!
//! Layers: `sys` (raw types), `library` (the function table), `comm` (communicators),
//! `abort` (tearing a failed one down), `raw` (the one unsafe enqueue of every operation,
//! over `collective/op.rs`'s `Op`s), `ops` (the safe level; its docs say what it checks
//! and what it cannot: the other ranks' matching calls), `stage` (a `gpu_pipeline!` stage's
//! communication as one group, over ranges the generated step holds borrowed), `adapt` (the
//! runtime's streams, memory and capture keep-alive, in one place), `watchdog` (the thread
//! that aborts a communicator whose work misses its deadline). The operations themselves
//! (their checks, ranges and words) are described once, for both backends, in
//! `collective/op.rs`.
//!
//! Communicators are nonblocking and every operation has a deadline
//! ([`CommConfig::timeout`], else `GPU_PIPELINE_COMM_TIMEOUT`, else 5 minutes): a
//! mismatched program (a send with no recv, counts that differ, a recv from the wrong rank,
//! a rank that left) no longer hangs; its communicator is aborted and the next wait on the
//! stream returns [`Error::Communication`](crate::Error::Communication).
//!
//! Launch one process per GPU (`gpu-pipeline-launch -n 2 -- ./program`, `mpirun`, `srun`);
//! keep `NCCL_NVLS_ENABLE=0` set (the launcher does). Captured into a graph, every rank must
//! capture the same operations and launch its graph as often as the others; capture with
//! [`CaptureMode::ThreadLocal`](crate::CaptureMode) after a few uncaptured exchanges with the
//! same peers (NCCL connects peers lazily on first use).

mod abort;
mod adapt;
mod comm;
mod library;
mod ops;
mod raw;
mod stage;
mod sys;
mod watchdog;

pub(crate) use abort::abort_deferred;
pub use comm::{CommConfig, Communicator, UniqueId};
pub use library::{
    DEFAULT_NCCL_NAMES, NCCL_PATH_ENV, NcclVersion, WHEEL_LIBRARY, candidate_paths, is_available,
    library_path, python_package_dirs, version,
};
pub use ops::Group;
pub(crate) use stage::Part as StagePart;
pub(crate) use watchdog::{failure_after_event, failure_after_wait, note_record, watch_launch};

//! The CPU backend's collectives: N ranks in one process (one thread each) exchanging bytes,
//! with NCCL's meaning, so CI runs multi-rank programs without GPUs.
//!
//! A [`World`] of `size` ranks hands out one [`Comm`] per rank. Every operation is a pure,
//! blocking function over the caller's slices: it returns once this rank's part is done.
//!
//! Semantics, chosen to equal NCCL's for every *matched* program (every rank issues the same
//! collectives in the same order with the same arguments, and every send has its recv):
//! - Collectives match by order: the k-th collective of each rank is one operation. They
//!   block until every rank has joined; the element kind, operator, length and root must
//!   agree, or every rank of that operation gets [`CollectiveError::Mismatch`]. Reductions
//!   combine the ranks' inputs in rank order (NCCL's order is unspecified, so floating-point
//!   results may differ from a GPU's in the last bits).
//! - Send/recv match by peer and order: the k-th send from `a` to `b` is the k-th recv at `b`
//!   from `a`; lengths (and element kinds, when typed) must agree. As in NCCL, a send outside
//!   a group is blocking: it returns once the peer has received it. So two ranks that both
//!   send before they receive deadlock under NCCL, and time out here.
//! - [`Comm::group`] is `ncclGroupStart`/`ncclGroupEnd`: its sends and recvs progress
//!   together, so any order within a group is deadlock-free (a halo exchange).
//! - Nothing hangs: every wait gives up after the world's timeout with
//!   [`CollectiveError::Timeout`] naming the operation, and a rank whose `Comm` is dropped
//!   (a thread that returned or panicked) makes the operations that need it fail at once
//!   with [`CollectiveError::PeerGone`].
//!
//! The rooms: this file (the world, its shared state and errors), `comm.rs` (one rank's
//! operations), `group.rs` ([`CommGroup`]), `reduce.rs` (the reductions), `stage.rs` (a
//! pipeline stage's group as one CPU stream operation: the twin of `nccl/stage.rs`) and
//! `tests.rs`. All but `stage.rs` depend on nothing else of the CPU backend: streams and the
//! race detector build on them, not the other way round.
//!
//! ```
//! use gpu_pipeline::collective::{ReduceOp, World};
//! let results = World::run(4, |comm| {
//!     let mine = [comm.rank() as f32 + 1.0; 3];
//!     let mut sum = [0.0f32; 3];
//!     comm.all_reduce(&mine, &mut sum, ReduceOp::Sum)?;
//!     Ok(sum)
//! })
//! .unwrap();
//! assert!(results.iter().all(|r| r.as_ref().unwrap() == &[10.0; 3]));
//! ```
#![forbid(unsafe_code)]

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::collective::{Element, ElementKind, ReduceOp};

mod comm;
mod group;
mod order;
mod reduce;
mod stage;
#[cfg(test)]
mod tests;

pub use group::CommGroup;
pub(crate) use order::IssueOrder;
use order::ReplayTurns;
pub(crate) use stage::{StageFailure, enqueue_cpu_stage};

/// How long an operation waits for its peers when neither [`World::with_timeout`] nor
/// [`COMM_TIMEOUT_ENV`](crate::collective::COMM_TIMEOUT_ENV) says: the deadline NCCL
/// communicators get too ([`DEFAULT_COMM_TIMEOUT`](crate::collective::DEFAULT_COMM_TIMEOUT)).
pub const DEFAULT_TIMEOUT: Duration = crate::collective::DEFAULT_COMM_TIMEOUT;

/// Why a CPU collective failed.
///
/// ```
/// use std::time::Duration;
/// use gpu_pipeline::collective::{CollectiveError, World};
/// // Rank 0 receives from rank 1, which never sends: the deadline ends the wait.
/// let ended = World::run_with_timeout(2, Duration::from_millis(100), |comm| {
///     if comm.rank() == 0 {
///         comm.recv(1, &mut [0u32; 4])?;
///     }
///     Ok(())
/// })
/// .unwrap();
/// let err = ended[0].as_ref().unwrap_err();
/// assert!(
///     matches!(err, CollectiveError::Timeout { rank: 0, peer: Some(1), .. })
///         || matches!(err, CollectiveError::PeerGone { rank: 0, peer: 1, .. }),
///     "{err}"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CollectiveError {
    /// The operation's peers did not arrive in time: an unmatched program.
    #[error("rank {rank}: {operation} did not complete within {waited:?}; {waiting_for}")]
    Timeout {
        /// The rank that gave up.
        rank: usize,
        /// The peer of a send or recv.
        peer: Option<usize>,
        /// The operation, e.g. `recv #2 from rank 1`.
        operation: String,
        /// What it was still waiting for.
        waiting_for: String,
        /// How long it waited.
        waited: Duration,
    },
    /// A rank the operation needs dropped its [`Comm`] (its thread returned or panicked).
    #[error("rank {rank}: {operation} needs rank {peer}, which left the world")]
    PeerGone {
        /// The rank that noticed.
        rank: usize,
        /// The rank that left.
        peer: usize,
        /// The operation.
        operation: String,
    },
    /// The ranks disagree about an operation: different collectives at the same position,
    /// or a send and a recv of different lengths or element kinds.
    #[error("rank {rank}: {operation}: {detail}")]
    Mismatch {
        /// The rank that reports it.
        rank: usize,
        /// The operation.
        operation: String,
        /// What differs, naming both sides.
        detail: String,
    },
    /// An argument was rejected before anything was exchanged.
    #[error("{call}: {message}")]
    InvalidArgument {
        /// The method, e.g. `Comm::all_gather`.
        call: &'static str,
        /// What was wrong and what is accepted.
        message: String,
    },
    /// This rank's communicator was aborted ([`Comm::abort`]) after an earlier failure.
    #[error("rank {rank}: {operation} was refused: this rank's communicator was aborted")]
    Aborted {
        /// The rank.
        rank: usize,
        /// The refused operation.
        operation: String,
    },
    /// A rank's closure in [`World::run`] panicked.
    #[error("rank {rank} panicked: {message}")]
    Panicked {
        /// The rank.
        rank: usize,
        /// The panic payload, when it was a string.
        message: String,
    },
}

/// Results of this module.
pub type Result<T, E = CollectiveError> = std::result::Result<T, E>;

/// N simulated ranks in one process. Take each rank's [`Comm`] once ([`World::comm`] or
/// [`World::into_comms`]) and move it to that rank's thread.
///
/// ```
/// use gpu_pipeline::collective::World;
/// let world = World::new(2).unwrap();
/// assert_eq!(world.size(), 2);
/// let mut comms = world.into_comms().unwrap().into_iter();
/// let (zero, one) = (comms.next().unwrap(), comms.next().unwrap());
/// // Each rank's communicator moves to its own thread.
/// let sender = std::thread::spawn(move || zero.send(1, &[1.5f32, 2.5]));
/// let mut got = [0.0f32; 2];
/// one.recv(0, &mut got).unwrap();
/// sender.join().unwrap().unwrap();
/// assert_eq!(got, [1.5, 2.5]);
/// ```
#[derive(Clone)]
pub struct World {
    shared: Arc<Shared>,
}

struct Shared {
    size: usize,
    timeout: Duration,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    taken: Vec<bool>,
    departed: Vec<bool>,
    /// Point-to-point channels, `src * size + dst`.
    channels: Vec<Channel>,
    /// Collectives in flight, by their position in every rank's sequence.
    slots: HashMap<u64, Slot>,
}

#[derive(Default)]
struct Channel {
    queue: VecDeque<Message>,
    /// Messages posted so far (the next message's number).
    posted: u64,
    /// Messages received so far.
    delivered: u64,
    /// Mismatches found by the receiver, for the sender to report too.
    errors: HashMap<u64, CollectiveError>,
}

struct Message {
    number: u64,
    kind: Option<ElementKind>,
    bytes: Vec<u8>,
}

/// What every rank must agree on for one collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Signature {
    name: &'static str,
    kind: Option<ElementKind>,
    op: Option<ReduceOp>,
    bytes: usize,
    root: Option<usize>,
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` (", self.name)?;
        if let Some(op) = self.op {
            write!(f, "{op}, ")?;
        }
        if let Some(root) = self.root {
            write!(f, "root {root}, ")?;
        }
        write!(f, "{} bytes", self.bytes)?;
        if let Some(kind) = self.kind {
            write!(f, " of {kind}")?;
        }
        f.write_str(")")
    }
}

struct Slot {
    signature: Signature,
    first: usize,
    inputs: Vec<Option<Vec<u8>>>,
    joined: Vec<bool>,
    result: Option<Arc<Vec<u8>>>,
    error: Option<(usize, String)>,
    readers_left: usize,
}

impl World {
    /// A world of `size` ranks whose operations wait at most the deadline
    /// [`COMM_TIMEOUT_ENV`](crate::collective::COMM_TIMEOUT_ENV) sets, or [`DEFAULT_TIMEOUT`]
    /// (a bad value of the variable is an error saying what to write).
    pub fn new(size: usize) -> Result<World> {
        World::with_timeout(size, env_timeout("World::new")?)
    }

    /// A world of `size` ranks whose operations wait at most `timeout` (not zero) for their
    /// peers.
    pub fn with_timeout(size: usize, timeout: Duration) -> Result<World> {
        crate::collective::check_timeout("World::with_timeout", timeout).map_err(|message| {
            CollectiveError::InvalidArgument {
                call: "World::with_timeout",
                message,
            }
        })?;
        if size == 0 {
            return Err(CollectiveError::InvalidArgument {
                call: "World::new",
                message: "a world needs at least one rank".to_owned(),
            });
        }
        let state = State {
            taken: vec![false; size],
            departed: vec![false; size],
            channels: (0..size * size).map(|_| Channel::default()).collect(),
            slots: HashMap::new(),
        };
        Ok(World {
            shared: Arc::new(Shared {
                size,
                timeout,
                state: Mutex::new(state),
                changed: Condvar::new(),
            }),
        })
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.shared.size
    }

    /// Rank `rank`'s communicator. Each rank can be taken once.
    pub fn comm(&self, rank: usize) -> Result<Comm> {
        let mut state = self.shared.lock();
        if rank >= self.shared.size {
            return Err(CollectiveError::InvalidArgument {
                call: "World::comm",
                message: format!(
                    "rank {rank} is out of range for a world of {} ranks",
                    self.shared.size
                ),
            });
        }
        if std::mem::replace(&mut state.taken[rank], true) {
            return Err(CollectiveError::InvalidArgument {
                call: "World::comm",
                message: format!("rank {rank}'s communicator was already taken"),
            });
        }
        Ok(Comm {
            shared: self.shared.clone(),
            rank,
            collectives: std::cell::Cell::new(0),
            aborted: std::cell::Cell::new(false),
            batch_start: std::cell::Cell::new(None),
        })
    }

    /// Every rank's communicator, in rank order (fails if any was taken already).
    pub fn into_comms(self) -> Result<Vec<Comm>> {
        (0..self.size()).map(|r| self.comm(r)).collect()
    }

    /// Runs `f` on one thread per rank of a new world of `size` ranks and returns each
    /// rank's result in rank order; a panic in any rank is [`CollectiveError::Panicked`].
    /// The deadline is [`World::new`]'s.
    pub fn run<R: Send>(
        size: usize,
        f: impl Fn(Comm) -> Result<R> + Sync,
    ) -> Result<Vec<Result<R>>> {
        World::run_with_timeout(size, env_timeout("World::run")?, f)
    }

    /// [`World::run`] with a timeout for every operation.
    pub fn run_with_timeout<R: Send>(
        size: usize,
        timeout: Duration,
        f: impl Fn(Comm) -> Result<R> + Sync,
    ) -> Result<Vec<Result<R>>> {
        let comms = World::with_timeout(size, timeout)?.into_comms()?;
        let f = &f;
        std::thread::scope(|scope| {
            let handles: Vec<_> = comms
                .into_iter()
                .map(|comm| scope.spawn(move || f(comm)))
                .collect();
            handles
                .into_iter()
                .enumerate()
                .map(|(rank, handle)| {
                    handle.join().map_err(|payload| CollectiveError::Panicked {
                        rank,
                        message: panic_message(payload.as_ref()),
                    })
                })
                .collect()
        })
    }
}

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("World")
            .field("size", &self.shared.size)
            .field("timeout", &self.shared.timeout)
            .finish_non_exhaustive()
    }
}

/// The deadline of [`COMM_TIMEOUT_ENV`](crate::collective::COMM_TIMEOUT_ENV), or the default.
fn env_timeout(call: &'static str) -> Result<Duration> {
    crate::collective::comm_timeout_from_env()
        .map_err(|message| CollectiveError::InvalidArgument { call, message })
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".to_owned())
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update of the state is a few assignments that cannot panic half-way.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until `ready` gives an answer, or the deadline (`start` plus the timeout)
    /// passes (`waiting_for` then says what was missing). `ready` runs under the lock after
    /// every change.
    #[allow(clippy::too_many_arguments)]
    fn wait<T>(
        &self,
        mut state: MutexGuard<'_, State>,
        rank: usize,
        peer: Option<usize>,
        start: Instant,
        operation: &dyn Fn() -> String,
        waiting_for: impl Fn(&State) -> String,
        mut ready: impl FnMut(&mut State) -> Option<Result<T>>,
    ) -> Result<T> {
        let deadline = start + self.timeout;
        loop {
            if let Some(answer) = ready(&mut state) {
                return answer;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(CollectiveError::Timeout {
                    rank,
                    peer,
                    operation: operation(),
                    waiting_for: waiting_for(&state),
                    waited: now - start,
                });
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// One rank's communicator in a [`World`]: what a thread standing in for a GPU holds. Send
/// it to the rank's thread; like an NCCL communicator it is driven from one thread at a time.
/// Dropping it tells the other ranks that this one left.
///
/// ```
/// use gpu_pipeline::collective::{ReduceOp, World};
/// let results = World::run(4, |comm| {
///     // rank r holds [r, 10 r]; every rank gets the sums, then rank 2's values
///     let mut sums = [0i64; 2];
///     comm.all_reduce(&[comm.rank() as i64, 10 * comm.rank() as i64], &mut sums, ReduceOp::Sum)?;
///     let mut row = [comm.rank() as i64; 2];
///     comm.broadcast(2, &mut row)?;
///     let mut all = [0i64; 4];
///     comm.all_gather(&[comm.rank() as i64], &mut all)?;
///     Ok((sums, row, all))
/// })
/// .unwrap();
/// for result in results {
///     assert_eq!(result.unwrap(), ([6, 60], [2, 2], [0, 1, 2, 3]));
/// }
/// ```
pub struct Comm {
    shared: Arc<Shared>,
    rank: usize,
    collectives: std::cell::Cell<u64>,
    /// Set by [`Comm::abort`]: every later operation is refused.
    aborted: std::cell::Cell<bool>,
    /// When the current batch of operations began (a group, or a stage's communication):
    /// they share one deadline. `None`: each operation's own start.
    batch_start: std::cell::Cell<Option<Instant>>,
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Comm")
            .field("rank", &self.rank)
            .field("size", &self.shared.size)
            .finish_non_exhaustive()
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        self.shared.lock().departed[self.rank] = true;
        self.shared.changed.notify_all();
    }
}

fn invalid(call: &'static str, message: String) -> CollectiveError {
    CollectiveError::InvalidArgument { call, message }
}

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
//! This file depends on nothing else of the CPU backend: streams and the race detector build
//! on it, not the other way round.
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

impl Comm {
    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks in the world.
    pub fn size(&self) -> usize {
        self.shared.size
    }

    /// How long each operation waits for its peers.
    pub fn timeout(&self) -> Duration {
        self.shared.timeout
    }

    /// Aborts this rank after a failure, like `ncclCommAbort`: the other ranks see it leave
    /// (their operations that need it fail at once with [`CollectiveError::PeerGone`]) and
    /// every later operation of this rank is refused with [`CollectiveError::Aborted`].
    pub fn abort(&self) {
        self.aborted.set(true);
        self.shared.lock().departed[self.rank] = true;
        self.shared.changed.notify_all();
    }

    /// Whether [`abort`](Self::abort) was called.
    pub fn is_aborted(&self) -> bool {
        self.aborted.get()
    }

    /// Runs `f` with one deadline for every operation it issues (a stage's communication):
    /// the timeout from now, rather than from each operation's start.
    pub fn with_one_deadline<R>(&self, f: impl FnOnce(&Comm) -> R) -> R {
        let outer = self.batch_start.get();
        if outer.is_none() {
            self.batch_start.set(Some(Instant::now()));
        }
        let result = f(self);
        self.batch_start.set(outer);
        result
    }

    /// When the deadline of an operation starting now counts from.
    fn started(&self) -> Instant {
        self.batch_start.get().unwrap_or_else(Instant::now)
    }

    /// Refuses an operation of an aborted rank.
    fn refuse_if_aborted(&self, operation: impl FnOnce() -> String) -> Result<()> {
        if self.aborted.get() {
            return Err(CollectiveError::Aborted {
                rank: self.rank,
                operation: operation(),
            });
        }
        Ok(())
    }

    fn check_rank(&self, call: &'static str, what: &str, rank: usize) -> Result<()> {
        if rank < self.size() {
            Ok(())
        } else {
            Err(invalid(
                call,
                format!(
                    "{what} {rank} is out of range for a world of {} ranks",
                    self.size()
                ),
            ))
        }
    }

    fn check_elements(call: &'static str, kind: ElementKind, bytes: usize) -> Result<()> {
        if bytes.is_multiple_of(kind.size()) {
            Ok(())
        } else {
            Err(invalid(
                call,
                format!("{bytes} bytes are not a whole number of `{kind}` elements"),
            ))
        }
    }

    // ---- point to point -------------------------------------------------------------------

    /// Sends `data` to `peer`, matched by the peer's next [`recv`](Self::recv) from this rank.
    /// Blocking like NCCL's: returns once the peer has received it.
    pub fn send<T: Element>(&self, peer: usize, data: &[T]) -> Result<()> {
        self.send_raw(
            "Comm::send",
            peer,
            Some(T::KIND),
            bytemuck::cast_slice(data),
        )
    }

    /// Receives the next message from `peer` into `data`, whose length must equal the sent
    /// one's.
    pub fn recv<T: Element>(&self, peer: usize, data: &mut [T]) -> Result<()> {
        self.recv_raw(
            "Comm::recv",
            peer,
            Some(T::KIND),
            bytemuck::cast_slice_mut(data),
        )
    }

    /// [`send`](Self::send) of untyped bytes.
    pub fn send_bytes(&self, peer: usize, data: &[u8]) -> Result<()> {
        self.send_raw("Comm::send_bytes", peer, None, data)
    }

    /// [`recv`](Self::recv) of untyped bytes.
    pub fn recv_bytes(&self, peer: usize, data: &mut [u8]) -> Result<()> {
        self.recv_raw("Comm::recv_bytes", peer, None, data)
    }

    fn send_raw(
        &self,
        call: &'static str,
        peer: usize,
        kind: Option<ElementKind>,
        data: &[u8],
    ) -> Result<()> {
        self.check_rank(call, "peer", peer)?;
        self.refuse_if_aborted(|| format!("send to rank {peer}"))?;
        let number = self.post(peer, kind, data);
        self.await_delivery(peer, number)
    }

    fn recv_raw(
        &self,
        call: &'static str,
        peer: usize,
        kind: Option<ElementKind>,
        data: &mut [u8],
    ) -> Result<()> {
        self.check_rank(call, "peer", peer)?;
        self.refuse_if_aborted(|| format!("recv from rank {peer}"))?;
        self.take(peer, kind, data)
    }

    /// Queues a message to `peer`; returns its number on the channel.
    fn post(&self, peer: usize, kind: Option<ElementKind>, data: &[u8]) -> u64 {
        let mut state = self.shared.lock();
        let channel = &mut state.channels[self.rank * self.shared.size + peer];
        let number = channel.posted;
        channel.posted += 1;
        channel.queue.push_back(Message {
            number,
            kind,
            bytes: data.to_vec(),
        });
        drop(state);
        self.shared.changed.notify_all();
        number
    }

    /// Waits until `peer` has received message `number` from this rank.
    fn await_delivery(&self, peer: usize, number: u64) -> Result<()> {
        let size = self.shared.size;
        let index = self.rank * size + peer;
        let operation = || format!("send #{number} to rank {peer}");
        self.shared.wait(
            self.shared.lock(),
            self.rank,
            Some(peer),
            self.started(),
            &operation,
            |_| format!("rank {peer} has not posted the matching recv"),
            |state| {
                let channel = &mut state.channels[index];
                if channel.delivered > number {
                    return Some(channel.errors.remove(&number).map_or(Ok(()), Err));
                }
                state.departed[peer].then(|| {
                    Err(CollectiveError::PeerGone {
                        rank: self.rank,
                        peer,
                        operation: operation(),
                    })
                })
            },
        )
    }

    /// Receives the next message from `peer` into `data`.
    fn take(&self, peer: usize, kind: Option<ElementKind>, data: &mut [u8]) -> Result<()> {
        let size = self.shared.size;
        let index = peer * size + self.rank;
        let operation = || format!("recv from rank {peer}");
        let (message, number) = self.shared.wait(
            self.shared.lock(),
            self.rank,
            Some(peer),
            self.started(),
            &operation,
            |_| format!("rank {peer} has not sent the matching message"),
            |state| {
                if let Some(message) = state.channels[index].queue.pop_front() {
                    let number = message.number;
                    return Some(Ok((message, number)));
                }
                state.departed[peer].then(|| {
                    Err(CollectiveError::PeerGone {
                        rank: self.rank,
                        peer,
                        operation: operation(),
                    })
                })
            },
        )?;
        let outcome =
            match_message(&message, kind, data.len()).map_err(|detail| CollectiveError::Mismatch {
                rank: self.rank,
                operation: format!("recv #{number} from rank {peer}"),
                detail,
            });
        if outcome.is_ok() {
            data.copy_from_slice(&message.bytes);
        }
        let mut state = self.shared.lock();
        let channel = &mut state.channels[index];
        channel.delivered = number + 1;
        if let Err(e) = &outcome {
            channel.errors.insert(
                number,
                CollectiveError::Mismatch {
                    rank: peer,
                    operation: format!("send #{number} to rank {}", self.rank),
                    detail: match e {
                        CollectiveError::Mismatch { detail, .. } => detail.clone(),
                        other => other.to_string(),
                    },
                },
            );
        }
        drop(state);
        self.shared.changed.notify_all();
        outcome
    }

    /// Runs the sends and recvs that `f` records as one group, like
    /// `ncclGroupStart`/`ncclGroupEnd`: every send of the group is posted before any of its
    /// recvs waits, so the group's order does not matter. Returns once every recv is filled
    /// and every send received.
    ///
    /// The recorded operations run even when `f` returns an error (NCCL issues what a group
    /// recorded at its end); `f`'s error is returned after them.
    ///
    /// ```
    /// use gpu_pipeline::collective::World;
    /// let rows = World::run(3, |comm| {
    ///     let (rank, size) = (comm.rank(), comm.size());
    ///     let (up, down) = ((rank + size - 1) % size, (rank + 1) % size);
    ///     let mine = [rank as i32; 4];
    ///     let (mut from_up, mut from_down) = ([0i32; 4], [0i32; 4]);
    ///     comm.group(|g| {
    ///         g.send(down, &mine)?;
    ///         g.send(up, &mine)?;
    ///         g.recv(up, &mut from_up)?;
    ///         g.recv(down, &mut from_down)
    ///     })?;
    ///     Ok((from_up[0], from_down[0]))
    /// })
    /// .unwrap();
    /// assert_eq!(rows[0].as_ref().unwrap(), &(2, 1));
    /// ```
    pub fn group<'a, R>(&'a self, f: impl FnOnce(&mut CommGroup<'a>) -> Result<R>) -> Result<R> {
        let mut group = CommGroup {
            comm: self,
            sends: Vec::new(),
            recvs: Vec::new(),
        };
        let result = f(&mut group);
        let ended = group.end();
        let value = result?;
        ended.map(|()| value)
    }

    // ---- collectives ----------------------------------------------------------------------

    /// Reduces `send` over all ranks with `op` into every rank's `recv` (same length).
    pub fn all_reduce<T: Element>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        self.all_reduce_bytes(
            T::KIND,
            op,
            bytemuck::cast_slice(send),
            bytemuck::cast_slice_mut(recv),
        )
    }

    /// [`all_reduce`](Self::all_reduce) with `data` as both input and output.
    pub fn all_reduce_in_place<T: Element>(&self, data: &mut [T], op: ReduceOp) -> Result<()> {
        let send = data.to_vec();
        self.all_reduce(&send, data, op)
    }

    /// [`all_reduce`](Self::all_reduce) of bytes holding elements of `kind`.
    pub fn all_reduce_bytes(
        &self,
        kind: ElementKind,
        op: ReduceOp,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<()> {
        const CALL: &str = "Comm::all_reduce";
        op.check(kind).map_err(|m| invalid(CALL, m))?;
        Self::check_elements(CALL, kind, send.len())?;
        if send.len() != recv.len() {
            return Err(invalid(
                CALL,
                format!(
                    "the send buffer has {} bytes and the receive buffer {}; they must be equal",
                    send.len(),
                    recv.len()
                ),
            ));
        }
        let signature = Signature {
            name: "all_reduce",
            kind: Some(kind),
            op: Some(op),
            bytes: send.len(),
            root: None,
        };
        let size = self.size();
        let result = self.collective(signature, Some(send.to_vec()), |inputs| {
            reduce_all(kind, op, inputs, size)
        })?;
        recv.copy_from_slice(&result);
        Ok(())
    }

    /// Copies `root`'s `data` into every other rank's `data` (same length everywhere).
    pub fn broadcast<T: Element>(&self, root: usize, data: &mut [T]) -> Result<()> {
        self.broadcast_raw(
            "Comm::broadcast",
            Some(T::KIND),
            root,
            bytemuck::cast_slice_mut(data),
        )
    }

    /// [`broadcast`](Self::broadcast) from `root`'s `send` into every rank's `recv`
    /// (`send` is read on the root only, as in NCCL).
    pub fn broadcast_from<T: Element>(
        &self,
        root: usize,
        send: &[T],
        recv: &mut [T],
    ) -> Result<()> {
        if self.rank == root {
            if send.len() != recv.len() {
                return Err(invalid(
                    "Comm::broadcast_from",
                    format!(
                        "the root's send buffer has {} elements and its receive buffer {}",
                        send.len(),
                        recv.len()
                    ),
                ));
            }
            recv.copy_from_slice(send);
        }
        self.broadcast(root, recv)
    }

    /// [`broadcast`](Self::broadcast) of bytes.
    pub fn broadcast_bytes(&self, root: usize, data: &mut [u8]) -> Result<()> {
        self.broadcast_raw("Comm::broadcast_bytes", None, root, data)
    }

    fn broadcast_raw(
        &self,
        call: &'static str,
        kind: Option<ElementKind>,
        root: usize,
        data: &mut [u8],
    ) -> Result<()> {
        self.check_rank(call, "root", root)?;
        let signature = Signature {
            name: "broadcast",
            kind,
            op: None,
            bytes: data.len(),
            root: Some(root),
        };
        let input = (self.rank == root).then(|| data.to_vec());
        let result = self.collective(signature, input, |inputs| {
            inputs[root].clone().unwrap_or_default()
        })?;
        if self.rank != root {
            data.copy_from_slice(&result);
        }
        Ok(())
    }

    /// Gathers every rank's `send` into every rank's `recv`, in rank order:
    /// `recv.len() == send.len() * size`.
    pub fn all_gather<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        self.all_gather_raw(
            "Comm::all_gather",
            Some(T::KIND),
            bytemuck::cast_slice(send),
            bytemuck::cast_slice_mut(recv),
        )
    }

    /// [`all_gather`](Self::all_gather) of bytes.
    pub fn all_gather_bytes(&self, send: &[u8], recv: &mut [u8]) -> Result<()> {
        self.all_gather_raw("Comm::all_gather_bytes", None, send, recv)
    }

    fn all_gather_raw(
        &self,
        call: &'static str,
        kind: Option<ElementKind>,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<()> {
        if Some(recv.len()) != send.len().checked_mul(self.size()) {
            return Err(invalid(
                call,
                format!(
                    "the receive buffer must hold {} ranks times the {} sent bytes, but has {} \
                     bytes",
                    self.size(),
                    send.len(),
                    recv.len()
                ),
            ));
        }
        let signature = Signature {
            name: "all_gather",
            kind,
            op: None,
            bytes: send.len(),
            root: None,
        };
        let result = self.collective(signature, Some(send.to_vec()), |inputs| {
            inputs.iter().flatten().flatten().copied().collect()
        })?;
        recv.copy_from_slice(&result);
        Ok(())
    }

    /// Reduces `send` over all ranks with `op` and leaves rank `r`'s share (the `r`-th block
    /// of `recv.len()` elements) in rank `r`'s `recv`: `send.len() == recv.len() * size`.
    pub fn reduce_scatter<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        self.reduce_scatter_bytes(
            T::KIND,
            op,
            bytemuck::cast_slice(send),
            bytemuck::cast_slice_mut(recv),
        )
    }

    /// [`reduce_scatter`](Self::reduce_scatter) of bytes holding elements of `kind`.
    pub fn reduce_scatter_bytes(
        &self,
        kind: ElementKind,
        op: ReduceOp,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<()> {
        const CALL: &str = "Comm::reduce_scatter";
        op.check(kind).map_err(|m| invalid(CALL, m))?;
        Self::check_elements(CALL, kind, recv.len())?;
        if Some(send.len()) != recv.len().checked_mul(self.size()) {
            return Err(invalid(
                CALL,
                format!(
                    "the send buffer must hold {} ranks times the {} received bytes, but has {} \
                     bytes",
                    self.size(),
                    recv.len(),
                    send.len()
                ),
            ));
        }
        let signature = Signature {
            name: "reduce_scatter",
            kind: Some(kind),
            op: Some(op),
            bytes: send.len(),
            root: None,
        };
        let size = self.size();
        let result = self.collective(signature, Some(send.to_vec()), |inputs| {
            reduce_all(kind, op, inputs, size)
        })?;
        let share = recv.len();
        recv.copy_from_slice(&result[self.rank * share..(self.rank + 1) * share]);
        Ok(())
    }

    /// Joins this rank's next collective with `input`; the last rank to join computes the
    /// result from every rank's input with `combine`; every rank gets it.
    fn collective(
        &self,
        signature: Signature,
        input: Option<Vec<u8>>,
        combine: impl FnOnce(&[Option<Vec<u8>>]) -> Vec<u8>,
    ) -> Result<Arc<Vec<u8>>> {
        self.refuse_if_aborted(|| format!("`{}`", signature.name))?;
        let position = self.collectives.get();
        self.collectives.set(position + 1);
        let size = self.size();
        let rank = self.rank;
        let operation = || format!("collective #{position} {signature}");

        let mut state = self.shared.lock();
        let slot = state.slots.entry(position).or_insert_with(|| Slot {
            signature,
            first: rank,
            inputs: vec![None; size],
            joined: vec![false; size],
            result: None,
            error: None,
            readers_left: size,
        });
        if slot.signature != signature && slot.error.is_none() {
            slot.error = Some((
                rank,
                format!(
                    "rank {rank} called {signature} but rank {} called {}",
                    slot.first, slot.signature
                ),
            ));
        }
        slot.inputs[rank] = input;
        slot.joined[rank] = true;
        if slot.joined.iter().all(|&j| j) && slot.error.is_none() {
            slot.result = Some(Arc::new(combine(&slot.inputs)));
            slot.inputs = Vec::new();
        }
        drop(state);
        self.shared.changed.notify_all();

        let outcome = self.shared.wait(
            self.shared.lock(),
            rank,
            None,
            self.started(),
            &operation,
            |state| {
                let missing: Vec<usize> =
                    state.slots.get(&position).map_or_else(Vec::new, |slot| {
                        (0..size).filter(|&r| !slot.joined[r]).collect()
                    });
                format!("ranks {missing:?} have not joined")
            },
            |state| {
                let slot = state.slots.get(&position)?;
                if let Some((culprit, detail)) = &slot.error {
                    return Some(Err(CollectiveError::Mismatch {
                        rank,
                        operation: operation(),
                        detail: format!("{detail} (found by rank {culprit})"),
                    }));
                }
                if let Some(result) = &slot.result {
                    return Some(Ok(result.clone()));
                }
                (0..size)
                    .find(|&r| !slot.joined[r] && state.departed[r])
                    .map(|peer| {
                        Err(CollectiveError::PeerGone {
                            rank,
                            peer,
                            operation: operation(),
                        })
                    })
            },
        );

        // The last reader removes the slot.
        let mut state = self.shared.lock();
        if let Some(slot) = state.slots.get_mut(&position) {
            slot.readers_left -= 1;
            if slot.readers_left == 0 {
                state.slots.remove(&position);
            }
        }
        outcome
    }
}

/// Checks a received message against the recv's element kind and length.
fn match_message(
    message: &Message,
    kind: Option<ElementKind>,
    len: usize,
) -> std::result::Result<(), String> {
    if let (Some(sent), Some(expected)) = (message.kind, kind)
        && sent != expected
    {
        return Err(format!(
            "the sender sent `{sent}` elements and the receiver expects `{expected}`"
        ));
    }
    if message.bytes.len() != len {
        return Err(format!(
            "the sender sent {} bytes and the receive buffer has {len}",
            message.bytes.len()
        ));
    }
    Ok(())
}

/// A group of sends and recvs being recorded by [`Comm::group`]. The buffers it is given are
/// borrowed until the group ends.
/// A group of sends and recvs being recorded by [`Comm::group`]. The buffers it is given are
/// borrowed until the group ends.
///
/// Two ranks that each send first and then receive would wait on each other with blocking
/// calls; in a group the order does not matter:
///
/// ```
/// use gpu_pipeline::collective::World;
/// let swapped = World::run(2, |comm| {
///     let other = 1 - comm.rank();
///     let mine = [comm.rank() as u8; 3];
///     let mut theirs = [9u8; 3];
///     comm.group(|group| {
///         group.send(other, &mine)?;
///         group.recv(other, &mut theirs)
///     })?;
///     Ok(theirs)
/// })
/// .unwrap();
/// assert_eq!(swapped[0].as_ref().unwrap(), &[1, 1, 1]);
/// assert_eq!(swapped[1].as_ref().unwrap(), &[0, 0, 0]);
/// ```
pub struct CommGroup<'a> {
    comm: &'a Comm,
    sends: Vec<(usize, Option<ElementKind>, &'a [u8])>,
    recvs: Vec<(usize, Option<ElementKind>, &'a mut [u8])>,
}

impl fmt::Debug for CommGroup<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommGroup")
            .field("rank", &self.comm.rank)
            .field("sends", &self.sends.len())
            .field("recvs", &self.recvs.len())
            .finish()
    }
}

impl<'a> CommGroup<'a> {
    /// Records a send of `data` to `peer`.
    pub fn send<T: Element>(&mut self, peer: usize, data: &'a [T]) -> Result<()> {
        self.comm.check_rank("CommGroup::send", "peer", peer)?;
        self.sends
            .push((peer, Some(T::KIND), bytemuck::cast_slice(data)));
        Ok(())
    }

    /// Records a recv from `peer` into `data`.
    pub fn recv<T: Element>(&mut self, peer: usize, data: &'a mut [T]) -> Result<()> {
        self.comm.check_rank("CommGroup::recv", "peer", peer)?;
        self.recvs
            .push((peer, Some(T::KIND), bytemuck::cast_slice_mut(data)));
        Ok(())
    }

    /// Records a send of untyped bytes.
    pub fn send_bytes(&mut self, peer: usize, data: &'a [u8]) -> Result<()> {
        self.comm
            .check_rank("CommGroup::send_bytes", "peer", peer)?;
        self.sends.push((peer, None, data));
        Ok(())
    }

    /// Records a recv of untyped bytes.
    pub fn recv_bytes(&mut self, peer: usize, data: &'a mut [u8]) -> Result<()> {
        self.comm
            .check_rank("CommGroup::recv_bytes", "peer", peer)?;
        self.recvs.push((peer, None, data));
        Ok(())
    }

    /// Posts every send, fills every recv in the order recorded, then waits until every send
    /// was received. Reports the first failure after attempting every operation.
    fn end(self) -> Result<()> {
        let comm = self.comm;
        comm.refuse_if_aborted(|| "a group of sends and recvs".to_owned())?;
        comm.with_one_deadline(|comm| self.end_within(comm))
    }

    fn end_within(self, comm: &Comm) -> Result<()> {
        let posted: Vec<(usize, u64)> = self
            .sends
            .iter()
            .map(|&(peer, kind, data)| (peer, comm.post(peer, kind, data)))
            .collect();
        let mut first_error = None;
        for (peer, kind, data) in self.recvs {
            if let Err(e) = comm.take(peer, kind, data) {
                first_error.get_or_insert(e);
            }
        }
        for (peer, number) in posted {
            if let Err(e) = comm.await_delivery(peer, number) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

// ---- reductions -----------------------------------------------------------------------------

/// Reduces every rank's input (all present, all the same length) in rank order.
fn reduce_all(kind: ElementKind, op: ReduceOp, inputs: &[Option<Vec<u8>>], size: usize) -> Vec<u8> {
    let mut inputs = inputs.iter().flatten();
    let mut acc = inputs.next().cloned().unwrap_or_default();
    for input in inputs {
        reduce_into(kind, op, &mut acc, input);
    }
    if op == ReduceOp::Avg {
        divide(kind, &mut acc, size);
    }
    acc
}

/// Applies `op` element-wise: `acc[i] = acc[i] op x[i]`. `Avg` sums here (see [`divide`]).
fn reduce_into(kind: ElementKind, op: ReduceOp, acc: &mut [u8], x: &[u8]) {
    macro_rules! int {
        ($ty:ty) => {
            zip_elements::<$ty, { std::mem::size_of::<$ty>() }>(acc, x, |a, b| match op {
                ReduceOp::Sum | ReduceOp::Avg => a.wrapping_add(b),
                ReduceOp::Prod => a.wrapping_mul(b),
                ReduceOp::Max => a.max(b),
                ReduceOp::Min => a.min(b),
            })
        };
    }
    macro_rules! float {
        ($ty:ty) => {
            zip_elements::<$ty, { std::mem::size_of::<$ty>() }>(acc, x, |a, b| match op {
                ReduceOp::Sum | ReduceOp::Avg => a + b,
                ReduceOp::Prod => a * b,
                ReduceOp::Max => a.max(b),
                ReduceOp::Min => a.min(b),
            })
        };
    }
    match kind {
        ElementKind::I8 => int!(i8),
        ElementKind::U8 => int!(u8),
        ElementKind::I32 => int!(i32),
        ElementKind::U32 => int!(u32),
        ElementKind::I64 => int!(i64),
        ElementKind::U64 => int!(u64),
        ElementKind::F32 => float!(f32),
        ElementKind::F64 => float!(f64),
    }
}

/// Divides a float sum by the number of ranks (`Avg`; checked to be a float kind).
fn divide(kind: ElementKind, acc: &mut [u8], size: usize) {
    match kind {
        ElementKind::F32 => map_elements::<f32, 4>(acc, |a| a / size as f32),
        ElementKind::F64 => map_elements::<f64, 8>(acc, |a| a / size as f64),
        _ => {}
    }
}

/// Native-endian conversion of a fixed-size element; implemented for every element type.
trait NeBytes<const N: usize>: Copy {
    fn from_ne(bytes: [u8; N]) -> Self;
    fn to_ne(self) -> [u8; N];
}

macro_rules! ne_bytes {
    ($($ty:ty),*) => {$(
        impl NeBytes<{ std::mem::size_of::<$ty>() }> for $ty {
            fn from_ne(bytes: [u8; std::mem::size_of::<$ty>()]) -> Self {
                <$ty>::from_ne_bytes(bytes)
            }
            fn to_ne(self) -> [u8; std::mem::size_of::<$ty>()] {
                self.to_ne_bytes()
            }
        }
    )*};
}

ne_bytes!(i8, u8, i32, u32, i64, u64, f32, f64);

/// `acc[i] = f(acc[i], x[i])` over elements of `T` stored as bytes (of any alignment).
fn zip_elements<T: NeBytes<N>, const N: usize>(acc: &mut [u8], x: &[u8], f: impl Fn(T, T) -> T) {
    for (a, b) in acc.chunks_exact_mut(N).zip(x.chunks_exact(N)) {
        let (Ok(a_bytes), Ok(b_bytes)) = (<[u8; N]>::try_from(&*a), <[u8; N]>::try_from(b)) else {
            continue;
        };
        a.copy_from_slice(&f(T::from_ne(a_bytes), T::from_ne(b_bytes)).to_ne());
    }
}

/// `acc[i] = f(acc[i])` over elements of `T` stored as bytes.
fn map_elements<T: NeBytes<N>, const N: usize>(acc: &mut [u8], f: impl Fn(T) -> T) {
    for a in acc.chunks_exact_mut(N) {
        let Ok(bytes) = <[u8; N]>::try_from(&*a) else {
            continue;
        };
        a.copy_from_slice(&f(T::from_ne(bytes)).to_ne());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SHORT: Duration = Duration::from_millis(300);

    /// Runs `f` on `size` ranks and unwraps every rank's result.
    fn run_ok<R: Send + fmt::Debug>(size: usize, f: impl Fn(Comm) -> Result<R> + Sync) -> Vec<R> {
        World::run(size, f)
            .expect("no rank panicked")
            .into_iter()
            .enumerate()
            .map(|(rank, r)| r.unwrap_or_else(|e| panic!("rank {rank}: {e}")))
            .collect()
    }

    #[test]
    fn all_reduce_sums_every_rank_in_worlds_of_one_two_and_four() {
        for size in [1, 2, 4] {
            let out = run_ok(size, |comm| {
                let mine: Vec<i32> = (0..5).map(|i| i * 10 + comm.rank() as i32).collect();
                let mut sum = vec![0; 5];
                comm.all_reduce(&mine, &mut sum, ReduceOp::Sum)?;
                Ok(sum)
            });
            let ranks: i32 = (0..size as i32).sum();
            let expected: Vec<i32> = (0..5).map(|i| i * 10 * size as i32 + ranks).collect();
            assert!(out.iter().all(|r| *r == expected), "{size}: {out:?}");
        }
    }

    #[test]
    fn every_operator_reduces_as_its_name_says() {
        let out = run_ok(3, |comm| {
            let x = [comm.rank() as f64 + 1.0, -(comm.rank() as f64)];
            let mut results = Vec::new();
            for op in ReduceOp::ALL {
                let mut r = [0.0; 2];
                comm.all_reduce(&x, &mut r, op)?;
                results.push(r);
            }
            Ok(results)
        });
        let expected = [
            [6.0, -3.0], // sum of 1,2,3 and 0,-1,-2
            [6.0, -0.0], // product
            [3.0, 0.0],  // max
            [1.0, -2.0], // min
            [2.0, -1.0], // avg
        ];
        for r in &out {
            assert_eq!(r.as_slice(), expected.as_slice());
        }
    }

    #[test]
    fn integer_sums_wrap_like_the_gpu() {
        let out = run_ok(2, |comm| {
            let mut x = [200u8, 255];
            comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
            Ok(x)
        });
        assert_eq!(out, vec![[144, 254]; 2]);
    }

    #[test]
    fn broadcast_all_gather_and_reduce_scatter_on_four_ranks() {
        let out = run_ok(4, |comm| {
            let rank = comm.rank() as u32;
            let mut b = [rank; 3];
            comm.broadcast(2, &mut b)?;
            let mut gathered = [0u32; 8];
            comm.all_gather(&[rank, rank * 100], &mut gathered)?;
            let send: Vec<i64> = (0..8).map(|i| i as i64 * (rank as i64 + 1)).collect();
            let mut share = [0i64; 2];
            comm.reduce_scatter(&send, &mut share, ReduceOp::Sum)?;
            let mut from = [0u32; 2];
            comm.broadcast_from(1, &[7, 8], &mut from)?;
            Ok((b, gathered, share, from))
        });
        for (rank, (b, gathered, share, from)) in out.into_iter().enumerate() {
            assert_eq!(b, [2; 3]);
            assert_eq!(gathered, [0, 0, 1, 100, 2, 200, 3, 300]);
            // Sum over ranks of i * (r + 1) = i * 10, for this rank's two elements.
            let i = 2 * rank as i64;
            assert_eq!(share, [i * 10, (i + 1) * 10], "rank {rank}");
            assert_eq!(from, [7, 8]);
        }
    }

    #[test]
    fn sends_match_recvs_by_peer_and_order() {
        let out = run_ok(3, |comm| {
            let (rank, size) = (comm.rank(), comm.size());
            let next = (rank + 1) % size;
            let prev = (rank + size - 1) % size;
            // Rank 0 sends first and the others receive first, so the blocking sends of the
            // ring 0 -> 1 -> 2 -> 0 complete one after the other.
            let mut got = Vec::new();
            if rank == 0 {
                comm.send(next, &[rank as u8; 1])?;
                comm.send(next, &[rank as u8; 3])?;
                let (mut a, mut b) = ([0u8; 1], [0u8; 3]);
                comm.recv(prev, &mut a)?;
                comm.recv(prev, &mut b)?;
                got.extend(a);
                got.extend(b);
            } else {
                let (mut a, mut b) = ([0u8; 1], [0u8; 3]);
                comm.recv(prev, &mut a)?;
                comm.recv(prev, &mut b)?;
                comm.send(next, &[rank as u8; 1])?;
                comm.send(next, &[rank as u8 + 10; 3])?;
                got.extend(a);
                got.extend(b);
            }
            Ok(got)
        });
        assert_eq!(out[1], [0, 0, 0, 0]);
        assert_eq!(out[2], [1, 11, 11, 11]);
        assert_eq!(out[0], [2, 12, 12, 12]);
    }

    #[test]
    fn a_grouped_halo_exchange_needs_no_ordering() {
        let out = run_ok(4, |comm| {
            let (rank, size) = (comm.rank(), comm.size());
            let (up, down) = ((rank + size - 1) % size, (rank + 1) % size);
            let first = [rank as f32; 8];
            let last = [rank as f32 + 0.5; 8];
            let (mut top, mut bottom) = ([0f32; 8], [0f32; 8]);
            // Every rank records its recvs first: fine inside a group.
            comm.group(|g| {
                g.recv(up, &mut top)?;
                g.recv(down, &mut bottom)?;
                g.send(down, &last)?;
                g.send(up, &first)
            })?;
            Ok((top[0], bottom[0]))
        });
        for (rank, (top, bottom)) in out.into_iter().enumerate() {
            let up = (rank + 3) % 4;
            let down = (rank + 1) % 4;
            assert_eq!(top, up as f32 + 0.5);
            assert_eq!(bottom, down as f32);
        }
    }

    #[test]
    fn a_rank_may_send_to_itself_inside_a_group() {
        let out = run_ok(1, |comm| {
            let mut got = [0i32; 2];
            comm.group(|g| {
                g.send(0, &[5, 6])?;
                g.recv(0, &mut got)
            })?;
            Ok(got)
        });
        assert_eq!(out, vec![[5, 6]]);
    }

    #[test]
    fn two_blocking_sends_at_each_other_time_out_as_under_nccl() {
        let out = World::run_with_timeout(2, SHORT, |comm| {
            let peer = 1 - comm.rank();
            comm.send(peer, &[1u8])?;
            let mut x = [0u8];
            comm.recv(peer, &mut x)
        })
        .unwrap();
        for (rank, r) in out.into_iter().enumerate() {
            match r {
                // Whichever rank gives up first leaves; the other then sees it gone.
                Err(CollectiveError::Timeout {
                    rank: r,
                    operation,
                    waiting_for,
                    ..
                }) => {
                    assert_eq!(r, rank);
                    assert_eq!(operation, format!("send #0 to rank {}", 1 - rank));
                    assert!(waiting_for.contains("recv"), "{waiting_for}");
                }
                Err(CollectiveError::PeerGone { peer, .. }) => assert_eq!(peer, 1 - rank),
                other => panic!("rank {rank}: expected a timeout, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_recv_with_no_sender_times_out_naming_the_peer() {
        let world = World::with_timeout(2, SHORT).unwrap();
        let (c0, _c1) = (world.comm(0).unwrap(), world.comm(1).unwrap());
        let err = c0.recv(1, &mut [0u8; 4]).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, CollectiveError::Timeout { rank: 0, .. }),
            "{err:?}"
        );
        assert!(text.contains("recv from rank 1"), "{text}");
    }

    #[test]
    fn a_collective_missing_a_rank_times_out_listing_it() {
        let world = World::with_timeout(3, SHORT).unwrap();
        let (c0, c1, _c2) = (
            world.comm(0).unwrap(),
            world.comm(1).unwrap(),
            world.comm(2),
        );
        let err = std::thread::scope(|s| {
            let h = s.spawn(move || c1.all_reduce_in_place(&mut [1u32], ReduceOp::Max));
            let e0 = c0.all_reduce_in_place(&mut [1u32], ReduceOp::Max);
            let _ = h.join().unwrap();
            e0.unwrap_err()
        });
        assert!(
            err.to_string().contains("ranks [2] have not joined"),
            "{err}"
        );
    }

    #[test]
    fn different_collectives_at_one_position_are_a_mismatch_for_every_rank() {
        let out = World::run(2, |comm| {
            if comm.rank() == 0 {
                comm.all_reduce_in_place(&mut [1.0f32; 4], ReduceOp::Sum)
            } else {
                comm.broadcast(0, &mut [1.0f32; 4])
            }
        })
        .unwrap();
        for r in out {
            let err = r.unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, CollectiveError::Mismatch { .. }), "{err:?}");
            assert!(
                text.contains("`all_reduce`") && text.contains("`broadcast`"),
                "{text}"
            );
        }
    }

    #[test]
    fn a_recv_of_the_wrong_length_fails_on_both_sides() {
        let out = World::run(2, |comm| {
            if comm.rank() == 0 {
                comm.send(1, &[1u32, 2, 3])
            } else {
                comm.recv(0, &mut [0u32; 2])
            }
        })
        .unwrap();
        for (rank, r) in out.into_iter().enumerate() {
            match r.unwrap_err() {
                CollectiveError::Mismatch {
                    rank: r, detail, ..
                } => {
                    assert_eq!(r, rank);
                    assert!(
                        detail.contains("12 bytes") && detail.contains("8"),
                        "{detail}"
                    );
                }
                other => panic!("rank {rank}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_typed_recv_of_another_kind_is_a_mismatch() {
        let out = World::run(2, |comm| {
            if comm.rank() == 0 {
                comm.send(1, &[1.0f32])
            } else {
                comm.recv(0, &mut [0u32])
            }
        })
        .unwrap();
        let err = out[1].clone().unwrap_err();
        assert!(err.to_string().contains("`f32`") && err.to_string().contains("`u32`"));
    }

    #[test]
    fn a_departed_rank_fails_its_peers_at_once() {
        // A long timeout: the test finishing fast shows the departure, not the timeout, ended
        // the wait.
        let start = Instant::now();
        let out = World::run_with_timeout(3, Duration::from_secs(600), |comm| {
            if comm.rank() == 2 {
                return Ok(()); // leaves without joining
            }
            comm.all_reduce_in_place(&mut [0i8; 2], ReduceOp::Sum)?;
            comm.recv(2, &mut [0u8])
        })
        .unwrap();
        assert!(start.elapsed() < Duration::from_secs(60));
        for r in &out[..2] {
            match r {
                Err(CollectiveError::PeerGone {
                    peer: 2, operation, ..
                }) => {
                    assert!(operation.contains("all_reduce"), "{operation}")
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_panicking_rank_is_reported_and_releases_its_peers() {
        let err = World::run_with_timeout(2, Duration::from_secs(600), |comm| {
            if comm.rank() == 1 {
                panic!("rank one fails");
            }
            comm.recv(1, &mut [0u8])
        })
        .unwrap_err();
        assert_eq!(
            err,
            CollectiveError::Panicked {
                rank: 1,
                message: "rank one fails".into()
            }
        );
    }

    #[test]
    fn bad_arguments_are_rejected_before_any_exchange() {
        assert!(World::new(0).is_err());
        let world = World::with_timeout(2, SHORT).unwrap();
        let c0 = world.comm(0).unwrap();
        assert!(
            world
                .comm(0)
                .unwrap_err()
                .to_string()
                .contains("already taken")
        );
        assert!(
            world
                .comm(2)
                .unwrap_err()
                .to_string()
                .contains("out of range")
        );
        let checks: Vec<(CollectiveError, &str)> = vec![
            (c0.send(2, &[1u8]).unwrap_err(), "peer 2 is out of range"),
            (c0.broadcast(5, &mut [1u8]).unwrap_err(), "root 5"),
            (
                c0.all_reduce(&[1i32; 2], &mut [0; 3], ReduceOp::Sum)
                    .unwrap_err(),
                "must be equal",
            ),
            (
                c0.all_reduce_in_place(&mut [1i32], ReduceOp::Avg)
                    .unwrap_err(),
                "`avg` needs a floating-point",
            ),
            (
                c0.all_gather(&[1u8; 2], &mut [0; 3]).unwrap_err(),
                "2 ranks times the 2 sent bytes",
            ),
            (
                c0.reduce_scatter(&[1u8; 3], &mut [0; 2], ReduceOp::Min)
                    .unwrap_err(),
                "2 ranks times the 2 received bytes",
            ),
            (
                c0.all_reduce_bytes(ElementKind::F32, ReduceOp::Sum, &[0; 6], &mut [0; 6])
                    .unwrap_err(),
                "not a whole number of `f32`",
            ),
        ];
        for (err, needle) in checks {
            assert!(
                matches!(err, CollectiveError::InvalidArgument { .. }),
                "{err:?}"
            );
            assert!(err.to_string().contains(needle), "{err} lacks {needle:?}");
        }
    }

    // ---- property tests against a sequential reference ---------------------------------

    /// The reference: element-wise fold over ranks in typed arithmetic, written without the
    /// byte-level reducer above.
    fn reference_i32(inputs: &[Vec<i32>], op: ReduceOp) -> Vec<i32> {
        (0..inputs[0].len())
            .map(|i| {
                let column = inputs.iter().map(|v| v[i]);
                match op {
                    ReduceOp::Sum => column.fold(0i32, i32::wrapping_add),
                    ReduceOp::Prod => column.fold(1i32, i32::wrapping_mul),
                    ReduceOp::Max => column.max().unwrap(),
                    ReduceOp::Min => column.min().unwrap(),
                    ReduceOp::Avg => unreachable!("integers have no avg"),
                }
            })
            .collect()
    }

    fn reference_f64(inputs: &[Vec<f64>], op: ReduceOp) -> Vec<f64> {
        (0..inputs[0].len())
            .map(|i| {
                let column = inputs.iter().map(|v| v[i]);
                match op {
                    ReduceOp::Sum => column.sum(),
                    ReduceOp::Prod => column.product(),
                    ReduceOp::Max => column.fold(f64::NEG_INFINITY, f64::max),
                    ReduceOp::Min => column.fold(f64::INFINITY, f64::min),
                    ReduceOp::Avg => column.sum::<f64>() / inputs.len() as f64,
                }
            })
            .collect()
    }

    fn int_op() -> impl Strategy<Value = ReduceOp> {
        prop_oneof![
            Just(ReduceOp::Sum),
            Just(ReduceOp::Prod),
            Just(ReduceOp::Max),
            Just(ReduceOp::Min)
        ]
    }

    fn inputs<T: fmt::Debug>(
        element: impl Strategy<Value = T> + Clone,
    ) -> impl Strategy<Value = Vec<Vec<T>>> {
        (1usize..=5, 0usize..40).prop_flat_map(move |(size, len)| {
            proptest::collection::vec(proptest::collection::vec(element.clone(), len), size)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn all_reduce_and_reduce_scatter_of_i32_match_the_reference(
            inputs in inputs(any::<i32>()),
            op in int_op(),
        ) {
            let size = inputs.len();
            let expected = reference_i32(&inputs, op);
            let out = run_ok(size, |comm| {
                let mine = &inputs[comm.rank()];
                let mut all = vec![0; mine.len()];
                comm.all_reduce(mine, &mut all, op)?;
                // Reduce-scatter over the input repeated once per rank: rank r's share is
                // the whole reduction.
                let send: Vec<i32> = mine.iter().copied().cycle().take(mine.len() * size).collect();
                let mut share = vec![0; mine.len()];
                comm.reduce_scatter(&send, &mut share, op)?;
                Ok((all, share))
            });
            for (all, share) in out {
                prop_assert_eq!(&all, &expected);
                prop_assert_eq!(&share, &expected);
            }
        }

        #[test]
        fn all_reduce_of_f64_matches_the_reference(
            inputs in inputs(-1.0e6f64..1.0e6),
            op in prop_oneof![Just(ReduceOp::Sum), Just(ReduceOp::Max), Just(ReduceOp::Min), Just(ReduceOp::Avg)],
        ) {
            let expected = reference_f64(&inputs, op);
            let out = run_ok(inputs.len(), |comm| {
                let mut x = inputs[comm.rank()].clone();
                comm.all_reduce_in_place(&mut x, op)?;
                Ok(x)
            });
            for got in out {
                for (g, e) in got.iter().zip(&expected) {
                    prop_assert!((g - e).abs() <= 1e-9 * e.abs().max(1.0), "{} vs {}", g, e);
                }
            }
        }

        #[test]
        fn all_gather_and_broadcast_of_bytes_match_the_reference(
            inputs in inputs(any::<u8>()),
            root_seed in any::<usize>(),
        ) {
            let size = inputs.len();
            let root = root_seed % size;
            let concat: Vec<u8> = inputs.concat();
            let out = run_ok(size, |comm| {
                let mine = &inputs[comm.rank()];
                let mut gathered = vec![0; mine.len() * size];
                comm.all_gather_bytes(mine, &mut gathered)?;
                let mut b = mine.clone();
                comm.broadcast_bytes(root, &mut b)?;
                Ok((gathered, b))
            });
            for (gathered, b) in out {
                prop_assert_eq!(&gathered, &concat);
                prop_assert_eq!(&b, &inputs[root]);
            }
        }

        /// A random program of messages, each rank doing its part in the global order:
        /// blocking sends complete because every earlier message has. Then the same program
        /// as one group per rank, self-sends included.
        #[test]
        fn random_point_to_point_programs_deliver_in_order(
            size in 1usize..=4,
            messages in proptest::collection::vec((any::<usize>(), any::<usize>(), 0usize..24), 0..24),
        ) {
            let messages: Vec<(usize, usize, usize)> = messages
                .into_iter()
                .map(|(a, b, len)| (a % size, b % size, len))
                .collect();
            let payload = |k: usize, len: usize| -> Vec<u8> {
                (0..len).map(|i| (k * 31 + i) as u8).collect()
            };
            // Expected: what each rank receives, in its order.
            let expected: Vec<Vec<Vec<u8>>> = (0..size)
                .map(|r| {
                    messages
                        .iter()
                        .enumerate()
                        .filter(|(_, m)| m.1 == r)
                        .map(|(k, m)| payload(k, m.2))
                        .collect()
                })
                .collect();

            let ungrouped: Vec<_> = messages.iter().copied().enumerate().filter(|(_, m)| m.0 != m.1).collect();
            let got = run_ok(size, |comm| {
                let me = comm.rank();
                let mut received = Vec::new();
                for &(k, (src, dst, len)) in &ungrouped {
                    if src == me {
                        comm.send_bytes(dst, &payload(k, len))?;
                    } else if dst == me {
                        let mut buf = vec![0; len];
                        comm.recv_bytes(src, &mut buf)?;
                        received.push((k, buf));
                    }
                }
                Ok(received)
            });
            for (r, received) in got.into_iter().enumerate() {
                let want: Vec<(usize, Vec<u8>)> = ungrouped
                    .iter()
                    .filter(|(_, m)| m.1 == r)
                    .map(|&(k, m)| (k, payload(k, m.2)))
                    .collect();
                prop_assert_eq!(received, want);
            }

            let got = run_ok(size, |comm| {
                let me = comm.rank();
                let sends: Vec<(usize, Vec<u8>)> = messages
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.0 == me)
                    .map(|(k, m)| (m.1, payload(k, m.2)))
                    .collect();
                let mut recvs: Vec<(usize, Vec<u8>)> = messages
                    .iter()
                    .filter(|m| m.1 == me)
                    .map(|m| (m.0, vec![0; m.2]))
                    .collect();
                comm.group(|g| {
                    // Recvs first, sends after: the group makes the order irrelevant.
                    for (src, buf) in recvs.iter_mut() {
                        g.recv_bytes(*src, buf)?;
                    }
                    for (dst, data) in &sends {
                        g.send_bytes(*dst, data)?;
                    }
                    Ok(())
                })?;
                Ok(recvs.into_iter().map(|(_, b)| b).collect::<Vec<_>>())
            });
            prop_assert_eq!(got, expected);
        }
    }
}

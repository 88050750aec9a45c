//! Communicators: creation from a unique id, the handle every NCCL call goes through, and
//! teardown that never panics and never waits on a broken communicator (the raw enqueue is
//! `raw.rs`, aborting `abort.rs`).
//!
//! Communicators are nonblocking (`ncclConfig_t.blocking = 0`, NCCL 2.14+): init, enqueue
//! and group end may return `ncclInProgress`, and then [`CommHandle::settle`] polls
//! `ncclCommGetAsyncError` until NCCL is done, within the communicator's deadline. The
//! handle may be aborted by the watchdog thread (`watchdog.rs`) at any time: every use of the
//! raw handle goes through [`CommHandle::with_raw`], under the lock the abort takes, and an
//! aborted handle is never passed to NCCL again.

use std::cell::Cell;
use std::ffi::{c_char, c_int};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use super::abort::{ABORTS, AbortPlan, abort_plan, defer_abort, wait_for_aborts_at_exit};
use super::adapt;
use super::library::{Nccl, NcclVersion, nccl};
use super::sys::{self, ncclComm_t, ncclResult_t};
use crate::collective::{AbortState, CommCause, CommFailure, check_timeout, comm_timeout_from_env};
use crate::context::Context;
use crate::cuda;
use crate::error::{Error, Result};
use crate::rendezvous::{RankInfo, Rendezvous};

thread_local! {
    /// Whether a `Communicator::group` is open on this thread.
    static IN_GROUP: Cell<bool> = const { Cell::new(false) };
    /// The handle (its address) whose lock this thread holds in [`CommHandle::with_raw`].
    static HELD: Cell<usize> = const { Cell::new(0) };
}

pub(super) fn refuse_in_group(call: &'static str) -> Result<()> {
    if IN_GROUP.with(Cell::get) {
        return Err(Error::invalid(
            call,
            "a `Communicator::group` is open on this thread, and NCCL would hold this operation \
             until it ends, after its buffers' borrows; enqueue through the group's `Group` \
             handle instead",
        ));
    }
    Ok(())
}

/// Marks a `Communicator::group` as open (or closed) on this thread.
pub(super) fn set_in_group(open: bool) {
    IN_GROUP.with(|g| g.set(open));
}

/// The 128 bytes every rank of one communicator must share (`ncclUniqueId`): rank 0 makes it
/// with [`UniqueId::new`] and hands it to the others, e.g. through a
/// [`Rendezvous`].
///
/// It holds the address of a bootstrap socket that [`UniqueId::new`] opened in this process:
/// the process that made it must live until every rank has created its communicator.
///
/// ```
/// use gpu_pipeline::nccl::{self, UniqueId};
/// // The other ranks rebuild it from the bytes rank 0 shared.
/// let received = [7u8; 128];
/// let id = UniqueId::from_bytes(&received)?;
/// assert_eq!(id.as_bytes(), &received);
/// assert!(UniqueId::from_bytes(&received[..64]).is_err()); // not an id
/// // Rank 0 makes one, where NCCL loads.
/// if nccl::is_available() {
///     let fresh = UniqueId::new()?;
///     assert_eq!(UniqueId::from_bytes(fresh.as_bytes())?, fresh);
/// }
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct UniqueId([u8; sys::NCCL_UNIQUE_ID_BYTES]);

impl UniqueId {
    /// A new id (`ncclGetUniqueId`); call it on one rank only.
    pub fn new() -> Result<UniqueId> {
        let n = nccl()?;
        let mut raw = sys::ncclUniqueId {
            internal: [0; sys::NCCL_UNIQUE_ID_BYTES],
        };
        // SAFETY: a valid out-pointer to a 128-byte ncclUniqueId.
        n.check("ncclGetUniqueId", unsafe { (n.ncclGetUniqueId)(&mut raw) })?;
        Ok(UniqueId(raw.internal.map(|c| c as u8)))
    }

    /// An id received from rank 0; it must be exactly 128 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<UniqueId> {
        <[u8; sys::NCCL_UNIQUE_ID_BYTES]>::try_from(bytes)
            .map(UniqueId)
            .map_err(|_| {
                Error::invalid(
                    "UniqueId::from_bytes",
                    format!(
                        "an NCCL unique id has {} bytes, not {}",
                        sys::NCCL_UNIQUE_ID_BYTES,
                        bytes.len()
                    ),
                )
            })
    }

    /// The 128 bytes, to send to the other ranks.
    pub fn as_bytes(&self) -> &[u8; sys::NCCL_UNIQUE_ID_BYTES] {
        &self.0
    }

    fn raw(&self) -> sys::ncclUniqueId {
        sys::ncclUniqueId {
            internal: self.0.map(|b| b as c_char),
        }
    }
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let head: String = self.0[..8].iter().map(|b| format!("{b:02x}")).collect();
        write!(f, "UniqueId({head}..)")
    }
}

/// Options for [`Communicator::init_with`] (`ncclConfig_t`, NCCL 2.14+); `None` leaves NCCL's
/// default (and its environment variables) in charge.
///
/// ```
/// use std::time::Duration;
/// use gpu_pipeline::nccl::CommConfig;
/// let config = CommConfig { timeout: Some(Duration::from_secs(30)), ..CommConfig::default() };
/// assert_eq!(config.deadline().unwrap(), Duration::from_secs(30));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommConfig {
    /// How long each communication (and the communicator's creation) may take before the
    /// communicator is aborted and the wait returns [`Error::Communication`]; `None`:
    /// [`COMM_TIMEOUT_ENV`](crate::collective::COMM_TIMEOUT_ENV), else
    /// [`DEFAULT_COMM_TIMEOUT`](crate::collective::DEFAULT_COMM_TIMEOUT).
    pub timeout: Option<Duration>,
    /// `cgaClusterSize`: the CTA cluster size of NCCL's kernels (Hopper and newer).
    pub cga_cluster_size: Option<i32>,
    /// `minCTAs`: the fewest CTAs (channels) NCCL may use.
    pub min_ctas: Option<i32>,
    /// `maxCTAs`: the most CTAs NCCL may use, e.g. to leave SMs to overlapping compute.
    pub max_ctas: Option<i32>,
}

impl CommConfig {
    /// The deadline these options give (see [`CommConfig::timeout`]); a zero timeout or a
    /// bad environment value is an error saying what to write.
    pub fn deadline(&self) -> Result<Duration> {
        const CALL: &str = "CommConfig::deadline";
        match self.timeout {
            Some(timeout) => check_timeout(CALL, timeout).map_err(|m| Error::invalid(CALL, m)),
            None => comm_timeout_from_env().map_err(|m| Error::invalid(CALL, m)),
        }
    }
}

/// The NCCL communicator handle, shared (through `Arc`) by the [`Communicator`] and every
/// graph captured with its operations, so it outlives them all. Its drop tears it down.
pub(crate) struct CommHandle {
    raw: ncclComm_t,
    ctx: Context,
    pub(super) nccl: &'static Nccl,
    /// A call failed: the communicator's state is unknown, so teardown aborts.
    failed: AtomicBool,
    /// `false` once aborted or destroyed: `raw` is then never used again. Held across every
    /// use of `raw` ([`CommHandle::with_raw`]), so an abort never frees it under a call.
    alive: Mutex<bool>,
    /// The deadline and the first failure, shared with the `Communicator` and the watchdog.
    abort: Arc<AbortState>,
    rank: usize,
    /// This handle, for the list of aborts deferred until no capture is open.
    me: Weak<CommHandle>,
}

// SAFETY: an ncclComm_t may be used from any thread that makes the device current (every
// call here binds the context first); NCCL forbids only concurrent use, and every use of
// `raw` holds the `alive` lock (`with_raw`, `abort_now`, drop).
unsafe impl Send for CommHandle {}
// SAFETY: as above: shared references reach `raw` only under the `alive` lock.
unsafe impl Sync for CommHandle {}

impl CommHandle {
    pub(super) fn bind(&self, call: &'static str) -> Result<()> {
        adapt::bind(&self.ctx, call)
    }

    /// Checks a result, marking the communicator failed on error.
    fn check(&self, call: &'static str, code: ncclResult_t) -> Result<()> {
        if !code.is_success() {
            self.failed.store(true, Ordering::Release);
        }
        self.nccl.check(call, code)
    }

    /// The context the communicator runs on.
    pub(crate) fn context(&self) -> &Context {
        &self.ctx
    }

    /// This rank.
    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    /// The deadline and first failure.
    pub(crate) fn abort_state(&self) -> &Arc<AbortState> {
        &self.abort
    }

    /// Whether the communicator was aborted (or destroyed).
    pub(crate) fn is_aborted(&self) -> bool {
        !*self.alive.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The refusal of a use after an abort.
    fn refused(&self, call: &'static str) -> Error {
        self.abort
            .refusal(self.rank, None, None, call.to_owned())
            .map_or_else(
                || Error::invalid(call, "the NCCL communicator was aborted; make a new one"),
                Error::from,
            )
    }

    /// Runs `f` with the raw handle, under the lock an abort takes (re-entrantly on this
    /// thread); refused once the communicator is aborted. A failure `f` records aborts the
    /// communicator before the lock is released.
    pub(super) fn with_raw<R>(
        &self,
        call: &'static str,
        f: impl FnOnce(ncclComm_t) -> Result<R>,
    ) -> Result<R> {
        let key = self as *const CommHandle as usize;
        if HELD.with(Cell::get) == key {
            return f(self.raw);
        }
        let mut alive = self.alive.lock().unwrap_or_else(PoisonError::into_inner);
        // A recorded failure whose abort waits for a capture to end refuses too.
        if !*alive || self.abort.failure().is_some() {
            drop(alive);
            return Err(self.refused(call));
        }
        let outer = HELD.with(|h| h.replace(key));
        let result = f(self.raw);
        HELD.with(|h| h.set(outer));
        if self.abort.failure().is_some() {
            self.abort_locked(&mut alive);
        }
        result
    }

    /// Aborts the communicator unless it was already (the watchdog's call; never under
    /// [`with_raw`](Self::with_raw) on this thread).
    pub(crate) fn abort_now(&self) {
        if HELD.with(Cell::get) == self as *const CommHandle as usize {
            return;
        }
        let mut alive = self.alive.lock().unwrap_or_else(PoisonError::into_inner);
        self.abort_locked(&mut alive);
    }

    fn abort_locked(&self, alive: &mut bool) {
        // Held across the abort: no capture of ours begins while NCCL tears down.
        let open = cuda::open_captures();
        match abort_plan(*alive, *open) {
            AbortPlan::Nothing => {}
            AbortPlan::AfterCaptures => defer_abort(self.me.clone()),
            AbortPlan::Now => {
                let _aborting = ABORTS.begin();
                *alive = false;
                self.failed.store(true, Ordering::Release);
                let _ = self.bind("ncclCommAbort");
                // SAFETY: a live communicator (`alive` was true under its lock), aborted once;
                // `alive` is now false, so nothing passes it to NCCL again. No capture of ours
                // is open (checked under the lock that `begin_capture` takes).
                let code = unsafe { (self.nccl.ncclCommAbort)(self.raw) };
                if !code.is_success() {
                    tracing::warn!(error = %self.nccl.error("ncclCommAbort", code), "aborting an NCCL communicator failed");
                }
            }
        }
    }

    /// NCCL's asynchronous error, if any (`ncclCommGetAsyncError`); `None` while healthy,
    /// in progress, or aborted.
    pub(crate) fn poll_async_error(&self) -> Option<(i32, String)> {
        self.with_raw("ncclCommGetAsyncError", |raw| {
            let mut state = ncclResult_t::SUCCESS;
            // SAFETY: a live communicator (under `with_raw`) and a valid out-pointer.
            let query = unsafe { (self.nccl.ncclCommGetAsyncError)(raw, &mut state) };
            let code = if query.is_success() { state } else { query };
            Ok(
                (!code.is_success() && code != ncclResult_t::IN_PROGRESS).then(|| {
                    (
                        code.0,
                        self.nccl.error("ncclCommGetAsyncError", code).to_string(),
                    )
                }),
            )
        })
        .ok()
        .flatten()
    }

    /// Waits for a call that returned `code` to finish: at once unless `ncclInProgress`
    /// (a nonblocking communicator), else polling `ncclCommGetAsyncError` until NCCL is done,
    /// within the deadline. A missed deadline or an asynchronous error is recorded as this
    /// communicator's failure (so [`with_raw`](Self::with_raw) aborts it).
    pub(super) fn settle(
        &self,
        call: &'static str,
        raw: ncclComm_t,
        code: ncclResult_t,
    ) -> Result<()> {
        if code.is_success() {
            return Ok(());
        }
        if code != ncclResult_t::IN_PROGRESS {
            // On a nonblocking communicator any error leaves it unusable: a typed failure,
            // so the communicator is aborted and every rank's error names it.
            return Err(self.fail(
                CommCause::Nccl {
                    code: code.0,
                    message: self.nccl.error(call, code).to_string(),
                },
                call,
            ));
        }
        let start = Instant::now();
        let deadline = self.abort.deadline();
        loop {
            let mut state = ncclResult_t::SUCCESS;
            // SAFETY: `raw` is live: the caller runs under `with_raw`.
            let query = unsafe { (self.nccl.ncclCommGetAsyncError)(raw, &mut state) };
            self.check("ncclCommGetAsyncError", query)?;
            if state.is_success() {
                return Ok(());
            }
            let cause = if state != ncclResult_t::IN_PROGRESS {
                CommCause::Nccl {
                    code: state.0,
                    message: self.nccl.error(call, state).to_string(),
                }
            } else if start.elapsed() >= deadline {
                CommCause::Timeout {
                    waited: start.elapsed(),
                    waiting_for: "NCCL still reported ncclInProgress".to_owned(),
                }
            } else {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            };
            return Err(self.fail(cause, call));
        }
    }

    /// Records `cause` as this communicator's failure (unless one came first; the stage
    /// that made the call names it: `AbortState::name_first`) and returns the error.
    fn fail(&self, cause: CommCause, call: &'static str) -> Error {
        self.failed.store(true, Ordering::Release);
        let failure = CommFailure {
            rank: self.rank,
            pipeline: None,
            stage: None,
            operation: call.to_owned(),
            peer: None,
            deadline: self.abort.deadline(),
            cause,
        };
        self.abort.record(failure.clone());
        failure.into()
    }
}

impl Drop for CommHandle {
    fn drop(&mut self) {
        let alive = std::mem::take(self.alive.get_mut().unwrap_or_else(PoisonError::into_inner));
        if !alive {
            // Aborted already: `raw` was freed.
            return;
        }
        // Best effort: NCCL uses the runtime, which uses the current context.
        let _ = self.bind("Communicator::drop");
        let n = self.nccl;
        let mut state = ncclResult_t::SUCCESS;
        // SAFETY: a live communicator and a valid out-pointer.
        let query = unsafe { (n.ncclCommGetAsyncError)(self.raw, &mut state) };
        // While this thread panics the other ranks may never reach their destroy (an intra-node
        // collective), so a panicking rank aborts too.
        let healthy = query.is_success()
            && (state.is_success() || state == ncclResult_t::IN_PROGRESS)
            && !self.failed.load(Ordering::Acquire)
            && self.abort.failure().is_none()
            && !std::thread::panicking();
        if healthy {
            // Waits for this communicator's outstanding work (a blocking communicator).
            // SAFETY: a live communicator, destroyed once; nothing uses it afterwards.
            let code = unsafe { (n.ncclCommDestroy)(self.raw) };
            if !code.is_success() {
                tracing::warn!(error = %n.error("ncclCommDestroy", code), "destroying an NCCL communicator failed");
            }
        } else {
            // A broken communicator may never finish its work: abort rather than wait.
            let _aborting = ABORTS.begin();
            // SAFETY: a live communicator, aborted once; nothing uses it afterwards.
            let code = unsafe { (n.ncclCommAbort)(self.raw) };
            tracing::warn!(
                async_error = state.0,
                abort = code.0,
                "aborted an NCCL communicator that had failed"
            );
        }
    }
}

/// One rank's NCCL communicator: the ranks it talks to and the device it runs on.
///
/// Made by [`Communicator::init`] (from a [`UniqueId`] shared by other means) or
/// [`Communicator::from_env`] (rank and rendezvous from the launcher's variables). Its
/// operations enqueue on a CUDA stream of the same context ([`send`](Self::send),
/// [`all_reduce`](Self::all_reduce), ..., and [`group`](Self::group) for several at once).
///
/// Like NCCL's, it is driven from one thread at a time: it is `Send` but not `Sync`.
/// Dropping it destroys the communicator (`ncclCommDestroy`, which waits for its outstanding
/// work and, per NCCL, expects every rank on the node to destroy theirs), or aborts it
/// (`ncclCommAbort`) when any call failed, NCCL reports an asynchronous error, or the thread
/// is panicking, so a broken communicator is never waited on. A graph captured with its
/// operations keeps it alive until the graph is dropped.
///
/// ```no_run
/// use gpu_pipeline::collective::ReduceOp;
/// use gpu_pipeline::nccl::Communicator;
/// use gpu_pipeline::rendezvous::RankInfo;
/// use gpu_pipeline::{Context, DeviceBuffer, Stream};
/// # fn main() -> gpu_pipeline::Result<()> {
/// // Under `gpu-pipeline-launch -n 2 -- ./program`:
/// let me = RankInfo::from_env()?;
/// let ctx = Context::cuda(me.local_rank)?;
/// let comm = Communicator::from_env(&ctx)?;
/// let stream = Stream::non_blocking(&ctx)?;
/// let mut residual = DeviceBuffer::from_slice(&stream, &[me.rank as f32])?;
/// comm.all_reduce_in_place(&stream, &mut residual, ReduceOp::Sum)?;
/// assert_eq!(residual.to_vec(&stream)?, [1.0]); // 0 + 1
/// # Ok(()) }
/// ```
pub struct Communicator {
    pub(super) handle: Arc<CommHandle>,
    rank: usize,
    size: usize,
    _not_sync: PhantomData<Cell<()>>,
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("context", &self.handle.ctx)
            .finish_non_exhaustive()
    }
}

pub(super) fn to_c_int(call: &'static str, what: &str, value: usize) -> Result<c_int> {
    c_int::try_from(value)
        .map_err(|_| Error::invalid(call, format!("{what} {value} does not fit NCCL's `int`")))
}

impl Communicator {
    /// Rank `rank` of `world_size` ranks on `ctx`'s device, joining the other ranks that
    /// call this with the same `id` (`ncclCommInitRankConfig`, nonblocking). Waits until all
    /// have joined, at most the deadline ([`CommConfig::timeout`]).
    pub fn init(
        ctx: &Context,
        world_size: usize,
        rank: usize,
        id: &UniqueId,
    ) -> Result<Communicator> {
        Communicator::init_with(ctx, world_size, rank, id, &CommConfig::default())
    }

    /// [`Communicator::init`] with options (`ncclCommInitRankConfig`; NCCL 2.14+ when any
    /// option is set).
    pub fn init_with(
        ctx: &Context,
        world_size: usize,
        rank: usize,
        id: &UniqueId,
        config: &CommConfig,
    ) -> Result<Communicator> {
        const CALL: &str = "Communicator::init";
        // Inside a group NCCL would defer the init, and the handle would not be usable yet.
        refuse_in_group(CALL)?;
        let n = nccl()?;
        if world_size == 0 || rank >= world_size {
            return Err(Error::invalid(
                CALL,
                format!("rank {rank} is not one of the {world_size} ranks"),
            ));
        }
        let nranks = to_c_int(CALL, "the world size", world_size)?;
        let c_rank = to_c_int(CALL, "the rank", rank)?;
        let deadline = config.deadline()?;
        // NCCL takes the device from the current context (through the runtime).
        adapt::bind(ctx, CALL)?;
        let mut raw: ncclComm_t = std::ptr::null_mut();
        let (call, code) = match n.ncclCommInitRankConfig {
            Some(init) => {
                let undef = |v: Option<i32>| v.unwrap_or(sys::NCCL_CONFIG_UNDEF_INT);
                let mut raw_config = sys::ncclConfig_v21700 {
                    size: std::mem::size_of::<sys::ncclConfig_v21700>(),
                    magic: sys::NCCL_API_MAGIC,
                    version: sys::CONFIG_VERSION,
                    // Nonblocking: no call waits on the peers unbounded; `settle` polls.
                    blocking: 0,
                    cgaClusterSize: undef(config.cga_cluster_size),
                    minCTAs: undef(config.min_ctas),
                    maxCTAs: undef(config.max_ctas),
                    netName: std::ptr::null(),
                };
                // SAFETY: a valid out-pointer; the id is passed by value as nccl.h declares;
                // the device's primary context is current on this thread; the config is a
                // correctly initialised 2.17 prefix (size, magic and version set) that
                // outlives the call.
                let code = unsafe { init(&mut raw, nranks, id.raw(), c_rank, &mut raw_config) };
                ("ncclCommInitRankConfig", code)
            }
            None if config.cga_cluster_size.is_none()
                && config.min_ctas.is_none()
                && config.max_ctas.is_none() =>
            {
                // NCCL before 2.14: a blocking communicator; the watchdog still aborts it on a
                // missed deadline, but its creation waits for the peers unbounded.
                // SAFETY: a valid out-pointer; the id is passed by value as nccl.h declares;
                // the device's primary context is current on this thread.
                let code = unsafe { (n.ncclCommInitRank)(&mut raw, nranks, id.raw(), c_rank) };
                ("ncclCommInitRank", code)
            }
            None => {
                return Err(Error::invalid(
                    CALL,
                    format!(
                        "the loaded NCCL {} has no ncclCommInitRankConfig (2.14+); leave \
                         `CommConfig`'s NCCL options at their defaults",
                        NcclVersion::from_code(n.version)
                    ),
                ));
            }
        };
        if !code.is_success() && code != ncclResult_t::IN_PROGRESS {
            return Err(n.error(call, code));
        }
        let handle = Arc::new_cyclic(|me| CommHandle {
            raw,
            ctx: ctx.clone(),
            nccl: n,
            failed: AtomicBool::new(false),
            alive: Mutex::new(true),
            abort: Arc::new(AbortState::new(deadline)),
            rank,
            me: me.clone(),
        });
        // A nonblocking init returns `ncclInProgress` until every rank has joined: wait for
        // it within the deadline (a missed one aborts the handle, and dropping it is safe).
        handle.with_raw(call, |raw| handle.settle(call, raw, code))?;
        // After NCCL's own exit handlers are registered (at its first init), so ours runs
        // before them.
        wait_for_aborts_at_exit();
        let comm = Communicator {
            handle,
            rank,
            size: world_size,
            _not_sync: PhantomData,
        };
        comm.check_device()?;
        Ok(comm)
    }

    /// Every rank of a launch builds its communicator on `ctx`: the rank comes from the
    /// launcher's variables ([`RankInfo::from_env_or_single`]: a single rank when none is
    /// set), rank 0 makes the [`UniqueId`] and the others get it through the rendezvous the
    /// environment names ([`Rendezvous::from_env`]).
    pub fn from_env(ctx: &Context) -> Result<Communicator> {
        let me = RankInfo::from_env_or_single()?;
        let id = if me.world_size == 1 {
            UniqueId::new()?
        } else {
            let store = Rendezvous::from_env()?;
            if me.is_root() {
                let id = UniqueId::new()?;
                store.share(&me, Some(id.as_bytes()))?;
                id
            } else {
                UniqueId::from_bytes(&store.share(&me, None)?)?
            }
        };
        Communicator::init(ctx, me.world_size, me.rank, &id)
    }

    /// Checks that NCCL agrees on the rank and size (`ncclCommUserRank`, `ncclCommCount`)
    /// and took the context's device (`ncclCommCuDevice`).
    fn check_device(&self) -> Result<()> {
        let h = &self.handle;
        let n = h.nccl;
        let (mut device, mut rank, mut count): (c_int, c_int, c_int) = (-1, -1, -1);
        h.with_raw("ncclCommCuDevice", |raw| {
            // SAFETY: a live communicator (under `with_raw`) and valid out-pointers, for each
            // of the three queries.
            h.check("ncclCommCuDevice", unsafe {
                (n.ncclCommCuDevice)(raw, &mut device)
            })?;
            // SAFETY: as above.
            h.check("ncclCommUserRank", unsafe {
                (n.ncclCommUserRank)(raw, &mut rank)
            })?;
            // SAFETY: as above.
            h.check("ncclCommCount", unsafe {
                (n.ncclCommCount)(raw, &mut count)
            })
        })?;
        let expected = adapt::device_ordinal(&h.ctx);
        let as_usize = |v: c_int| usize::try_from(v).ok();
        let problem = if expected.is_some_and(|o| as_usize(device) != Some(o)) {
            Some(format!(
                "NCCL bound the communicator to device {device}, not the context's device {}",
                expected.unwrap_or_default()
            ))
        } else if as_usize(rank) != Some(self.rank) || as_usize(count) != Some(self.size) {
            Some(format!(
                "NCCL reports rank {rank} of {count}, not rank {} of {}",
                self.rank, self.size
            ))
        } else {
            None
        };
        match problem {
            Some(message) => {
                h.failed.store(true, Ordering::Release);
                Err(Error::invalid("Communicator::init", message))
            }
            None => Ok(()),
        }
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The context (and so the device) the communicator runs on.
    pub fn context(&self) -> &Context {
        &self.handle.ctx
    }

    /// An error NCCL found while running enqueued work (`ncclCommGetAsyncError`), such as a
    /// peer that died. After one, nothing can be assumed about enqueued operations: drop the
    /// communicator (which then aborts it).
    ///
    /// An aborted communicator (a missed deadline, an earlier error) reports its first
    /// failure as [`Error::Communication`].
    pub fn async_error(&self) -> Result<()> {
        const CALL: &str = "Communicator::async_error";
        let h = &self.handle;
        if let Some(failure) = h.abort.failure() {
            return Err(failure.into());
        }
        h.bind(CALL)?;
        match h.poll_async_error() {
            None if h.is_aborted() => Err(h.refused(CALL)),
            None => Ok(()),
            Some((code, message)) => {
                let failure = CommFailure {
                    rank: self.rank,
                    pipeline: None,
                    stage: None,
                    operation: "enqueued communication".to_owned(),
                    peer: None,
                    deadline: h.abort.deadline(),
                    cause: CommCause::Nccl { code, message },
                };
                h.abort.record(failure.clone());
                h.abort_now();
                Err(failure.into())
            }
        }
    }

    /// The deadline and abort state, shared with the watchdog.
    pub(crate) fn abort_state(&self) -> &Arc<AbortState> {
        &self.handle.abort
    }

    /// The shared handle, for graphs that capture this communicator's operations.
    pub(super) fn shared(&self) -> Arc<CommHandle> {
        self.handle.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_ids_are_128_bytes_and_print_briefly() {
        let bytes: Vec<u8> = (0..128).map(|i| i as u8).collect();
        let id = UniqueId::from_bytes(&bytes).unwrap();
        assert_eq!(id.as_bytes().as_slice(), bytes.as_slice());
        assert_eq!(format!("{id:?}"), "UniqueId(0001020304050607..)");
        assert_eq!(id.raw().internal[127], 127);
        let err = UniqueId::from_bytes(&bytes[..100]).unwrap_err().to_string();
        assert!(err.contains("128 bytes, not 100"), "{err}");
    }

    /// With an NCCL library present (the wheel's, through `GPU_PIPELINE_LIBNCCL`, works
    /// without a GPU), ids come from it and differ each time.
    #[test]
    fn unique_ids_come_from_nccl_when_it_loads() {
        if nccl().is_err() {
            println!("skipped: no NCCL library here");
            return;
        }
        println!(
            "NCCL {} from {}",
            super::super::version().unwrap(),
            super::super::library_path().unwrap()
        );
        let (a, b) = (UniqueId::new().unwrap(), UniqueId::new().unwrap());
        assert_ne!(a, b);
        assert!(a.as_bytes().iter().any(|&x| x != 0));
    }
}

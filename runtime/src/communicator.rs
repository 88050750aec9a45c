//! The communicator of one rank, on either backend: what a pipeline's `send`, `recv` and
//! collective statements go through.
//!
//! On CUDA it is an NCCL communicator ([`nccl::Communicator`]; one process per GPU, ranks
//! meeting through [`crate::rendezvous`]). On the CPU backend it is one rank of a
//! [`World`]: ranks are threads of one process, and a stage's communication runs on the
//! stage's stream worker, exchanging bytes with the other ranks' workers with NCCL's
//! meaning, so CI runs every multi-rank pipeline (and the race detector sees its accesses).
//!
//! Both give every communication a deadline ([`Communicator::timeout`]: the builder's, else
//! [`COMM_TIMEOUT_ENV`](crate::collective::COMM_TIMEOUT_ENV), else
//! [`DEFAULT_COMM_TIMEOUT`](crate::collective::DEFAULT_COMM_TIMEOUT)). A communication that
//! misses it, or fails, aborts the communicator and surfaces as
//! [`Error::Communication`] (or inside the [`Error::Step`] of the pipeline wait that saw it);
//! [`Communicator::failure`] keeps the first failure, and every later use is refused.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::collective::{AbortState, Comm, CommFailure, IssueOrder, World};
use crate::context::{Backend, Context};
use crate::error::{Error, Result};
use crate::nccl;

/// One rank's communicator for `gpu_pipeline!` communication statements: NCCL on CUDA, a
/// [`World`] rank on the CPU backend.
///
/// ```
/// use gpu_pipeline::Communicator;
/// // Four simulated ranks (the CPU backend): move each to its own thread.
/// let ranks = Communicator::cpu_ranks(4).unwrap();
/// assert_eq!(ranks.len(), 4);
/// assert_eq!((ranks[2].rank(), ranks[2].size()), (2, 4));
/// ```
///
/// On GPUs, one process per rank (`gpu-pipeline-launch -n 2 -- ./program`):
///
/// ```no_run
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::rendezvous::RankInfo;
/// use gpu_pipeline::{Communicator, Context};
/// let me = RankInfo::from_env_or_single()?;
/// let ctx = Context::cuda(me.local_rank)?;
/// let comm = Communicator::from_env(&ctx)?;
/// println!("rank {} of {}", comm.rank(), comm.size());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Communicator {
    backend: CommBackend,
    rank: usize,
    size: usize,
    /// The deadline and the first failure, shared with enqueued work (and, on NCCL, with the
    /// watchdog).
    abort: Arc<AbortState>,
    /// The order this rank's communication was enqueued in, which the CPU backend runs it in
    /// (NCCL pairs operations in issue order itself).
    order: Arc<IssueOrder>,
}

/// The one backend value a [`Communicator`] holds.
#[derive(Debug)]
pub(crate) enum CommBackend {
    /// An NCCL communicator.
    Nccl(nccl::Communicator),
    /// A CPU-backend rank, shared with the stream operations that use it (one at a time).
    Cpu(Arc<Mutex<Comm>>),
}

impl Communicator {
    /// The communicator of an NCCL rank.
    pub fn nccl(comm: nccl::Communicator) -> Communicator {
        let (rank, size) = (comm.rank(), comm.size());
        let abort = comm.abort_state().clone();
        Communicator {
            backend: CommBackend::Nccl(comm),
            rank,
            size,
            abort,
            order: Arc::default(),
        }
    }

    /// The communicator of one rank of a CPU-backend [`World`].
    pub fn cpu(comm: Comm) -> Communicator {
        let (rank, size) = (comm.rank(), comm.size());
        let abort = Arc::new(AbortState::new(comm.timeout()));
        Communicator {
            backend: CommBackend::Cpu(Arc::new(Mutex::new(comm))),
            rank,
            size,
            abort,
            order: Arc::default(),
        }
    }

    /// The communicators of a new CPU-backend world of `size` ranks, in rank order: give
    /// each to its own thread, with its own CPU context and pipeline. Their deadline is
    /// [`COMM_TIMEOUT_ENV`](crate::collective::COMM_TIMEOUT_ENV)'s, or
    /// [`DEFAULT_COMM_TIMEOUT`](crate::collective::DEFAULT_COMM_TIMEOUT).
    pub fn cpu_ranks(size: usize) -> Result<Vec<Communicator>> {
        let comms = World::new(size)
            .and_then(World::into_comms)
            .map_err(|e| Error::invalid("Communicator::cpu_ranks", e.to_string()))?;
        Ok(comms.into_iter().map(Communicator::cpu).collect())
    }

    /// [`Communicator::cpu_ranks`] whose communication waits at most `timeout` (not zero)
    /// for the other ranks.
    ///
    /// ```
    /// use std::time::Duration;
    /// use gpu_pipeline::Communicator;
    /// let ranks = Communicator::cpu_ranks_with_timeout(2, Duration::from_secs(2)).unwrap();
    /// assert_eq!(ranks[1].timeout(), Duration::from_secs(2));
    /// assert!(Communicator::cpu_ranks_with_timeout(2, Duration::ZERO).is_err());
    /// ```
    pub fn cpu_ranks_with_timeout(size: usize, timeout: Duration) -> Result<Vec<Communicator>> {
        const CALL: &str = "Communicator::cpu_ranks_with_timeout";
        let comms = World::with_timeout(size, timeout)
            .and_then(World::into_comms)
            .map_err(|e| Error::invalid(CALL, e.to_string()))?;
        Ok(comms.into_iter().map(Communicator::cpu).collect())
    }

    /// This process's rank on `ctx`'s device, from the launcher's variables: an NCCL
    /// communicator ([`nccl::Communicator::from_env`]; a single rank when no launcher
    /// variable is set). The CPU backend simulates ranks as threads of one process instead:
    /// use [`Communicator::cpu_ranks`] there.
    pub fn from_env(ctx: &Context) -> Result<Communicator> {
        match ctx.backend() {
            Backend::Cuda => Ok(Communicator::nccl(nccl::Communicator::from_env(ctx)?)),
            Backend::Cpu => Err(Error::BackendMismatch {
                call: "Communicator::from_env",
                backend: "cpu",
                reason: "the CPU backend runs ranks as threads of one process; make them with \
                         `Communicator::cpu_ranks`"
                    .to_owned(),
            }),
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

    /// Which backend it communicates on.
    pub fn backend(&self) -> Backend {
        match self.backend {
            CommBackend::Nccl(_) => Backend::Cuda,
            CommBackend::Cpu(_) => Backend::Cpu,
        }
    }

    /// The NCCL communicator, on CUDA.
    pub fn as_nccl(&self) -> Option<&nccl::Communicator> {
        match &self.backend {
            CommBackend::Nccl(comm) => Some(comm),
            CommBackend::Cpu(_) => None,
        }
    }

    /// How long each communication may take before it is declared hung.
    pub fn timeout(&self) -> Duration {
        self.abort.deadline()
    }

    /// The failure that aborted this communicator, if one did (a missed deadline, a peer
    /// that left, a mismatch, an NCCL error). Once there is one, every later use is refused.
    pub fn failure(&self) -> Option<CommFailure> {
        self.abort.failure()
    }

    /// [`Error::Communication`] if the communicator was aborted, or NCCL reports an
    /// asynchronous error (`ncclCommGetAsyncError`, such as a peer that died: the
    /// communicator is then aborted); `Ok` otherwise. On the CPU backend a failure is also
    /// reported at the next synchronize of the stream that ran the operation.
    pub fn async_error(&self) -> Result<()> {
        if let Some(failure) = self.abort.failure() {
            return Err(failure.into());
        }
        match &self.backend {
            CommBackend::Nccl(comm) => comm.async_error(),
            CommBackend::Cpu(_) => Ok(()),
        }
    }

    /// The order this rank's communication was enqueued in, for the CPU backend's groups.
    pub(crate) fn issue_order(&self) -> &Arc<IssueOrder> {
        &self.order
    }

    /// The deadline and abort state, for the crate's enqueued work.
    pub(crate) fn abort_state(&self) -> &Arc<AbortState> {
        &self.abort
    }

    /// The backend value, for the crate's dispatch.
    pub(crate) fn kind(&self) -> &CommBackend {
        &self.backend
    }
}

//! What a failed communication reports ([`CommFailure`], carried by
//! [`Error::Communication`](crate::Error::Communication)), and the abort state a
//! communicator shares with its enqueued work and its watchdog ([`AbortState`]).
//!
//! A failure is final for its communicator: the first one aborts it (NCCL's `ncclCommAbort`;
//! on the CPU backend the rank leaves its world, so its peers fail at once), and every later
//! use is refused with [`CommCause::Aborted`] naming the first. The device context and its
//! buffers stay usable (an abort ends NCCL's kernels; the stream drains), but what the failed
//! operations received is undefined.

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Why a communication failed.
///
/// A rank waits on a peer that never issues the matching operation, and its deadline ends
/// the wait:
///
/// ```
/// use std::time::Duration;
/// use gpu_pipeline::collective::CommCause;
/// use gpu_pipeline::{Communicator, Context, DeviceBuffer, Stream, gpu_pipeline};
///
/// gpu_pipeline! {
///     /// Exchanges `out` and `inbox` with the other of two ranks.
///     pipeline Swap {
///         streams { link }
///         params { comm: &Communicator, peer: usize, out: &DeviceBuffer<f32>, inbox: &mut DeviceBuffer<f32> }
///         stage swap on link { send out to peer; recv inbox from peer; }
///     }
/// }
///
/// // Rank 0 runs the step; rank 1 never does.
/// let ranks = Communicator::cpu_ranks_with_timeout(2, Duration::from_millis(200))?;
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let (out, mut inbox) = (DeviceBuffer::<f32>::zeros(&stream, 4)?, DeviceBuffer::zeros(&stream, 4)?);
/// let params = SwapParams { comm: &ranks[0], peer: 1, out: &out, inbox: &mut inbox };
/// let err = Swap::new(&ctx)?.run(params).and_then(|run| run.wait()).unwrap_err();
/// let failure = err.comm_failure().expect("a communication error");
/// assert!(matches!(failure.cause, CommCause::Timeout { .. }), "{err}");
/// assert!(failure.is_timeout());
/// # drop(ranks);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommCause {
    /// It did not complete within the communicator's deadline: its peers never issued the
    /// matching operation (a send with no recv, a recv from the wrong rank, counts that
    /// differ under NCCL, a rank that stopped communicating).
    Timeout {
        /// How long it waited.
        waited: Duration,
        /// What it was still waiting for, where known.
        waiting_for: String,
    },
    /// A rank the operation needs left: its communicator was dropped (its thread or process
    /// returned) or aborted after its own failure.
    PeerGone {
        /// The rank that left.
        peer: usize,
    },
    /// The ranks disagree about the operation (lengths or element kinds; the CPU backend
    /// sees this at once, NCCL may hang on it and then time out).
    Mismatch {
        /// What differs, naming both sides.
        detail: String,
    },
    /// NCCL reported an asynchronous error (`ncclCommGetAsyncError`), e.g. a peer's
    /// connection broke.
    Nccl {
        /// The `ncclResult_t` code.
        code: i32,
        /// NCCL's text for it.
        message: String,
    },
    /// The communicator was aborted by an earlier failure; this operation was not issued.
    Aborted {
        /// The earlier failure, as it was reported.
        earlier: String,
    },
}

/// One rank's failed communication: which rank, pipeline, stage and operation, the peer
/// where there is one, the deadline, and why.
///
/// ```
/// use gpu_pipeline::collective::CommCause;
/// use gpu_pipeline::{Communicator, Context, DeviceBuffer, Stream, gpu_pipeline};
///
/// gpu_pipeline! {
///     /// Exchanges `out` and `inbox` with the other of two ranks.
///     pipeline Swap {
///         streams { link }
///         params { comm: &Communicator, peer: usize, out: &DeviceBuffer<f32>, inbox: &mut DeviceBuffer<f32> }
///         stage swap on link { send out to peer; recv inbox from peer; }
///     }
/// }
///
/// let mut ranks = Communicator::cpu_ranks(2)?;
/// drop(ranks.pop()); // rank 1 leaves before it exchanges
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let (out, mut inbox) = (DeviceBuffer::<f32>::zeros(&stream, 4)?, DeviceBuffer::zeros(&stream, 4)?);
/// let params = SwapParams { comm: &ranks[0], peer: 1, out: &out, inbox: &mut inbox };
/// let err = Swap::new(&ctx)?.run(params).and_then(|run| run.wait()).unwrap_err();
/// let failure = err.comm_failure().expect("a communication error");
/// assert_eq!(failure.cause, CommCause::PeerGone { peer: 1 });
/// assert_eq!((failure.rank, failure.peer), (0, Some(1)));
/// assert_eq!((failure.pipeline, failure.stage), (Some("Swap"), Some("swap")));
/// assert!(!failure.is_timeout());
/// assert!(err.to_string().contains("rank 1 left"), "{err}");
/// // The communicator is aborted: a second use is refused at once, naming the first failure.
/// assert!(ranks[0].failure().is_some());
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommFailure {
    /// The rank that reports it.
    pub rank: usize,
    /// The pipeline whose step issued it, when a `gpu_pipeline!` step did.
    pub pipeline: Option<&'static str>,
    /// The stage that issued it, when a `gpu_pipeline!` step did.
    pub stage: Option<&'static str>,
    /// The operation (`send field[2..4] to rank 1`, `all_reduce(sum) norm -> total`, ...);
    /// on NCCL the whole group of the stage, as NCCL cannot say which of its operations hung.
    pub operation: String,
    /// The peer of a send or receive (or the rank that left), where there is one.
    pub peer: Option<usize>,
    /// The communicator's deadline.
    pub deadline: Duration,
    /// Why it failed.
    pub cause: CommCause,
}

impl CommFailure {
    /// Whether the deadline passed (rather than an error being seen).
    pub fn is_timeout(&self) -> bool {
        matches!(self.cause, CommCause::Timeout { .. })
    }
}

impl fmt::Display for CommFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {}", self.rank)?;
        if let Some(pipeline) = self.pipeline {
            write!(f, ", pipeline `{pipeline}`")?;
        }
        if let Some(stage) = self.stage {
            write!(f, ", stage `{stage}`")?;
        }
        write!(f, ": {}", self.operation)?;
        match &self.cause {
            CommCause::Timeout {
                waited,
                waiting_for,
            } => {
                write!(
                    f,
                    " did not complete within the {:?} communication deadline (waited {:.1?}",
                    self.deadline, waited
                )?;
                if !waiting_for.is_empty() {
                    write!(f, "; {waiting_for}")?;
                }
                f.write_str(")")?;
            }
            CommCause::PeerGone { peer } => write!(
                f,
                " failed: rank {peer} left (its communicator was dropped or aborted)"
            )?,
            CommCause::Mismatch { detail } => {
                write!(f, " failed: the ranks disagree: {detail}")?;
            }
            CommCause::Nccl { code, message } => {
                write!(f, " failed: NCCL reported error {code}: {message}")?;
            }
            CommCause::Aborted { earlier } => {
                return write!(
                    f,
                    " was refused: the communicator was aborted by an earlier failure \
                     ({earlier}); make a new communicator"
                );
            }
        }
        f.write_str(
            "; the communicator is aborted: make a new one (the device context and its \
             buffers remain usable; what the failed operations received is undefined)",
        )
    }
}

/// The pipeline and stage a group of communication belongs to, when a `gpu_pipeline!` step
/// enqueues it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Names {
    /// The pipeline.
    pub(crate) pipeline: Option<&'static str>,
    /// The stage.
    pub(crate) stage: Option<&'static str>,
}

/// A communicator's abort state, shared by the communicator, the work it enqueued (a CPU
/// stage's operation, a captured graph) and its watchdog: the first failure, once there is
/// one, and the deadline.
#[derive(Debug)]
pub(crate) struct AbortState {
    deadline: Duration,
    failure: Mutex<Option<CommFailure>>,
}

impl AbortState {
    /// A healthy communicator with `deadline`.
    pub(crate) fn new(deadline: Duration) -> AbortState {
        AbortState {
            deadline,
            failure: Mutex::new(None),
        }
    }

    /// The deadline of every operation.
    pub(crate) fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The first failure, if the communicator was aborted.
    pub(crate) fn failure(&self) -> Option<CommFailure> {
        // A poisoned lock holds an `Option` that was assigned whole.
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records `failure` unless one was recorded already; returns whether it was the first
    /// (the caller then aborts the communicator).
    pub(crate) fn record(&self, failure: CommFailure) -> bool {
        let mut slot = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_some() {
            return false;
        }
        *slot = Some(failure);
        true
    }

    /// Names the first failure after the stage whose call it was, when the layer that saw it
    /// (an NCCL call) could not: fills in the pipeline, stage, operation and peer of a
    /// failure recorded without a pipeline or stage. Returns the failure as it now is.
    pub(crate) fn name_first(
        &self,
        names: Names,
        operation: &str,
        peer: Option<usize>,
    ) -> Option<CommFailure> {
        let mut slot = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        let first = slot.as_mut()?;
        if first.pipeline.is_none() && first.stage.is_none() {
            first.pipeline = names.pipeline;
            first.stage = names.stage;
            first.operation = operation.to_owned();
            first.peer = first.peer.or(peer);
        }
        Some(first.clone())
    }

    /// The refusal of a new operation after an abort, naming it like the first failure.
    pub(crate) fn refusal(
        &self,
        rank: usize,
        pipeline: Option<&'static str>,
        stage: Option<&'static str>,
        operation: String,
    ) -> Option<CommFailure> {
        self.failure().map(|first| CommFailure {
            rank,
            pipeline,
            stage,
            operation,
            peer: None,
            deadline: self.deadline,
            cause: CommCause::Aborted {
                earlier: first.to_string(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout() -> CommFailure {
        CommFailure {
            rank: 1,
            pipeline: Some("Ring"),
            stage: Some("exchange"),
            operation: "send field[2..4] to rank 0".to_owned(),
            peer: Some(0),
            deadline: Duration::from_secs(2),
            cause: CommCause::Timeout {
                waited: Duration::from_millis(2001),
                waiting_for: "rank 0 has not posted the matching recv".to_owned(),
            },
        }
    }

    #[test]
    fn a_timeout_names_rank_pipeline_stage_operation_peer_and_deadline() {
        let text = timeout().to_string();
        for part in [
            "rank 1",
            "pipeline `Ring`",
            "stage `exchange`",
            ": send field[2..4] to rank 0 did not",
            "within the 2s communication deadline",
            "the communicator is aborted: make a new one",
        ] {
            assert!(text.contains(part), "{part:?} missing from {text}");
        }
        assert!(timeout().is_timeout());
    }

    #[test]
    fn an_unnamed_first_failure_takes_the_stage_that_made_the_call() {
        let state = AbortState::new(Duration::from_secs(2));
        let names = Names {
            pipeline: Some("Exchange"),
            stage: Some("swap"),
        };
        assert!(state.name_first(names, "send", Some(0)).is_none());
        let mut unnamed = timeout();
        (unnamed.pipeline, unnamed.stage, unnamed.peer) = (None, None, None);
        unnamed.operation = "ncclGroupEnd".to_owned();
        state.record(unnamed);
        let named = state
            .name_first(
                names,
                "send (4 f32) to rank 0; recv (4 f32) from rank 1",
                Some(0),
            )
            .unwrap();
        assert_eq!(
            (named.pipeline, named.stage),
            (Some("Exchange"), Some("swap"))
        );
        assert_eq!(named.peer, Some(0));
        assert_eq!(state.failure().unwrap(), named);
        // A failure named already keeps its names.
        let other = Names {
            pipeline: Some("Total"),
            stage: Some("reduce"),
        };
        assert_eq!(state.name_first(other, "all_reduce", None).unwrap(), named);
    }

    #[test]
    fn the_first_failure_wins_and_later_uses_are_refused_naming_it() {
        let state = AbortState::new(Duration::from_secs(2));
        assert!(state.refusal(1, None, None, "x".to_owned()).is_none());
        assert!(state.record(timeout()));
        let mut second = timeout();
        second.cause = CommCause::PeerGone { peer: 0 };
        assert!(!state.record(second));
        assert!(state.failure().unwrap().is_timeout());
        let refusal = state
            .refusal(
                1,
                Some("Ring"),
                Some("reduce"),
                "all_reduce(sum)".to_owned(),
            )
            .unwrap();
        let text = refusal.to_string();
        assert!(
            text.contains("stage `reduce`")
                && text.contains("aborted by an earlier failure")
                && text.contains("stage `exchange`"),
            "{text}"
        );
    }
}

//! Mismatched communication, for the communication-deadline tests: pipelines whose ranks
//! disagree (a send with no recv, counts that differ, a recv from the wrong rank) and a rank
//! function that runs one, eagerly or replayed from a captured graph, then a matched
//! all-reduce, and returns how it ended. The same code runs on simulated CPU ranks
//! (`tests/tests/comm_timeout.rs`) and on two GPUs (`tests/tests/gpu_comm_timeout.rs`).

use std::time::{Duration, Instant};

use gpu_pipeline::collective::{CommCause, CommFailure};
use gpu_pipeline::{Backend, Communicator, Context, DeviceBuffer, Error, Stream, gpu_pipeline};

/// Elements of [`Mismatch::SendWithoutRecv`]'s send on a GPU: 16M `f32`, 64 MB.
///
/// NCCL buffers small sends: a send completes once its data fits in the peer's receive
/// buffers (`NCCL_BUFFSIZE`, 4 MiB a channel by default), matched or not, and the step after
/// it then completes too. Only a send far larger than that blocks until the peer receives.
/// The CPU backend's ranks hand every send over in a rendezvous, so there a send of 8
/// elements with no recv blocks already.
pub const GPU_UNBUFFERED_SEND: usize = 16 << 20;

/// The length of [`Mismatch::SendWithoutRecv`]'s send on `ctx`'s backend.
pub fn unmatched_send_len(ctx: &Context) -> usize {
    match ctx.backend() {
        Backend::Cuda => GPU_UNBUFFERED_SEND,
        _ => 8,
    }
}

gpu_pipeline! {
    /// Sends `n` elements of `out` to `to` and receives `m` elements into `inbox` from `from`.
    pub pipeline Exchange {
        streams { link }
        params {
            comm: &Communicator,
            to: usize,
            from: usize,
            n: usize,
            m: usize,
            out: &DeviceBuffer<f32>,
            inbox: &mut DeviceBuffer<f32>,
        }
        stage swap on link {
            send out[0..n] to to;
            recv inbox[0..m] from from;
        }
    }
}

gpu_pipeline! {
    /// Sends `out` to `to` `times` times, with no receive. A group with a send and no recv
    /// that every rank runs is a compile error; one in a loop over a param is not (the count
    /// may differ from rank to rank, as in a pipeline of ranks), so this mistake reaches run
    /// time.
    pub pipeline Push {
        streams { link }
        params {
            comm: &Communicator,
            to: usize,
            times: usize,
            out: &DeviceBuffer<f32>,
        }
        for time in 0..times {
            stage push on link {
                send out to to;
            }
        }
    }
}

gpu_pipeline! {
    /// Receives `inbox` from `from` `times` times, with no send (in a loop, as [`Push`]).
    pub pipeline Pull {
        streams { link }
        params {
            comm: &Communicator,
            from: usize,
            times: usize,
            inbox: &mut DeviceBuffer<f32>,
        }
        for time in 0..times {
            stage pull on link {
                recv inbox from from;
            }
        }
    }
}

gpu_pipeline! {
    /// Sums `x` over every rank, in place.
    pub pipeline Total {
        streams { main }
        params {
            comm: &Communicator,
            x: &mut DeviceBuffer<f32>,
        }
        stage reduce on main {
            all_reduce(sum) x;
        }
    }
}

/// How the ranks disagree (two ranks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// Both ranks send to each other ([`Push`], [`unmatched_send_len`] elements) and neither
    /// receives.
    SendWithoutRecv,
    /// Both ranks receive from each other ([`Pull`]) and neither sends: on NCCL the hang that
    /// an unmatched send does not give (NCCL 2.28 completed a 64 MB send with no recv between
    /// two H200s over NVLink).
    RecvWithoutSend,
    /// Rank 0 exchanges 4 elements, rank 1 exchanges 8 ([`Exchange`]).
    CountsDiffer,
    /// Rank 1 receives from itself instead of rank 0 ([`Exchange`]). NCCL refuses that at
    /// once (`ncclInvalidUsage`: a recv from self with no send) on rank 1; rank 0's recv
    /// then waits for a rank 1 that never sends, until its deadline or rank 1's abort.
    WrongPeer,
    /// Nothing: a matched exchange.
    None,
}

impl Mismatch {
    /// The pipeline and stage where the mismatch is.
    pub fn site(self) -> (&'static str, &'static str) {
        match self {
            Mismatch::SendWithoutRecv => ("Push", "push"),
            Mismatch::RecvWithoutSend => ("Pull", "pull"),
            _ => ("Exchange", "swap"),
        }
    }
}

/// Eagerly, or replayed from a captured graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `run_steps(.., 1)` and a wait.
    Eager,
    /// `capture`, one launch and a synchronize.
    Replay,
}

/// One rank (of two) runs `mismatch`'s step by `mode`, then a matched [`Total`] step (so a
/// rank whose half of the mismatch completed still meets its peer's failure), and waits.
/// Returns how that ended and how long it took.
pub fn mismatched_rank(
    ctx: &Context,
    comm: &Communicator,
    mismatch: Mismatch,
    mode: Mode,
) -> (Result<(), Error>, Duration) {
    let stream = Stream::non_blocking(ctx).unwrap();
    let (rank, other) = (comm.rank(), 1 - comm.rank());
    let out = DeviceBuffer::from_slice(&stream, &[rank as f32 + 1.0; 8]).unwrap();
    let pushed = match mismatch {
        Mismatch::SendWithoutRecv => DeviceBuffer::<f32>::zeros(&stream, unmatched_send_len(ctx)),
        _ => DeviceBuffer::<f32>::zeros(&stream, 8),
    }
    .unwrap();
    let mut inbox = DeviceBuffer::<f32>::zeros(&stream, 8).unwrap();
    let mut x = DeviceBuffer::from_slice(&stream, &[rank as f32 + 1.0]).unwrap();
    stream.synchronize().unwrap();
    let mut push = Push::new(ctx).unwrap();
    let mut pull = Pull::new(ctx).unwrap();
    let mut exchange = Exchange::new(ctx).unwrap();
    let mut total = Total::new(ctx).unwrap();
    let (n, from) = match (mismatch, rank) {
        (Mismatch::CountsDiffer, 1) => (8, other),
        (Mismatch::WrongPeer, 1) => (4, rank),
        _ => (4, other),
    };
    let start = Instant::now();
    let mut body = || -> Result<(), Error> {
        if mismatch == Mismatch::RecvWithoutSend {
            let params = PullParams {
                comm,
                from: other,
                times: 1,
                inbox: &mut inbox,
            };
            match mode {
                Mode::Eager => pull.run_steps(params, 1)?.wait()?,
                Mode::Replay => {
                    let mut graph = pull.capture(params)?;
                    graph.launch()?;
                    graph.synchronize()?;
                }
            }
        } else if mismatch == Mismatch::SendWithoutRecv {
            let params = PushParams {
                comm,
                to: other,
                times: 1,
                out: &pushed,
            };
            match mode {
                Mode::Eager => push.run_steps(params, 1)?.wait()?,
                Mode::Replay => {
                    let mut graph = push.capture(params)?;
                    graph.launch()?;
                    graph.synchronize()?;
                }
            }
        } else {
            let params = ExchangeParams {
                comm,
                to: other,
                from,
                n,
                m: n,
                out: &out,
                inbox: &mut inbox,
            };
            match mode {
                Mode::Eager => exchange.run_steps(params, 1)?.wait()?,
                Mode::Replay => {
                    let mut graph = exchange.capture(params)?;
                    graph.launch()?;
                    graph.synchronize()?;
                }
            }
        }
        total
            .run_steps(TotalParams { comm, x: &mut x }, 1)?
            .wait()?;
        Ok(())
    };
    let ended = body();
    (ended, start.elapsed())
}

/// Checks that `error` (what `rank` ended with) reports a failed communication naming a
/// pipeline and stage, an operation, and `deadline`; that the communicator kept it as its
/// failure; and that a second use is refused at once naming it. Returns the error's text.
pub fn check_comm_error(comm: &Communicator, error: &Error, deadline: Duration) -> String {
    let rank = comm.rank();
    let text = error.report().to_string();
    let failure = comm
        .failure()
        .unwrap_or_else(|| panic!("rank {rank}: the communicator kept no failure: {text}"));
    let kept = failure.to_string();
    // Typed on both backends, after any wait: the communicator's own failure, or the
    // refusal of a later operation naming it.
    let typed = error
        .comm_failure()
        .unwrap_or_else(|| panic!("rank {rank}: not a typed communication error: {text}"));
    assert!(
        *typed == failure || matches!(typed.cause, CommCause::Aborted { .. }),
        "rank {rank}: the error is not the communicator's failure\n{text}\n{kept}"
    );
    assert!(
        failure.pipeline.is_some() && failure.stage.is_some(),
        "{kept}"
    );
    assert!(
        ["send", "recv", "all_reduce"]
            .iter()
            .any(|op| failure.operation.contains(op)),
        "{kept}"
    );
    assert_eq!(failure.deadline, deadline, "{kept}");
    assert!(
        kept.contains("the communicator is aborted: make a new one"),
        "{kept}"
    );
    assert!(
        matches!(comm.async_error(), Err(Error::Communication(_))),
        "rank {rank}"
    );
    text
}

/// The failure `error` carries (after [`check_comm_error`]).
pub fn failure_of(error: &Error) -> &CommFailure {
    error.comm_failure().expect("a typed communication error")
}

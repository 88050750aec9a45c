//! The communication watchdog, in the shape of PyTorch's `ProcessGroupNCCL` watchdog: one
//! thread per process watches every NCCL communication this process enqueued (an event
//! recorded after it on its stream; for a graph replay, after the replay) against its
//! communicator's deadline, and polls `ncclCommGetAsyncError`. On a missed deadline or an
//! asynchronous error it records the failure ([`CommFailure`], naming pipeline, stage,
//! operation and peer) and aborts the communicator (`ncclCommAbort`), which makes NCCL's
//! kernels return, so the stream drains and a host wait on it returns.
//!
//! A host wait then reports the failure: [`failure_after_wait`] is asked by
//! `Stream::synchronize` and `DeviceBuffer::to_vec` for the communicators whose work it
//! waited for, [`failure_after_event`] by `Event::synchronize` for those whose work came
//! before the event's record ([`note_record`]).

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use super::comm::CommHandle;
use crate::collective::{CommCause, CommFailure, Names};
use crate::cuda::Keep;
use crate::error::{Error, Result};
use crate::event::{Event, EventBackend, EventFlags};
use crate::stream::Stream;

/// How often the watchdog looks at pending work.
const POLL: Duration = Duration::from_millis(50);

/// What a watched communication was, for its failure's report.
#[derive(Clone, Debug)]
pub(crate) struct What {
    /// The pipeline and stage.
    pub(crate) names: Names,
    /// The operations of the group.
    pub(crate) operation: String,
    /// The one peer of its sends and receives, if there is one.
    pub(crate) peer: Option<usize>,
}

/// A stage's communicator and description, kept alive by a graph captured with its group:
/// each launch of the graph is watched as this group.
pub(crate) struct Captured {
    pub(crate) handle: Arc<CommHandle>,
    pub(crate) what: What,
}

/// One communication in flight.
struct Pending {
    handle: Weak<CommHandle>,
    done: Event,
    started: Instant,
    what: What,
}

#[derive(Default)]
struct Watchdog {
    pending: Mutex<Vec<Pending>>,
    woken: Condvar,
    /// The communicators with work enqueued on each stream (by raw handle) since its last
    /// wait.
    streams: Mutex<HashMap<usize, Vec<Weak<CommHandle>>>>,
    /// The communicators with work before each event's latest record (by raw handle), for
    /// `Event::synchronize`. Replaced at each record; an entry of a dropped event stays
    /// until its handle is recorded again (a few pointers; reporting a communicator's
    /// failure is never wrong).
    events: Mutex<HashMap<usize, Vec<Weak<CommHandle>>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update under these locks is a push, a retain or an insert: never half done.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

static WATCHDOG: OnceLock<std::result::Result<Arc<Watchdog>, String>> = OnceLock::new();

/// The process's watchdog, started on first use.
fn watchdog() -> Result<&'static Arc<Watchdog>> {
    WATCHDOG
        .get_or_init(|| {
            let dog = Arc::new(Watchdog::default());
            let run = dog.clone();
            std::thread::Builder::new()
                .name("gpu-pipeline-comm-watchdog".to_owned())
                .spawn(move || run.run())
                .map(|_| dog)
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| {
            Error::invalid(
                "communication watchdog",
                format!("the operating system refused its thread: {e}"),
            )
        })
}

/// Watches the work just enqueued on `stream` with `handle`'s communicator: an event is
/// recorded after it, and the deadline counts from now.
pub(crate) fn watch(handle: &Arc<CommHandle>, stream: &Stream, what: What) -> Result<()> {
    let dog = watchdog()?;
    let done = Event::with_flags(handle.context(), EventFlags::ORDERING)?;
    // Recorded on the CUDA level: the watchdog's own events are not noted for waits.
    match done.kind() {
        EventBackend::Cuda(event) => stream.cuda_only("watch")?.record(event)?,
        EventBackend::Cpu(_) => return Err(Error::cuda_only("watch")),
    }
    if let Some(raw) = stream_key(stream) {
        let mut streams = lock(&dog.streams);
        let list = streams.entry(raw).or_default();
        if !list
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(handle)))
        {
            list.push(Arc::downgrade(handle));
        }
    }
    lock(&dog.pending).push(Pending {
        handle: Arc::downgrade(handle),
        done,
        started: Instant::now(),
        what,
    });
    dog.woken.notify_all();
    Ok(())
}

/// Watches one launch of a graph on `stream`: every communicator group the graph captured
/// (its keep-alive list holds them) gets the launch's completion as its own.
pub(crate) fn watch_launch(keep: &[Keep], stream: &Stream) -> Result<()> {
    for kept in keep {
        if let Keep::Object(object) = kept
            && let Some(captured) = object.downcast_ref::<Captured>()
        {
            watch(&captured.handle, stream, captured.what.clone())?;
        }
    }
    Ok(())
}

/// The failure of a communicator whose work was enqueued on the stream `raw` since its last
/// wait, once that wait has returned (the watchdog aborted it, or it failed earlier).
pub(crate) fn failure_after_wait(raw: usize) -> Option<CommFailure> {
    let dog = WATCHDOG.get()?.as_ref().ok()?;
    let handles = lock(&dog.streams).remove(&raw)?;
    handles
        .iter()
        .filter_map(Weak::upgrade)
        .find_map(|h| h.abort_state().failure())
}

/// Notes, as the event `event` is recorded on the stream `stream` (raw handles), the
/// communicators with work on the stream so far: a wait on the event waits for that work.
pub(crate) fn note_record(stream: usize, event: usize) {
    let Some(Ok(dog)) = WATCHDOG.get().map(Result::as_ref) else {
        return;
    };
    let handles = lock(&dog.streams).get(&stream).cloned();
    let mut events = lock(&dog.events);
    match handles {
        Some(handles) => {
            events.insert(event, handles);
        }
        None => {
            events.remove(&event);
        }
    }
}

/// The failure of a communicator whose work came before the latest record of the event
/// `raw`, once a wait on it has returned.
pub(crate) fn failure_after_event(raw: usize) -> Option<CommFailure> {
    let dog = WATCHDOG.get()?.as_ref().ok()?;
    let handles = lock(&dog.events).get(&raw).cloned()?;
    handles
        .iter()
        .filter_map(Weak::upgrade)
        .find_map(|h| h.abort_state().failure())
}

fn stream_key(stream: &Stream) -> Option<usize> {
    stream.cuda_only("watch").ok().map(|s| s.raw() as usize)
}

impl Watchdog {
    fn run(&self) {
        loop {
            let mut pending = lock(&self.pending);
            while pending.is_empty() {
                pending = self
                    .woken
                    .wait(pending)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            let now = Instant::now();
            let mut failed: Vec<(Arc<CommHandle>, CommFailure)> = Vec::new();
            pending.retain(|p| {
                let Some(handle) = p.handle.upgrade() else {
                    return false;
                };
                if handle.is_aborted() {
                    return false;
                }
                // A driver error here is a fault of the stream, reported by its own wait.
                if p.done.query().unwrap_or(true) {
                    return false;
                }
                let deadline = handle.abort_state().deadline();
                let cause = match handle.poll_async_error() {
                    Some((code, message)) => Some(CommCause::Nccl { code, message }),
                    None if now.duration_since(p.started) >= deadline => Some(CommCause::Timeout {
                        waited: now.duration_since(p.started),
                        waiting_for: "its peers never completed the matching operations".to_owned(),
                    }),
                    None => None,
                };
                match cause {
                    Some(cause) => {
                        let failure = CommFailure {
                            rank: handle.rank(),
                            pipeline: p.what.names.pipeline,
                            stage: p.what.names.stage,
                            operation: p.what.operation.clone(),
                            peer: p.what.peer,
                            deadline,
                            cause,
                        };
                        failed.push((handle, failure));
                        false
                    }
                    None => true,
                }
            });
            drop(pending);
            for (handle, failure) in failed {
                tracing::error!(failure = %failure, "aborting an NCCL communicator");
                // Counted as running before the failure is visible: a thread that sees it
                // (and the process exit after it) must find the abort not yet finished.
                let _aborting = super::abort::ABORTS.begin();
                handle.abort_state().record(failure);
                handle.abort_now();
            }
            // Aborts that waited for a capture the public layer did not end through us.
            super::abort::abort_deferred();
            std::thread::sleep(POLL);
        }
    }
}

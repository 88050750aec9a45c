//! Aborting a failed communicator: never while a capture is open, never twice, and never
//! left running when the process exits.

use std::sync::{Condvar, Mutex, MutexGuard, Once, PoisonError, Weak};
use std::time::Duration;

use super::comm::CommHandle;

/// What to do with a communicator that has failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AbortPlan {
    /// It was aborted already.
    Nothing,
    /// Abort it now.
    Now,
    /// A capture is open: `ncclCommAbort` synchronizes NCCL's internal streams, which the
    /// driver refuses while a stream captures (NCCL 2.28: "operation not permitted when
    /// stream is capturing", and the communicator is then leaked half torn down). Abort it
    /// once the last capture has ended ([`abort_deferred`]).
    AfterCaptures,
}

/// The rule for aborting a failed communicator: never while a capture of ours is open
/// (`open` captures); never twice.
pub(crate) fn abort_plan(alive: bool, open: usize) -> AbortPlan {
    match (alive, open) {
        (false, _) => AbortPlan::Nothing,
        (true, 0) => AbortPlan::Now,
        (true, _) => AbortPlan::AfterCaptures,
    }
}

/// Failed communicators waiting for the open captures to end.
static DEFERRED: Mutex<Vec<Weak<CommHandle>>> = Mutex::new(Vec::new());

pub(super) fn defer_abort(handle: Weak<CommHandle>) {
    let mut deferred = DEFERRED.lock().unwrap_or_else(PoisonError::into_inner);
    if !deferred.iter().any(|w| w.ptr_eq(&handle)) {
        deferred.push(handle);
    }
}

/// Aborts the failed communicators whose abort waited for a capture to end (each is
/// deferred again while one is still open). Called when a capture ends and by the
/// watchdog on every poll.
pub(crate) fn abort_deferred() {
    let waiting = std::mem::take(&mut *DEFERRED.lock().unwrap_or_else(PoisonError::into_inner));
    for handle in waiting.iter().filter_map(Weak::upgrade) {
        handle.abort_now();
    }
}

/// The aborts running now, process-wide: `ncclCommAbort` takes a while after it has told
/// the kernels to stop (NCCL 2.28 joins its proxy threads, which poll every 500 ms, and
/// waits for every graph that captured the communicator to be destroyed), and the host wait
/// that the abort released returns long before. A process that exits in between tears the
/// CUDA runtime (statically linked in libnccl) and NCCL's globals down under the aborting
/// thread: the SIGSEGV at exit after a timeout on both ranks. Exit waits for them
/// ([`wait_for_aborts_at_exit`]).
pub(crate) struct InFlight {
    running: Mutex<usize>,
    idle: Condvar,
}

/// One abort in progress, from before its failure is recorded until `ncclCommAbort` returns.
#[must_use = "the abort counts as running only while the guard lives"]
pub(crate) struct Aborting<'a>(&'a InFlight);

impl InFlight {
    pub(crate) const fn new() -> InFlight {
        InFlight {
            running: Mutex::new(0),
            idle: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, usize> {
        // A count changed by one under the lock is never half updated.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts an abort as running until the guard drops.
    pub(crate) fn begin(&self) -> Aborting<'_> {
        *self.lock() += 1;
        Aborting(self)
    }

    /// How many aborts run now.
    pub(crate) fn running(&self) -> usize {
        *self.lock()
    }

    /// Waits until no abort runs, at most `limit`; whether none runs.
    pub(crate) fn wait_idle(&self, limit: Duration) -> bool {
        let running = self.lock();
        let (running, _) = self
            .idle
            .wait_timeout_while(running, limit, |n| *n > 0)
            .unwrap_or_else(PoisonError::into_inner);
        *running == 0
    }
}

impl Drop for Aborting<'_> {
    fn drop(&mut self) {
        let mut running = self.0.lock();
        *running = running.saturating_sub(1);
        if *running == 0 {
            self.0.idle.notify_all();
        }
    }
}

/// Every `ncclCommAbort` of this process.
pub(crate) static ABORTS: InFlight = InFlight::new();

/// How long exit waits for aborts still running: NCCL's teardown takes a second or so; one
/// that waits for a graph the program never destroys is given up on.
const EXIT_WAIT: Duration = Duration::from_secs(30);

extern "C" fn wait_at_exit() {
    if !ABORTS.wait_idle(EXIT_WAIT) {
        use std::io::Write;
        // No panic may leave an exit handler: a failed write is ignored.
        let _ = writeln!(
            std::io::stderr(),
            "gpu-pipeline: {} NCCL communicator abort(s) still running after {EXIT_WAIT:?} at \
             exit (a graph that captured the communicator is still alive?); exiting anyway",
            ABORTS.running()
        );
    }
}

/// Makes the process's exit wait for the aborts still running ([`InFlight`]); registered
/// once, after the first communicator is created.
pub(super) fn wait_for_aborts_at_exit() {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: `wait_at_exit` is a plain `extern "C" fn()` that never unwinds (it waits on
        // a condvar and ignores a failed write) and touches only a static. A failed
        // registration (out of memory) only loses the wait.
        let code = unsafe { nix::libc::atexit(wait_at_exit) };
        if code != 0 {
            tracing::warn!("could not make exit wait for NCCL aborts (atexit failed)");
        }
    });
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn a_failed_communicator_is_aborted_once_and_never_while_a_capture_is_open() {
        assert_eq!(abort_plan(true, 0), AbortPlan::Now);
        assert_eq!(abort_plan(true, 1), AbortPlan::AfterCaptures);
        assert_eq!(abort_plan(true, 3), AbortPlan::AfterCaptures);
        assert_eq!(abort_plan(false, 0), AbortPlan::Nothing);
        assert_eq!(abort_plan(false, 2), AbortPlan::Nothing);
    }

    #[test]
    fn exit_waits_for_every_running_abort_and_no_longer_than_its_limit() {
        let aborts = InFlight::new();
        assert!(aborts.wait_idle(Duration::ZERO), "nothing runs at first");
        let first = aborts.begin();
        let second = aborts.begin();
        assert_eq!(aborts.running(), 2);
        let start = Instant::now();
        assert!(
            !aborts.wait_idle(Duration::from_millis(20)),
            "two still run"
        );
        assert!(start.elapsed() >= Duration::from_millis(20));
        drop(first);
        assert!(!aborts.wait_idle(Duration::ZERO), "one still runs");
        std::thread::scope(|s| {
            s.spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                drop(second);
            });
            // Woken when the last one ends, well before the limit.
            let start = Instant::now();
            assert!(aborts.wait_idle(Duration::from_secs(10)));
            assert!(start.elapsed() < Duration::from_secs(5));
        });
        assert_eq!(aborts.running(), 0);
    }
}

//! What every stream, event and allocation of a CPU-backend context shares: the race
//! detector (which also names buffers), and the helpers the engine's locks use.

use std::borrow::Cow;
use std::cell::Cell;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::race::Detector;
use crate::vocab::access::{BufferId, Touch, merge_accesses};
use crate::vocab::fault::CpuFault;

/// Locks `mutex`, ignoring poisoning: user code never runs under these locks, so a poisoned
/// lock only means another thread panicked between our own consistent updates.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `cond`, ignoring poisoning as [`lock`] does.
pub(super) fn wait<'a, T>(cond: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cond.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

thread_local! {
    /// Set on stream worker threads: blocking calls there could wait on themselves.
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
    /// The graph launch whose replay this worker is running, if any (see `LaunchHook`).
    static CURRENT_LAUNCH: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The graph launch whose replay the current thread is running, if any: what a node's
/// launch hook queued for that launch is what its run takes.
pub(super) fn current_launch() -> Option<u64> {
    CURRENT_LAUNCH.with(Cell::get)
}

/// Runs `f` as part of the replay of launch `launch`.
pub(super) fn in_launch<R>(launch: u64, f: impl FnOnce() -> R) -> R {
    let outer = CURRENT_LAUNCH.with(|c| c.replace(Some(launch)));
    let result = f();
    CURRENT_LAUNCH.with(|c| c.set(outer));
    result
}

/// Whether the current thread is a stream worker (running some stream's operations).
pub(crate) fn on_worker_thread() -> bool {
    ON_WORKER.with(Cell::get)
}

/// Marks the current thread as a stream worker, for its whole life.
pub(super) fn become_worker() {
    ON_WORKER.with(|flag| flag.set(true));
}

/// The state every stream, event and allocation of a context shares.
#[derive(Debug)]
pub(crate) struct ContextShared {
    pub(super) checked: bool,
    detector: Mutex<Detector>,
}

impl ContextShared {
    pub(super) fn new(checked: bool) -> Arc<Self> {
        Arc::new(ContextShared {
            checked,
            detector: Mutex::new(Detector::default()),
        })
    }

    /// The race detector (also holds buffer names in unchecked mode).
    pub(super) fn detector(&self) -> MutexGuard<'_, Detector> {
        lock(&self.detector)
    }

    /// A new buffer id, named `name` in race reports.
    pub(super) fn register_buffer(&self, name: impl Into<Cow<'static, str>>) -> BufferId {
        let id = BufferId::fresh();
        let name: Arc<str> = Arc::from(name.into().as_ref());
        self.detector().register_buffer(id, name);
        id
    }

    /// Renames a registered buffer in later race reports.
    pub(super) fn name_buffer(&self, buffer: BufferId, name: impl Into<Cow<'static, str>>) {
        let name: Arc<str> = Arc::from(name.into().as_ref());
        self.detector().register_buffer(buffer, name);
    }

    /// Forgets a freed buffer (its name and access history).
    pub(super) fn release_buffer(&self, buffer: BufferId) {
        self.detector().release_buffer(buffer);
    }

    /// Reports that the host itself reads or writes buffers now. In checked mode an access
    /// that races with enqueued work returns the first race (all are kept in the context's
    /// list); the host is ordered after work only by synchronizes, queries that returned
    /// complete, and waits for the work touching a buffer.
    pub(super) fn host_access(
        &self,
        label: impl Into<Cow<'static, str>>,
        accesses: &[Touch],
    ) -> Result<(), CpuFault> {
        if !self.checked {
            return Ok(());
        }
        let label: Arc<str> = Arc::from(label.into().as_ref());
        let accesses = merge_accesses(accesses.to_vec());
        let races = self.detector().host_access(label, &accesses);
        match races.into_iter().next() {
            Some(race) => Err(CpuFault::Race(Box::new(race))),
            None => Ok(()),
        }
    }
}

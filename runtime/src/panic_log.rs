//! Panics caught in host functions and host nodes, kept until a synchronize reports them.
//!
//! Shared by both backends: a host function's panic must never unwind into the driver's (or
//! a CPU-backend worker's) thread, and must never be lost.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Messages of caught panics, drained by the next synchronize that reports them. Cloning
/// shares the log.
#[derive(Clone, Debug, Default)]
pub(crate) struct PanicLog(Arc<Messages>);

/// The messages, and whether there is any: a synchronize that finds none (nearly all of
/// them) reads one flag instead of locking.
#[derive(Debug, Default)]
struct Messages {
    list: Mutex<Vec<String>>,
    /// Set under the lock with each message, cleared under it when they are drained.
    any: AtomicBool,
}

impl PanicLog {
    /// Runs `f`, recording a panic instead of letting it unwind.
    pub(crate) fn run(&self, f: impl FnOnce()) {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
            self.record(payload);
        }
    }

    /// Records a caught panic's message. The payload is dropped under `catch_unwind` too: a
    /// payload whose own `Drop` panics would otherwise unwind out of the thread that caught
    /// it (a driver callback thread, a CPU-backend worker) and kill it.
    pub(crate) fn record(&self, payload: Box<dyn Any + Send>) {
        let message = panic_message(payload.as_ref());
        if let Err(nested) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            // The nested payload may panic on drop too: it is leaked, never dropped.
            std::mem::forget(nested);
        }
        self.push(message);
    }

    /// Records a message.
    pub(crate) fn push(&self, message: String) {
        let mut list = self.0.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.push(message);
        self.0.any.store(true, Ordering::Release);
    }

    /// Takes every recorded message, joined with `; `, or `None` when there is none.
    pub(crate) fn take(&self) -> Option<String> {
        // A message pushed before the work this synchronize waited for finished (a host
        // function's panic) set the flag before that work completed: visible here.
        if !self.0.any.load(Ordering::Acquire) {
            return None;
        }
        let mut log = self.0.list.lock().unwrap_or_else(PoisonError::into_inner);
        self.0.any.store(false, Ordering::Relaxed);
        if log.is_empty() {
            return None;
        }
        let message = log.drain(..).collect::<Vec<_>>().join("; ");
        Some(message)
    }

    /// The log's identity, for de-duplication.
    pub(crate) fn key(&self) -> usize {
        Arc::as_ptr(&self.0) as *const () as usize
    }

    /// Whether two handles share one log.
    pub(crate) fn same_as(&self, other: &PanicLog) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The message of a panic payload: the `&str` or `String` it carries.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&str>() {
        (*message).to_owned()
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_kept_and_drained() {
        let log = PanicLog::default();
        log.record(Box::new("static str"));
        log.record(Box::new(String::from("owned")));
        log.record(Box::new(42_u8));
        assert_eq!(
            log.take().as_deref(),
            Some("static str; owned; a panic with a non-string payload")
        );
        assert_eq!(log.take(), None);
    }

    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("the payload's drop panics too");
        }
    }

    #[test]
    fn a_payload_that_panics_in_drop_does_not_escape() {
        let log = PanicLog::default();
        // The closure panics with a payload whose Drop panics again.
        log.run(|| std::panic::panic_any(PanicsOnDrop));
        assert_eq!(
            log.take().as_deref(),
            Some("a panic with a non-string payload")
        );
    }
}

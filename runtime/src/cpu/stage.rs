//! The pipeline stage the host thread is enqueuing, so that an operation the CPU backend
//! records then names its stage when it fails (a kernel's CPU implementation that panics, say):
//! on the CPU backend the failing operation is known exactly, so the report need not guess.

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    /// The stage whose statements this thread enqueues now, if any.
    static CURRENT: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// While it lives, operations this thread creates belong to one stage; dropping it restores
/// the stage before (scopes nest). Not `Send`: it restores the thread it was made on.
#[derive(Debug)]
#[must_use = "the stage is current only while the scope lives"]
pub(crate) struct StageScope {
    previous: Option<&'static str>,
    _not_send: PhantomData<*const ()>,
}

impl StageScope {
    /// Makes `stage` this thread's current stage until the scope is dropped.
    pub(crate) fn enter(stage: &'static str) -> StageScope {
        let previous = CURRENT.with(|current| current.replace(Some(stage)));
        StageScope {
            previous,
            _not_send: PhantomData,
        }
    }
}

impl Drop for StageScope {
    fn drop(&mut self) {
        CURRENT.with(|current| current.set(self.previous));
    }
}

/// The stage this thread enqueues for, if any.
pub(crate) fn current() -> Option<&'static str> {
    CURRENT.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_and_restore_the_stage_before() {
        assert_eq!(current(), None);
        let outer = StageScope::enter("step");
        assert_eq!(current(), Some("step"));
        {
            let _inner = StageScope::enter("save");
            assert_eq!(current(), Some("save"));
        }
        assert_eq!(current(), Some("step"));
        drop(outer);
        assert_eq!(current(), None);
    }
}

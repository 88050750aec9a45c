//! Which kernel launches are a pipeline's own. A captured step's setters update the kernel
//! node of each `launch` statement in place, so they must find exactly those nodes, in
//! statement order. Kernels that code run by a `call` statement launches (a library such as
//! cuBLAS, or the function itself through the [`TypedStream`](crate::TypedStream) it is
//! given) are that code's: the driver adds their nodes too, and they must not shift the
//! statements' ones. A library's launches never pass through this crate; the called code's
//! launches through `TypedStream::launch` run inside [`as_called`], which the backends see
//! with [`in_call`].

use std::cell::Cell;

thread_local! {
    /// How many `as_called` scopes this thread is inside.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Whether the calling thread is launching on behalf of code a `call` statement ran.
pub(crate) fn in_call() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

/// Runs `f` with its launches counted as the called code's (see the module docs).
pub(crate) fn as_called<R>(f: impl FnOnce() -> R) -> R {
    /// Leaves the scope also when `f` unwinds.
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        }
    }
    DEPTH.with(|d| d.set(d.get().saturating_add(1)));
    let _leave = Leave;
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_and_end_on_unwind() {
        assert!(!in_call());
        as_called(|| {
            assert!(in_call());
            as_called(|| assert!(in_call()));
            assert!(in_call());
        });
        assert!(!in_call());
        let unwound = std::panic::catch_unwind(|| as_called(|| panic!("inside")));
        assert!(unwound.is_err());
        assert!(!in_call());
        // Other threads are not inside this thread's scope.
        as_called(|| {
            assert!(!std::thread::spawn(in_call).join().unwrap());
        });
    }
}

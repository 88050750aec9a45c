//! A crash diagnostic for multi-process GPU tests, where no debugger is at hand: with
//! `GPU_PIPELINE_SEGV_BACKTRACE=1`, [`install_from_env`] makes a SIGSEGV print the faulting
//! thread's stack to stderr (glibc's `backtrace_symbols_fd`, which writes straight to the
//! file descriptor without allocating) before the process dies of the signal as before.

use std::ffi::{c_int, c_void};

use nix::libc;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

/// The variable that turns the handler on.
pub const SEGV_BACKTRACE_ENV: &str = "GPU_PIPELINE_SEGV_BACKTRACE";

/// The most frames printed.
const FRAMES: usize = 64;

extern "C" fn print_backtrace(_signal: c_int) {
    const HEAD: &[u8] =
        b"\n=== SIGSEGV: backtrace of the faulting thread (GPU_PIPELINE_SEGV_BACKTRACE) ===\n";
    let mut frames = [std::ptr::null_mut::<c_void>(); FRAMES];
    // SAFETY: `write` and `backtrace_symbols_fd` are async-signal-safe; `backtrace` is too once
    // its unwinder is loaded, which `install_from_env` did by calling it before installing
    // this handler. Every buffer is this frame's own array, of the length given.
    unsafe {
        libc::write(libc::STDERR_FILENO, HEAD.as_ptr().cast(), HEAD.len());
        let n = libc::backtrace(frames.as_mut_ptr(), FRAMES as c_int);
        libc::backtrace_symbols_fd(frames.as_ptr(), n, libc::STDERR_FILENO);
    }
    // The handler was installed with SA_RESETHAND: returning re-runs the faulting instruction
    // under the default action, so the process still dies of SIGSEGV (status and core as
    // without the handler).
}

/// Installs the SIGSEGV handler when `GPU_PIPELINE_SEGV_BACKTRACE=1`; returns whether it did.
pub fn install_from_env() -> bool {
    if std::env::var(SEGV_BACKTRACE_ENV).as_deref() != Ok("1") {
        return false;
    }
    let mut warm = [std::ptr::null_mut::<c_void>(); 1];
    // SAFETY: a valid one-entry buffer; called once outside any handler so glibc loads its
    // unwinder (which allocates) now rather than inside the signal handler.
    unsafe { libc::backtrace(warm.as_mut_ptr(), 1) };
    let action = SigAction::new(
        SigHandler::Handler(print_backtrace),
        // Runs on the alternate stack Rust sets up for the main thread's overflow detection
        // when there is one; one shot, then the default action.
        SaFlags::SA_RESETHAND | SaFlags::SA_ONSTACK,
        SigSet::empty(),
    );
    // SAFETY: the handler calls only async-signal-safe functions (above) and never unwinds.
    // It replaces Rust's own SIGSEGV handler, which only reports stack overflows of threads
    // with a guard page: this diagnostic is opt-in for that reason.
    match unsafe { sigaction(Signal::SIGSEGV, &action) } {
        Ok(_) => true,
        Err(e) => {
            eprintln!("{SEGV_BACKTRACE_ENV}: could not install the SIGSEGV handler: {e}");
            false
        }
    }
}

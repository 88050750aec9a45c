//! What a rank's process does between `fork` and `exec`: ask the kernel to kill it when the
//! launcher dies, and make sure the launcher had not already died.
//!
//! The only `unsafe` of the launcher lives here (`CommandExt::pre_exec` is `unsafe` because
//! the hook runs in a forked child, where only async-signal-safe calls are allowed).

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// Makes the child that `command` starts receive `signal` when the thread that spawns it
/// exits (`PR_SET_PDEATHSIG`), and refuse to start when its parent is no longer `launcher`
/// (the launcher died between `fork` and the `prctl`, so the signal would never come).
///
/// The kernel sends the signal when the spawning *thread* ends, so spawn from a thread that
/// outlives the child (the launcher spawns from the thread that waits for its ranks).
pub(crate) fn die_with_parent(command: &mut Command, signal: Signal, launcher: Pid) {
    let hook = move || -> io::Result<()> {
        nix::sys::prctl::set_pdeathsig(signal)?;
        if nix::unistd::getppid() != launcher {
            // Reparented already: the launcher is gone and nobody would kill this rank.
            return Err(io::Error::from_raw_os_error(nix::libc::ESRCH));
        }
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before `exec`, where only async-signal-safe
    // operations are allowed. It makes two system calls, `prctl(PR_SET_PDEATHSIG)` and
    // `getppid`, both async-signal-safe (thin wrappers in nix: no allocation, no lock), and
    // builds an `io::Error` from a raw errno (`From<Errno>` and `from_raw_os_error` store an
    // integer, no allocation). It touches no memory shared with other threads: `signal` and
    // `launcher` are copied into the closure.
    unsafe {
        command.pre_exec(hook);
    }
}

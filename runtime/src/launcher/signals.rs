//! The launcher's signals: SIGINT, SIGTERM and SIGHUP it receives go to every rank's process
//! group; and the kills it sends itself reach a rank's whole group (what the rank started
//! too).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The signals the launcher forwards.
pub const FORWARDED: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// While alive, the forwarded signals no longer end this process: they are noted, for the
/// launcher to pass on ([`Catcher::take`]).
pub(super) struct Catcher {
    last: Arc<AtomicUsize>,
    ids: Vec<signal_hook::SigId>,
}

impl Catcher {
    /// Starts catching [`FORWARDED`]; a failure to install a handler is logged and that
    /// signal keeps its default action.
    pub(super) fn install() -> Catcher {
        let last = Arc::new(AtomicUsize::new(0));
        let ids = FORWARDED
            .iter()
            .filter_map(|&signal| {
                signal_hook::flag::register_usize(signal as i32, last.clone(), signal as usize)
                    .map_err(
                        |e| tracing::warn!(%e, ?signal, "the launcher cannot forward a signal"),
                    )
                    .ok()
            })
            .collect();
        Catcher { last, ids }
    }

    /// The signal received since the last call, if any.
    pub(super) fn take(&self) -> Option<Signal> {
        match self.last.swap(0, Ordering::SeqCst) {
            0 => None,
            n => Signal::try_from(n as i32).ok(),
        }
    }
}

impl Drop for Catcher {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// Sends `signal` to the process group `leader` leads (a rank and what it started); a group
/// already gone is no error.
pub(super) fn signal_group(leader: u32, signal: Signal) {
    let Ok(pid) = i32::try_from(leader) else {
        return;
    };
    if let Err(e) = killpg(Pid::from_raw(pid), signal)
        && e != nix::errno::Errno::ESRCH
    {
        tracing::warn!(%e, leader, ?signal, "the launcher could not signal a rank's group");
    }
}

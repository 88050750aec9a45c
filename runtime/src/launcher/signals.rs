//! The launcher's signals: SIGINT, SIGTERM and SIGHUP it receives go to every rank's process
//! group; and the kills it sends itself reach a rank's whole group (what the rank started
//! too).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The signals the launcher forwards.
pub const FORWARDED: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// The process-wide handlers, installed once: signal-hook cannot give a signal its default
/// action back after an unregistration, so the handlers stay and run the default action
/// themselves while no launch is catching ([`Catcher`]).
struct Handlers {
    /// The last forwarded signal received, 0 once taken.
    last: Arc<AtomicUsize>,
    /// Set while no launch catches: a signal then does what it does by default.
    idle: Arc<AtomicBool>,
    /// How many launches catch now.
    catching: Mutex<usize>,
}

fn handlers() -> &'static Handlers {
    static HANDLERS: OnceLock<Handlers> = OnceLock::new();
    HANDLERS.get_or_init(|| {
        let handlers = Handlers {
            last: Arc::new(AtomicUsize::new(0)),
            idle: Arc::new(AtomicBool::new(true)),
            catching: Mutex::new(0),
        };
        for signal in FORWARDED {
            let number = signal as i32;
            let installed =
                signal_hook::flag::register_conditional_default(number, handlers.idle.clone())
                    .and_then(|_| {
                        signal_hook::flag::register_usize(
                            number,
                            handlers.last.clone(),
                            number as usize,
                        )
                    });
            if let Err(e) = installed {
                tracing::warn!(%e, ?signal, "the launcher cannot forward a signal");
            }
        }
        handlers
    })
}

/// While alive, the forwarded signals no longer end this process: they are noted, for the
/// launcher to pass on ([`Catcher::take`]). With two launches catching at once, each signal
/// goes to whichever asks first.
pub(super) struct Catcher {
    handlers: &'static Handlers,
}

impl Catcher {
    /// Starts catching [`FORWARDED`]; a failure to install a handler is logged and that
    /// signal keeps its default action.
    pub(super) fn install() -> Catcher {
        let handlers = handlers();
        let mut catching = handlers
            .catching
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *catching += 1;
        handlers.idle.store(false, Ordering::SeqCst);
        Catcher { handlers }
    }

    /// The signal received since the last call, if any.
    pub(super) fn take(&self) -> Option<Signal> {
        match self.handlers.last.swap(0, Ordering::SeqCst) {
            0 => None,
            n => Signal::try_from(n as i32).ok(),
        }
    }
}

impl Drop for Catcher {
    fn drop(&mut self) {
        let mut catching = self
            .handlers
            .catching
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *catching = catching.saturating_sub(1);
        if *catching == 0 {
            // From now on these signals end the process again, as by default.
            self.handlers.idle.store(true, Ordering::SeqCst);
            self.handlers.last.store(0, Ordering::SeqCst);
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

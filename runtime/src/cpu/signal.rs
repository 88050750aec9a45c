//! Signals between simulated ranks: the CPU backend's stand-in for a flag word one rank writes
//! into another's memory (`cuStreamWriteValue32` over a mapping) and the owner waits on
//! (`cuStreamWaitValue32`), as one-sided windows use them.
//!
//! Execution: a post counts one up when it runs; the k-th wait to run blocks its stream's
//! worker until k posts have run (at most the signal's deadline, then the wait fails and the
//! next synchronize reports it). A captured post or wait replays the same way.
//!
//! Race detector: like an event, a post enqueued on a checked context carries its stream's
//! clock, and the k-th wait enqueued joins the k-th post's clock (the initial posts carry an
//! empty one). The clocks are taken at enqueue time as every other ordering decision is, so a
//! wait's enqueue blocks until the matching post was enqueued on the other rank's thread (at
//! most the deadline: a post that never comes is [`CpuFault::SignalNeverPosted`]). Graph
//! replays do the same for every post and wait node they hold: the waits' clocks are joined
//! before the replay's accesses are checked and the posts take the clock after them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::clock::VectorClock;
use super::op::{Keep, Op};
use super::shared::lock;
use super::stream::Stream;
use crate::vocab::fault::CpuFault;

/// One signal word: posted by one rank, waited on by another.
#[derive(Debug)]
pub(crate) struct Signal {
    name: Arc<str>,
    deadline: Duration,
    /// Posts that have run (the initial ones included).
    posted: AtomicU64,
    /// Waits that have started running.
    started: AtomicU64,
    /// The clocks of posts enqueued on checked contexts and not yet matched by a wait.
    clocks: Mutex<VecDeque<VectorClock>>,
    arrived: Condvar,
}

/// What a post or wait node carries, so graph replays find their signals.
#[derive(Debug)]
pub(super) struct SignalNode {
    pub(super) signal: Arc<Signal>,
    pub(super) post: bool,
}

impl Signal {
    /// A signal named `name` in reports, already posted `initial` times, whose waits give up
    /// after `deadline`.
    pub(crate) fn new(name: impl Into<Arc<str>>, initial: u64, deadline: Duration) -> Arc<Signal> {
        Arc::new(Signal {
            name: name.into(),
            deadline,
            posted: AtomicU64::new(initial),
            started: AtomicU64::new(0),
            clocks: Mutex::new((0..initial).map(|_| VectorClock::default()).collect()),
            arrived: Condvar::new(),
        })
    }

    /// A post's clock, enqueued now.
    pub(super) fn push_clock(&self, clock: VectorClock) {
        lock(&self.clocks).push_back(clock);
        self.arrived.notify_all();
    }

    /// Gives a taken clock back (its wait was captured after all).
    pub(super) fn unshift_clock(&self, clock: VectorClock) {
        lock(&self.clocks).push_front(clock);
        self.arrived.notify_all();
    }

    /// The clock of the post the next wait matches, once it was enqueued.
    pub(super) fn take_clock(&self) -> Result<VectorClock, CpuFault> {
        let start = Instant::now();
        let mut clocks = lock(&self.clocks);
        loop {
            if let Some(clock) = clocks.pop_front() {
                return Ok(clock);
            }
            let left = self.deadline.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(CpuFault::SignalNeverPosted {
                    signal: self.name.clone(),
                    deadline: self.deadline,
                });
            }
            clocks = self
                .arrived
                .wait_timeout(clocks, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    fn run_post(&self) {
        self.posted.fetch_add(1, Ordering::AcqRel);
    }

    fn run_wait(&self) -> Result<(), String> {
        let k = self.started.fetch_add(1, Ordering::AcqRel) + 1;
        let start = Instant::now();
        let mut spins = 0_u32;
        while self.posted.load(Ordering::Acquire) < k {
            if start.elapsed() >= self.deadline {
                return Err(format!(
                    "signal `{}` was not posted within {:?}: the rank that writes it stopped \
                     or never signals",
                    self.name, self.deadline
                ));
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        Ok(())
    }
}

/// The signals an operation's keep list carries: `(signal, is_post)`.
pub(super) fn signals_of(keep: &[Keep]) -> Vec<(Arc<Signal>, bool)> {
    keep.iter()
        .filter_map(|k| match k {
            Keep::Object(o) => o
                .downcast_ref::<SignalNode>()
                .map(|n| (n.signal.clone(), n.post)),
            Keep::Memory(_) => None,
        })
        .collect()
}

/// Whether `keep` carries a signal (without collecting them).
pub(super) fn has_signals(keep: &[Keep]) -> bool {
    keep.iter()
        .any(|k| matches!(k, Keep::Object(o) if o.downcast_ref::<SignalNode>().is_some()))
}

impl Stream {
    /// Posts `signal` once the work enqueued here so far has run.
    pub(crate) fn post_signal(&self, signal: &Arc<Signal>, label: String) -> Result<(), CpuFault> {
        let run = signal.clone();
        let node = SignalNode {
            signal: signal.clone(),
            post: true,
        };
        let op = Op::replayable(label, move || {
            run.run_post();
            Ok(())
        })
        .keep(Keep::Object(Arc::new(node)));
        self.enqueue(op)
    }

    /// Makes later work here wait until `signal` was posted once more than it was waited on.
    pub(crate) fn wait_signal(&self, signal: &Arc<Signal>, label: String) -> Result<(), CpuFault> {
        let run = signal.clone();
        let node = SignalNode {
            signal: signal.clone(),
            post: false,
        };
        let op = Op::replayable(label, move || run.run_wait()).keep(Keep::Object(Arc::new(node)));
        self.enqueue(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_match_posts_in_order_and_a_missing_post_is_an_error_at_the_deadline() {
        let signal = Signal::new("ready", 1, Duration::from_millis(50));
        // The initial post carries an empty clock.
        assert_eq!(signal.take_clock().unwrap(), VectorClock::default());
        let mut later = VectorClock::default();
        later.tick(3);
        signal.push_clock(later.clone());
        let mut first = VectorClock::default();
        first.tick(2);
        // A clock given back goes before the ones still queued.
        signal.unshift_clock(first.clone());
        assert_eq!(signal.take_clock().unwrap(), first);
        assert_eq!(signal.take_clock().unwrap(), later);
        let started = Instant::now();
        match signal.take_clock() {
            Err(CpuFault::SignalNeverPosted { signal, deadline }) => {
                assert_eq!(&*signal, "ready");
                assert_eq!(deadline, Duration::from_millis(50));
            }
            other => panic!("{other:?}"),
        }
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn the_kth_wait_runs_once_k_posts_ran() {
        let signal = Signal::new("free", 1, Duration::from_secs(5));
        signal.run_wait().unwrap(); // the initial post
        let waiter = {
            let signal = signal.clone();
            std::thread::spawn(move || signal.run_wait())
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "the second wait needs a second post");
        signal.run_post();
        waiter.join().unwrap().unwrap();
        let short = Signal::new("never", 0, Duration::from_millis(20));
        assert!(
            short
                .run_wait()
                .unwrap_err()
                .contains("`never` was not posted")
        );
    }
}

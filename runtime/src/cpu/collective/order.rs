//! The order a rank's communication groups run in on the CPU backend: the order they were
//! enqueued, whatever their streams, so that they pair across ranks as NCCL's do (NCCL
//! numbers a communicator's operations as they are issued). Without it, two groups enqueued
//! on two streams of one rank (two pipelines sharing a communicator) ran in whichever order
//! their streams reached them, and a delay on one rank paired its first group with another
//! rank's second.
//!
//! Each group enqueued outside a capture takes a [`Ticket`]; when its stream reaches it, it
//! waits until every group with an earlier ticket has run or was dropped, at most the
//! communicator's deadline. A group recorded into a graph takes one each time a launch of the
//! graph is enqueued ([`ReplayTurns`]), so replays pair in the order they were issued too.

use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The tickets of one rank's communicator.
#[derive(Debug, Default)]
pub(crate) struct IssueOrder {
    state: Mutex<OrderState>,
    turn: Condvar,
}

#[derive(Debug, Default)]
struct OrderState {
    /// Tickets handed out so far (the next ticket's number).
    issued: u64,
    /// The first ticket whose group has not finished: every earlier one has.
    next: u64,
    /// Finished tickets past `next`.
    done: BTreeSet<u64>,
}

impl IssueOrder {
    fn lock(&self) -> MutexGuard<'_, OrderState> {
        // The state is three counters, consistent after every change: a poisoned lock
        // carries no broken state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next ticket, for a group being enqueued now.
    pub(crate) fn ticket(self: &Arc<Self>) -> Ticket {
        let mut state = self.lock();
        let number = state.issued;
        state.issued += 1;
        Ticket {
            order: self.clone(),
            number,
        }
    }
}

/// A group's place in its rank's issue order. Dropping it, run or not, lets the next one go.
#[derive(Debug)]
pub(crate) struct Ticket {
    order: Arc<IssueOrder>,
    number: u64,
}

impl Ticket {
    /// Waits until every group that took an earlier ticket has finished; `false` when
    /// `deadline` passed first.
    pub(crate) fn wait_turn(&self, deadline: Duration) -> bool {
        let end = Instant::now() + deadline;
        let mut state = self.order.lock();
        while state.next < self.number {
            let now = Instant::now();
            if now >= end {
                return false;
            }
            state = self
                .order
                .turn
                .wait_timeout(state, end - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.order.lock();
        state.done.insert(self.number);
        loop {
            let next = state.next;
            if !state.done.remove(&next) {
                break;
            }
            state.next = next + 1;
        }
        drop(state);
        self.order.turn.notify_all();
    }
}

/// The tickets of a group recorded into a graph: each launch of the graph takes one when it
/// is enqueued (its `LaunchHook`, through the node's `cpu::OnLaunch`), and the group's run
/// in that launch's replay takes it back ([`next`](Self::next)). A run the replay skipped
/// (a failed child graph stops there) leaves its ticket, which goes when the replay ends,
/// so the rank's later groups do not wait for it.
#[derive(Debug)]
pub(crate) struct ReplayTurns {
    order: Arc<IssueOrder>,
    /// The tickets launches took and no run used.
    tickets: crate::cpu::PerLaunch<Ticket>,
}

impl ReplayTurns {
    pub(crate) fn new(order: Arc<IssueOrder>) -> Self {
        ReplayTurns {
            order,
            tickets: Default::default(),
        }
    }

    /// The ticket the replay running now took for this group; `None` outside a replay, or
    /// for a second run of the group in one replay (a child graph holding it twice), which
    /// then runs where its stream reaches it.
    pub(crate) fn next(&self) -> Option<Ticket> {
        self.tickets.take()
    }
}

impl crate::cpu::LaunchHook for ReplayTurns {
    fn after(&self, _clock: Option<&crate::cpu::VectorClock>, launch: u64) {
        self.tickets.push(launch, self.order.ticket());
    }

    fn end(&self, launch: u64) {
        // Dropped outside the lock: dropping a ticket wakes the groups waiting for it.
        drop(self.tickets.leftover(launch));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A later ticket waits for the earlier ones, however they end; a ticket whose turn
    /// never comes gives up at its deadline.
    #[test]
    fn tickets_go_in_issue_order() {
        let order = Arc::new(IssueOrder::default());
        let (first, second, third) = (order.ticket(), order.ticket(), order.ticket());
        assert!(first.wait_turn(Duration::ZERO));
        assert!(
            !second.wait_turn(Duration::from_millis(10)),
            "the first has not finished"
        );
        // The second finishing out of turn does not let the third go before the first.
        drop(second);
        assert!(!third.wait_turn(Duration::from_millis(10)));
        let waiter = std::thread::spawn(move || third.wait_turn(Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(20));
        drop(first);
        assert!(
            waiter.join().unwrap(),
            "the third goes once the first is done"
        );
    }
}

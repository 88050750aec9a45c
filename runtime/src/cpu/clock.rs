//! Vector clocks: the happens-before relation the race detector computes at enqueue time.
//!
//! Every logical thread of execution is a *timeline*: the host is timeline 0 and each stream
//! gets the next index when it is created. A clock holds, per timeline, the latest tick of that
//! timeline known to have happened before the owner of the clock.

/// Index of a timeline in a vector clock.
pub(super) type Timeline = usize;

/// The host thread's timeline (every host thread of a context shares it).
pub(super) const HOST_TIMELINE: Timeline = 0;

/// One point of one timeline: the `tick`-th operation enqueued on `timeline`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Epoch {
    pub(super) timeline: Timeline,
    pub(super) tick: u64,
}

/// A vector clock; missing components are zero, so clocks grow lazily as streams appear.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct VectorClock {
    ticks: Vec<u64>,
}

impl VectorClock {
    /// The latest tick of `timeline` this clock has seen.
    pub(super) fn get(&self, timeline: Timeline) -> u64 {
        self.ticks.get(timeline).copied().unwrap_or(0)
    }

    /// Advances this clock's own component and returns the new epoch.
    pub(super) fn tick(&mut self, timeline: Timeline) -> Epoch {
        if self.ticks.len() <= timeline {
            self.ticks.resize(timeline + 1, 0);
        }
        self.ticks[timeline] += 1;
        Epoch {
            timeline,
            tick: self.ticks[timeline],
        }
    }

    /// Makes this clock have seen `timeline` up to `tick`.
    pub(super) fn raise(&mut self, timeline: Timeline, tick: u64) {
        if self.ticks.len() <= timeline {
            self.ticks.resize(timeline + 1, 0);
        }
        self.ticks[timeline] = self.ticks[timeline].max(tick);
    }

    /// Component-wise maximum: afterwards this clock has seen everything `other` has.
    pub(super) fn join(&mut self, other: &VectorClock) {
        if self.ticks.len() < other.ticks.len() {
            self.ticks.resize(other.ticks.len(), 0);
        }
        for (mine, theirs) in self.ticks.iter_mut().zip(&other.ticks) {
            *mine = (*mine).max(*theirs);
        }
    }
}

#[cfg(test)]
impl VectorClock {
    /// Whether the operation at `epoch` happened before the owner of this clock.
    fn has_seen(&self, epoch: Epoch) -> bool {
        epoch.tick <= self.get(epoch.timeline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_is_componentwise_max_and_grows() {
        let mut a = VectorClock::default();
        a.tick(1);
        let mut b = VectorClock::default();
        b.tick(3);
        b.tick(3);
        a.join(&b);
        assert_eq!((a.get(0), a.get(1), a.get(2), a.get(3)), (0, 1, 0, 2));
    }

    #[test]
    fn has_seen_follows_ticks() {
        let mut stream = VectorClock::default();
        let first = stream.tick(2);
        let second = stream.tick(2);
        let mut other = VectorClock::default();
        assert!(!other.has_seen(first));
        let mut snapshot = VectorClock::default();
        snapshot.join(&stream);
        other.join(&snapshot);
        assert!(other.has_seen(first) && other.has_seen(second));
        assert!(!other.has_seen(Epoch {
            timeline: 2,
            tick: 3
        }));
    }
}

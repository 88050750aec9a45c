//! The race detector: vector clocks per timeline and per-buffer access history.
//!
//! Clocks are computed when work is *enqueued*, not when it runs, so a report depends only on
//! the program (stream order, event records and waits, synchronizes), never on how the worker
//! threads happened to be scheduled.
//!
//! Each buffer keeps, per timeline, the accesses that the host has not yet synchronized past.
//! A new access is checked against every remembered access it has not seen (those form a
//! suffix of each timeline's history, since a timeline's ticks grow), so every racy *pair* is
//! reported, not only the first race per access as FastTrack would. History is pruned when a
//! synchronize makes the host see it: every later access joins the host clock, so none of them
//! can race with what the host has seen.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::clock::{Epoch, HOST_TIMELINE, Timeline, VectorClock};
use crate::vocab::access::{Access, BufferId, Span, Touch};
use crate::vocab::fault::{Hazard, OpSite, RaceReport};

/// Accesses one timeline may remember per buffer between synchronizes before it forgets those
/// that newer ones of the same stream cover (see [`Lane::push`]): a loop that never
/// synchronizes stays bounded in memory, and every race is still caught, through the newer
/// access. Only a stream whose accesses to one buffer keep more than [`HISTORY_HARD_LIMIT`]
/// distinct ranges uncovered forgets the oldest half of them (keeping a write).
const HISTORY_LIMIT: usize = 4096;

/// Uncovered accesses one timeline may remember per buffer (see [`HISTORY_LIMIT`]).
const HISTORY_HARD_LIMIT: usize = 16 * HISTORY_LIMIT;

/// Race reports a context keeps; later ones are counted but dropped.
const REPORT_LIMIT: usize = 10_000;

/// The detector's whole state; the context guards it with one mutex.
#[derive(Debug)]
pub(super) struct Detector {
    host: VectorClock,
    host_name: Arc<str>,
    /// Indexed by timeline; entry 0 (the host) stays empty.
    streams: Vec<VectorClock>,
    shadows: HashMap<BufferId, Shadow>,
    names: HashMap<BufferId, Arc<str>>,
    races: Vec<RaceReport>,
    dropped_races: usize,
}

impl Default for Detector {
    fn default() -> Self {
        Detector {
            host: VectorClock::default(),
            host_name: Arc::from("host"),
            streams: vec![VectorClock::default()],
            shadows: HashMap::new(),
            names: HashMap::new(),
            races: Vec::new(),
            dropped_races: 0,
        }
    }
}

impl Detector {
    /// A timeline for a new stream.
    pub(super) fn add_stream(&mut self) -> Timeline {
        self.streams.push(VectorClock::default());
        self.streams.len() - 1
    }

    /// Remembers a buffer's name for reports.
    pub(super) fn register_buffer(&mut self, buffer: BufferId, name: Arc<str>) {
        self.names.insert(buffer, name);
    }

    /// Forgets a freed buffer's name and history.
    pub(super) fn release_buffer(&mut self, buffer: BufferId) {
        self.names.remove(&buffer);
        self.shadows.remove(&buffer);
    }

    /// Orders one enqueue on `timeline` after its previous work and after everything the host
    /// has seen, then checks and records the accesses of each listed operation with that one
    /// epoch (a graph replay lists all its nodes).
    pub(super) fn stream_op<'a>(
        &mut self,
        timeline: Timeline,
        stream: &Arc<str>,
        ops: impl IntoIterator<Item = (&'a Arc<str>, &'a [Touch])>,
    ) -> Vec<RaceReport> {
        let Some(clock) = self.streams.get_mut(timeline) else {
            return Vec::new();
        };
        clock.join(&self.host);
        let epoch = clock.tick(timeline);
        let clock = clock.clone();
        let mut found = Vec::new();
        for (label, accesses) in ops {
            let site = OpSite {
                op: label.clone(),
                stream: stream.clone(),
            };
            self.check_all(epoch, &clock, &site, accesses, &mut found);
        }
        found
    }

    /// Checks accesses the host itself makes (reads or writes of pinned memory).
    pub(super) fn host_access(&mut self, label: Arc<str>, accesses: &[Touch]) -> Vec<RaceReport> {
        let epoch = self.host.tick(HOST_TIMELINE);
        let clock = self.host.clone();
        let site = OpSite {
            op: label,
            stream: self.host_name.clone(),
        };
        let mut found = Vec::new();
        self.check_all(epoch, &clock, &site, accesses, &mut found);
        found
    }

    /// The clock an event recorded now on `timeline` carries.
    pub(super) fn record(&mut self, timeline: Timeline) -> VectorClock {
        match self.streams.get_mut(timeline) {
            Some(clock) => {
                clock.join(&self.host);
                clock.clone()
            }
            None => VectorClock::default(),
        }
    }

    /// A wait: later work on `timeline` happens after the event's clock.
    pub(super) fn wait(&mut self, timeline: Timeline, event: &VectorClock) {
        if let Some(clock) = self.streams.get_mut(timeline) {
            clock.join(event);
        }
    }

    /// Everything enqueued on `timeline` so far, for a synchronize to join into the host.
    pub(super) fn stream_clock(&self, timeline: Timeline) -> VectorClock {
        self.streams.get(timeline).cloned().unwrap_or_default()
    }

    /// The host observed completion of `clock` (a synchronize or a completed query).
    pub(super) fn host_join(&mut self, clock: &VectorClock) {
        self.host.join(clock);
        let host = &self.host;
        self.shadows.retain(|_, shadow| !shadow.forget_seen(host));
    }

    /// The host waited until no queued work touches `buffer` any more: it is now ordered
    /// after every access of the buffer it had not seen (their streams up to those accesses).
    pub(super) fn host_waited_for(&mut self, buffer: BufferId) {
        let Some(shadow) = self.shadows.get(&buffer) else {
            return;
        };
        let mut seen = VectorClock::default();
        for lane in &shadow.lanes {
            if let Some(last) = lane.history.back() {
                seen.raise(lane.timeline, last.tick);
            }
        }
        self.host_join(&seen);
    }

    /// Names and stores a race found outside the clocks (between nodes of one graph).
    pub(super) fn report(
        &mut self,
        buffer: BufferId,
        hazard: Hazard,
        earlier: OpSite,
        later: OpSite,
    ) -> RaceReport {
        let report = RaceReport {
            buffer,
            buffer_name: self.name_of(buffer),
            hazard,
            earlier,
            later,
        };
        self.keep(report.clone());
        report
    }

    /// Every race found so far, oldest first.
    pub(super) fn races(&self) -> &[RaceReport] {
        &self.races
    }

    /// How many reports were dropped past the limit.
    pub(super) fn dropped_races(&self) -> usize {
        self.dropped_races
    }

    fn check_all(
        &mut self,
        epoch: Epoch,
        clock: &VectorClock,
        site: &OpSite,
        accesses: &[Touch],
        found: &mut Vec<RaceReport>,
    ) {
        for &(buffer, access, span) in accesses {
            let mut hazards = Vec::new();
            self.shadows.entry(buffer).or_default().access(
                epoch,
                clock,
                access,
                span,
                site,
                |earlier, hazard| hazards.push((earlier.clone(), hazard)),
            );
            for (earlier, hazard) in hazards {
                found.push(self.report(buffer, hazard, earlier, site.clone()));
            }
        }
    }

    fn name_of(&self, buffer: BufferId) -> Arc<str> {
        self.names
            .get(&buffer)
            .cloned()
            .unwrap_or_else(|| Arc::from(format!("buffer #{}", buffer.get())))
    }

    fn keep(&mut self, report: RaceReport) {
        if self.races.len() < REPORT_LIMIT {
            self.races.push(report);
        } else {
            self.dropped_races += 1;
        }
    }
}

/// The remembered accesses of one buffer, grouped by timeline.
#[derive(Debug, Default)]
struct Shadow {
    lanes: Vec<Lane>,
}

#[derive(Debug)]
struct Lane {
    timeline: Timeline,
    /// Sorted by tick (a timeline's enqueues are serialized).
    history: VecDeque<Prior>,
    /// The length past which the history is trimmed next: twice what the last trim left,
    /// between [`HISTORY_LIMIT`] and [`HISTORY_HARD_LIMIT`], so trims (`O(n log n)` each)
    /// are rare and the history never holds more than the hard limit and one.
    trim_at: usize,
}

#[derive(Clone, Debug)]
struct Prior {
    tick: u64,
    access: Access,
    span: Span,
    site: OpSite,
}

impl Shadow {
    /// Calls `report` for every remembered access that conflicts with this one (touches a
    /// common byte, one of them writing) and that the accessor's clock has not seen, then
    /// remembers this access.
    fn access(
        &mut self,
        epoch: Epoch,
        clock: &VectorClock,
        access: Access,
        span: Span,
        site: &OpSite,
        mut report: impl FnMut(&OpSite, Hazard),
    ) {
        for lane in &self.lanes {
            let seen = clock.get(lane.timeline);
            let unseen = lane.history.partition_point(|prior| prior.tick <= seen);
            for prior in lane.history.range(unseen..) {
                if !prior.span.overlaps(span) {
                    continue;
                }
                if let Some(hazard) = Hazard::between(prior.access, access) {
                    report(&prior.site, hazard);
                }
            }
        }
        let prior = Prior {
            tick: epoch.tick,
            access,
            span,
            site: site.clone(),
        };
        match self.lanes.iter_mut().find(|l| l.timeline == epoch.timeline) {
            Some(lane) => lane.push(prior),
            None => self.lanes.push(Lane {
                timeline: epoch.timeline,
                history: VecDeque::from([prior]),
                trim_at: HISTORY_LIMIT,
            }),
        }
    }

    /// Drops what the host has seen; returns whether nothing is left.
    fn forget_seen(&mut self, host: &VectorClock) -> bool {
        for lane in &mut self.lanes {
            let seen = host.get(lane.timeline);
            let unseen = lane.history.partition_point(|prior| prior.tick <= seen);
            lane.history.drain(..unseen);
        }
        self.lanes.retain(|lane| !lane.history.is_empty());
        self.lanes.is_empty()
    }
}

/// A union of byte spans, as disjoint intervals sorted by start (merged when they overlap or
/// touch).
#[derive(Default)]
struct Cover(std::collections::BTreeMap<usize, usize>);

impl Cover {
    /// Whether every byte of `span` is in the union.
    fn contains(&self, span: Span) -> bool {
        span.start >= span.end
            || self
                .0
                .range(..=span.start)
                .next_back()
                .is_some_and(|(_, &end)| end >= span.end)
    }

    fn insert(&mut self, span: Span) {
        if span.start >= span.end {
            return;
        }
        let (mut start, mut end) = (span.start, span.end);
        // The interval that starts at or before `start` and reaches it, then every one that
        // starts inside the new interval: all merge into it.
        if let Some((&s, &e)) = self.0.range(..=start).next_back()
            && e >= start
        {
            start = s;
            end = end.max(e);
        }
        let inside: Vec<usize> = self.0.range(start..=end).map(|(&s, _)| s).collect();
        for s in inside {
            if let Some(e) = self.0.remove(&s) {
                end = end.max(e);
            }
        }
        self.0.insert(start, end);
    }
}

impl Lane {
    fn push(&mut self, prior: Prior) {
        self.history.push_back(prior);
        if self.history.len() <= self.trim_at {
            return;
        }
        self.forget_covered();
        if self.history.len() > HISTORY_HARD_LIMIT {
            self.forget_oldest_half();
        }
        self.trim_at = (2 * self.history.len()).clamp(HISTORY_LIMIT, HISTORY_HARD_LIMIT);
    }

    /// Forgets each access whose bytes newer ones of this stream cover: newer writes, or for
    /// a read, newer reads and writes. Whatever is unordered with the older access is
    /// unordered with the newer ones (same stream, later), touches a byte of one of them, and
    /// conflicts with it whenever it conflicted with the older, so no race goes unreported:
    /// it names the newer access. The union of the newer spans is kept as merged intervals,
    /// so a trim costs `O(n log n)`.
    fn forget_covered(&mut self) {
        let (mut writes, mut any) = (Cover::default(), Cover::default());
        let mut kept = VecDeque::with_capacity(self.history.len());
        while let Some(prior) = self.history.pop_back() {
            let write = prior.access.is_write();
            let covered = match write {
                true => writes.contains(prior.span),
                false => any.contains(prior.span),
            };
            if covered {
                continue;
            }
            if write {
                writes.insert(prior.span);
            }
            any.insert(prior.span);
            kept.push_front(prior);
        }
        self.history = kept;
    }

    /// The last resort past [`HISTORY_HARD_LIMIT`] uncovered accesses: forgets the oldest half,
    /// keeping one write so that a later unordered read still finds a write to race with.
    fn forget_oldest_half(&mut self) {
        let cut = self.history.len() / 2;
        let kept_has_write = self.history.range(cut..).any(|p| p.access.is_write());
        let saved = if kept_has_write {
            None
        } else {
            self.history
                .range(..cut)
                .rev()
                .find(|p| p.access.is_write())
                .cloned()
        };
        self.history.drain(..cut);
        if let Some(write) = saved {
            self.history.push_front(write);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(op: &str, stream: &str) -> OpSite {
        OpSite {
            op: Arc::from(op),
            stream: Arc::from(stream),
        }
    }

    #[test]
    fn lane_stays_bounded_and_keeps_a_write() {
        let mut lane = Lane {
            timeline: 1,
            history: VecDeque::new(),
            trim_at: HISTORY_LIMIT,
        };
        lane.push(Prior {
            tick: 1,
            access: Access::Write,
            span: Span::ALL,
            site: site("w", "s"),
        });
        for tick in 2..=(HISTORY_LIMIT as u64 + 1) {
            lane.push(Prior {
                tick,
                access: Access::Read,
                span: Span::ALL,
                site: site("r", "s"),
            });
        }
        assert!(lane.history.len() <= HISTORY_LIMIT / 2 + 2);
        assert!(lane.history.front().is_some_and(|p| p.access.is_write()));
        let ticks: Vec<u64> = lane.history.iter().map(|p| p.tick).collect();
        assert!(ticks.windows(2).all(|w| w[0] < w[1]));
    }

    /// The union of spans: merged when they overlap or touch, and covering a span only
    /// where one merged interval holds all of it.
    #[test]
    fn a_cover_merges_spans_and_covers_what_they_hold() {
        let mut cover = Cover::default();
        for (start, len) in [(0, 4), (8, 4), (4, 4), (20, 2), (18, 1)] {
            cover.insert(Span::bytes(start, len));
        }
        assert!(
            cover.contains(Span::bytes(0, 12)),
            "0..4, 4..8 and 8..12 touch"
        );
        assert!(cover.contains(Span::bytes(18, 1)));
        assert!(!cover.contains(Span::bytes(18, 4)), "19..20 is a gap");
        assert!(!cover.contains(Span::bytes(10, 4)));
        assert!(cover.contains(Span::bytes(30, 0)), "an empty span");
        cover.insert(Span::bytes(2, 25));
        assert!(cover.contains(Span::bytes(0, 27)));
        assert_eq!(cover.0.len(), 1);
    }

    /// Many accesses to one range do not make the stream forget its one write to another,
    /// which a later unordered access must still race with.
    #[test]
    fn a_lane_forgets_only_what_newer_accesses_cover() {
        let mut lane = Lane {
            timeline: 1,
            history: VecDeque::new(),
            trim_at: HISTORY_LIMIT,
        };
        let at = |tick, access, start| Prior {
            tick,
            access,
            span: Span::bytes(start, 4),
            site: site("op", "s"),
        };
        lane.push(at(1, Access::Write, 0));
        lane.push(at(2, Access::Read, 8));
        for tick in 3..(3 * HISTORY_LIMIT as u64) {
            let access = if tick % 2 == 0 {
                Access::Read
            } else {
                Access::Write
            };
            lane.push(at(tick, access, 4));
        }
        assert!(
            lane.history.len() <= HISTORY_LIMIT + 1,
            "{}",
            lane.history.len()
        );
        let kept = |start: usize, access: Access| {
            lane.history
                .iter()
                .any(|p| p.span == Span::bytes(start, 4) && p.access == access)
        };
        assert!(kept(0, Access::Write), "the write to bytes 0..4");
        assert!(kept(8, Access::Read), "the read of bytes 8..12");
        let ticks: Vec<u64> = lane.history.iter().map(|p| p.tick).collect();
        assert!(ticks.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn synchronize_prunes_history() {
        let mut detector = Detector::default();
        let t = detector.add_stream();
        let buffer = BufferId::fresh();
        let name: Arc<str> = Arc::from("s");
        let label: Arc<str> = Arc::from("w");
        let races = detector.stream_op(
            t,
            &name,
            [(&label, &[(buffer, Access::Write, Span::ALL)][..])],
        );
        assert!(races.is_empty());
        assert_eq!(detector.shadows.len(), 1);
        let clock = detector.stream_clock(t);
        detector.host_join(&clock);
        assert!(detector.shadows.is_empty());
    }
}

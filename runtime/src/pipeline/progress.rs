//! Which stage a failed step stopped at: each stage writes its step's tag and its position in
//! the step to a per-stream progress word after its work. The words live in mapped host
//! memory, so the host can read them after a fault that poisons every later driver call.
//!
//! An eager step takes a new tag (the host counts them), so its marks supersede the step
//! before's with no stream operation of its own: a fault is placed in the first step, among
//! those enqueued with the current plan, that some stage did not complete, and the report names
//! that stage (see [`Progress::first_incomplete`]). A graph cannot count its replays, so a
//! captured or built step begins by zeroing the words and marks with tag 0.
//!
//! Off by default: each mark is one more stream operation, which the GPU front end pays like
//! a launch (about 1 µs), so a step of one small kernel runs noticeably longer with tracking
//! on (docs/PERFORMANCE.md). A fault names the pipeline either way; turn tracking on
//! (`set_fault_tracking(true)`, or [`TRACK_FAULTS_ENV`] for every pipeline of a process)
//! to learn the stage.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::memory::FlagCell;
use crate::stream::{MemOp, Stream};

/// The environment variable that sets whether new pipelines track faults: `1`, `true` or
/// `on` turns tracking on, `0`, `false`, `off` or nothing leaves it off.
pub const TRACK_FAULTS_ENV: &str = "GPU_PIPELINE_TRACK_FAULTS";

/// Whether a new pipeline tracks faults, from [`TRACK_FAULTS_ENV`].
fn tracking_by_default() -> Result<bool> {
    let value = std::env::var(TRACK_FAULTS_ENV).ok();
    parse_tracking(value.as_deref()).ok_or_else(|| {
        Error::invalid(
            "Progress::new",
            format!(
                "{TRACK_FAULTS_ENV}={:?} is not a switch; set it to 1 or 0 (or true/false, on/off)",
                value.unwrap_or_default()
            ),
        )
    })
}

/// `Some(on)` for a recognised value of [`TRACK_FAULTS_ENV`] (unset or empty: off).
fn parse_tracking(value: Option<&str>) -> Option<bool> {
    match value.map(str::trim).map(str::to_ascii_lowercase).as_deref() {
        None | Some("" | "0" | "false" | "off" | "no") => Some(false),
        Some("1" | "true" | "on" | "yes") => Some(true),
        Some(_) => None,
    }
}

/// One stage as the step enqueues it: name, stream index, and its 1-based position.
pub type StageSite = (&'static str, usize, u32);

/// A progress word's value: a step's tag in the high half, a stage's 1-based position in the
/// low half, so words compare as (tag, position).
#[inline]
fn mark_value(tag: u32, position: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(position)
}

/// The progress words of one pipeline, one per stream.
///
/// In a pipeline over several devices only the streams of the origin's device are tracked
/// (the origin zeroes the words, and a word is memory of one device); a fault then names
/// the first of their stages that did not complete.
#[derive(Debug)]
pub struct Progress {
    cells: Vec<Option<FlagCell<u64>>>,
    enabled: AtomicBool,
    /// The tag of the last eager step begun (0: none yet; tag 0 is a graph's).
    tag: u32,
    /// The tags of the steps a report considers: every eager step from `first` to `last`
    /// was enqueued with the plan whose stages are `sites` (its address and length, as a
    /// key). Both 0 after a graph replay.
    first: u32,
    last: u32,
    sites: (usize, usize),
}

impl Progress {
    /// Words for `streams` streams; tracking as [`TRACK_FAULTS_ENV`] says (off when unset).
    pub fn new(ctx: &Context, streams: usize) -> Result<Progress> {
        Progress::on_devices(ctx, &vec![ctx; streams])
    }

    /// Words for streams on the devices `streams` gives, one per stream, of which those on
    /// `origin`'s device are tracked.
    pub fn on_devices(origin: &Context, streams: &[&Context]) -> Result<Progress> {
        let enabled = tracking_by_default()?;
        let cells = streams
            .iter()
            .map(|ctx| {
                ctx.shares_memory_with(origin)
                    .then(|| FlagCell::new(origin, 0))
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Progress {
            cells,
            enabled: AtomicBool::new(enabled),
            tag: 0,
            first: 0,
            last: 0,
            sites: (0, 0),
        })
    }

    /// Makes room for `streams` streams (a pipeline whose stream arrays grew).
    pub fn ensure(&mut self, ctx: &Context, streams: usize) -> Result<()> {
        while self.cells.len() < streams {
            self.cells.push(Some(FlagCell::new(ctx, 0)?));
        }
        Ok(())
    }

    /// Makes the words match streams on the devices `streams` gives, one per stream slot (a
    /// pipeline over several devices, whose stream arrays may grow or be laid out anew): as
    /// in [`Progress::on_devices`], only the slots on `origin`'s device are tracked.
    pub fn ensure_on(&mut self, origin: &Context, streams: &[&Context]) -> Result<()> {
        for (slot, ctx) in streams.iter().enumerate() {
            let tracked = ctx.shares_memory_with(origin);
            if self
                .cells
                .get(slot)
                .is_some_and(|cell| cell.is_some() == tracked)
            {
                continue;
            }
            let cell = tracked.then(|| FlagCell::new(origin, 0)).transpose()?;
            match self.cells.get_mut(slot) {
                Some(old) => *old = cell,
                None => self.cells.push(cell),
            }
        }
        Ok(())
    }

    /// Turns tracking on or off for steps enqueued (or captured) from now on.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Whether tracking is on.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Begins a step whose stages are `sites`, enqueued from `origin`, and returns the tag its
    /// marks carry ([`Progress::mark`]). Eager, it takes the next tag and enqueues nothing
    /// (once in 2^32 steps, when the tags wrap, it zeroes the words); recorded into a graph
    /// (the origin captures), it zeroes every word on the origin and marks with tag 0, as
    /// every replay then does. Tag 0 while tracking is off.
    pub fn begin_step(&mut self, origin: &Stream, sites: &[StageSite]) -> Result<u32> {
        if !self.is_enabled() {
            return Ok(0);
        }
        if origin.capturing_now()? {
            origin.batch_mem_op(&self.reset_ops())?;
            return Ok(0);
        }
        let tag = match self.tag.checked_add(1) {
            Some(tag) => tag,
            None => {
                // Wrapped: words with greater tags would pass for this step's marks.
                origin.batch_mem_op(&self.reset_ops())?;
                1
            }
        };
        let key = (sites.as_ptr() as usize, sites.len());
        if self.sites != key || self.last == 0 || tag == 1 {
            self.first = tag;
            self.sites = key;
        }
        self.tag = tag;
        self.last = tag;
        Ok(tag)
    }

    /// The tag of the step begun last: what the later steps of a run ahead mark with (only
    /// the first of them begins).
    pub fn current_tag(&self) -> u32 {
        self.last
    }

    /// A graph is replayed: its marks carry tag 0, and it zeroed the words first.
    pub fn replayed(&mut self) {
        self.first = 0;
        self.last = 0;
    }

    /// Marks the stage at `position` of the step tagged `tag` done on its stream.
    pub fn mark(
        &self,
        stream: &Stream,
        stream_index: usize,
        tag: u32,
        position: u32,
    ) -> Result<()> {
        match self.cells.get(stream_index).and_then(Option::as_ref) {
            Some(cell) if self.is_enabled() => {
                stream.write_value_64(cell, mark_value(tag, position))
            }
            _ => Ok(()),
        }
    }

    /// The operations that zero every word (what a recorded step begins with), for a node
    /// of a graph built from the stage graph; none while tracking is off.
    pub fn reset_ops(&self) -> Vec<MemOp<'_>> {
        if !self.is_enabled() {
            return Vec::new();
        }
        self.cells
            .iter()
            .flatten()
            .map(|cell| MemOp::WriteValue64 { cell, value: 0 })
            .collect()
    }

    /// The operation that marks the stage at `position` done on stream `stream_index` in a
    /// graph (tag 0), for a node of a built graph; `None` while tracking is off.
    pub fn mark_op(&self, stream_index: usize, position: u32) -> Option<MemOp<'_>> {
        let cell = self
            .cells
            .get(stream_index)
            .and_then(Option::as_ref)
            .filter(|_| self.is_enabled())?;
        Some(MemOp::WriteValue64 {
            cell,
            value: mark_value(0, position),
        })
    }

    /// The first stage, in enqueue order, that did not complete in the first step that some
    /// stage did not complete (among the steps enqueued with the plan of `stages`); `None`
    /// when every one completed, or while tracking is off.
    ///
    /// A stream's word only grows (its stages mark in enqueue order, and tags grow), so the
    /// stage at `position` completed in the step tagged `t` exactly when its word is at least
    /// `(t, position)`; the faulting step is the least tag, from the first step considered,
    /// at which some stage has not.
    pub fn first_incomplete(&self, stages: &[StageSite]) -> Option<&'static str> {
        if !self.is_enabled() {
            return None;
        }
        let first = self.first;
        // Per stage, the first step considered that it did not complete (None: untracked).
        let unreached = |&(_, stream, position): &StageSite| -> Option<u64> {
            let word = self.cells.get(stream)?.as_ref()?.load();
            if word < mark_value(first, position) {
                return Some(u64::from(first));
            }
            let (tag, reached) = (word >> 32, word & u64::from(u32::MAX));
            Some(if u64::from(position) > reached {
                tag
            } else {
                tag + 1
            })
        };
        let faulted = stages.iter().filter_map(unreached).min()?;
        if faulted > u64::from(self.last) {
            return None;
        }
        stages
            .iter()
            .find(|stage| unreached(stage) == Some(faulted))
            .map(|&(name, ..)| name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_unreached_stage_in_order_is_named() {
        let ctx = Context::host();
        let progress = Progress::new(&ctx, 2).unwrap();
        progress.set_enabled(true);
        let stages = [("a", 0, 1), ("b", 1, 2), ("c", 0, 3)];
        assert_eq!(progress.first_incomplete(&stages), Some("a"));
        progress.cells[0].as_ref().unwrap().store(1);
        assert_eq!(progress.first_incomplete(&stages), Some("b"));
        progress.cells[1].as_ref().unwrap().store(2);
        assert_eq!(progress.first_incomplete(&stages), Some("c"));
        progress.cells[0].as_ref().unwrap().store(3);
        assert_eq!(progress.first_incomplete(&stages), None);
        progress.set_enabled(false);
        progress.cells[0].as_ref().unwrap().store(0);
        assert_eq!(
            progress.first_incomplete(&stages),
            None,
            "no claim without tracking"
        );
    }

    /// The words of `progress`, as (tag, position).
    fn words(progress: &Progress) -> Vec<(u64, u64)> {
        progress
            .cells
            .iter()
            .flatten()
            .map(|cell| (cell.load() >> 32, cell.load() & 0xffff_ffff))
            .collect()
    }

    fn store(progress: &Progress, stream: usize, tag: u32, position: u32) {
        progress.cells[stream]
            .as_ref()
            .unwrap()
            .store(mark_value(tag, position));
    }

    #[test]
    fn eager_steps_take_tags_and_enqueue_no_reset() {
        let ctx = Context::cpu();
        let stream = Stream::non_blocking(&ctx).unwrap();
        let mut progress = Progress::new(&ctx, 2).unwrap();
        let sites = vec![("a", 0, 1), ("b", 1, 2)];
        assert_eq!(
            progress.begin_step(&stream, &sites).unwrap(),
            0,
            "off: tag 0"
        );
        progress.set_enabled(true);
        assert_eq!(progress.begin_step(&stream, &sites).unwrap(), 1);
        progress.mark(&stream, 0, 1, 1).unwrap();
        progress.mark(&stream, 1, 1, 2).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(words(&progress), [(1, 1), (1, 2)]);
        // The next step's marks supersede these; nothing zeroes them in between.
        assert_eq!(progress.begin_step(&stream, &sites).unwrap(), 2);
        assert_eq!(progress.current_tag(), 2);
        stream.synchronize().unwrap();
        assert_eq!(words(&progress), [(1, 1), (1, 2)]);
        progress.mark(&stream, 0, 2, 1).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(words(&progress), [(2, 1), (1, 2)]);
    }

    #[test]
    fn a_fault_is_placed_in_the_first_step_a_stage_did_not_complete() {
        let ctx = Context::cpu();
        let stream = Stream::non_blocking(&ctx).unwrap();
        let mut progress = Progress::new(&ctx, 2).unwrap();
        progress.set_enabled(true);
        let sites = vec![("a", 0, 1), ("b", 1, 2), ("c", 0, 3)];
        for _ in 0..3 {
            progress.begin_step(&stream, &sites).unwrap();
        }
        // Step 1 completed; in step 2, `a` did and `b` did not; step 3 never ran. On one
        // stream the later steps' first stage would look unreached too: the earlier step is
        // the one named.
        store(&progress, 0, 2, 1);
        store(&progress, 1, 1, 2);
        assert_eq!(progress.first_incomplete(&sites), Some("b"));
        // Step 2 completed, step 3 stopped after `b`.
        store(&progress, 0, 3, 1);
        store(&progress, 1, 3, 2);
        assert_eq!(progress.first_incomplete(&sites), Some("c"));
        store(&progress, 0, 3, 3);
        assert_eq!(progress.first_incomplete(&sites), None, "all completed");
        // Nothing of step 1 ran.
        store(&progress, 0, 0, 0);
        store(&progress, 1, 0, 0);
        assert_eq!(progress.first_incomplete(&sites), Some("a"));
    }

    #[test]
    fn steps_of_another_plan_are_not_blamed() {
        let ctx = Context::cpu();
        let stream = Stream::non_blocking(&ctx).unwrap();
        let mut progress = Progress::new(&ctx, 2).unwrap();
        progress.set_enabled(true);
        let both = vec![("a", 0, 1), ("z", 1, 2)];
        let one = vec![("a", 0, 1)];
        progress.begin_step(&stream, &both).unwrap();
        store(&progress, 0, 1, 1);
        store(&progress, 1, 1, 2);
        progress.begin_step(&stream, &one).unwrap();
        progress.begin_step(&stream, &one).unwrap();
        store(&progress, 0, 3, 1);
        // Step 4 (plan `both`) faults in `a`: `z`'s word is old, but from a step before
        // this plan's steps began, so not a sign of a fault.
        assert_eq!(progress.begin_step(&stream, &both).unwrap(), 4);
        assert_eq!(progress.first_incomplete(&both), Some("a"));
        store(&progress, 0, 4, 1);
        assert_eq!(progress.first_incomplete(&both), Some("z"));
    }

    #[test]
    fn a_recorded_step_zeroes_the_words_and_marks_with_tag_zero() {
        let ctx = Context::cpu();
        let stream = Stream::non_blocking(&ctx).unwrap();
        let mut progress = Progress::new(&ctx, 1).unwrap();
        progress.set_enabled(true);
        let sites = vec![("a", 0, 1), ("b", 0, 2)];
        progress.begin_step(&stream, &sites).unwrap();
        store(&progress, 0, 1, 2);
        let graph = stream
            .capture(crate::CaptureMode::ThreadLocal, |s| {
                let tag = progress.begin_step(s, &sites)?;
                assert_eq!(tag, 0, "a graph cannot count its replays");
                progress.mark(s, 0, tag, 1)
            })
            .unwrap();
        assert_eq!(progress.current_tag(), 1, "recording is not a step");
        let exec = graph.instantiate().unwrap();
        exec.launch(&stream).unwrap();
        progress.replayed();
        stream.synchronize().unwrap();
        assert_eq!(words(&progress), [(0, 1)]);
        assert_eq!(progress.first_incomplete(&sites), Some("b"));
        // The eager step after it takes the next tag.
        assert_eq!(progress.begin_step(&stream, &sites).unwrap(), 2);
        assert_eq!(progress.first_incomplete(&sites), Some("a"));
    }

    #[test]
    fn wrapped_tags_zero_the_words_once() {
        let ctx = Context::cpu();
        let stream = Stream::non_blocking(&ctx).unwrap();
        let mut progress = Progress::new(&ctx, 1).unwrap();
        progress.set_enabled(true);
        let sites = vec![("a", 0, 1)];
        progress.tag = u32::MAX;
        store(&progress, 0, u32::MAX, 1);
        assert_eq!(progress.begin_step(&stream, &sites).unwrap(), 1);
        stream.synchronize().unwrap();
        assert_eq!(words(&progress), [(0, 0)]);
        assert_eq!(progress.first_incomplete(&sites), Some("a"));
    }

    #[test]
    fn only_the_origin_devices_streams_are_tracked() {
        let devices = Context::cpu_devices(2);
        let progress =
            Progress::on_devices(&devices[0], &[&devices[0], &devices[1], &devices[0]]).unwrap();
        progress.set_enabled(true);
        let stages = [("a", 1, 1), ("b", 2, 2)];
        // Stage `a` runs on device 1: untracked, so no claim about it.
        assert_eq!(progress.first_incomplete(&stages), Some("b"));
        progress.cells[2].as_ref().unwrap().store(2);
        assert_eq!(progress.first_incomplete(&stages), None);
        assert!(progress.cells[1].is_none());
    }

    #[test]
    fn the_environment_switch_reads_the_usual_spellings() {
        assert_eq!(parse_tracking(None), Some(false));
        assert_eq!(parse_tracking(Some("")), Some(false));
        for on in ["1", "true", "ON", " yes "] {
            assert_eq!(parse_tracking(Some(on)), Some(true), "{on}");
        }
        for off in ["0", "False", "off", "no"] {
            assert_eq!(parse_tracking(Some(off)), Some(false), "{off}");
        }
        assert_eq!(parse_tracking(Some("2")), None);
        assert_eq!(parse_tracking(Some("enabled")), None);
    }
}

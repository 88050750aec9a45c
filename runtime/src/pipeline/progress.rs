//! Which stage a failed step stopped at: each stage writes its position in the step to a
//! per-stream progress word after its work, and the origin stream zeroes the words at the
//! start of each step (or replay). The words live in mapped host memory, so the host can
//! read them after a fault that poisons every later driver call.
//!
//! Off by default: each mark is one more stream operation, which the GPU front end pays like
//! a launch (about 1 µs), so a step of one small kernel runs about 1.7 times as long with
//! tracking on (docs/PERFORMANCE.md). A fault names the pipeline either way; turn tracking on
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

/// The progress words of one pipeline, one per stream.
///
/// In a pipeline over several devices only the streams of the origin's device are tracked
/// (the origin zeroes the words, and a word is memory of one device); a fault then names
/// the first of their stages that did not complete.
#[derive(Debug)]
pub struct Progress {
    cells: Vec<Option<FlagCell<u32>>>,
    enabled: AtomicBool,
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

    /// Zeroes every word on the origin stream, before a step or a replay.
    pub fn reset(&self, origin: &Stream) -> Result<()> {
        if !self.is_enabled() {
            return Ok(());
        }
        let ops: Vec<MemOp<'_>> = self
            .cells
            .iter()
            .flatten()
            .map(|cell| MemOp::WriteValue32 { cell, value: 0 })
            .collect();
        origin.batch_mem_op(&ops)
    }

    /// Marks the stage at `position` done on its stream.
    pub fn mark(&self, stream: &Stream, stream_index: usize, position: u32) -> Result<()> {
        match self.cells.get(stream_index).and_then(Option::as_ref) {
            Some(cell) if self.is_enabled() => stream.write_value_32(cell, position),
            _ => Ok(()),
        }
    }

    /// The operations that zero every word (what [`Progress::reset`] enqueues), for a node of
    /// a graph built from the stage graph; none while tracking is off.
    pub fn reset_ops(&self) -> Vec<MemOp<'_>> {
        if !self.is_enabled() {
            return Vec::new();
        }
        self.cells
            .iter()
            .flatten()
            .map(|cell| MemOp::WriteValue32 { cell, value: 0 })
            .collect()
    }

    /// The operation that marks the stage at `position` done on stream `stream_index` (what
    /// [`Progress::mark`] enqueues), for a node of a built graph; `None` while tracking is off.
    pub fn mark_op(&self, stream_index: usize, position: u32) -> Option<MemOp<'_>> {
        let cell = self
            .cells
            .get(stream_index)
            .and_then(Option::as_ref)
            .filter(|_| self.is_enabled())?;
        Some(MemOp::WriteValue32 {
            cell,
            value: position,
        })
    }

    /// The first stage, in enqueue order, whose stream has not reached it.
    pub fn first_incomplete(&self, stages: &[StageSite]) -> Option<&'static str> {
        if !self.is_enabled() {
            return None;
        }
        stages.iter().find_map(|&(name, stream, position)| {
            let cell = self.cells.get(stream)?.as_ref()?;
            (cell.load() < position).then_some(name)
        })
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

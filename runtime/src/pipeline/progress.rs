//! Which stage a failed step stopped at: each stage writes its position in the step to a
//! per-stream progress word after its work, and the origin stream zeroes the words at the
//! start of each step (or replay). The words live in mapped host memory, so the host can
//! read them after a fault that poisons every later driver call.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::context::Context;
use crate::error::Result;
use crate::memory::FlagCell;
use crate::stream::{MemOp, Stream};

/// One stage as the step enqueues it: name, stream index, and its 1-based position.
pub type StageSite = (&'static str, usize, u32);

/// The progress words of one pipeline, one per stream.
#[derive(Debug)]
pub struct Progress {
    cells: Vec<FlagCell<u32>>,
    enabled: AtomicBool,
}

impl Progress {
    /// Words for `streams` streams, tracking on.
    pub fn new(ctx: &Context, streams: usize) -> Result<Progress> {
        let cells = (0..streams)
            .map(|_| FlagCell::new(ctx, 0))
            .collect::<Result<Vec<_>>>()?;
        Ok(Progress {
            cells,
            enabled: AtomicBool::new(true),
        })
    }

    /// Makes room for `streams` streams (a pipeline whose stream arrays grew).
    pub fn ensure(&mut self, ctx: &Context, streams: usize) -> Result<()> {
        while self.cells.len() < streams {
            self.cells.push(FlagCell::new(ctx, 0)?);
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
            .map(|cell| MemOp::WriteValue32 { cell, value: 0 })
            .collect();
        origin.batch_mem_op(&ops)
    }

    /// Marks the stage at `position` done on its stream.
    pub fn mark(&self, stream: &Stream, stream_index: usize, position: u32) -> Result<()> {
        match self.cells.get(stream_index) {
            Some(cell) if self.is_enabled() => stream.write_value_32(cell, position),
            _ => Ok(()),
        }
    }

    /// The first stage, in enqueue order, whose stream has not reached it.
    pub fn first_incomplete(&self, stages: &[StageSite]) -> Option<&'static str> {
        if !self.is_enabled() {
            return None;
        }
        stages.iter().find_map(|&(name, stream, position)| {
            let reached = self.cells.get(stream).map_or(0, FlagCell::load);
            (reached < position).then_some(name)
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
        let stages = [("a", 0, 1), ("b", 1, 2), ("c", 0, 3)];
        assert_eq!(progress.first_incomplete(&stages), Some("a"));
        progress.cells[0].store(1);
        assert_eq!(progress.first_incomplete(&stages), Some("b"));
        progress.cells[1].store(2);
        assert_eq!(progress.first_incomplete(&stages), Some("c"));
        progress.cells[0].store(3);
        assert_eq!(progress.first_incomplete(&stages), None);
        progress.set_enabled(false);
        progress.cells[0].store(0);
        assert_eq!(
            progress.first_incomplete(&stages),
            None,
            "no claim without tracking"
        );
    }
}

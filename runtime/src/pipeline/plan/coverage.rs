//! Scratch buffers are written before they are read, element by element, in the step as it
//! will run: a scratch device buffer starts with undefined contents (and a replay finds what
//! the last step left), so every element a stage instance reads must have been written by an
//! instance that runs before it.
//!
//! The macro checks this at compile time per buffer, counting a write to any part of it, in
//! any `for` loop, as a write of all of it. Here the described step settles what it could
//! not: a `for` whose bounds left it with no iteration, writes of other elements than the
//! read ones, ranges computed from params. The instances are walked in the closed plan's
//! enqueue order, a topological order of the step: the schedule orders every write that
//! overlaps a read before or after it, so a write enqueued earlier that covers a read's
//! elements runs before the read.
//!
//! Within one instance, its statements run in order; a `do ... while`'s condition is read
//! after the body, so its reads are judged at the end of the instance. Writes inside an `if`
//! without `else`, a `while` or a `switch` count here as the compile-time rule lets them
//! (where it refuses a read after them, the program never gets here).

use gpu_pipeline_schedule::{Access, Mode, Plan};

use super::describe::{Instance, ScratchDecl, buffer_key};
use crate::error::{Error, Result};

/// The elements written so far of one buffer: sorted, disjoint, merged ranges.
#[derive(Debug, Default)]
struct Written(Vec<(u64, u64)>);

impl Written {
    fn add(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let (mut start, mut end) = (start, end);
        // Absorb every range that touches the new one.
        self.0.retain(|&(s, e)| {
            if e < start || s > end {
                return true;
            }
            start = start.min(s);
            end = end.max(e);
            false
        });
        let at = self.0.partition_point(|&(s, _)| s < start);
        self.0.insert(at, (start, end));
    }

    /// The first elements of `start..end` not written yet, if any.
    fn first_gap(&self, start: u64, end: u64) -> Option<(u64, u64)> {
        let mut at = start;
        for &(s, e) in &self.0 {
            if at >= end {
                return None;
            }
            if s > at {
                return Some((at, s.min(end)));
            }
            at = at.max(e);
        }
        (at < end).then_some((at, end))
    }
}

/// The elements an access covers of a buffer of `len`.
fn span(access: &Access, len: usize) -> (u64, u64) {
    match access.extent {
        Some(extent) => (extent.start, extent.end),
        None => (0, len as u64),
    }
}

/// Refuses the step when a stage instance reads elements of a scratch buffer that no
/// instance before it (in `plan`'s order) or earlier statement of its own wrote.
pub(super) fn scratch_written_first(
    pipeline: &'static str,
    instances: &[Instance],
    scratch: &[ScratchDecl],
    plan: &Plan,
) -> Result<()> {
    if scratch.is_empty() {
        return Ok(());
    }
    let mut written: Vec<Written> = scratch.iter().map(|_| Written::default()).collect();
    let which = |access: &Access| {
        scratch
            .iter()
            .position(|s| buffer_key(s.buffer, 0) == access.buffer)
    };
    for planned in &plan.stages {
        let instance = &instances[planned.stage.0];
        let accesses = instance.accesses.iter().zip(&instance.after_body);
        // In order, then a `do ... while`'s condition reads.
        let in_order = accesses.clone().filter(|(_, after)| !**after);
        let after = accesses.filter(|(_, after)| **after);
        for (access, _) in in_order.chain(after) {
            let Some(k) = which(access) else { continue };
            let (start, end) = span(access, scratch[k].len);
            match access.mode {
                Mode::Write => written[k].add(start, end),
                Mode::Read => {
                    if let Some(gap) = written[k].first_gap(start, end) {
                        return Err(unwritten(pipeline, instance, &scratch[k], gap));
                    }
                }
            }
        }
    }
    Ok(())
}

fn unwritten(
    pipeline: &'static str,
    instance: &Instance,
    scratch: &ScratchDecl,
    (start, end): (u64, u64),
) -> Error {
    let ScratchDecl { name, zero, .. } = scratch;
    Error::invalid(
        "pipeline step",
        format!(
            "pipeline `{pipeline}`: stage `{}` reads elements {start}..{end} of scratch buffer \
             `{name}`, which nothing the step runs before it writes, so their contents are \
             undefined (a `for` that writes them ran no iteration with these params, or the \
             writes before cover other elements); write them first (`fill {name} = {zero};`, \
             or a kernel that writes them, in a stage this one runs after)",
            instance.label()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::Written;

    #[test]
    fn written_ranges_merge_and_leave_gaps_where_nothing_wrote() {
        let mut w = Written::default();
        assert_eq!(w.first_gap(0, 4), Some((0, 4)));
        w.add(2, 4);
        w.add(8, 10);
        assert_eq!(w.first_gap(2, 4), None);
        assert_eq!(w.first_gap(0, 3), Some((0, 2)));
        assert_eq!(w.first_gap(3, 9), Some((4, 8)));
        w.add(4, 8);
        assert_eq!(w.0, [(2, 10)]);
        assert_eq!(w.first_gap(2, 10), None);
        assert_eq!(w.first_gap(9, 12), Some((10, 12)));
        w.add(0, 1);
        w.add(1, 2);
        assert_eq!(w.0, [(0, 10)]);
        // An empty read needs nothing.
        assert_eq!(w.first_gap(12, 12), None);
    }
}

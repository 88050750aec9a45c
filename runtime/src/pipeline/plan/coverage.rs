//! Scratch buffers are written before they are read, element by element, in the step as it
//! will run: a scratch device buffer starts with undefined contents (and a replay finds what
//! the last step left), so the elements a stage instance reads must have been written by an
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
//! Only what surely reads undefined elements is refused ([`ReadKind`]): a copy reads every
//! element of its source, and so does a communication operand of its range, a condition the
//! first of its buffer; a kernel, a `call` or a host closure may read only some of the
//! elements it is given (a kernel indexes below its bound), so it is refused only when none
//! of them was written.
//! Within one instance the statements run in order. Inside a control statement each body
//! starts from what was written before it; after it, a write counts only where every run
//! makes it (see [`BodiesRun`]: both bodies of an `if`/`else`, the body of a `do ... while`,
//! whose condition is judged at its end, against what its body wrote).

use gpu_pipeline_schedule::{Access, Mode, Plan};

use super::describe::{BodiesRun, Instance, Mark, ReadKind, ScratchDecl, buffer_key};
use crate::error::{Error, Result};

/// The elements written so far of one buffer: sorted, disjoint, merged ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Written(Vec<(u64, u64)>);

impl Written {
    /// The elements both hold.
    fn intersection(&self, other: &Written) -> Written {
        let mut out = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < self.0.len() && j < other.0.len() {
            let (a, b) = (self.0[i], other.0[j]);
            let (start, end) = (a.0.max(b.0), a.1.min(b.1));
            if start < end {
                out.push((start, end));
            }
            if a.1 < b.1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        Written(out)
    }

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
    // What some run of a control statement wrote and another did not: named in the error.
    let mut some_paths: Vec<Written> = written.clone();
    for planned in &plan.stages {
        let instance = &instances[planned.stage.0];
        let mut marks = instance.marks.iter().peekable();
        let mut frames: Vec<Frame<'_>> = Vec::new();
        // `judge` for this instance.
        let judge_here =
            |written: &mut [Written], some_paths: &[Written], access: &Access, kind: ReadKind| {
                judge(
                    pipeline,
                    instance,
                    scratch,
                    (written, some_paths),
                    access,
                    kind,
                )
            };
        let accesses = instance.accesses.iter().zip(&instance.read_kinds);
        for (i, (access, kind)) in accesses.enumerate() {
            while let Some((_, mark)) = marks.next_if(|&&(at, _)| at <= i) {
                let state = (&mut written, &mut some_paths);
                enter(*mark, state, &mut frames, &judge_here)?;
            }
            match (kind, frames.last_mut()) {
                // A `do ... while`'s condition, read after its body: judged at its end.
                (ReadKind::FirstAfterBody, Some(frame)) => frame.after_body.push(access),
                (kind, _) => judge_here(&mut written, &some_paths, access, *kind)?,
            }
        }
        for (_, mark) in marks {
            enter(
                *mark,
                (&mut written, &mut some_paths),
                &mut frames,
                &judge_here,
            )?;
        }
    }
    Ok(())
}

/// A control statement being walked: the elements written before it, and after each of its
/// bodies that ended; a `do ... while`'s condition reads, judged when its body has run.
struct Frame<'a> {
    runs: BodiesRun,
    before: Vec<Written>,
    bodies: Vec<Vec<Written>>,
    in_body: bool,
    after_body: Vec<&'a Access>,
}

/// Steps over a mark of a control statement: a body starts from what was written before the
/// statement; at its end, a `do ... while`'s condition is judged against what its body wrote;
/// after it, what counts is what every run wrote (see [`BodiesRun`]).
fn enter<'a>(
    mark: Mark,
    (written, some_paths): (&mut Vec<Written>, &mut Vec<Written>),
    frames: &mut Vec<Frame<'a>>,
    judge: &impl Fn(&mut [Written], &[Written], &Access, ReadKind) -> Result<()>,
) -> Result<()> {
    match mark {
        Mark::Control(runs) => frames.push(Frame {
            runs,
            before: written.clone(),
            bodies: Vec::new(),
            in_body: false,
            after_body: Vec::new(),
        }),
        Mark::Body => {
            if let Some(frame) = frames.last_mut() {
                if frame.in_body {
                    frame.bodies.push(written.clone());
                }
                frame.in_body = true;
                written.clone_from(&frame.before);
            }
        }
        Mark::End => {
            let Some(mut frame) = frames.pop() else {
                return Ok(());
            };
            for access in &frame.after_body {
                judge(written, some_paths, access, ReadKind::FirstAfterBody)?;
            }
            if frame.in_body {
                frame.bodies.push(std::mem::take(written));
            }
            for body in &frame.bodies {
                for (paths, body) in some_paths.iter_mut().zip(body) {
                    for &(start, end) in &body.0 {
                        paths.add(start, end);
                    }
                }
            }
            *written = match (frame.runs, frame.bodies.as_slice()) {
                (BodiesRun::Always, [.., last]) => last.clone(),
                (BodiesRun::OneOf, [first, rest @ ..]) if !rest.is_empty() => {
                    rest.iter().fold(first.clone(), |common, body| {
                        common
                            .iter()
                            .zip(body)
                            .map(|(a, b)| a.intersection(b))
                            .collect()
                    })
                }
                _ => frame.before,
            };
        }
    }
    Ok(())
}

/// Counts a write, or refuses a read of elements nothing wrote.
fn judge(
    pipeline: &'static str,
    instance: &Instance,
    scratch: &[ScratchDecl],
    (written, some_paths): (&mut [Written], &[Written]),
    access: &Access,
    kind: ReadKind,
) -> Result<()> {
    let Some(k) = scratch
        .iter()
        .position(|s| buffer_key(s.buffer, 0) == access.buffer)
    else {
        return Ok(());
    };
    let (start, end) = span(access, scratch[k].len);
    if access.mode == Mode::Write {
        written[k].add(start, end);
        return Ok(());
    }
    let gap = match kind {
        ReadKind::Every => written[k].first_gap(start, end),
        ReadKind::First | ReadKind::FirstAfterBody => {
            written[k].first_gap(start, end.min(start + 1))
        }
        // Unwritten only when no element of it is written.
        ReadKind::Within => written[k]
            .first_gap(start, end)
            .filter(|&gap| gap == (start, end)),
    };
    match gap {
        Some(gap) => {
            let on_some_paths = some_paths[k].first_gap(gap.0, gap.1) != Some(gap);
            let why = if on_some_paths {
                Why::OnSomePaths
            } else {
                Why::Nowhere
            };
            Err(unwritten(pipeline, instance, &scratch[k], gap, kind, why))
        }
        None => Ok(()),
    }
}

/// Why elements a read needs were not written, for the message.
enum Why {
    /// A control statement before the read writes some of them on some of its runs only.
    OnSomePaths,
    /// Nothing before the read writes them.
    Nowhere,
}

fn unwritten(
    pipeline: &'static str,
    instance: &Instance,
    scratch: &ScratchDecl,
    (start, end): (u64, u64),
    kind: ReadKind,
    why: Why,
) -> Error {
    let ScratchDecl { name, zero, .. } = scratch;
    let what = match kind {
        ReadKind::Every => format!("reads elements {start}..{end}"),
        ReadKind::First | ReadKind::FirstAfterBody => {
            format!("tests element {start} (a condition)")
        }
        ReadKind::Within => format!("reads from elements {start}..{end}"),
    };
    let them = if end - start == 1 { "it" } else { "them" };
    let why = match why {
        Why::OnSomePaths => format!(
            "a control statement before it writes {them} on some of its runs only (an `if` \
             without `else`, an `if`/`else` or `switch` whose bodies write different \
             elements, or a `while` that may run no iteration), and nothing else does"
        ),
        Why::Nowhere => format!(
            "nothing the step runs before it writes {} (a `for` that writes {them} ran no \
             iteration with these params, or the writes before cover other elements)",
            if end - start == 1 {
                "it"
            } else {
                "any of them"
            }
        ),
    };
    Error::invalid(
        "pipeline step",
        format!(
            "pipeline `{pipeline}`: stage `{}` {what} of scratch buffer `{name}`, but {why}, so \
             the read finds undefined contents; write them first on every path (`fill {name} \
             = {zero};`, or a kernel that writes them, in a stage this one runs after or before \
             the control statement)",
            instance.label(),
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
        let other = Written(vec![(2, 4), (8, 12)]);
        assert_eq!(w.intersection(&other).0, [(2, 4), (8, 10)]);
        assert_eq!(other.intersection(&Written::default()).0, []);
    }
}

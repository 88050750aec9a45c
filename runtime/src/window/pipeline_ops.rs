//! What a `gpu_pipeline!` launch that names a [`Window`] stands on: the views of this rank's
//! window and of the neighbours' parts it writes (`w[lo..hi] on rank r`), and the signals the
//! macro derives around it (see `macros/LANGUAGE.md`, "Windows"). Each check here refuses
//! with an error naming the pipeline and the window rather than letting a rank wait for ever.

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::memory::{DeviceView, DeviceViewMut};
use crate::stream::Stream;
use crate::window::Window;

const CALL: &str = "pipeline step";

/// A range `lo..hi` of a window of `len` elements (`hi` left out: to the end), checked.
fn range(
    pipeline: &'static str,
    window: &'static str,
    (start, end): (usize, Option<usize>),
    len: usize,
) -> Result<(usize, usize)> {
    let end = end.unwrap_or(len);
    if start > end || end > len {
        return Err(Error::invalid(
            CALL,
            format!(
                "pipeline `{pipeline}`: range {start}..{end} of window `{window}` is outside its \
                 {len} elements"
            ),
        ));
    }
    Ok((start, end))
}

/// The distinct ranks of `ranks`, in their first order.
fn distinct(ranks: &[usize]) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::with_capacity(ranks.len());
    for &r in ranks {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

/// The views one launch passes for window `name`: `local` ranges of this rank's window (read)
/// and `remote` `(rank, range)`s of the neighbours' windows (written), which must be apart
/// (see `apart` below).
#[allow(clippy::type_complexity)]
pub fn window_views<'w, T: Pod, const L: usize, const R: usize>(
    pipeline: &'static str,
    name: &'static str,
    window: &'w mut Window<T>,
    local: [(usize, Option<usize>); L],
    remote: [(usize, (usize, Option<usize>)); R],
) -> Result<([DeviceView<'w, T>; L], [DeviceViewMut<'w, T>; R])> {
    // Shared from here on: the views below are of disjoint memory, which the exclusive borrow
    // of the window and the checks make sure of.
    let window: &'w Window<T> = window;
    let len = window.local().len();
    let mut reads = Vec::with_capacity(L);
    for r in local {
        let (start, end) = range(pipeline, name, r, len)?;
        reads.push(window.local().slice(start..end)?);
    }
    let mut written: Vec<(usize, usize, usize)> = Vec::with_capacity(R);
    let mut writes = Vec::with_capacity(R);
    for (rank, r) in remote {
        let (start, end) = range(pipeline, name, r, len)?;
        apart(pipeline, name, &written, (rank, start, end))?;
        written.push((rank, start, end));
        let peer = window
            .peer(rank)
            .map_err(|_| not_a_peer(pipeline, name, window, rank))?;
        writes.push(peer.slice_mut_apart(start..end)?);
    }
    let reads = reads
        .try_into()
        .map_err(|_| crate::pipeline::plan::internal(pipeline, "window views"))?;
    let writes = writes
        .try_into()
        .map_err(|_| crate::pipeline::plan::internal(pipeline, "window views"))?;
    Ok((reads, writes))
}

fn not_a_peer<T: Pod>(
    pipeline: &'static str,
    name: &'static str,
    window: &Window<T>,
    rank: usize,
) -> Error {
    Error::invalid(
        CALL,
        format!(
            "pipeline `{pipeline}`: rank {} writes window `{name}` on rank {rank}, which is not \
             one of its window peers {:?} (the `peers` given to `Window::new`)",
            window.rank(),
            window.peers()
        ),
    )
}

/// The checks of one launch's window arguments, before anything of the step is enqueued:
/// `local` ranges read here, `remote` `(rank, range)`s written on the neighbours; `reads` and
/// `first` as [`window_before`] takes them. The same refusals as the launch's own calls, made
/// while no signal of the step is posted yet.
#[allow(clippy::type_complexity)]
pub fn window_check<T: Pod, const L: usize, const R: usize>(
    pipeline: &'static str,
    name: &'static str,
    window: &Window<T>,
    (reads, first): (bool, bool),
    local: [(usize, Option<usize>); L],
    remote: [(usize, (usize, Option<usize>)); R],
) -> Result<()> {
    marked_as_used(pipeline, name, window, (reads, first))?;
    let ranks: Vec<usize> = remote.iter().map(|&(rank, _)| rank).collect();
    if !ranks.is_empty() {
        covers_peers(pipeline, name, window, &ranks)?;
    }
    let len = window.local().len();
    for r in local {
        range(pipeline, name, r, len)?;
    }
    let mut written: Vec<(usize, usize, usize)> = Vec::with_capacity(R);
    for (rank, r) in remote {
        let (start, end) = range(pipeline, name, r, len)?;
        apart(pipeline, name, &written, (rank, start, end))?;
        written.push((rank, start, end));
    }
    Ok(())
}

/// The parts one launch writes of its neighbours' windows are apart, into one neighbour (both
/// neighbours are one rank on two ranks) or into two. Every rank runs the same launch, so a
/// range written on two neighbours is written into each rank's window by two neighbours at
/// once (the one writing its first part and the one writing its second), a race on three
/// ranks or more. (A program whose ranges differ from rank to rank could keep such parts
/// apart across the ranks, as an all-gather placing each rank's block at its own offset in
/// both neighbours does; no rank can see the others' ranges, so the step refuses it too
/// rather than trusting it: such a program uses one window per neighbour.)
fn apart(
    pipeline: &'static str,
    name: &'static str,
    written: &[(usize, usize, usize)],
    (rank, start, end): (usize, usize, usize),
) -> Result<()> {
    let Some(&(other, s, e)) = written.iter().find(|&&(_, s, e)| start < e && s < end) else {
        return Ok(());
    };
    let message = if other == rank {
        format!(
            "pipeline `{pipeline}`: one launch writes {s}..{e} and {start}..{end} of rank \
             {rank}'s window `{name}`, which overlap (the two neighbours are one rank here); \
             write parts that are apart"
        )
    } else {
        format!(
            "pipeline `{pipeline}`: one launch writes {s}..{e} of window `{name}` on rank \
             {other} and {start}..{end} on rank {rank}, which overlap: every rank runs the \
             launch, so where the ranges are alike on every rank, each rank's part is written \
             by two neighbours at once; write parts that are apart, or use one window per \
             neighbour"
        )
    };
    Err(Error::invalid(CALL, message))
}

/// The step's first use of the window matches [`Window::mark_written`].
fn marked_as_used<T: Pod>(
    pipeline: &'static str,
    name: &'static str,
    window: &Window<T>,
    (reads, first): (bool, bool),
) -> Result<()> {
    if !first || reads == window.marked() {
        return Ok(());
    }
    let message = if reads {
        format!(
            "pipeline `{pipeline}`: the step reads window `{name}` before it writes it on the \
             neighbours, so it reads what they wrote before the step; before the first step, \
             set this rank's part and call `{name}.mark_written(&stream)` on every rank"
        )
    } else {
        format!(
            "pipeline `{pipeline}`: the step writes window `{name}` on the neighbours before it \
             reads it, but `mark_written` counted this rank's part as their writes, so this \
             write would wait for ever for a read; leave `mark_written` out for a window whose \
             steps write it first"
        )
    };
    Err(Error::invalid(CALL, message))
}

/// The ranks a launch writes are the window's peers, every one of them.
fn covers_peers<T: Pod>(
    pipeline: &'static str,
    name: &'static str,
    window: &Window<T>,
    ranks: &[usize],
) -> Result<()> {
    let ranks = distinct(ranks);
    for &r in &ranks {
        if !window.peers().contains(&r) {
            return Err(not_a_peer(pipeline, name, window, r));
        }
    }
    let missing: Vec<usize> = window
        .peers()
        .into_iter()
        .filter(|p| !ranks.contains(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(
        CALL,
        format!(
            "pipeline `{pipeline}`: rank {} writes window `{name}` on ranks {ranks:?} but not on \
             its peers {missing:?}, whose reads would wait for ever; write every peer's part in \
             the launch (or make the window with those peers only)",
            window.rank()
        ),
    ))
}

/// The signals before a launch that reads window `name` locally (`reads`) and writes it on
/// `ranks`: wait until each neighbour written into has read what this rank wrote last, then
/// (reading) until every neighbour has written this rank's window. A launch that writes the
/// window writes every neighbour's part, since each neighbour's read waits for every one of
/// its neighbours (duplicates are one neighbour: both sides of two ranks). `first`: the
/// launch is the step's first that names the window, which reads what the neighbours wrote
/// before the step exactly when [`Window::mark_written`] stood in for their first write.
pub fn window_before<T: Pod>(
    pipeline: &'static str,
    name: &'static str,
    stream: &Stream,
    window: &Window<T>,
    (reads, first): (bool, bool),
    ranks: &[usize],
) -> Result<()> {
    marked_as_used(pipeline, name, window, (reads, first))?;
    if !ranks.is_empty() {
        covers_peers(pipeline, name, window, ranks)?;
        window.wait_read_all(stream, &distinct(ranks))?;
    }
    if reads {
        window.wait_written_all(stream, &window.peers())?;
    }
    Ok(())
}

/// The signals after the launch [`window_before`] preceded: tell each neighbour written into
/// that its window is written, and (reading) every neighbour that this rank has read. On CUDA
/// each of the two is one batch of memory operations (one node in a captured step), as each
/// wait of [`window_before`] is.
pub fn window_after<T: Pod>(
    stream: &Stream,
    window: &Window<T>,
    reads: bool,
    ranks: &[usize],
) -> Result<()> {
    window.signal_written_all(stream, &distinct(ranks))?;
    if reads {
        window.signal_read_all(stream, &window.peers())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_ranks_are_one_neighbour() {
        assert_eq!(distinct(&[1, 1]), [1]);
        assert_eq!(distinct(&[2, 0, 2]), [2, 0]);
    }

    #[test]
    fn a_range_past_the_window_is_refused() {
        assert_eq!(range("p", "w", (2, None), 8).unwrap(), (2, 8));
        let err = range("p", "w", (4, Some(9)), 8).unwrap_err().to_string();
        assert!(err.contains("range 4..9 of window `w`"), "{err}");
        assert!(range("p", "w", (5, Some(4)), 8).is_err());
    }
}

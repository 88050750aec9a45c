//! Stream capture: recording a stream's work into a graph (what the recorded nodes point at
//! is kept by `keep.rs`).

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::driver::check;
use crate::error::{Error, Result};
use crate::sys::{self, CUgraph, CUresult, CUstreamCaptureMode, CUstreamCaptureStatus};

use super::keep::{CaptureRecord, records};
use super::{Graph, Stream};

/// How many captures this process began here and has not ended yet, in any mode on any
/// thread. A failed NCCL communicator is aborted only while this is zero, under this lock
/// (`nccl/comm.rs`, `abort_plan`): `ncclCommAbort` makes calls the driver refuses while a
/// stream captures.
static OPEN: Mutex<usize> = Mutex::new(0);

/// The number of open captures, locked: a capture waits to begin while this is held.
pub(crate) fn open_captures() -> MutexGuard<'static, usize> {
    // A poisoned lock holds a count that was updated whole.
    OPEN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counts a capture about to begin (`true`), one that did not begin or has ended (`false`);
/// once none is open, the aborts that waited for that run.
fn count_open(opening: bool) {
    let none_open = {
        let mut open = open_captures();
        *open = if opening {
            *open + 1
        } else {
            open.saturating_sub(1)
        };
        *open == 0
    };
    if none_open {
        crate::nccl::abort_deferred();
    }
}

/// Starts capturing on `stream` in `mode`.
pub(crate) fn begin(stream: &Stream, mode: CUstreamCaptureMode) -> Result<()> {
    count_open(true);
    let begun = begin_counted(stream, mode);
    if begun.is_err() {
        count_open(false);
    }
    begun
}

fn begin_counted(stream: &Stream, mode: CUstreamCaptureMode) -> Result<()> {
    let _gate = stream.gate_exclusive();
    // No eager record can be made on a capturing handle: cover its fences now (`fence.rs`).
    stream.cover_fences();
    let d = stream.bind()?;
    // SAFETY: a live stream and a valid mode.
    check("cuStreamBeginCapture", unsafe {
        (d.cuStreamBeginCapture)(stream.raw(), mode)
    })?;
    // Hot paths (launches, copies) read the tracked id instead of asking the driver, so the
    // capture must be tracked from its first enqueue on: work recorded into a capture we do
    // not track would keep nothing alive in its graph.
    match stream.capture_info() {
        Ok((CUstreamCaptureStatus::ACTIVE, id)) => {
            stream.set_tracked_capture(Some(id));
            Ok(())
        }
        other => {
            // Not known: end it again at once, before anything is recorded into it.
            let mut graph = std::ptr::null_mut();
            // SAFETY: a live stream and a valid out-pointer.
            let code = unsafe { (d.cuStreamEndCapture)(stream.raw(), &mut graph) };
            if code.is_success() && !graph.is_null() {
                // SAFETY: the empty graph the driver just returned, which nothing else owns.
                unsafe { (d.cuGraphDestroy)(graph) };
            }
            Err(other.err().unwrap_or_else(|| {
                Error::invalid(
                    "Stream::begin_capture",
                    "the driver began a capture it then did not report as active",
                )
            }))
        }
    }
}

/// Ends the capture begun on `stream`: the recorded graph, holding what the capture
/// collected. When the driver refuses to end it and the capture goes on
/// (`cuStreamEndCapture` from the wrong thread, say), everything collected stays registered
/// for it: the nodes recorded so far still point at it.
///
/// Every handle of the capture is held still while the driver ends it: the origin's gate and
/// the gates of the handles that joined it, all exclusively (origin first, the only place
/// that holds two gates). An enqueue on a joined handle that read the capture id before the
/// driver ended the capture would otherwise reach the driver after it: its work would run at
/// once, neither kept by a graph nor fenced (a copy into pinned memory the host could then
/// read while the copy writes it).
pub(crate) fn end(stream: &Stream) -> Result<Graph> {
    let (code, graph, record) = end_under_gates(stream)?;
    // The capture is over, whatever the driver's verdict.
    count_open(false);
    // Past the gates: dropping what a failed capture collected may run user code (a captured
    // closure's drop), which may enqueue on these very streams.
    check("cuStreamEndCapture", code)?;
    // SAFETY: the driver returned a new graph of the stream's context, which nothing else
    // owns; `record` holds what its nodes point at.
    Ok(unsafe { Graph::from_raw(stream.context(), graph, record) })
}

/// The driver's verdict on ending the capture, its graph, and what the capture collected.
fn end_under_gates(stream: &Stream) -> Result<(CUresult, CUgraph, CaptureRecord)> {
    let _gate = stream.gate_exclusive();
    let id = stream.tracked_capture();
    if let Some(id) = id
        && stream.joined(id)
    {
        // Refused before the driver sees it, so the capture goes on, valid, and its origin
        // ends it (and every stream of it) as tracked.
        return Err(Error::invalid(
            "Stream::end_capture",
            "the stream joined a capture that another stream began; end it on that stream",
        ));
    }
    let joined = id.map(|id| stream.joined_handles(id)).unwrap_or_default();
    let _joined_gates: Vec<_> = joined.iter().map(|state| state.gate_exclusive()).collect();
    let d = stream.bind()?;
    let mut graph = std::ptr::null_mut();
    // SAFETY: a live stream and a valid out-pointer.
    let code = unsafe { (d.cuStreamEndCapture)(stream.raw(), &mut graph) };
    if !code.is_success()
        && let Ok((status, now)) = stream.capture_info()
        && status != CUstreamCaptureStatus::NONE
        && Some(now) == id
    {
        return Err(crate::driver::driver_error("cuStreamEndCapture", code).into());
    }
    // The capture is over, whatever the verdict: every stream of it has left it.
    stream.set_tracked_capture(None);
    let record = id
        .and_then(|id| records().as_mut().and_then(|m| m.remove(&id)))
        .unwrap_or_default();
    if let Some(id) = id {
        for state in &joined {
            state.leave(id);
        }
        Stream::forget_joined(id);
    }
    Ok((code, graph, record))
}

/// The driver's capture state of `stream`.
pub(crate) fn status(stream: &Stream) -> Result<(CUstreamCaptureStatus, u64)> {
    stream.capture_info()
}

/// Starts capturing on `stream` into the existing graph `graph` (CUDA 12.3,
/// `cuStreamBeginCaptureToGraph`): the first captured work depends on `dependencies`.
///
/// # Safety
/// `graph` must be a live graph (or body graph) of the stream's context that nothing else
/// edits until [`end_to_graph`], and `dependencies` nodes of it.
pub(crate) unsafe fn begin_to_graph(
    stream: &Stream,
    graph: sys::CUgraph,
    dependencies: &[sys::CUgraphNode],
    mode: CUstreamCaptureMode,
) -> Result<()> {
    count_open(true);
    // SAFETY: the caller's promise, passed on.
    let begun = unsafe { begin_to_graph_counted(stream, graph, dependencies, mode) };
    if begun.is_err() {
        count_open(false);
    }
    begun
}

/// [`begin_to_graph`], counted by it.
///
/// # Safety
/// As [`begin_to_graph`].
unsafe fn begin_to_graph_counted(
    stream: &Stream,
    graph: sys::CUgraph,
    dependencies: &[sys::CUgraphNode],
    mode: CUstreamCaptureMode,
) -> Result<()> {
    let _gate = stream.gate_exclusive();
    // No eager record can be made on a capturing handle: cover its fences now (`fence.rs`).
    stream.cover_fences();
    let d = stream.bind()?;
    let begin = d.optional(d.cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph")?;
    // SAFETY: a live stream, a live graph of its context with nodes of it (the caller's
    // promise), no edge data (default edges) and a valid mode.
    check("cuStreamBeginCaptureToGraph", unsafe {
        begin(
            stream.raw(),
            graph,
            dependencies.as_ptr(),
            std::ptr::null(),
            dependencies.len(),
            mode,
        )
    })?;
    // As in `begin`: a capture we do not track would keep nothing alive, so one the driver
    // does not report as active is ended again at once (the graph stays the caller's).
    match stream.capture_info() {
        Ok((CUstreamCaptureStatus::ACTIVE, id)) => {
            stream.set_tracked_capture(Some(id));
            Ok(())
        }
        other => {
            let mut ended = std::ptr::null_mut();
            // SAFETY: a live stream and a valid out-pointer; the returned graph is `graph`,
            // which stays the caller's.
            let _ = unsafe { (d.cuStreamEndCapture)(stream.raw(), &mut ended) };
            Err(other.err().unwrap_or_else(|| {
                Error::invalid(
                    "Graph::capture_into",
                    "the driver began a capture it then did not report as active",
                )
            }))
        }
    }
}

/// Ends a capture begun by [`begin_to_graph`]: the nodes the captured work ends with (what
/// later nodes must depend on) and what the captured nodes point at. The graph stays the
/// caller's (the driver hands the same graph back; it is not a new one to own).
pub(crate) fn end_to_graph(stream: &Stream) -> Result<(Vec<sys::CUgraphNode>, CaptureRecord)> {
    let (code, info, sinks, record) = end_to_graph_under_gates(stream)?;
    // The capture is over, whatever the driver's verdict.
    count_open(false);
    // Past the gates: dropping what a failed capture collected may run user code.
    check("cuStreamEndCapture", code)?;
    check("cuStreamGetCaptureInfo", info)?;
    Ok((sinks, record))
}

/// The driver's verdicts on ending the capture and on asking for its last nodes, those
/// nodes, and what the capture collected.
fn end_to_graph_under_gates(
    stream: &Stream,
) -> Result<(CUresult, CUresult, Vec<sys::CUgraphNode>, CaptureRecord)> {
    // The gates of every handle of the capture are held while the driver ends it, as in
    // `end_under_gates`.
    let _gate = stream.gate_exclusive();
    let id = stream.tracked_capture();
    if let Some(id) = id
        && stream.joined(id)
    {
        return Err(Error::invalid(
            "Graph::capture_into",
            "the stream joined a capture that another stream began; end it on that stream",
        ));
    }
    let joined = id.map(|id| stream.joined_handles(id)).unwrap_or_default();
    let _joined_gates: Vec<_> = joined.iter().map(|state| state.gate_exclusive()).collect();
    let d = stream.bind()?;
    let mut status = CUstreamCaptureStatus::NONE;
    let mut now = 0;
    let mut tail: *const sys::CUgraphNode = std::ptr::null();
    let mut count = 0;
    // SAFETY: a live stream and valid out-pointers; the graph output is not wanted.
    let info = unsafe {
        (d.cuStreamGetCaptureInfo)(
            stream.raw(),
            &mut status,
            &mut now,
            std::ptr::null_mut(),
            &mut tail,
            &mut count,
        )
    };
    let sinks = if info.is_success() && !tail.is_null() && count > 0 {
        // SAFETY: the driver reports `count` nodes at `tail`, valid until the next capture
        // call on the stream; they are copied out at once.
        unsafe { std::slice::from_raw_parts(tail, count) }.to_vec()
    } else {
        Vec::new()
    };
    let mut graph = std::ptr::null_mut();
    // SAFETY: a live stream and a valid out-pointer.
    let code = unsafe { (d.cuStreamEndCapture)(stream.raw(), &mut graph) };
    if !code.is_success()
        && let Ok((status, now)) = stream.capture_info()
        && status != CUstreamCaptureStatus::NONE
        && Some(now) == id
    {
        return Err(crate::driver::driver_error("cuStreamEndCapture", code).into());
    }
    stream.set_tracked_capture(None);
    let record = id
        .and_then(|id| records().as_mut().and_then(|m| m.remove(&id)))
        .unwrap_or_default();
    if let Some(id) = id {
        for state in &joined {
            state.leave(id);
        }
        Stream::forget_joined(id);
    }
    Ok((code, info, sinks, record))
}

//! Stream capture: recording a stream's work into a graph (what the recorded nodes point at
//! is kept by `keep.rs`).

use crate::driver::check;
use crate::error::{Error, Result};
use crate::sys::{CUgraph, CUresult, CUstreamCaptureMode, CUstreamCaptureStatus};

use super::keep::{CaptureRecord, records};
use super::{Graph, Stream};

/// Starts capturing on `stream` in `mode`.
pub(crate) fn begin(stream: &Stream, mode: CUstreamCaptureMode) -> Result<()> {
    let _gate = stream.gate_exclusive();
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

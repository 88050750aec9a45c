//! Stream capture: recording a stream's work into a graph (what the recorded nodes point at
//! is kept by `keep.rs`).

use crate::driver::check;
use crate::error::Result;
use crate::sys::{CUstreamCaptureMode, CUstreamCaptureStatus};

use super::keep::records;
use super::{Graph, Stream};

/// Starts capturing on `stream` in `mode`.
pub(crate) fn begin(stream: &Stream, mode: CUstreamCaptureMode) -> Result<()> {
    let _gate = stream.gate_exclusive();
    let d = stream.bind()?;
    // SAFETY: a live stream and a valid mode.
    check("cuStreamBeginCapture", unsafe {
        (d.cuStreamBeginCapture)(stream.raw(), mode)
    })?;
    // Hot paths (launches, copies) read the tracked id instead of asking the driver.
    let (status, id) = stream.capture_info()?;
    if status == CUstreamCaptureStatus::ACTIVE {
        stream.set_tracked_capture(Some(id));
    }
    Ok(())
}

/// Ends the capture begun on `stream`: the recorded graph, holding what the capture
/// collected. When the driver refuses to end it and the capture goes on
/// (`cuStreamEndCapture` from the wrong thread, say), everything collected stays registered
/// for it: the nodes recorded so far still point at it.
pub(crate) fn end(stream: &Stream) -> Result<Graph> {
    let _gate = stream.gate_exclusive();
    let id = stream.tracked_capture();
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
        stream.leave_capture(id);
    }
    // On failure no graph exists any more, so `record` may drop.
    check("cuStreamEndCapture", code)?;
    // SAFETY: the driver returned a new graph of the stream's context, which nothing else
    // owns; `record` holds what its nodes point at.
    Ok(unsafe { Graph::from_raw(stream.context(), graph, record) })
}

/// The driver's capture state of `stream`.
pub(crate) fn status(stream: &Stream) -> Result<(CUstreamCaptureStatus, u64)> {
    stream.capture_info()
}

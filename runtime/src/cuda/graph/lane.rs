//! Graphs with device loops, of one context, launch one after another.
//!
//! The driver faults ("unspecified launch failure", the context lost) when a WHILE loop runs
//! concurrently with another conditional node (see `loops.rs`). Edges order the nodes of one
//! graph; they cannot reach across graphs, and separate graphs of one loop each, launched at
//! once on separate streams, fault the same way (`benches/anchors/parallel_while.cu`, mode 6;
//! `graph_build`'s separate-graphs test lost the context in 3 runs of 3 without this, on an
//! H100). So each context has a lane: a launch of a graph with loops on another stream than
//! the lane's last such launch first waits for it, through an event recorded on that stream
//! at that moment. The record also waits for whatever was enqueued there after the launch
//! (conservative, never wrong), and when one stream replays every such graph, as a time-step
//! loop does, nothing is recorded or waited for at all: the lane costs a lock.
//!
//! Not covered (best effort, said in `Graph::instantiate`'s docs): a last stream that is
//! capturing when the next launch comes (no eager record can be made there), graphs with
//! loops launched into another capture (their loops belong to that graph then), and graphs
//! with `if`s but no loop, which the reproducer never saw fault in parallel and which stay
//! parallel.

use std::sync::{Mutex, Weak};

use super::super::Event;
use super::super::stream::{StreamLink, lock};
use super::*;

/// The lane of one context (see the module's comment). Held by each executable graph with
/// loops; the registry holds it weakly, so it goes with the last of them.
pub(crate) struct LoopLane {
    ctx: Arc<Context>,
    state: Mutex<LaneState>,
}

/// Where the last launch of a graph with loops went.
#[derive(Default)]
struct LaneState {
    /// The stream of the last launch, while it is open.
    last: Option<StreamLink>,
    /// Recorded on a stream to mark the end of its launches (made at the first need).
    event: Option<Event>,
    /// The event holds the end of the last launch: its stream closed since.
    recorded: bool,
}

/// Every context's lane, by raw context (one primary context may have several `Context`
/// values; they share a lane).
static LANES: Mutex<Vec<(usize, Weak<LoopLane>)>> = Mutex::new(Vec::new());

/// The live lane of the context whose raw handle is `key`, if it has one.
fn find(lanes: &[(usize, Weak<LoopLane>)], key: usize) -> Option<Arc<LoopLane>> {
    lanes
        .iter()
        .find(|(raw, _)| *raw == key)
        .and_then(|(_, lane)| lane.upgrade())
}

impl LoopLane {
    /// The lane of `ctx`, made if it has none.
    pub(crate) fn of(ctx: &Arc<Context>) -> Arc<LoopLane> {
        let key = ctx.raw() as usize;
        let mut lanes = lock(&LANES);
        lanes.retain(|(_, lane)| lane.strong_count() > 0);
        if let Some(lane) = find(&lanes, key) {
            return lane;
        }
        let lane = Arc::new(LoopLane {
            ctx: ctx.clone(),
            state: Mutex::new(LaneState::default()),
        });
        lanes.push((key, Arc::downgrade(&lane)));
        lane
    }

    /// Runs `launch`, which enqueues a graph with loops on `stream` (outside any capture,
    /// under the stream's gate), after the lane's last launch when that was on another stream.
    pub(crate) fn launch(
        &self,
        stream: &Stream,
        launch: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let mut state = lock(&self.state);
        let after = match state.last.clone() {
            Some(link) if link.id() == stream.id() => false,
            Some(link) => {
                let event = state.event(&self.ctx)?;
                let d = self.ctx.bind()?;
                // SAFETY: `with_live` hands over the raw handle only while it is live and
                // not capturing; the event is live and of the same context (the lane's).
                let recorded = link.with_live(|raw| unsafe { (d.cuEventRecord)(event, raw) });
                match recorded {
                    Some(code) => check("cuEventRecord", code).map(|()| true)?,
                    // Capturing now (or closing under our feet, which records the event
                    // itself): best effort, see the module's comment.
                    None => state.recorded,
                }
            }
            None => state.recorded,
        };
        if after {
            let event = state.event(&self.ctx)?;
            let d = stream.bind()?;
            // SAFETY: a live stream (the caller's) and a live event of its context, recorded
            // outside any capture, so the wait joins none.
            check("cuStreamWaitEvent", unsafe {
                (d.cuStreamWaitEvent)(stream.raw(), event, sys::CU_EVENT_WAIT_DEFAULT)
            })?;
        }
        launch()?;
        state.last = Some(stream.link());
        state.recorded = false;
        Ok(())
    }
}

impl LaneState {
    /// The lane's event, made at the first need.
    fn event(&mut self, ctx: &Arc<Context>) -> Result<sys::CUevent> {
        if self.event.is_none() {
            self.event = Some(Event::new(ctx, sys::CU_EVENT_DISABLE_TIMING)?);
        }
        Ok(self.event.as_ref().map_or(std::ptr::null_mut(), Event::raw))
    }
}

/// `stream` is closing (it is still live, and not capturing): if the last launch of its
/// context's lane went there, the lane's event marks its end now, for the next launch.
pub(crate) fn stream_closing(stream: &Stream) {
    let lane = find(&lock(&LANES), stream.context().raw() as usize);
    let Some(lane) = lane else {
        return;
    };
    let mut state = lock(&lane.state);
    if state.last.as_ref().map(StreamLink::id) != Some(stream.id()) {
        return;
    }
    state.last = None;
    let recorded = state.event(&lane.ctx).and_then(|event| {
        let d = stream.bind()?;
        // SAFETY: a live stream that is not capturing (the caller's) and a live event of
        // its context.
        check("cuEventRecord", unsafe {
            (d.cuEventRecord)(event, stream.raw())
        })
    });
    state.recorded = match recorded {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "marking the end of a closing stream's device loops failed");
            false
        }
    };
}

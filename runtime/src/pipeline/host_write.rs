//! [`HostWrite`]: the host writing a device buffer that a captured graph holds, between its
//! replays, in stream order (on the origin stream the replays are launched on, or joined with
//! it when the buffer is another device's), never into elements a replay writes.

use std::ops::{Bound, Range, RangeBounds};

use bytemuck::Pod;

use super::plan::StepPlan;
use crate::error::{Error, Result};
use crate::memory::{DeviceBuffer, PinnedSource};
use crate::stream::Stream;

/// A device buffer param of a captured step, written by the host between replays: from a
/// generated graph's `write_<name>()`. Each [`upload`](HostWrite::upload) and
/// [`fill`](HostWrite::fill) is enqueued on the pipeline's origin stream, where the replays
/// are launched, so it runs after the replays launched before it and before those launched
/// after, without the host waiting for either: what graphConditionalNodes does with a
/// `cudaMemset` between `cudaGraphLaunch`es.
///
/// The step may only read what the host writes: a buffer that a statement of the step
/// writes whole has no working `write_<name>()` (a compile error), and where the step writes
/// ranges of the buffer (`x[lo..hi]`), a host write that overlaps one of them is refused
/// with an error naming the stage.
///
/// ```
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream, gpu_pipeline};
///
/// gpu_pipeline! {
///     /// Copies a device input out to the host at every replay.
///     pub pipeline Echo {
///         streams { main }
///         params { input: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
///         stage echo on main { copy input -> out; }
///     }
/// }
///
/// let ctx = Context::cpu();
/// let mut input = DeviceBuffer::<f32>::zeros(&Stream::new(&ctx)?, 4)?;
/// let mut out = PinnedBuffer::<f32>::zeros(&ctx, 4)?;
/// let frame = PinnedBuffer::from_slice(&ctx, &[1.0f32, 2.0, 3.0, 4.0])?;
/// let mut echo = Echo::new(&ctx)?;
/// let mut graph = echo.capture(EchoParams { input: &mut input, out: &mut out })?;
/// graph.write_input()?.fill(7.0)?; // no wait: ordered before the next replay
/// graph.launch()?;
/// graph.write_input()?.upload(&frame)?;
/// graph.launch()?;
/// assert_eq!(&*graph.window()?.out()?, &[1.0, 2.0, 3.0, 4.0]);
/// # Ok(()) }
/// ```
/// `B` is the buffer's type, `DeviceBuffer<T>`. (Generic over it rather than `T`, so that a
/// param of a non-`Pod` element is reported once, at the param, not again at every
/// generated `write_<name>()`.)
pub struct HostWrite<'g, B> {
    pipeline: &'static str,
    name: &'static str,
    /// Where the replays are launched.
    stream: &'g Stream,
    /// The pipeline's streams, for a buffer on another device than the origin's.
    lanes: &'g [Vec<Stream>],
    /// A stream of the buffer's device made for it, when no lane is on that device.
    own: Option<Stream>,
    buffer: &'g mut B,
    /// The ranges a replay writes, each with the stage instance that writes it.
    written: Vec<(String, Range<usize>)>,
}

/// The handle for buffer `buffer` (its index among the pipeline's buffers, `name`), whose
/// writes by the steps of `plans` are refused; `stream` is the origin, `lanes` every stream
/// of the pipeline.
pub fn host_write<'g, 'p, B>(
    pipeline: &'static str,
    name: &'static str,
    index: usize,
    plans: impl IntoIterator<Item = &'p StepPlan>,
    (stream, lanes): (&'g Stream, &'g [Vec<Stream>]),
    buffer: &'g mut B,
) -> HostWrite<'g, B> {
    let written = plans
        .into_iter()
        .flat_map(|plan| &plan.instances)
        .flat_map(|instance| {
            instance
                .refs
                .iter()
                .filter(move |r| r.buffer == index && r.write && !r.is_empty())
                .map(move |r| (instance.label(), r.start..r.end))
        })
        .collect();
    HostWrite {
        pipeline,
        name,
        stream,
        lanes,
        own: None,
        buffer,
        written,
    }
}

impl<T: Pod> HostWrite<'_, DeviceBuffer<T>> {
    /// The number of elements of the buffer.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// Copies `src` (pinned host memory of the buffer's length) into the whole buffer,
    /// before the next replay. The host waits for the copy before it writes `src` again.
    pub fn upload(&mut self, src: &impl PinnedSource<T>) -> Result<()> {
        let (len, whole) = (src.pinned_region().len, self.buffer.len());
        if len != whole {
            // A shorter source would leave the rest of the buffer as the last replay left it.
            return Err(Error::invalid(
                "HostWrite",
                format!(
                    "pipeline `{}`: a host upload into the whole of `{}` ({whole} elements) \
                     from {len} elements; upload that many, or use `upload_at` for part of it",
                    self.pipeline, self.name
                ),
            ));
        }
        self.upload_at(0, src)
    }

    /// Copies `src` into elements `start..start + src's length` of the buffer, before the
    /// next replay.
    pub fn upload_at(&mut self, start: usize, src: &impl PinnedSource<T>) -> Result<()> {
        let len = src.pinned_region().len;
        let range = self.allowed("upload", start, start.checked_add(len))?;
        self.in_order(|stream, buffer| stream.copy_htod(src, &mut buffer.slice_mut(range)?))
    }

    /// Sets every element of the buffer to `value`, before the next replay (a 1- or 4-byte
    /// memset, as the `fill` statement; an element of another size works when all the bytes
    /// of `value` are equal).
    pub fn fill(&mut self, value: T) -> Result<()> {
        self.fill_range(.., value)
    }

    /// Sets elements `range` of the buffer to `value`, before the next replay.
    pub fn fill_range(&mut self, range: impl RangeBounds<usize>, value: T) -> Result<()> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1),
            Bound::Excluded(&e) => Some(e),
            Bound::Unbounded => Some(self.buffer.len()),
        };
        let range = self.allowed("fill", start, end)?;
        self.in_order(|stream, buffer| {
            super::ops::fill_dest(stream, &mut buffer.slice_mut(range)?, value)
        })
    }

    /// Runs `write` on a stream of the buffer's device, in the origin stream's order: the
    /// origin itself, or (a buffer of another device) one of the pipeline's streams on that
    /// device, or one made for it, joined after the origin and joined back into it, so the
    /// write still lands after the replays launched before it and before those after.
    fn in_order(
        &mut self,
        write: impl FnOnce(&Stream, &mut DeviceBuffer<T>) -> Result<()>,
    ) -> Result<()> {
        let device = self.buffer.context();
        if self.stream.context().shares_memory_with(device) {
            return write(self.stream, self.buffer);
        }
        let lane = self
            .lanes
            .iter()
            .flatten()
            .find(|s| s.context().shares_memory_with(device));
        let writer = match (lane, &self.own) {
            (Some(lane), _) => lane,
            (None, Some(own)) => own,
            (None, None) => self.own.insert(Stream::non_blocking(device)?),
        };
        writer.join(self.stream)?;
        write(writer, self.buffer)?;
        self.stream.join(writer)
    }

    /// `start..end` when it lies in the buffer and no replay writes any of it.
    fn allowed(&self, what: &str, start: usize, end: Option<usize>) -> Result<Range<usize>> {
        let len = self.buffer.len();
        let call = "HostWrite";
        let Some(end) = end.filter(|&end| start <= end && end <= len) else {
            let problem = match end {
                Some(end) if end < start => {
                    format!("the range {start}..{end} ends before it starts")
                }
                _ => format!("from element {start} goes past its {len} elements"),
            };
            return Err(Error::invalid(
                call,
                format!(
                    "pipeline `{}`: a host {what} of `{}`: {problem}",
                    self.pipeline, self.name
                ),
            ));
        };
        if start == end {
            return Ok(start..end);
        }
        if let Some((stage, written)) = self
            .written
            .iter()
            .find(|(_, r)| r.start < end && start < r.end)
        {
            return Err(Error::invalid(
                call,
                format!(
                    "pipeline `{}`: a host {what} of elements {start}..{end} of `{}` overlaps \
                     elements {}..{} that stage `{stage}` may write during a replay (in every \
                     replay, or in those where a control statement around the write runs); the \
                     host may write only what the step reads",
                    self.pipeline, self.name, written.start, written.end
                ),
            ));
        }
        Ok(start..end)
    }
}

impl<B> std::fmt::Debug for HostWrite<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostWrite")
            .field("pipeline", &self.pipeline)
            .field("buffer", &self.name)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

//! Per-stage timings of one pipeline step: a timing event recorded before and after each
//! stage on its own stream, read back after the step, and exportable as a Chrome trace
//! (open it in Perfetto or chrome://tracing) to see the streams overlap without nsys.

use std::cell::Cell;
use std::fmt;

use crate::context::Context;
use crate::error::Result;
use crate::event::Event;
use crate::stream::Stream;

/// The timing events of one profiled step: a start on the origin, then a pair per stage.
///
/// In a step over several devices, a stage on another device than the origin's is timed
/// from a start event its device records when its first stage starts (events of two devices
/// cannot be compared): its times count from that point, which follows the step's start by
/// the fork's latency.
#[derive(Debug)]
pub struct Profiler {
    start: Event,
    stages: Vec<(Event, Event)>,
    /// Per stage: the index of its device's own start in `device_starts`, or `None` on the
    /// origin's device.
    device_of: Vec<Option<usize>>,
    /// Each other device's start, and whether it was recorded in this step.
    device_starts: Vec<(Event, Cell<bool>)>,
}

impl Profiler {
    /// Events for `stages` stages (timing on).
    pub fn new(ctx: &Context, stages: usize) -> Result<Profiler> {
        Profiler::on_devices(ctx, &vec![ctx; stages])
    }

    /// Events for stages on the devices `stages` gives, in enqueue order, of a step that
    /// starts on `origin`'s device.
    pub fn on_devices(origin: &Context, stages: &[&Context]) -> Result<Profiler> {
        let pairs = stages
            .iter()
            .map(|ctx| Ok((Event::new(ctx)?, Event::new(ctx)?)))
            .collect::<Result<Vec<_>>>()?;
        let mut others: Vec<&Context> = Vec::new();
        let mut device_of = Vec::with_capacity(stages.len());
        for ctx in stages {
            if ctx.shares_memory_with(origin) {
                device_of.push(None);
                continue;
            }
            let index = match others.iter().position(|o| o.shares_memory_with(ctx)) {
                Some(index) => index,
                None => {
                    others.push(ctx);
                    others.len() - 1
                }
            };
            device_of.push(Some(index));
        }
        let device_starts = others
            .iter()
            .map(|ctx| Ok((Event::new(ctx)?, Cell::new(false))))
            .collect::<Result<Vec<_>>>()?;
        Ok(Profiler {
            start: Event::new(origin)?,
            stages: pairs,
            device_of,
            device_starts,
        })
    }

    /// The start event stage `index` is timed from.
    fn start_of(&self, index: usize) -> &Event {
        match self.device_of.get(index).copied().flatten() {
            Some(device) => &self.device_starts[device].0,
            None => &self.start,
        }
    }

    /// Marks the step's start on the origin stream.
    pub fn step_start(&self, origin: &Stream) -> Result<()> {
        origin.record_into(&self.start)
    }

    /// Marks the start of the stage at `index` (in enqueue order) on its stream.
    pub fn stage_start(&self, stream: &Stream, index: usize) -> Result<()> {
        if let Some(device) = self.device_of.get(index).copied().flatten() {
            let (start, recorded) = &self.device_starts[device];
            if !recorded.replace(true) {
                stream.record_into(start)?;
            }
        }
        match self.stages.get(index) {
            Some((start, _)) => stream.record_into(start),
            None => Ok(()),
        }
    }

    /// Marks the end of the stage at `index` on its stream.
    pub fn stage_end(&self, stream: &Stream, index: usize) -> Result<()> {
        match self.stages.get(index) {
            Some((_, end)) => stream.record_into(end),
            None => Ok(()),
        }
    }

    /// Reads the timings once the step has finished; `sites` names each stage in enqueue
    /// order with its stream's name.
    pub fn finish(
        &self,
        pipeline: &'static str,
        sites: &[(&'static str, &'static str)],
    ) -> Result<StepProfile> {
        let mut stages = Vec::with_capacity(self.stages.len());
        for (index, (&(stage, stream), (start, end))) in sites.iter().zip(&self.stages).enumerate()
        {
            let origin = self.start_of(index);
            stages.push(StageTiming {
                stage,
                stream,
                start_ms: Event::elapsed_time(origin, start)?,
                end_ms: Event::elapsed_time(origin, end)?,
            });
        }
        Ok(StepProfile { pipeline, stages })
    }
}

/// When one stage ran, in milliseconds from the start of its step.
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, gpu_pipeline};
///
/// gpu_pipeline! {
///     /// Clears two buffers on two streams, then copies one into the other.
///     pipeline Clear {
///         streams { main, side }
///         params { x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
///         stage zero on main { fill x = 0.0; }
///         stage one on side { fill y = 1.0; }
///         stage merge on main { copy y -> x; }
///     }
/// }
///
/// let ctx = Context::cpu();
/// let mut x = DeviceBuffer::<f32>::alloc(&ctx, 1 << 16)?;
/// let mut y = DeviceBuffer::<f32>::alloc(&ctx, 1 << 16)?;
/// let profile = Clear::new(&ctx)?.profile(ClearParams { x: &mut x, y: &mut y })?;
/// let one = &profile.stages[1];
/// assert_eq!((one.stage, one.stream), ("one", "side"));
/// assert!(0.0 <= one.start_ms && one.start_ms <= one.end_ms);
/// assert!(one.duration_ms() >= 0.0);
/// // `merge` reads `y` after `one` wrote it: it starts after `one` ends.
/// assert!(profile.stages[2].start_ms >= one.end_ms);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StageTiming {
    /// The stage's name.
    pub stage: &'static str,
    /// Its stream's name.
    pub stream: &'static str,
    /// Milliseconds from the step's start to the stage's start (after its waits).
    pub start_ms: f32,
    /// Milliseconds from the step's start to the stage's end.
    pub end_ms: f32,
}

impl StageTiming {
    /// How long the stage ran.
    pub fn duration_ms(&self) -> f32 {
        self.end_ms - self.start_ms
    }
}

/// The timings of one profiled step, from a generated pipeline's `profile`.
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, gpu_pipeline};
///
/// gpu_pipeline! {
///     /// Clears two buffers on two streams, then copies one into the other.
///     pipeline Clear {
///         streams { main, side }
///         params { x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
///         stage zero on main { fill x = 0.0; }
///         stage one on side { fill y = 1.0; }
///         stage merge on main { copy y -> x; }
///     }
/// }
///
/// let ctx = Context::cpu();
/// let mut x = DeviceBuffer::<f32>::alloc(&ctx, 1 << 16)?;
/// let mut y = DeviceBuffer::<f32>::alloc(&ctx, 1 << 16)?;
/// let profile = Clear::new(&ctx)?.profile(ClearParams { x: &mut x, y: &mut y })?;
/// assert_eq!(profile.pipeline, "Clear");
/// let names: Vec<_> = profile.stages.iter().map(|s| s.stage).collect();
/// assert_eq!(names, ["zero", "one", "merge"]);
/// assert!(profile.stages.iter().all(|s| s.end_ms <= profile.total_ms()));
/// // Open in Perfetto (ui.perfetto.dev): one track per stream.
/// let trace = profile.to_chrome_trace();
/// assert!(trace.contains("\"name\":\"merge\""), "{trace}");
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct StepProfile {
    /// The pipeline's name.
    pub pipeline: &'static str,
    /// One entry per stage, in enqueue order.
    pub stages: Vec<StageTiming>,
}

impl StepProfile {
    /// The step's span: from its start to the last stage's end.
    pub fn total_ms(&self) -> f32 {
        self.stages.iter().map(|s| s.end_ms).fold(0.0, f32::max)
    }

    /// The timings as Chrome trace JSON ("complete" events, one thread per stream), which
    /// Perfetto (ui.perfetto.dev) and chrome://tracing open.
    pub fn to_chrome_trace(&self) -> String {
        let mut streams: Vec<&str> = Vec::new();
        for s in &self.stages {
            if !streams.contains(&s.stream) {
                streams.push(s.stream);
            }
        }
        let mut events = Vec::new();
        for (tid, stream) in streams.iter().enumerate() {
            events.push(format!(
                r#"{{"name":"thread_name","ph":"M","pid":1,"tid":{tid},"args":{{"name":"stream {}"}}}}"#,
                json_escape(stream)
            ));
        }
        events.push(format!(
            r#"{{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{{"name":"pipeline {}"}}}}"#,
            json_escape(self.pipeline)
        ));
        for s in &self.stages {
            let tid = streams.iter().position(|&t| t == s.stream).unwrap_or(0);
            events.push(format!(
                r#"{{"name":"{}","cat":"stage","ph":"X","pid":1,"tid":{tid},"ts":{:.3},"dur":{:.3}}}"#,
                json_escape(s.stage),
                f64::from(s.start_ms) * 1000.0,
                f64::from(s.duration_ms().max(0.0)) * 1000.0
            ));
        }
        format!("{{\"traceEvents\":[\n{}\n]}}\n", events.join(",\n"))
    }
}

impl fmt::Display for StepProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "| stage | stream | start (ms) | end (ms) | duration (ms) |"
        )?;
        writeln!(f, "| --- | --- | ---: | ---: | ---: |")?;
        for s in &self.stages {
            writeln!(
                f,
                "| {} | {} | {:.3} | {:.3} | {:.3} |",
                s.stage,
                s.stream,
                s.start_ms,
                s.end_ms,
                s.duration_ms()
            )?;
        }
        Ok(())
    }
}

fn json_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            c if (c as u32) < 0x20 => format!("\\u{:04x}", c as u32).chars().collect(),
            c => vec![c],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chrome_traces_have_one_thread_per_stream_and_microsecond_spans() {
        let profile = StepProfile {
            pipeline: "Heat",
            stages: vec![
                StageTiming {
                    stage: "step",
                    stream: "compute",
                    start_ms: 0.0,
                    end_ms: 1.5,
                },
                StageTiming {
                    stage: "save",
                    stream: "copy",
                    start_ms: 1.5,
                    end_ms: 2.0,
                },
            ],
        };
        let trace = profile.to_chrome_trace();
        assert!(
            trace.contains(
                r#""name":"step","cat":"stage","ph":"X","pid":1,"tid":0,"ts":0.000,"dur":1500.000"#
            ),
            "{trace}"
        );
        assert!(trace.contains(r#""name":"save","cat":"stage","ph":"X","pid":1,"tid":1,"ts":1500.000,"dur":500.000"#), "{trace}");
        assert!(trace.contains(r#""args":{"name":"stream copy"}"#));
        assert_eq!(profile.total_ms(), 2.0);
        assert!(
            profile
                .to_string()
                .contains("| save | copy | 1.500 | 2.000 | 0.500 |")
        );
    }

    #[test]
    fn names_are_escaped_for_json() {
        assert_eq!(json_escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(json_escape("t\tab"), r"t\u0009ab");
    }
}

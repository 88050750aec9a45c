//! Events per step: what the generated code emits against what a per-buffer run-time tracker
//! would, counted for several pipelines and timed on the GPU.
//!
//! A per-buffer tracker (the cudarc approach) knows nothing about the step: it records an
//! event after every access of every buffer, and before each access waits on the last write
//! of that buffer (and, for a write, on its reads since) when those happened on another
//! stream. The generated code records one event per stage that another stream waits on and
//! enqueues one wait per edge of the transitive reduction of the stage graph (plus the fork
//! and join that close a step).
//!
//! 1. Counts, always printed (no GPU needed): the generated constants
//!    `EVENT_RECORDS_PER_STEP`, `EVENT_WAITS_PER_STEP`, `BUFFER_ACCESSES_PER_STEP`, against
//!    the tracker simulated over the same accesses (one record per buffer argument of every
//!    operation; steady state, i.e. the second of two steps).
//! 2. Time, on a GPU: the same step with the generated wiring (`run_steps`, fault tracking
//!    off), the same wiring by hand through the runtime, and the per-buffer-event wiring by
//!    hand through the runtime; µs per step (10 000 steps enqueued, then one wait; 1 000 for
//!    the 16-chunk step), medians of `REPS` after a warm-up, and the ratios.
//!
//! Every variant's results are checked against a CPU reference before timing. Without a GPU
//! the timing part says so and the program exits successfully. `cargo bench -p tests --bench
//! events` (`-- --check-host` runs the timed code on the checked host backend and fails on any
//! race); on the GPU machine `bash .gpu/run bench events`. Results also go to
//! `target/bench/events.json`.

use std::time::{Duration, Instant};

use gpu_pipeline::{
    Bound, Bounds, Context, DeviceBuffer, Event, EventFlags, HostKernel, LaunchConfig, Module,
    Stream, TypedKernel,
};

#[allow(
    dead_code,
    reason = "the overlap bench's pipelines and helpers, of which this bench uses some"
)]
#[path = "overlap.rs"]
pub mod overlap;

use overlap::{
    AddScalar, BoxResult, CHUNKS, Chunked16, Chunks, HandChunked, Serial16, VALUE, add_scalar_host,
    chunked16_params,
};
use shapes::{CrossStream, CrossStreamParams, Diamond, DiamondParams};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");
const STEPS: usize = 10_000;
const CHUNKED_STEPS: usize = 1_000;
/// Elements per chunk of the timed 16-chunk step: small, so the wiring dominates.
const CHUNK_LEN: usize = 1024;
const REPS: usize = 7;
/// Elements of the diamond's and cross-stream step's buffers (one block).
const N: u32 = 32;

type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);

/// Host implementation of `saxpy`, with the FMA the PTX uses.
pub fn saxpy_host(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
    let n = n as usize;
    for (y, x) in y[..n].iter_mut().zip(&x[..n]) {
        *y = a.mul_add(*x, *y);
    }
}

/// Host implementation of `empty`.
pub fn empty_host() {}

#[allow(dead_code, reason = "some pipelines are here only for their constants")]
mod shapes {
    use super::{PTX, add_scalar_host, empty_host, saxpy_host};
    use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

    gpu_pipeline! {
        /// The pipeline bench's `Empty`: one empty kernel per step.
        pub pipeline Empty {
            streams { main }
            unsafe kernels k = ptx(PTX) { fn empty() host = empty_host; }
            stage only on main { launch k::empty() grid 1u32 block 1u32; }
        }
    }

    gpu_pipeline! {
        /// The pipeline bench's `CrossStream`: `x` written on `a`, read on `b`.
        pub pipeline CrossStream {
            streams { a(non_blocking), b(non_blocking) }
            unsafe kernels k = ptx(PTX) {
                fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) host = add_scalar_host;
                fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) host = saxpy_host;
            }
            params { n: u32, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
            stage first on a { launch k::add_scalar(n, 1.0f32, x) grid 1u32 block 32u32; }
            stage second on b { launch k::saxpy(n, 1.0f32, x, y) grid 1u32 block 32u32; }
        }
    }

    /// A stage of 100 launches of `add_scalar` on one buffer.
    macro_rules! chain_pipeline {
        ($($i:literal)*) => {
            gpu_pipeline! {
                /// The pipeline bench's `Chain`: 100 dependent kernels on one stream.
                pub pipeline Chain {
                    streams { main }
                    unsafe kernels k = ptx(PTX) {
                        fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) host = add_scalar_host;
                    }
                    params { n: u32, value: f32, data: &mut DeviceBuffer<f32> }
                    stage chain on main { $( launch k::add_scalar(n, value, data) grid 1u32 + 0 * $i block 32u32; )* }
                }
            }
        };
    }

    chain_pipeline!(
        0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
        32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60
        61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89
        90 91 92 93 94 95 96 97 98 99
    );

    gpu_pipeline! {
        /// A diamond on three streams: `a` writes `x`; `b` and `c` read it on two other
        /// streams; `d` reads both results back on the first.
        pub pipeline Diamond {
            streams { s0(non_blocking), s1(non_blocking), s2(non_blocking) }
            unsafe kernels k = ptx(PTX) {
                fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) host = add_scalar_host;
                fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) host = saxpy_host;
            }
            params {
                n: u32,
                x: &mut DeviceBuffer<f32>,
                y: &mut DeviceBuffer<f32>,
                z: &mut DeviceBuffer<f32>,
                w: &mut DeviceBuffer<f32>,
            }
            stage a on s0 { launch k::add_scalar(n, 1.0f32, x) grid 1u32 block 32u32; }
            stage b on s1 { launch k::saxpy(n, 1.0f32, x, y) grid 1u32 block 32u32; }
            stage c on s2 { launch k::saxpy(n, 2.0f32, x, z) grid 1u32 block 32u32; }
            stage d on s0 {
                launch k::saxpy(n, 1.0f32, y, w) grid 1u32 block 32u32;
                launch k::saxpy(n, 1.0f32, z, w) grid 1u32 block 32u32;
            }
        }
    }
}

/// One buffer argument of an operation: buffer index and whether it is written.
type Access = (usize, bool);
const R: bool = false;
const W: bool = true;

/// A wait a per-buffer tracker enqueues before an access.
#[derive(Clone, Copy, Debug)]
enum Wait {
    /// On the buffer's last write.
    Write(usize),
    /// On the buffer's last read on a stream.
    Read(usize, usize),
}

/// Per buffer: the event of its last write and one per stream for its last read there.
#[derive(Debug)]
struct BufferEvents {
    write: Event,
    read: Vec<Event>,
}

/// A cudarc-style per-buffer tracker: an event recorded after every access of every buffer;
/// before an access on stream `s`, a wait on the buffer's last write if that was on another
/// stream, and for a write also on its reads since then on other streams. Without events it
/// only counts.
#[derive(Debug)]
struct Tracker {
    last_write: Vec<Option<usize>>,
    read_since: Vec<Vec<bool>>,
    events: Vec<BufferEvents>,
    records: usize,
    waits: usize,
}

impl Tracker {
    fn counting(buffers: usize, streams: usize) -> Tracker {
        Tracker {
            last_write: vec![None; buffers],
            read_since: vec![vec![false; streams]; buffers],
            events: Vec::new(),
            records: 0,
            waits: 0,
        }
    }

    fn with_events(ctx: &Context, buffers: usize, streams: usize) -> BoxResult<Tracker> {
        let event = || Event::with_flags(ctx, EventFlags::ORDERING);
        let mut tracker = Tracker::counting(buffers, streams);
        for _ in 0..buffers {
            tracker.events.push(BufferEvents {
                write: event()?,
                read: (0..streams).map(|_| event()).collect::<Result<_, _>>()?,
            });
        }
        Ok(tracker)
    }

    fn waits_for(&self, s: usize, accesses: &[Access]) -> Vec<Wait> {
        let mut waits = Vec::new();
        for &(b, write) in accesses {
            if self.last_write[b].is_some_and(|w| w != s) {
                waits.push(Wait::Write(b));
            }
            if write {
                for (t, &read) in self.read_since[b].iter().enumerate() {
                    if read && t != s {
                        waits.push(Wait::Read(b, t));
                    }
                }
            }
        }
        waits
    }

    fn commit(&mut self, s: usize, accesses: &[Access]) {
        for &(b, write) in accesses {
            if write {
                self.last_write[b] = Some(s);
                self.read_since[b].fill(false);
            } else {
                self.read_since[b][s] = true;
            }
            self.records += 1;
        }
    }

    /// Counts one operation without enqueueing anything.
    fn count(&mut self, s: usize, accesses: &[Access]) {
        self.waits += self.waits_for(s, accesses).len();
        self.commit(s, accesses);
    }

    /// Enqueues `op` on `stream` (index `s`) with the tracker's waits before it and its
    /// records after it.
    fn op(
        &mut self,
        stream: &Stream,
        s: usize,
        accesses: &[Access],
        op: impl FnOnce(&Stream) -> gpu_pipeline::Result<()>,
    ) -> BoxResult<()> {
        let waits = self.waits_for(s, accesses);
        for wait in &waits {
            let event = match *wait {
                Wait::Write(b) => &self.events[b].write,
                Wait::Read(b, t) => &self.events[b].read[t],
            };
            stream.wait_event(event)?;
        }
        self.waits += waits.len();
        op(stream)?;
        for &(b, write) in accesses {
            let event = if write {
                &self.events[b].write
            } else {
                &self.events[b].read[s]
            };
            stream.record_into(event)?;
        }
        self.commit(s, accesses);
        Ok(())
    }
}

/// A pipeline's step as the tracker sees it, with the generated constants.
struct Shape {
    name: &'static str,
    streams: usize,
    buffers: usize,
    /// Per stage: its stream and the buffer arguments of each of its operations.
    stages: Vec<(usize, Vec<Vec<Access>>)>,
    records: usize,
    waits: usize,
    accesses: usize,
}

impl Shape {
    /// The tracker's records and waits for the second of two steps.
    fn tracker(&self) -> (usize, usize) {
        let mut t = Tracker::counting(self.buffers, self.streams);
        let step = |t: &mut Tracker| {
            for (s, ops) in &self.stages {
                for accesses in ops {
                    t.count(*s, accesses);
                }
            }
        };
        step(&mut t);
        let (records, waits) = (t.records, t.waits);
        step(&mut t);
        (t.records - records, t.waits - waits)
    }

    /// Buffers per stage, each once: what `BUFFER_ACCESSES_PER_STEP` counts.
    fn stage_accesses(&self) -> usize {
        self.stages
            .iter()
            .map(|(_, ops)| {
                let mut buffers: Vec<usize> = ops.iter().flatten().map(|a| a.0).collect();
                buffers.sort_unstable();
                buffers.dedup();
                buffers.len()
            })
            .sum()
    }
}

/// The chunked step's operations on streams `compute`, `h2d`, `d2h` (buffers `src`, `dev`,
/// `dst` of chunk `c` are `3c`, `3c + 1`, `3c + 2`).
fn chunked_stages(compute: usize, h2d: usize, d2h: usize) -> Vec<(usize, Vec<Vec<Access>>)> {
    (0..CHUNKS)
        .flat_map(|c| {
            let (src, dev, dst) = (3 * c, 3 * c + 1, 3 * c + 2);
            [
                (h2d, vec![vec![(src, R), (dev, W)]]),
                (compute, vec![vec![(dev, W)]]),
                (d2h, vec![vec![(dev, R), (dst, W)]]),
            ]
        })
        .collect()
}

fn shapes() -> Vec<Shape> {
    use shapes::{Chain, Empty};
    let (x, y, z, w) = (0, 1, 2, 3);
    vec![
        Shape {
            name: "pipeline bench: Empty (1 stream)",
            streams: 1,
            buffers: 0,
            stages: vec![(0, vec![vec![]])],
            records: Empty::EVENT_RECORDS_PER_STEP,
            waits: Empty::EVENT_WAITS_PER_STEP,
            accesses: Empty::BUFFER_ACCESSES_PER_STEP,
        },
        Shape {
            name: "pipeline bench: CrossStream (2 streams)",
            streams: 2,
            buffers: 2,
            stages: vec![(0, vec![vec![(x, W)]]), (1, vec![vec![(x, R), (y, W)]])],
            records: CrossStream::EVENT_RECORDS_PER_STEP,
            waits: CrossStream::EVENT_WAITS_PER_STEP,
            accesses: CrossStream::BUFFER_ACCESSES_PER_STEP,
        },
        Shape {
            name: "pipeline bench: Chain (100 kernels, 1 stream)",
            streams: 1,
            buffers: 1,
            stages: vec![(0, vec![vec![(x, W)]; 100])],
            records: Chain::EVENT_RECORDS_PER_STEP,
            waits: Chain::EVENT_WAITS_PER_STEP,
            accesses: Chain::BUFFER_ACCESSES_PER_STEP,
        },
        Shape {
            name: "overlap bench: Chunked16 (16 chunks, 3 streams)",
            streams: 3,
            buffers: 3 * CHUNKS,
            stages: chunked_stages(0, 1, 2),
            records: Chunked16::EVENT_RECORDS_PER_STEP,
            waits: Chunked16::EVENT_WAITS_PER_STEP,
            accesses: Chunked16::BUFFER_ACCESSES_PER_STEP,
        },
        Shape {
            name: "overlap bench: Serial16 (16 chunks, 1 stream)",
            streams: 1,
            buffers: 3 * CHUNKS,
            stages: chunked_stages(0, 0, 0),
            records: Serial16::EVENT_RECORDS_PER_STEP,
            waits: Serial16::EVENT_WAITS_PER_STEP,
            accesses: Serial16::BUFFER_ACCESSES_PER_STEP,
        },
        Shape {
            name: "Diamond (4 stages, 3 streams)",
            streams: 3,
            buffers: 4,
            stages: vec![
                (0, vec![vec![(x, W)]]),
                (1, vec![vec![(x, R), (y, W)]]),
                (2, vec![vec![(x, R), (z, W)]]),
                (0, vec![vec![(y, R), (w, W)], vec![(z, R), (w, W)]]),
            ],
            records: Diamond::EVENT_RECORDS_PER_STEP,
            waits: Diamond::EVENT_WAITS_PER_STEP,
            accesses: Diamond::BUFFER_ACCESSES_PER_STEP,
        },
    ]
}

/// The counts table, and its JSON rows.
fn count_table() -> Vec<String> {
    println!("\nevents per step: generated wiring vs a per-buffer run-time tracker (steady state)");
    println!(
        "| pipeline | stages | generated records | generated waits | buffer accesses | tracker records | tracker waits | tracker / generated |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut json = Vec::new();
    for shape in shapes() {
        let (records, waits) = shape.tracker();
        let generated = shape.records + shape.waits;
        let ratio = if generated == 0 {
            if records + waits == 0 {
                "—".to_owned()
            } else {
                "∞".to_owned()
            }
        } else {
            format!("{:.2}", (records + waits) as f64 / generated as f64)
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            shape.name,
            shape.stages.len(),
            shape.records,
            shape.waits,
            shape.accesses,
            records,
            waits,
            ratio
        );
        if shape.stage_accesses() != shape.accesses {
            println!(
                "  (warning: this bench's model of `{}` touches {} buffers per stage in all, the \
                 macro counts {})",
                shape.name,
                shape.stage_accesses(),
                shape.accesses
            );
        }
        json.push(format!(
            "{{\"pipeline\":\"{}\",\"stages\":{},\"generated_records\":{},\"generated_waits\":{},\"buffer_accesses\":{},\"tracker_records\":{},\"tracker_waits\":{}}}",
            shape.name,
            shape.stages.len(),
            shape.records,
            shape.waits,
            shape.accesses,
            records,
            waits
        ));
    }
    println!(
        "records and waits count event operations enqueued per step; \"buffer accesses\" is the \
         macro's BUFFER_ACCESSES_PER_STEP (each buffer once per stage); the tracker records one \
         event per buffer argument of every operation"
    );
    json
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Warms each variant (0 generated, 1 same wiring by hand, 2 per-buffer tracker) up, then
/// runs them `reps` times interleaved; returns µs per step.
fn measure(
    steps: usize,
    reps: usize,
    f: &mut dyn FnMut(usize) -> BoxResult<()>,
) -> BoxResult<[f64; 3]> {
    for variant in 0..3 {
        f(variant)?;
    }
    let mut samples: [Vec<Duration>; 3] = Default::default();
    for _ in 0..reps {
        for (variant, s) in samples.iter_mut().enumerate() {
            let start = Instant::now();
            f(variant)?;
            s.push(start.elapsed());
        }
    }
    let us = |s: Vec<Duration>| median(s).as_secs_f64() * 1e6 / steps as f64;
    let [a, b, c] = samples;
    Ok([us(a), us(b), us(c)])
}

/// One timed pipeline.
#[derive(Debug)]
struct Timing {
    pipeline: &'static str,
    /// µs per step: generated, same wiring by hand, per-buffer tracker.
    us: [f64; 3],
}

/// The kernels through the runtime, with their host implementations.
struct Kernels {
    add: TypedKernel<AddScalar>,
    saxpy: TypedKernel<Saxpy>,
}

impl Kernels {
    fn new(ctx: &Context) -> BoxResult<Kernels> {
        let module = Module::load_ptx(ctx, PTX)?.named("test_kernels");
        // Each indexes its buffers below `n`, as the pipelines declare (`&mut [f32; n]`).
        let below_n = |buffers: &[usize]| {
            buffers
                .iter()
                .fold(Bounds::new(), |b, &i| b.buffer(i, Bound::param(0)))
        };
        // SAFETY: add_scalar(unsigned n, float value, float* data) in test_kernels.cu, which
        // indexes `data` below `n`.
        let add = unsafe {
            module
                .function("add_scalar")?
                .typed_with_bounds::<AddScalar>(below_n(&[2]))?
        };
        // SAFETY: saxpy(unsigned n, float a, const float* x, float* y) in test_kernels.cu,
        // which indexes `x` and `y` below `n`.
        let saxpy = unsafe {
            module
                .function("saxpy")?
                .typed_with_bounds::<Saxpy>(below_n(&[2, 3]))?
        };
        Ok(Kernels {
            add: add.with_host(HostKernel::new(add_scalar_host)),
            saxpy: saxpy.with_host(HostKernel::new(saxpy_host)),
        })
    }
}

/// Fresh device buffers holding `values`, uploaded and waited for.
fn buffers<const K: usize>(
    setup: &Stream,
    values: [&[f32]; K],
) -> BoxResult<[DeviceBuffer<f32>; K]> {
    let mut out = Vec::with_capacity(K);
    for (i, v) in values.into_iter().enumerate() {
        out.push(DeviceBuffer::from_slice(setup, v)?.named(&format!("buffer{i}")));
    }
    out.try_into().map_err(|_| "wrong number of buffers".into())
}

/// Non-zero starting values, different per buffer.
fn start(k: usize) -> Vec<f32> {
    (0..N as usize)
        .map(|i| ((i * 7 + k * 13) % 17) as f32 * 0.5 - 4.0)
        .collect()
}

fn compare(what: &str, got: &[f32], want: &[f32]) -> BoxResult<()> {
    match got.iter().zip(want).position(|(g, w)| g != w) {
        Some(i) => Err(format!("{what}: element {i} is {} instead of {}", got[i], want[i]).into()),
        None => Ok(()),
    }
}

const NAMES: [&str; 3] = [
    "generated",
    "same wiring by hand",
    "per-buffer events by hand",
];

/// The cross-stream step: `x += 1` on `a`, then `y = x + y` on `b`.
fn time_cross_stream(ctx: &Context, steps: usize, reps: usize) -> BoxResult<Timing> {
    let k = Kernels::new(ctx)?;
    let mut pipeline = CrossStream::new(ctx)?;
    pipeline.set_fault_tracking(false);
    let streams = [Stream::non_blocking(ctx)?, Stream::non_blocking(ctx)?];
    let [a, b] = &streams;
    let (ea, eb) = (
        Event::with_flags(ctx, EventFlags::ORDERING)?,
        Event::with_flags(ctx, EventFlags::ORDERING)?,
    );
    let mut tracker = Tracker::with_events(ctx, 2, 2)?;
    let cfg = LaunchConfig::new(1u32, 32u32);
    let mut run = |variant: usize,
                   steps: usize,
                   x: &mut DeviceBuffer<f32>,
                   y: &mut DeviceBuffer<f32>|
     -> BoxResult<()> {
        match variant {
            0 => Ok(pipeline
                .run_steps(CrossStreamParams { n: N, x, y }, steps)?
                .wait()?),
            1 => {
                for _ in 0..steps {
                    k.add.launch(a, cfg, (N, 1.0f32, &mut *x))?;
                    a.record_into(&ea)?;
                    b.wait_event(&ea)?;
                    k.saxpy.launch(b, cfg, (N, 1.0f32, &*x, &mut *y))?;
                    b.record_into(&eb)?;
                    a.wait_event(&eb)?;
                }
                Ok(a.synchronize()?)
            }
            _ => {
                for _ in 0..steps {
                    tracker.op(a, 0, &[(0, W)], |s| {
                        k.add.launch(s, cfg, (N, 1.0f32, &mut *x))
                    })?;
                    tracker.op(b, 1, &[(0, R), (1, W)], |s| {
                        k.saxpy.launch(s, cfg, (N, 1.0f32, &*x, &mut *y))
                    })?;
                }
                a.synchronize()?;
                Ok(b.synchronize()?)
            }
        }
    };
    // Check each variant against the CPU over 3 steps from fresh buffers.
    for (variant, name) in NAMES.into_iter().enumerate() {
        let (x0, y0) = (start(0), start(1));
        let [mut x, mut y] = buffers(a, [&x0, &y0])?;
        run(variant, 3, &mut x, &mut y)?;
        let (mut xr, mut yr) = (x0, y0);
        for _ in 0..3 {
            for (x, y) in xr.iter_mut().zip(&mut yr) {
                *x += 1.0;
                *y = 1.0f32.mul_add(*x, *y);
            }
        }
        compare(&format!("cross-stream, {name}, x"), &x.to_vec(a)?, &xr)?;
        compare(&format!("cross-stream, {name}, y"), &y.to_vec(a)?, &yr)?;
    }
    let [mut x, mut y] = buffers(a, [&start(0), &start(1)])?;
    let us = measure(steps, reps, &mut |variant| {
        run(variant, steps, &mut x, &mut y)
    })?;
    Ok(Timing {
        pipeline: "CrossStream (2 streams)",
        us,
    })
}

/// The diamond step on three streams.
fn time_diamond(ctx: &Context, steps: usize, reps: usize) -> BoxResult<Timing> {
    let k = Kernels::new(ctx)?;
    let mut pipeline = Diamond::new(ctx)?;
    pipeline.set_fault_tracking(false);
    let streams = [
        Stream::non_blocking(ctx)?,
        Stream::non_blocking(ctx)?,
        Stream::non_blocking(ctx)?,
    ];
    let [s0, s1, s2] = &streams;
    let event = || Event::with_flags(ctx, EventFlags::ORDERING);
    let (ea, eb, ec) = (event()?, event()?, event()?);
    let mut tracker = Tracker::with_events(ctx, 4, 3)?;
    let cfg = LaunchConfig::new(1u32, 32u32);
    let mut run = |variant: usize, steps: usize, b: &mut [DeviceBuffer<f32>; 4]| -> BoxResult<()> {
        let [x, y, z, w] = b;
        match variant {
            0 => Ok(pipeline
                .run_steps(DiamondParams { n: N, x, y, z, w }, steps)?
                .wait()?),
            1 => {
                for _ in 0..steps {
                    k.add.launch(s0, cfg, (N, 1.0f32, &mut *x))?;
                    s0.record_into(&ea)?;
                    s1.wait_event(&ea)?;
                    k.saxpy.launch(s1, cfg, (N, 1.0f32, &*x, &mut *y))?;
                    s1.record_into(&eb)?;
                    s2.wait_event(&ea)?;
                    k.saxpy.launch(s2, cfg, (N, 2.0f32, &*x, &mut *z))?;
                    s2.record_into(&ec)?;
                    s0.wait_event(&eb)?;
                    s0.wait_event(&ec)?;
                    k.saxpy.launch(s0, cfg, (N, 1.0f32, &*y, &mut *w))?;
                    k.saxpy.launch(s0, cfg, (N, 1.0f32, &*z, &mut *w))?;
                }
                Ok(s0.synchronize()?)
            }
            _ => {
                for _ in 0..steps {
                    tracker.op(s0, 0, &[(0, W)], |s| {
                        k.add.launch(s, cfg, (N, 1.0f32, &mut *x))
                    })?;
                    tracker.op(s1, 1, &[(0, R), (1, W)], |s| {
                        k.saxpy.launch(s, cfg, (N, 1.0f32, &*x, &mut *y))
                    })?;
                    tracker.op(s2, 2, &[(0, R), (2, W)], |s| {
                        k.saxpy.launch(s, cfg, (N, 2.0f32, &*x, &mut *z))
                    })?;
                    tracker.op(s0, 0, &[(1, R), (3, W)], |s| {
                        k.saxpy.launch(s, cfg, (N, 1.0f32, &*y, &mut *w))
                    })?;
                    tracker.op(s0, 0, &[(2, R), (3, W)], |s| {
                        k.saxpy.launch(s, cfg, (N, 1.0f32, &*z, &mut *w))
                    })?;
                }
                for s in &streams {
                    s.synchronize()?;
                }
                Ok(())
            }
        }
    };
    for (variant, name) in NAMES.into_iter().enumerate() {
        let start_values = [start(0), start(1), start(2), start(3)];
        let [x0, y0, z0, w0] = &start_values;
        let mut b = buffers(s0, [x0, y0, z0, w0])?;
        run(variant, 3, &mut b)?;
        let [mut xr, mut yr, mut zr, mut wr] = start_values;
        for _ in 0..3 {
            for i in 0..N as usize {
                xr[i] += 1.0;
                yr[i] = 1.0f32.mul_add(xr[i], yr[i]);
                zr[i] = 2.0f32.mul_add(xr[i], zr[i]);
                wr[i] = 1.0f32.mul_add(yr[i], wr[i]);
                wr[i] = 1.0f32.mul_add(zr[i], wr[i]);
            }
        }
        for (label, buffer, want) in [("x", &b[0], &xr), ("y", &b[1], &yr), ("z", &b[2], &zr)]
            .into_iter()
            .chain([("w", &b[3], &wr)])
        {
            compare(
                &format!("diamond, {name}, {label}"),
                &buffer.to_vec(s0)?,
                want,
            )?;
        }
    }
    let [x0, y0, z0, w0] = [start(0), start(1), start(2), start(3)];
    let mut b = buffers(s0, [&x0, &y0, &z0, &w0])?;
    let us = measure(steps, reps, &mut |variant| run(variant, steps, &mut b))?;
    Ok(Timing {
        pipeline: "Diamond (4 stages, 3 streams)",
        us,
    })
}

/// The overlap bench's 16-chunk step at `CHUNK_LEN` elements per chunk.
fn time_chunked(ctx: &Context, steps: usize, reps: usize) -> BoxResult<Timing> {
    let mut pipeline = Chunked16::new(ctx)?;
    pipeline.set_fault_tracking(false);
    let hand = HandChunked::new(ctx)?;
    let mut tracker = Tracker::with_events(ctx, 3 * CHUNKS, 3)?;
    let mut chunks = Chunks::new(ctx, CHUNK_LEN)?;
    let n = CHUNK_LEN as u32;
    let cfg = LaunchConfig::new(n.div_ceil(256), 256u32);
    let mut run = |variant: usize, steps: usize, chunks: &mut Chunks| -> BoxResult<()> {
        match variant {
            0 => Ok(pipeline
                .run_steps(chunked16_params(VALUE, chunks), steps)?
                .wait()?),
            1 => {
                for _ in 0..steps {
                    hand.enqueue(VALUE, chunks)?;
                }
                Ok(hand.compute.synchronize()?)
            }
            _ => {
                let Chunks { src, dev, dst, .. } = chunks;
                for _ in 0..steps {
                    for c in 0..CHUNKS {
                        let (s, d, o) = (3 * c, 3 * c + 1, 3 * c + 2);
                        let (src, dev, dst) = (&src[c], &mut dev[c], &mut dst[c]);
                        tracker.op(&hand.h2d, 1, &[(s, R), (d, W)], |st| {
                            st.copy_htod(src, &mut *dev)
                        })?;
                        tracker.op(&hand.compute, 0, &[(d, W)], |st| {
                            hand.add.launch(st, cfg, (n, VALUE, &mut *dev))
                        })?;
                        tracker.op(&hand.d2h, 2, &[(d, R), (o, W)], |st| {
                            st.copy_dtoh(&*dev, dst)
                        })?;
                    }
                }
                for s in [&hand.compute, &hand.h2d, &hand.d2h] {
                    s.synchronize()?;
                }
                Ok(())
            }
        }
    };
    for (variant, name) in NAMES.into_iter().enumerate() {
        chunks.poison()?;
        run(variant, 1, &mut chunks)?;
        chunks.verify(&format!("16 chunks, {name}"))?;
    }
    let us = measure(steps, reps, &mut |variant| run(variant, steps, &mut chunks))?;
    Ok(Timing {
        pipeline: "Chunked16 (48 stages, 3 streams, 4 KiB chunks)",
        us,
    })
}

fn time_all(ctx: &Context, scale: usize, reps: usize) -> BoxResult<Vec<Timing>> {
    Ok(vec![
        time_cross_stream(ctx, STEPS / scale, reps)?,
        time_diamond(ctx, STEPS / scale, reps)?,
        time_chunked(ctx, CHUNKED_STEPS / scale, reps)?,
    ])
}

/// The timed code on the checked host backend, a few steps each: every variant's results
/// are checked and the race detector must find nothing.
pub fn check_host() -> BoxResult<()> {
    let ctx = Context::host_checked();
    time_all(&ctx, 1000, 1)?;
    let races = ctx.races();
    if !races.is_empty() {
        return Err(format!("{} race(s), the first: {:?}", races.len(), races[0]).into());
    }
    Ok(())
}

fn main() {
    let counts = count_table();
    if std::env::args().any(|a| a == "--check-host") {
        match check_host() {
            Ok(()) => println!("\nevents: checked host backend, every variant verified, no races"),
            Err(e) => {
                eprintln!("events host check failed: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let ctx = match Context::cuda(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("\nevents bench timing skipped: no CUDA device ({e})");
            return;
        }
    };
    let device = ctx.device().and_then(|d| d.name().ok()).unwrap_or_default();
    let timings = match time_all(&ctx, 1, REPS) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("events bench failed: {e}");
            std::process::exit(1);
        }
    };
    println!("\n{device}: µs per step, medians of {REPS} runs after warm-up");
    println!(
        "| pipeline | generated | same wiring by hand | per-buffer events by hand | per-buffer / generated | generated / by hand |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    let mut json = Vec::new();
    for t in &timings {
        let [g, h, p] = t.us;
        println!(
            "| {} | {g:.3} | {h:.3} | {p:.3} | {:.3} | {:.3} |",
            t.pipeline,
            p / g,
            g / h
        );
        json.push(format!(
            "{{\"pipeline\":\"{}\",\"generated\":{g:.4},\"by_hand\":{h:.4},\"per_buffer\":{p:.4}}}",
            t.pipeline
        ));
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    let json = format!(
        "{{\"device\":\"{device}\",\"counts\":[{}],\"timings\":[{}]}}\n",
        counts.join(","),
        json.join(",")
    );
    if std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("events.json"), json))
        .is_err()
    {
        eprintln!("could not write target/bench/events.json");
    }
}

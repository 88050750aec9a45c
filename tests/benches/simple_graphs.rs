//! NVIDIA's simpleCudaGraphs sample written with `gpu_pipeline!` alone, against the sample's
//! two methods written with raw CUDA runtime calls (`benches/anchors/simple_graphs.cu`), per
//! method: the graph made, cloned, and each of the two launched `LAUNCHES` times (the sample's
//! GRAPH_LAUNCH_ITERATIONS, 3).
//!
//! The work is the sample's: the sum of `size` floats (2^24 by default) copied from pinned
//! memory to the device, reduced by `reduce` into 512 partial sums (zeroed first) and by
//! `reduce_final` into one (zeroed first, `tests/kernels/simple_graphs.cu`), copied to the host,
//! where a host node records it and resets the host copy to 0, as the sample's callback does.
//!
//! | method | the sample | the port |
//! | --- | --- | --- |
//! | `manual` | `cudaGraphsManual`: seven nodes added by hand with their dependencies | seven stages, each naming the stages it depends on (`after`); the roots on streams of their own; `capture` |
//! | `stream_capture` | `cudaGraphsUsingStreamCapture`: the work on three streams forked and joined with events, captured | the work on the sample's three streams, the fork and the joins derived from the data (and the fork checked with `concurrent`); `capture` |
//!
//! Both then `clone_step` the captured graph (`cuGraphClone`, as the sample's
//! `cudaGraphClone`) and launch the clone. The clone borrows the original, so the original's
//! launches come before the clone is made (the sample clones first). The macro builds both
//! graphs from the step's plan, so the two ports differ in how they are written, not in how
//! the graph is made.
//!
//! Each method is timed as a whole, after one untimed call of it: the graph captured (built and
//! instantiated), `LAUNCHES` launches and a synchronize, the clone made, `LAUNCHES` launches of
//! it and a synchronize, both dropped; the replays' part is timed too. The pipelines (their
//! streams and module) are made before. With `SIMPLE_GRAPHS_ANCHOR` naming the built anchor
//! (`nvcc -O3 -arch=sm_90 -o simple_graphs benches/anchors/simple_graphs.cu`), the bench runs
//! it as `ANCHOR SIZE LAUNCHES` in alternating rounds with its own (ours, anchor, ours, ...;
//! `--rounds R`, default 5), parses its `method nodes callbacks total_ms replay_ms sum` lines and
//! prints one Markdown table: medians over the rounds with their spread ((max - min) / median)
//! and ours/anchor. Every call of both programs must run the host node `2 LAUNCHES` times, each
//! time seeing the CPU's sum of the input (within 1e-9, relative), and our host copy must be 0
//! afterwards (the callback's reset).
//!
//! Without a GPU it says so and exits successfully; `-- --check-host` runs the two ports on
//! the checked CPU backend (2^16 floats) and fails on a wrong sum or a race.
//! `cargo bench -p tests --bench simple_graphs`; on the GPU machine
//! `SIMPLE_GRAPHS_ANCHOR=./simple_graphs bash .gpu/run bench simple_graphs`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream, gpu_pipeline};

const SIMPLE_GRAPHS_PTX: &str = include_str!("../kernels/simple_graphs.ptx");

/// Threads per block of both kernels (`SIMPLE_GRAPHS_THREADS`, the sample's THREADS_PER_BLOCK).
const THREADS: u32 = 512;
/// Blocks of `reduce`, and partial sums: the sample's `maxBlocks`.
const BLOCKS: u64 = 512;
/// The sample's input size.
const DEFAULT_SIZE: usize = 1 << 24;
/// The sample's GRAPH_LAUNCH_ITERATIONS.
const DEFAULT_LAUNCHES: usize = 3;
/// Rounds (ours, then the anchor's) unless `--rounds` says otherwise.
const DEFAULT_ROUNDS: usize = 5;
/// The largest input `--size` takes (1 GiB of floats).
const MAX_SIZE: usize = 1 << 28;
/// How far (relative) a sum may be from the CPU's: both add doubles, in other orders.
const TOLERANCE: f64 = 1e-9;
/// The environment variable naming the built anchor binary.
pub const ANCHOR_ENV: &str = "SIMPLE_GRAPHS_ANCHOR";
/// The methods, in the anchor's order and under its names.
pub const METHODS: [&str; 2] = ["manual", "stream_capture"];

type BoxResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;
/// What the host node records: every sum it saw.
type Seen = Arc<Mutex<Vec<f64>>>;

/// The kernels' CPU implementations, for the CPU backend.
mod cpu {
    use super::THREADS;

    /// `partials[b]`: the sum of the elements a grid of `partials_size` blocks of `THREADS`
    /// threads gives block `b` (`i / THREADS % blocks == b`).
    pub fn reduce(input: &[f32], partials: &mut [f64], input_size: u64, partials_size: u64) {
        let (threads, blocks) = (THREADS as usize, partials_size as usize);
        partials[..blocks].fill(0.0);
        for (chunk, values) in input[..input_size as usize].chunks(threads).enumerate() {
            partials[chunk % blocks] += values.iter().map(|&v| f64::from(v)).sum::<f64>();
        }
    }

    /// `result[0]`: the sum of the partial sums.
    pub fn reduce_final(partials: &[f64], result: &mut [f64], partials_size: u64) {
        result[0] = partials[..partials_size as usize].iter().sum();
    }
}

gpu_pipeline! {
    /// The sample's `cudaGraphsManual`: one stage per node it adds by hand, each naming the
    /// nodes it depends on (`after`, the sample's `nodeDependencies`); the three roots (the
    /// input's copy and the two memsets) on streams of their own, so nothing orders them.
    pipeline Manual {
        streams { main, partials_root, result_root }
        unsafe kernels k = ptx(SIMPLE_GRAPHS_PTX) {
            fn reduce(input: &[f32; input_size], partials: &mut [f64; partials_size], input_size: u64, partials_size: u64)
                cpu = cpu::reduce;
            fn reduce_final(partials: &[f64; partials_size], result: &mut [f64; 1], partials_size: u64)
                cpu = cpu::reduce_final;
        }
        params {
            input_size: u64,
            blocks: u64,
            seen: Seen,
            input_h: &PinnedBuffer<f32>,
            input_d: &mut DeviceBuffer<f32>,
            partials: &mut DeviceBuffer<f64>,
            result_d: &mut DeviceBuffer<f64>,
            result_h: &mut PinnedBuffer<f64>,
        }
        stage memcpy_input on main { copy input_h -> input_d; }
        stage memset_partials on partials_root { fill partials = 0.0f64; }
        stage reduce on main after memset_partials, memcpy_input {
            launch k::reduce(input_d, partials, input_size, blocks) grid blocks as u32 block THREADS;
        }
        stage memset_result on result_root { fill result_d = 0.0f64; }
        stage reduce_final on main after reduce, memset_result {
            launch k::reduce_final(partials, result_d, blocks) grid 1 block THREADS;
        }
        stage memcpy_result on main after reduce_final { copy result_d -> result_h; }
        stage host_node on main after memcpy_result {
            host |result_h: &mut [f64]| {
                seen.lock().unwrap_or_else(PoisonError::into_inner).push(result_h[0]);
                result_h[0] = 0.0;
            } writes(result_h);
        }
    }
}

gpu_pipeline! {
    /// The sample's `cudaGraphsUsingStreamCapture`: the work on its three streams, as it
    /// enqueues it; the fork to `stream2` and `stream3` and their joins before `reduce` and
    /// `reduce_final` are the waits the macro derives from the data, not written.
    pipeline StreamCapture {
        streams { stream1, stream2, stream3 }
        unsafe kernels k = ptx(SIMPLE_GRAPHS_PTX) {
            fn reduce(input: &[f32; input_size], partials: &mut [f64; partials_size], input_size: u64, partials_size: u64)
                cpu = cpu::reduce;
            fn reduce_final(partials: &[f64; partials_size], result: &mut [f64; 1], partials_size: u64)
                cpu = cpu::reduce_final;
        }
        params {
            input_size: u64,
            blocks: u64,
            seen: Seen,
            input_h: &PinnedBuffer<f32>,
            input_d: &mut DeviceBuffer<f32>,
            partials: &mut DeviceBuffer<f64>,
            result_d: &mut DeviceBuffer<f64>,
            result_h: &mut PinnedBuffer<f64>,
        }
        stage copy_input on stream1 { copy input_h -> input_d; }
        stage clear_partials on stream2 { fill partials = 0.0f64; }
        stage clear_result on stream3 { fill result_d = 0.0f64; }
        // Waits for `clear_partials` (the sample's memsetEvent1).
        stage partial_sums on stream1 {
            launch k::reduce(input_d, partials, input_size, blocks) grid blocks as u32 block THREADS;
        }
        // Waits for `clear_result` (memsetEvent2); stream1 is the origin, so the end joins it.
        stage final_sum on stream1 {
            launch k::reduce_final(partials, result_d, blocks) grid 1 block THREADS;
            copy result_d -> result_h;
            host |result_h: &mut [f64]| {
                seen.lock().unwrap_or_else(PoisonError::into_inner).push(result_h[0]);
                result_h[0] = 0.0;
            } writes(result_h);
        }
        concurrent(copy_input, clear_partials, clear_result);
    }
}

/// The sample's `(rand() & 0xFF) / RAND_MAX` for element `i`, with a hash of the index for
/// `rand()` (the anchor computes the same).
fn input_value(i: usize) -> f32 {
    let mut h = (i as u32).wrapping_mul(2_654_435_761);
    h ^= h >> 15;
    ((h >> 8) & 0xFF) as f32 / 2_147_483_647.0
}

/// The sum the host node must see: the input's, added on the CPU.
pub fn reference(size: usize) -> f64 {
    (0..size).map(|i| f64::from(input_value(i))).sum()
}

/// One call of a method: the graph's nodes and edges, the sums its host node saw, and its
/// times.
#[derive(Clone, Debug)]
struct Called {
    nodes: usize,
    edges: usize,
    seen: Vec<f64>,
    total_ms: f64,
    replay_ms: f64,
}

/// The sample's buffers on the device and the pipelines, made once.
struct Ports {
    size: usize,
    launches: usize,
    input_h: PinnedBuffer<f32>,
    input_d: DeviceBuffer<f32>,
    partials: DeviceBuffer<f64>,
    result_d: DeviceBuffer<f64>,
    result_h: PinnedBuffer<f64>,
    seen: Seen,
    manual: Manual,
    capture: StreamCapture,
}

/// One whole method call of the sample, on the port in field `$pipeline` with params type
/// `$params` (the two generated graph types share no trait): capture, `launches` launches and
/// a synchronize, `clone_step`, as many launches of the clone and a synchronize, both dropped.
macro_rules! method_call {
    ($ports:ident, $pipeline:ident, $params:ident) => {{
        let launches = $ports.launches;
        let start = Instant::now();
        let mut graph = $ports.$pipeline.capture($params {
            input_size: $ports.size as u64,
            blocks: BLOCKS,
            seen: Arc::clone(&$ports.seen),
            input_h: &$ports.input_h,
            input_d: &mut $ports.input_d,
            partials: &mut $ports.partials,
            result_d: &mut $ports.result_d,
            result_h: &mut $ports.result_h,
        })?;
        let (nodes, edges) = (graph.node_count()?, graph.edge_count()?);
        let replays = Instant::now();
        for _ in 0..launches {
            graph.launch()?;
        }
        graph.synchronize()?;
        let mut replay = replays.elapsed();
        let mut clone = graph.clone_step()?;
        let replays = Instant::now();
        for _ in 0..launches {
            clone.launch()?;
        }
        clone.synchronize()?;
        replay += replays.elapsed();
        drop(clone);
        drop(graph);
        Ok($ports.called((nodes, edges), start.elapsed(), replay))
    }};
}

impl Ports {
    fn new(ctx: &Context, size: usize, launches: usize) -> BoxResult<Ports> {
        let stream = Stream::new(ctx)?;
        let input: Vec<f32> = (0..size).map(input_value).collect();
        let mut ports = Ports {
            size,
            launches,
            input_h: PinnedBuffer::from_slice(ctx, &input)?,
            input_d: DeviceBuffer::zeros(&stream, size)?,
            partials: DeviceBuffer::zeros(&stream, BLOCKS as usize)?,
            result_d: DeviceBuffer::zeros(&stream, 1)?,
            result_h: PinnedBuffer::zeros(ctx, 1)?,
            seen: Arc::default(),
            manual: Manual::new(ctx)?,
            capture: StreamCapture::new(ctx)?,
        };
        stream.synchronize()?;
        // The anchor tracks nothing (tracking is off by default; this says so).
        ports.manual.set_fault_tracking(false);
        ports.capture.set_fault_tracking(false);
        Ok(ports)
    }

    /// The sums recorded so far, taken (the log left empty).
    fn take_seen(&self) -> Vec<f64> {
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The sample's `cudaGraphsManual`, ported.
    fn manual(&mut self) -> BoxResult<Called> {
        method_call!(self, manual, ManualParams)
    }

    /// The sample's `cudaGraphsUsingStreamCapture`, ported.
    fn stream_capture(&mut self) -> BoxResult<Called> {
        method_call!(self, capture, StreamCaptureParams)
    }

    fn called(&self, (nodes, edges): (usize, usize), total: Duration, replay: Duration) -> Called {
        Called {
            nodes,
            edges,
            seen: self.take_seen(),
            total_ms: total.as_secs_f64() * 1e3,
            replay_ms: replay.as_secs_f64() * 1e3,
        }
    }

    /// One untimed call of `method`, then a timed one, checked: what the timed one gave.
    fn timed(&mut self, method: &str, reference: f64) -> BoxResult<Called> {
        let mut result = None;
        for _ in 0..2 {
            let called = match method {
                "manual" => self.manual()?,
                "stream_capture" => self.stream_capture()?,
                other => return Err(format!("no method {other}").into()),
            };
            let (left, launches) = (self.result_h.as_slice()?[0], self.launches);
            check(
                "ours",
                method,
                called.seen.len(),
                &called.seen,
                reference,
                launches,
            )?;
            if left != 0.0 {
                return Err(format!("ours {method}: the host node left {left} in result_h").into());
            }
            result = Some(called);
        }
        result.ok_or_else(|| "no call ran".into())
    }
}

/// Fails unless the host node ran `2 launches` times and saw the CPU's sum every time.
fn check(
    who: &str,
    method: &str,
    callbacks: usize,
    seen: &[f64],
    reference: f64,
    launches: usize,
) -> BoxResult<()> {
    if callbacks != 2 * launches {
        return Err(format!(
            "{who} {method}: the host node ran {callbacks} times, not {} (two graphs, {launches} launches each)",
            2 * launches
        )
        .into());
    }
    for &sum in seen {
        // A NaN fails too.
        let agrees = (sum - reference).abs() <= TOLERANCE * reference.abs().max(1.0);
        if !agrees {
            return Err(format!(
                "{who} {method}: the host node saw the sum {sum:e}, the CPU's is {reference:e}"
            )
            .into());
        }
    }
    Ok(())
}

/// One method's calls over the rounds, ours and the anchor's (empty without one).
#[derive(Debug)]
pub struct MethodTimes {
    /// The method's name, as the anchor prints it.
    pub method: &'static str,
    /// The nodes of our graph (as `node_count` counts them), and the anchor's, if it ran.
    pub nodes: (usize, Option<usize>),
    /// The edges of our graph (`edge_count`).
    pub edges: usize,
    /// Our milliseconds per call, one per round.
    pub ours: Vec<f64>,
    /// The milliseconds of those calls' launches and synchronizes.
    pub ours_replay: Vec<f64>,
    /// The anchor's milliseconds per call, one per round, or none.
    pub anchor: Vec<f64>,
    /// The milliseconds of the anchor's launches and synchronizes.
    pub anchor_replay: Vec<f64>,
}

/// A method's line of the anchor's output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnchorLine {
    /// The nodes cudaGraphGetNodes counted.
    pub nodes: usize,
    /// How many times the host node ran.
    pub callbacks: usize,
    /// The call's milliseconds.
    pub total_ms: f64,
    /// The milliseconds of its launches and synchronizes.
    pub replay_ms: f64,
    /// The sum every host node saw.
    pub sum: f64,
}

/// Parses the anchor's `method nodes callbacks total_ms replay_ms sum` lines, in `METHODS`
/// order: each method once, positive finite times.
pub fn parse_anchor(stdout: &str) -> BoxResult<[AnchorLine; 2]> {
    let mut lines: [Option<AnchorLine>; 2] = [None; 2];
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, nodes, callbacks, total, replay, sum] = fields[..] else {
            return Err(format!(
                "the anchor printed `{line}`, not `method nodes callbacks total_ms replay_ms sum`"
            )
            .into());
        };
        let slot = METHODS
            .iter()
            .position(|&m| m == name)
            .ok_or_else(|| format!("the anchor printed an unknown method `{name}`"))?;
        if lines[slot].is_some() {
            return Err(format!("the anchor printed {name} twice").into());
        }
        let number = |what: &str, text: &str| -> BoxResult<f64> {
            text.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("the anchor's {name} line has no {what}: `{line}`").into())
        };
        let count = |what: &str, text: &str| -> BoxResult<usize> {
            text.parse()
                .map_err(|_| format!("the anchor's {name} line has no {what}: `{line}`").into())
        };
        let time = |text: &str| -> BoxResult<f64> {
            Some(number("time", text)?)
                .filter(|&ms| ms > 0.0)
                .ok_or_else(|| format!("the anchor's {name} line has no time: `{line}`").into())
        };
        lines[slot] = Some(AnchorLine {
            nodes: count("node count", nodes)?,
            callbacks: count("callback count", callbacks)?,
            total_ms: time(total)?,
            replay_ms: time(replay)?,
            sum: number("sum", sum)?,
        });
    }
    let mut out = [AnchorLine {
        nodes: 0,
        callbacks: 0,
        total_ms: 0.0,
        replay_ms: 0.0,
        sum: 0.0,
    }; 2];
    for (slot, (line, method)) in out.iter_mut().zip(lines.iter().zip(METHODS)) {
        *slot = line.ok_or_else(|| format!("the anchor printed no line for {method}"))?;
    }
    Ok(out)
}

/// Runs the anchor once on `size` floats, each graph launched `launches` times.
fn run_anchor(anchor: &Path, size: usize, launches: usize) -> BoxResult<[AnchorLine; 2]> {
    let stdout = tests::anchor::anchor_stdout(anchor, [size.to_string(), launches.to_string()])?;
    parse_anchor(&stdout)
}

/// `rounds` rounds of our two methods, each followed by one run of the anchor when there is
/// one; every call checked against the CPU's sum.
pub fn measure(
    ctx: &Context,
    size: usize,
    launches: usize,
    rounds: usize,
    anchor: Option<&Path>,
) -> BoxResult<Vec<MethodTimes>> {
    let reference = reference(size);
    let mut ports = Ports::new(ctx, size, launches)?;
    let mut times: Vec<MethodTimes> = METHODS
        .iter()
        .map(|&method| MethodTimes {
            method,
            nodes: (0, None),
            edges: 0,
            ours: Vec::new(),
            ours_replay: Vec::new(),
            anchor: Vec::new(),
            anchor_replay: Vec::new(),
        })
        .collect();
    for _ in 0..rounds {
        for t in &mut times {
            let called = ports.timed(t.method, reference)?;
            (t.nodes.0, t.edges) = (called.nodes, called.edges);
            t.ours.push(called.total_ms);
            t.ours_replay.push(called.replay_ms);
        }
        if let Some(anchor) = anchor {
            for (t, line) in times.iter_mut().zip(run_anchor(anchor, size, launches)?) {
                let seen = [line.sum];
                check(
                    "the anchor's",
                    t.method,
                    line.callbacks,
                    &seen,
                    reference,
                    launches,
                )?;
                t.nodes.1 = Some(line.nodes);
                t.anchor.push(line.total_ms);
                t.anchor_replay.push(line.replay_ms);
            }
        }
    }
    Ok(times)
}

/// The Markdown table of `times` (ms per call, and ms of its replays), with the anchor's
/// columns when it ran.
pub fn table(times: &[MethodTimes], launches: usize) -> String {
    let with_anchor = times.iter().all(|t| !t.anchor.is_empty());
    let mut out = String::from(if with_anchor {
        "| method | nodes (ours/anchor) | ours median ms | spread | ours replays ms | anchor median ms | spread | anchor replays ms | ours/anchor | replays ours/anchor |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    } else {
        "| method | nodes | ours median ms | spread | ours replays ms |\n| --- | ---: | ---: | ---: | ---: |\n"
    });
    let mut worst = 0.0_f64;
    for t in times {
        let (ours, ours_spread) = tests::anchor::median_spread(&t.ours);
        let (ours_replay, _) = tests::anchor::median_spread(&t.ours_replay);
        let nodes = match t.nodes {
            (ours, Some(anchor)) => format!("{ours}/{anchor}"),
            (ours, None) => ours.to_string(),
        };
        out.push_str(&format!(
            "| {} | {nodes} | {ours:.3} | {:.1}% | {ours_replay:.3} |",
            t.method,
            ours_spread * 100.0
        ));
        if with_anchor {
            let (anchor, anchor_spread) = tests::anchor::median_spread(&t.anchor);
            let (anchor_replay, _) = tests::anchor::median_spread(&t.anchor_replay);
            worst = worst.max(ours / anchor);
            out.push_str(&format!(
                " {anchor:.3} | {:.1}% | {anchor_replay:.3} | {:.3} | {:.3} |",
                anchor_spread * 100.0,
                ours / anchor,
                ours_replay / anchor_replay
            ));
        }
        out.push('\n');
    }
    if with_anchor {
        out.push_str(&format!(
            "worst ours/anchor per call = {worst:.3} (replays: {} launches of the graph and {launches} of its clone)\n",
            launches
        ));
    }
    out
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub struct Options {
    /// Floats to sum.
    pub size: usize,
    /// Launches of each graph (the original and its clone).
    pub launches: usize,
    /// Rounds of ours (and the anchor's).
    pub rounds: usize,
    /// `--check-host`: the ports on the checked CPU backend instead.
    pub check_host: bool,
}

/// Parses the arguments after the program's name. `--bench` (which cargo and `.gpu/run`
/// pass) is accepted and ignored; anything else unknown is an error.
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        size: DEFAULT_SIZE,
        launches: DEFAULT_LAUNCHES,
        rounds: DEFAULT_ROUNDS,
        check_host: false,
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<usize, String> {
            let value = args
                .next()
                .ok_or_else(|| format!("{name} needs a number, e.g. `{name} 5`"))?;
            match value.parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!(
                    "{name} takes a positive whole number, not `{value}`"
                )),
            }
        };
        match arg.as_str() {
            "--bench" => {}
            "--check-host" => options.check_host = true,
            "--rounds" => options.rounds = number("--rounds")?,
            "--launches" => options.launches = number("--launches")?,
            "--size" => {
                let size = number("--size")?;
                if size > MAX_SIZE {
                    return Err(format!(
                        "--size takes at most {MAX_SIZE} floats, not {size}"
                    ));
                }
                options.size = size;
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}`; the arguments are --size N, --launches N, --rounds N and --check-host"
                ));
            }
        }
    }
    Ok(options)
}

/// The two ports on the checked CPU backend, 2^16 floats, the sample's 3 launches: sums
/// checked, no races. Returns each method's graph nodes and edges (`node_count` and
/// `edge_count`) there.
pub fn check_host() -> BoxResult<Vec<(&'static str, usize, usize)>> {
    let ctx = Context::cpu_checked();
    let times = measure(&ctx, 1 << 16, DEFAULT_LAUNCHES, 1, None)?;
    let races = ctx.races();
    if !races.is_empty() {
        return Err(format!("{} race(s), the first: {:?}", races.len(), races[0]).into());
    }
    Ok(times
        .iter()
        .map(|t| (t.method, t.nodes.0, t.edges))
        .collect())
}

fn main() {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("simple_graphs: {e}");
            std::process::exit(2);
        }
    };
    if options.check_host {
        match check_host() {
            Ok(graphs) => println!(
                "simple_graphs: checked CPU backend, 65536 floats, (method, nodes, edges) {graphs:?}, every host node saw the CPU's sum, no races"
            ),
            Err(e) => {
                eprintln!("simple_graphs host check failed: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let ctx = match Context::cuda(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("simple_graphs bench skipped: no CUDA device ({e})");
            return;
        }
    };
    let anchor: Option<PathBuf> = std::env::var_os(ANCHOR_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    let device = ctx.device().and_then(|d| d.name().ok()).unwrap_or_default();
    let (size, launches, rounds) = (options.size, options.launches, options.rounds);
    let times = match measure(&ctx, size, launches, rounds, anchor.as_deref()) {
        Ok(times) => times,
        Err(e) => {
            eprintln!("simple_graphs bench failed: {e}");
            std::process::exit(1);
        }
    };
    let against = match &anchor {
        Some(path) => format!(
            "alternating with the anchor {} (benches/anchors/simple_graphs.cu)",
            path.display()
        ),
        None => format!("no anchor ({ANCHOR_ENV} unset)"),
    };
    println!(
        "\n{device}: {size} floats, {launches} launches of each graph, ms per call (after one untimed call), medians of {rounds} rounds, {against}; spread = (max - min) / median"
    );
    print!("{}", table(&times, launches));
    if anchor.is_none() {
        println!(
            "(the anchor: nvcc -O3 -arch=sm_90 -o simple_graphs benches/anchors/simple_graphs.cu, then {ANCHOR_ENV}=./simple_graphs)"
        );
    }
}

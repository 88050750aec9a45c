//! NVIDIA's graphConditionalNodes sample written with `gpu_pipeline!` alone, against the
//! sample's five functions written with raw CUDA runtime calls
//! (`benches/anchors/conditional_nodes.cu`), per call of a function.
//!
//! A call is the sample's whole function: a byte of device memory allocated, the graph built
//! and instantiated (`capture`), the byte set before each launch and each launch synchronized,
//! then the graph dropped and the byte freed. The sample's kernels print; here and in the
//! anchor they count into `log[slot]` instead (`tests/kernels/conditional_nodes.cu`), so that
//! both sides are checked to run the same bodies the same number of times.
//!
//! | function | the sample | the port |
//! | --- | --- | --- |
//! | `if` | `simpleIfGraph`: a kernel sets the handle (the byte is odd), an IF node; launched with 0, then 1 | `launch k::cn_set_odd(d, go); if go { .. }`, the byte set with `write_d().fill` |
//! | `do_while` | `simpleDoWhileGraph`: a WHILE node whose handle starts at 1, its body (two kernels, then one that counts the byte down and ends the loop at 0) captured; the byte set to 10 | `fill d = count; do { .. } while go max 256;` (the step writes the byte, so the step sets it, not the host) |
//! | `captured_while` | `capturedWhileGraph`: a kernel, a WHILE node on the handle it sets (the body the same kernel), one more kernel, captured; launched with 0, then 10 | the byte is `d[0]`, the value to start from `d[1]`, which the host writes (`write_d().fill_range(1..2, ..)`) and the step copies in first |
//! | `if_else` | `simpleIfElseGraph`: the kernel, an IF node with two bodies; launched with 0, then 1 | `if go { .. } else { .. }` |
//! | `switch` | `simpleSwitchGraph`: a kernel sets the handle to the byte, a SWITCH node of 4 bodies; launched with 0 to 4 | `switch go { 0 => .., 3 => .. }` |
//!
//! Each function is called 3 times untimed, then `--calls N` times (default 200) timed on the
//! host clock: µs per call. The pipelines (their streams and module) are made before, as the
//! sample's kernels are loaded before its functions run. Fault tracking is off, as the sample
//! tracks nothing. After every function's calls its log slots are read and must hold exactly
//! what its bodies count per call times the calls, on both sides.
//!
//! With `CONDITIONAL_NODES_ANCHOR` naming the built anchor
//! (`nvcc -O3 -arch=sm_90 -o conditional_nodes benches/anchors/conditional_nodes.cu`), the
//! bench runs it as `ANCHOR CALLS` in alternating rounds with its own (ours, anchor, ours, ...;
//! `--rounds R`, default 5), parses its `function nodes calls us_per_call counted` lines and
//! prints one Markdown table: medians over the rounds with their spread ((max - min) / median)
//! and ours/anchor, which issue 22 bounds at 1.05.
//!
//! Without a GPU it says so and exits successfully; `-- --check-host` runs the five ports on
//! the checked CPU backend and fails on a wrong count or a race. `-- --host-cost CALLS` times
//! only the host's work per call, each function called exactly CALLS times per round with no
//! check (against `tools/fake-driver`, the do-nothing driver: the library's own cost, and under
//! `valgrind --tool=callgrind` the driver calls a call makes).
//! `cargo bench -p tests --bench conditional_nodes`; on the GPU machine
//! `CONDITIONAL_NODES_ANCHOR=./conditional_nodes bash .gpu/run bench conditional_nodes`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use gpu_pipeline::{Context, DeviceBuffer, Stream, gpu_pipeline};

const CONDITIONAL_NODES_PTX: &str = include_str!("../kernels/conditional_nodes.ptx");

/// The functions, in the sample's (and the anchor's) order and under the anchor's names.
pub const FUNCTIONS: [&str; 5] = ["if", "do_while", "captured_while", "if_else", "switch"];
/// What one call of each function adds to the sum of its log slots: the IF's body once; two
/// counting kernels in each of the do-while's 10 iterations; the kernel after the captured
/// while at both launches; each branch of the if/else once; each of the switch's four cases
/// once (the fifth launch, with 4, runs none).
pub const COUNTED_PER_CALL: [u64; 5] = [1, 20, 2, 2, 4];
/// Each function's log slots: the first and how many.
const SLOTS: [(usize, usize); 5] = [(0, 1), (1, 1), (2, 1), (3, 2), (5, 4)];
/// The log's length (`cn_count`'s bound).
const LOG_SLOTS: usize = 16;
/// Calls before the timed ones, as in the anchor.
const WARMUPS: usize = 3;
/// Timed calls per function and round unless `--calls` says otherwise.
const DEFAULT_CALLS: usize = 200;
/// Rounds (ours, then the anchor's) unless `--rounds` says otherwise.
const DEFAULT_ROUNDS: usize = 5;
/// The environment variable naming the built anchor binary.
pub const ANCHOR_ENV: &str = "CONDITIONAL_NODES_ANCHOR";

type BoxResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The kernels' CPU implementations, for the CPU backend.
mod cpu {
    use gpu_pipeline::ConditionSetter;

    pub fn set_odd(d: &[u8], mut go: ConditionSetter<'_>) {
        go.set(u32::from(d[0] & 1));
    }

    pub fn set_value(d: &[u8], mut go: ConditionSetter<'_>) {
        go.set(u32::from(d[0]));
    }

    pub fn count(log: &mut [u32], slot: u32) {
        log[slot as usize] += 1;
    }

    pub fn count_down(d: &mut [u8], mut go: ConditionSetter<'_>) {
        d[0] = d[0].wrapping_sub(1);
        go.set(u32::from(d[0] != 0));
    }

    pub fn captured_while(d: &mut [u8], mut go: ConditionSetter<'_>) {
        d[0] = d[0].saturating_sub(1);
        go.set(u32::from(d[0]));
    }
}

gpu_pipeline! {
    /// `simpleIfGraph`: counts in slot 0 when the byte is odd.
    pipeline IfGraph {
        streams { main }
        unsafe kernels k = ptx(CONDITIONAL_NODES_PTX) {
            fn cn_set_odd(d: &[u8; 1], go: Condition) cpu = cpu::set_odd;
            fn cn_count(log: &mut [u32; 16], slot: u32) cpu = cpu::count;
        }
        params { d: &mut DeviceBuffer<u8>, log: &mut DeviceBuffer<u32> }
        scratch { go: Condition }
        stage graph on main {
            launch k::cn_set_odd(d, go) grid 1u32 block 1u32;
            if go {
                launch k::cn_count(log, 0u32) grid 1u32 block 1u32;
            }
        }
    }
}

gpu_pipeline! {
    /// `simpleDoWhileGraph`: from `count`, counts the byte down to 0, twice in slot 1 per
    /// iteration.
    pipeline DoWhileGraph {
        streams { main }
        unsafe kernels k = ptx(CONDITIONAL_NODES_PTX) {
            fn cn_count(log: &mut [u32; 16], slot: u32) cpu = cpu::count;
            fn cn_count_down(d: &mut [u8; 1], go: Condition) cpu = cpu::count_down;
        }
        params { count: u8, d: &mut DeviceBuffer<u8>, log: &mut DeviceBuffer<u32> }
        scratch { go: Condition }
        stage graph on main {
            fill d = count;
            do {
                launch k::cn_count(log, 1u32) grid 1u32 block 1u32;
                launch k::cn_count(log, 1u32) grid 1u32 block 1u32;
                launch k::cn_count_down(d, go) grid 1u32 block 1u32;
            } while go max 256u32;
        }
    }
}

gpu_pipeline! {
    /// `capturedWhileGraph`: from `d[1]`, counts `d[0]` down to 0 (the first decrement before
    /// the loop), then counts in slot 2.
    pipeline CapturedWhileGraph {
        streams { main }
        unsafe kernels k = ptx(CONDITIONAL_NODES_PTX) {
            fn cn_count(log: &mut [u32; 16], slot: u32) cpu = cpu::count;
            fn cn_captured_while(d: &mut [u8; 1], go: Condition) cpu = cpu::captured_while;
        }
        params { d: &mut DeviceBuffer<u8>, log: &mut DeviceBuffer<u32> }
        scratch { go: Condition }
        stage graph on main {
            copy d[1..2] -> d[0..1];
            launch k::cn_captured_while(d[0..1], go) grid 1u32 block 1u32;
            while go max 256u32 {
                launch k::cn_captured_while(d[0..1], go) grid 1u32 block 1u32;
            }
            launch k::cn_count(log, 2u32) grid 1u32 block 1u32;
        }
    }
}

gpu_pipeline! {
    /// `simpleIfElseGraph`: counts in slot 3 when the byte is odd, else in slot 4.
    pipeline IfElseGraph {
        streams { main }
        unsafe kernels k = ptx(CONDITIONAL_NODES_PTX) {
            fn cn_set_odd(d: &[u8; 1], go: Condition) cpu = cpu::set_odd;
            fn cn_count(log: &mut [u32; 16], slot: u32) cpu = cpu::count;
        }
        params { d: &mut DeviceBuffer<u8>, log: &mut DeviceBuffer<u32> }
        scratch { go: Condition }
        stage graph on main {
            launch k::cn_set_odd(d, go) grid 1u32 block 1u32;
            if go {
                launch k::cn_count(log, 3u32) grid 1u32 block 1u32;
            } else {
                launch k::cn_count(log, 4u32) grid 1u32 block 1u32;
            }
        }
    }
}

gpu_pipeline! {
    /// `simpleSwitchGraph`: counts in slot 5 + the byte, for a byte under 4.
    pipeline SwitchGraph {
        streams { main }
        unsafe kernels k = ptx(CONDITIONAL_NODES_PTX) {
            fn cn_set_value(d: &[u8; 1], go: Condition) cpu = cpu::set_value;
            fn cn_count(log: &mut [u32; 16], slot: u32) cpu = cpu::count;
        }
        params { d: &mut DeviceBuffer<u8>, log: &mut DeviceBuffer<u32> }
        scratch { go: Condition }
        stage graph on main {
            launch k::cn_set_value(d, go) grid 1u32 block 1u32;
            switch go {
                0 => { launch k::cn_count(log, 5u32) grid 1u32 block 1u32; }
                1 => { launch k::cn_count(log, 6u32) grid 1u32 block 1u32; }
                2 => { launch k::cn_count(log, 7u32) grid 1u32 block 1u32; }
                3 => { launch k::cn_count(log, 8u32) grid 1u32 block 1u32; }
            }
        }
    }
}

/// The five pipelines and the log, made once; every call allocates its own byte(s).
struct Ports {
    ctx: Context,
    stream: Stream,
    log: DeviceBuffer<u32>,
    if_graph: IfGraph,
    do_while: DoWhileGraph,
    captured_while: CapturedWhileGraph,
    if_else: IfElseGraph,
    switch: SwitchGraph,
}

/// One call of a function whose graph's byte the host sets before each launch, to each of
/// `values` in turn: the byte allocated, the step captured, set-launch-synchronize per value,
/// both dropped. Evaluates to the graph's top-level nodes.
macro_rules! set_and_launch {
    ($ports:ident, $pipeline:ident, $params:ident, $values:expr) => {{
        let mut d = DeviceBuffer::<u8>::alloc(&$ports.ctx, 1)?;
        let mut graph = $ports.$pipeline.capture($params {
            d: &mut d,
            log: &mut $ports.log,
        })?;
        for value in $values {
            graph.write_d()?.fill(value)?;
            graph.launch()?;
            graph.synchronize()?;
        }
        graph.node_count()?
    }};
}

impl Ports {
    fn new(ctx: &Context) -> BoxResult<Ports> {
        let stream = Stream::new(ctx)?;
        let mut ports = Ports {
            ctx: ctx.clone(),
            log: DeviceBuffer::zeros(&stream, LOG_SLOTS)?,
            stream,
            if_graph: IfGraph::new(ctx)?,
            do_while: DoWhileGraph::new(ctx)?,
            captured_while: CapturedWhileGraph::new(ctx)?,
            if_else: IfElseGraph::new(ctx)?,
            switch: SwitchGraph::new(ctx)?,
        };
        ports.stream.synchronize()?;
        // The sample tracks nothing (tracking is off by default; this says so).
        ports.if_graph.set_fault_tracking(false);
        ports.do_while.set_fault_tracking(false);
        ports.captured_while.set_fault_tracking(false);
        ports.if_else.set_fault_tracking(false);
        ports.switch.set_fault_tracking(false);
        Ok(ports)
    }

    /// One call of function `index` (of `FUNCTIONS`): its graph's top-level nodes.
    fn call(&mut self, index: usize) -> BoxResult<usize> {
        Ok(match index {
            0 => set_and_launch!(self, if_graph, IfGraphParams, [0u8, 1]),
            1 => {
                let mut d = DeviceBuffer::<u8>::alloc(&self.ctx, 1)?;
                let mut graph = self.do_while.capture(DoWhileGraphParams {
                    count: 10,
                    d: &mut d,
                    log: &mut self.log,
                })?;
                graph.launch()?;
                graph.synchronize()?;
                graph.node_count()?
            }
            2 => {
                // d[0] is the sample's byte; d[1] what it starts from at each launch.
                let mut d = DeviceBuffer::<u8>::alloc(&self.ctx, 2)?;
                let mut graph = self.captured_while.capture(CapturedWhileGraphParams {
                    d: &mut d,
                    log: &mut self.log,
                })?;
                for value in [0u8, 10] {
                    graph.write_d()?.fill_range(1..2, value)?;
                    graph.launch()?;
                    graph.synchronize()?;
                }
                graph.node_count()?
            }
            3 => set_and_launch!(self, if_else, IfElseGraphParams, [0u8, 1]),
            4 => set_and_launch!(self, switch, SwitchGraphParams, 0u8..5),
            _ => return Err(format!("no function {index}").into()),
        })
    }

    /// `WARMUPS` untimed calls of function `index`, then `calls` timed, its log slots checked:
    /// its nodes and µs per call.
    fn timed(&mut self, index: usize, calls: usize) -> BoxResult<(usize, f64)> {
        self.log = DeviceBuffer::zeros(&self.stream, LOG_SLOTS)?;
        self.stream.synchronize()?;
        for _ in 0..WARMUPS {
            self.call(index)?;
        }
        let start = Instant::now();
        let mut nodes = 0;
        for _ in 0..calls {
            nodes = self.call(index)?;
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / calls as f64;
        let log = self.log.to_vec(&self.stream)?;
        let (first, slots) = SLOTS[index];
        let counted = log[first..first + slots]
            .iter()
            .map(|&c| u64::from(c))
            .sum();
        check("ours", index, counted, WARMUPS + calls)?;
        Ok((nodes, us))
    }
}

/// Fails unless function `index`'s log slots hold what `calls` calls count.
fn check(who: &str, index: usize, counted: u64, calls: usize) -> BoxResult<()> {
    let expected = COUNTED_PER_CALL[index] * calls as u64;
    if counted == expected {
        Ok(())
    } else {
        Err(format!(
            "{who} {}: its bodies counted {counted} in {calls} calls, expected {expected}",
            FUNCTIONS[index]
        )
        .into())
    }
}

/// A function's line of the anchor's output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnchorLine {
    /// The top-level nodes cudaGraphGetNodes counted.
    pub nodes: usize,
    /// The timed calls.
    pub calls: usize,
    /// Microseconds per call.
    pub us_per_call: f64,
    /// The sum of the function's log slots over every call, untimed ones included.
    pub counted: u64,
}

/// Parses the anchor's `function nodes calls us_per_call counted` lines, in `FUNCTIONS`
/// order: each function once, a positive finite time.
pub fn parse_anchor(stdout: &str) -> BoxResult<[AnchorLine; 5]> {
    let mut lines: [Option<AnchorLine>; 5] = [None; 5];
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, nodes, calls, us, counted] = fields[..] else {
            return Err(format!(
                "the anchor printed `{line}`, not `function nodes calls us_per_call counted`"
            )
            .into());
        };
        let slot = FUNCTIONS
            .iter()
            .position(|&f| f == name)
            .ok_or_else(|| format!("the anchor printed an unknown function `{name}`"))?;
        if lines[slot].is_some() {
            return Err(format!("the anchor printed {name} twice").into());
        }
        let missing = |what: &str| format!("the anchor's {name} line has no {what}: `{line}`");
        lines[slot] = Some(AnchorLine {
            nodes: nodes.parse().map_err(|_| missing("node count"))?,
            calls: calls.parse().map_err(|_| missing("call count"))?,
            us_per_call: us
                .parse::<f64>()
                .ok()
                .filter(|us| us.is_finite() && *us > 0.0)
                .ok_or_else(|| missing("time"))?,
            counted: counted.parse().map_err(|_| missing("count"))?,
        });
    }
    let mut out = [AnchorLine {
        nodes: 0,
        calls: 0,
        us_per_call: 0.0,
        counted: 0,
    }; 5];
    for (slot, (line, function)) in out.iter_mut().zip(lines.iter().zip(FUNCTIONS)) {
        *slot = line.ok_or_else(|| format!("the anchor printed no line for {function}"))?;
    }
    Ok(out)
}

/// Runs the anchor once, `calls` timed calls per function, and checks its counts.
fn run_anchor(anchor: &Path, calls: usize) -> BoxResult<[AnchorLine; 5]> {
    let stdout = tests::anchor::anchor_stdout(anchor, [calls.to_string()])?;
    let lines = parse_anchor(&stdout)?;
    for (index, line) in lines.iter().enumerate() {
        if line.calls != calls {
            return Err(format!(
                "the anchor's {}: {} calls timed, {calls} asked for",
                FUNCTIONS[index], line.calls
            )
            .into());
        }
        check("the anchor's", index, line.counted, WARMUPS + calls)?;
    }
    Ok(lines)
}

/// One function's calls over the rounds, ours and the anchor's (empty without one).
#[derive(Debug)]
pub struct FunctionTimes {
    /// The function's name, as the anchor prints it.
    pub function: &'static str,
    /// The top-level nodes of our graph (`node_count`), and the anchor's, if it ran.
    pub nodes: (usize, Option<usize>),
    /// Our µs per call, one per round.
    pub ours: Vec<f64>,
    /// The anchor's µs per call, one per round, or none.
    pub anchor: Vec<f64>,
}

/// `rounds` rounds of our five functions, each followed by one run of the anchor when there
/// is one; every function's counts checked on both sides.
pub fn measure(
    ctx: &Context,
    calls: usize,
    rounds: usize,
    anchor: Option<&Path>,
) -> BoxResult<Vec<FunctionTimes>> {
    let mut ports = Ports::new(ctx)?;
    let mut times: Vec<FunctionTimes> = FUNCTIONS
        .iter()
        .map(|&function| FunctionTimes {
            function,
            nodes: (0, None),
            ours: Vec::new(),
            anchor: Vec::new(),
        })
        .collect();
    for _ in 0..rounds {
        for (index, t) in times.iter_mut().enumerate() {
            let (nodes, us) = ports.timed(index, calls)?;
            t.nodes.0 = nodes;
            t.ours.push(us);
        }
        if let Some(anchor) = anchor {
            for (t, line) in times.iter_mut().zip(run_anchor(anchor, calls)?) {
                t.nodes.1 = Some(line.nodes);
                t.anchor.push(line.us_per_call);
            }
        }
    }
    Ok(times)
}

/// The Markdown table of `times` (µs per call), with the anchor's columns when it ran.
pub fn table(times: &[FunctionTimes]) -> String {
    let with_anchor = times.iter().all(|t| !t.anchor.is_empty());
    let mut out = String::from(if with_anchor {
        "| function | nodes (ours/anchor) | ours median µs | spread | anchor median µs | spread | ours/anchor |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    } else {
        "| function | nodes | ours median µs | spread |\n| --- | ---: | ---: | ---: |\n"
    });
    let mut worst = 0.0_f64;
    for t in times {
        let (ours, ours_spread) = tests::anchor::median_spread(&t.ours);
        let nodes = match t.nodes {
            (ours, Some(anchor)) => format!("{ours}/{anchor}"),
            (ours, None) => ours.to_string(),
        };
        out.push_str(&format!(
            "| {} | {nodes} | {ours:.2} | {:.1}% |",
            t.function,
            ours_spread * 100.0
        ));
        if with_anchor {
            let (anchor, anchor_spread) = tests::anchor::median_spread(&t.anchor);
            worst = worst.max(ours / anchor);
            out.push_str(&format!(
                " {anchor:.2} | {:.1}% | {:.3} |",
                anchor_spread * 100.0,
                ours / anchor
            ));
        }
        out.push('\n');
    }
    if with_anchor {
        out.push_str(&format!(
            "worst ours/anchor per call = {worst:.3} (target <= 1.05)\n"
        ));
    }
    out
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub struct Options {
    /// Timed calls per function and round.
    pub calls: usize,
    /// Rounds of ours (and the anchor's).
    pub rounds: usize,
    /// `--check-host`: the ports on the checked CPU backend instead.
    pub check_host: bool,
    /// `--host-cost CALLS`: only the host's work per call, CALLS calls of each function per
    /// round, unchecked (against `tools/fake-driver`, the library's own cost).
    pub host_cost: Option<usize>,
}

/// Parses the arguments after the program's name. `--bench` (which cargo and `.gpu/run`
/// pass) is accepted and ignored; anything else unknown is an error.
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        calls: DEFAULT_CALLS,
        rounds: DEFAULT_ROUNDS,
        check_host: false,
        host_cost: None,
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
            "--calls" => options.calls = number("--calls")?,
            "--host-cost" => options.host_cost = Some(number("--host-cost")?),
            other => {
                return Err(format!(
                    "unknown argument `{other}`; the arguments are --calls N, --rounds N, --check-host and --host-cost CALLS"
                ));
            }
        }
    }
    Ok(options)
}

/// `--host-cost`: each function called `calls` times per round, unchecked, for `rounds`
/// rounds: the median µs per call of each. Against the do-nothing driver nothing runs, so
/// this is the host's work alone.
pub fn host_cost(
    ctx: &Context,
    calls: usize,
    rounds: usize,
) -> BoxResult<Vec<(&'static str, f64)>> {
    let mut ports = Ports::new(ctx)?;
    let mut times = vec![Vec::new(); FUNCTIONS.len()];
    for _ in 0..rounds {
        for (index, samples) in times.iter_mut().enumerate() {
            let start = Instant::now();
            for _ in 0..calls {
                ports.call(index)?;
            }
            samples.push(start.elapsed().as_secs_f64() * 1e6 / calls as f64);
        }
    }
    Ok(FUNCTIONS
        .iter()
        .zip(&times)
        .map(|(&function, samples)| (function, tests::anchor::median_spread(samples).0))
        .collect())
}

/// The five ports on the checked CPU backend, 2 timed calls each: counts checked, no races.
/// Returns each function's graph nodes there.
pub fn check_host() -> BoxResult<Vec<(&'static str, usize)>> {
    let ctx = Context::cpu_checked();
    let times = measure(&ctx, 2, 1, None)?;
    let races = ctx.races();
    if !races.is_empty() {
        return Err(format!("{} race(s), the first: {:?}", races.len(), races[0]).into());
    }
    Ok(times.iter().map(|t| (t.function, t.nodes.0)).collect())
}

fn main() {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("conditional_nodes: {e}");
            std::process::exit(2);
        }
    };
    if options.check_host {
        match check_host() {
            Ok(graphs) => println!(
                "conditional_nodes: checked CPU backend, (function, nodes) {graphs:?}, every body counted as the sample's, no races"
            ),
            Err(e) => {
                eprintln!("conditional_nodes host check failed: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let ctx = match Context::cuda(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("conditional_nodes bench skipped: no CUDA device ({e})");
            return;
        }
    };
    if let Some(calls) = options.host_cost {
        match host_cost(&ctx, calls, options.rounds) {
            Ok(costs) => {
                println!(
                    "host work per call, {calls} calls, medians of {} rounds:",
                    options.rounds
                );
                for (function, us) in costs {
                    println!("  {function} {us:.3} µs");
                }
            }
            Err(e) => {
                eprintln!("conditional_nodes host cost failed: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let anchor: Option<PathBuf> = std::env::var_os(ANCHOR_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    let device = ctx.device().and_then(|d| d.name().ok()).unwrap_or_default();
    let times = match measure(&ctx, options.calls, options.rounds, anchor.as_deref()) {
        Ok(times) => times,
        Err(e) => {
            eprintln!("conditional_nodes bench failed: {e}");
            std::process::exit(1);
        }
    };
    let against = match &anchor {
        Some(path) => format!(
            "alternating with the anchor {} (benches/anchors/conditional_nodes.cu)",
            path.display()
        ),
        None => format!("no anchor ({ANCHOR_ENV} unset)"),
    };
    println!(
        "\n{device}: µs per call of each function ({} calls after {WARMUPS} untimed), medians of {} rounds, {against}; spread = (max - min) / median",
        options.calls, options.rounds
    );
    print!("{}", table(&times));
    if anchor.is_none() {
        println!(
            "(the anchor: nvcc -O3 -arch=sm_90 -o conditional_nodes benches/anchors/conditional_nodes.cu, then {ANCHOR_ENV}=./conditional_nodes)"
        );
    }
}

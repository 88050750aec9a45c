//! Issue 22's conditional forms built by `gpu_pipeline!`, against the same graphs built with
//! raw CUDA runtime calls (`benches/anchors/conditionals.cu`), per launch.
//!
//! | form | the generated step (1-thread kernels, grid 1 block 1) |
//! | --- | --- |
//! | `if_else` | `if flag != 0u32 { add 1 to then } else { add 10 to other }`, flag 0: the library's condition kernel, one IF node with two bodies |
//! | `switch` | `switch mode { 0 => add 1, 1 => add 10, 2 => add 100 }` to `out`, mode 2: the condition kernel, one SWITCH node |
//! | `do_while` | `fill residual = 5.0; do { add -1 to residual; add 1 to iterations } while residual > 0.5 max 100;`: a memset, one WHILE node (5 iterations, the condition kernel last in the body) |
//! | `kernel_while` | `fill residual = 5.0;`, a kernel that sets `go` from `residual > 0.5`, `while go max 100 { a kernel that subtracts 1 and sets go }` (5 iterations; `tests/kernels/conditionals.cu`) |
//!
//! Each form is captured once per round and replayed `--launches N` times (default 10 000)
//! after 10 warm-ups, timed on the host clock from the first launch to the synchronize after
//! the last: µs per launch. Fault tracking is off, as the anchor tracks nothing. After the
//! timed launches each result is checked (the branch, case and iteration counts, every
//! launch's added values summed in f32 as the device sums them) and so are the loops'
//! iteration counts of the last launch.
//!
//! With `CONDITIONALS_ANCHOR` naming the built anchor
//! (`nvcc -O3 -arch=sm_90 -o conditionals benches/anchors/conditionals.cu`), the bench runs
//! it as `ANCHOR LAUNCHES` in alternating rounds with its own (ours, anchor, ours, ...;
//! `--rounds N`, default 5), parses its `form launches us_per_launch` lines, and prints one
//! Markdown table: medians over the rounds, each with its spread ((max - min) / median), and
//! ours/anchor, the ratio issue 22 bounds at 1.05. Without it, only our column.
//!
//! Without a GPU it says so and exits successfully; `-- --check-host` runs the pipelines on
//! the checked CPU backend at a few launches and fails on a wrong result or a race.
//! `cargo bench -p tests --bench conditionals`; on the GPU machine
//! `CONDITIONALS_ANCHOR=./conditionals bash .gpu/run bench conditionals`. Results also go to
//! `target/bench/conditionals.json`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use gpu_pipeline::{Context, DeviceBuffer, Stream, gpu_pipeline};

const TEST_PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");
const CONDITIONS_PTX: &str = include_str!("../kernels/conditionals.ptx");

/// Launches before the timed ones, as in the anchor.
const WARMUPS: usize = 10;
/// Timed launches per form and round unless `--launches` says otherwise.
const DEFAULT_LAUNCHES: usize = 10_000;
/// Rounds (ours, then the anchor's) unless `--rounds` says otherwise.
const DEFAULT_ROUNDS: usize = 5;
/// The environment variable naming the built anchor binary.
pub const ANCHOR_ENV: &str = "CONDITIONALS_ANCHOR";
/// The forms, in the anchor's order and under its names.
pub const FORMS: [&str; 4] = ["if_else", "switch", "do_while", "kernel_while"];

/// The loops' start, tolerance and iterations per launch (5 - 5 * 1 = 0 <= 0.5).
const START: f32 = 5.0;
const TOL: f32 = 0.5;
const ITERATIONS: u32 = 5;
/// The loops' maximum: well above `ITERATIONS`.
const MAX_ITERATIONS: u32 = 100;

type BoxResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The kernels' CPU implementations, for the CPU backend.
mod cpu {
    use gpu_pipeline::ConditionSetter;

    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }

    pub fn set_if_greater(value: &[f32], tol: f32, mut go: ConditionSetter<'_>) {
        go.set(u32::from(value[0] > tol));
    }

    pub fn sub_and_set(value: &mut [f32], tol: f32, mut go: ConditionSetter<'_>) {
        value[0] -= 1.0;
        go.set(u32::from(value[0] > tol));
    }
}

gpu_pipeline! {
    /// Adds 1 to `then` when `flag != 0`, else 10 to `other`.
    pipeline IfElse {
        streams { main }
        unsafe kernels k = ptx(TEST_PTX) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            flag: &mut DeviceBuffer<u32>,
            then: &mut DeviceBuffer<f32>,
            other: &mut DeviceBuffer<f32>,
        }
        stage decide on main {
            if flag != 0u32 {
                launch k::add_scalar(1u32, 1.0f32, then) grid 1u32 block 1u32;
            } else {
                launch k::add_scalar(1u32, 10.0f32, other) grid 1u32 block 1u32;
            }
        }
    }
}

gpu_pipeline! {
    /// Adds `10^mode` to `out` (mode 0, 1 or 2).
    pipeline Switch {
        streams { main }
        unsafe kernels k = ptx(TEST_PTX) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params { mode: &mut DeviceBuffer<u32>, out: &mut DeviceBuffer<f32> }
        stage pick on main {
            switch mode {
                0 => { launch k::add_scalar(1u32, 1.0f32, out) grid 1u32 block 1u32; }
                1 => { launch k::add_scalar(1u32, 10.0f32, out) grid 1u32 block 1u32; }
                2 => { launch k::add_scalar(1u32, 100.0f32, out) grid 1u32 block 1u32; }
            }
        }
    }
}

gpu_pipeline! {
    /// From `start`, lowers `residual` by one and counts an iteration, at least once, while
    /// `residual > tol`.
    pipeline DoWhile {
        streams { main }
        unsafe kernels k = ptx(TEST_PTX) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            start: f32,
            tol: f32,
            limit: u32,
            residual: &mut DeviceBuffer<f32>,
            iterations: &mut DeviceBuffer<f32>,
        }
        stage solve on main {
            fill residual = start;
            do {
                launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
                launch k::add_scalar(1u32, 1.0f32, iterations) grid 1u32 block 1u32;
            } while residual > tol max limit;
        }
    }
}

gpu_pipeline! {
    /// From `start`, lowers `residual` by one while `residual > tol`, the kernels deciding
    /// each test: one before the loop, the body's one kernel after that.
    pipeline KernelWhile {
        streams { main }
        unsafe kernels k = ptx(CONDITIONS_PTX) {
            fn cb_set_if_greater(value: &[f32; 1], tol: f32, go: Condition)
                cpu = cpu::set_if_greater;
            fn cb_sub_and_set(value: &mut [f32; 1], tol: f32, go: Condition)
                cpu = cpu::sub_and_set;
        }
        params { start: f32, tol: f32, limit: u32, residual: &mut DeviceBuffer<f32> }
        scratch { go: Condition }
        stage solve on main {
            fill residual = start;
            launch k::cb_set_if_greater(residual, tol, go) grid 1u32 block 1u32;
            while go max limit {
                launch k::cb_sub_and_set(residual, tol, go) grid 1u32 block 1u32;
            }
        }
    }
}

/// `launches` additions of `value` to 0 in f32, in order: what a 1-thread kernel leaves.
fn summed(value: f32, launches: usize) -> f32 {
    (0..launches).fold(0.0, |sum, _| sum + value)
}

fn read_f32(stream: &Stream, buffer: &DeviceBuffer<f32>) -> BoxResult<f32> {
    Ok(buffer.to_vec(stream)?[0])
}

/// Fails unless `got == expected` (exactly: both sides add the same f32 values in order).
fn expect(form: &str, what: &str, got: f32, expected: f32) -> BoxResult<()> {
    if got == expected {
        Ok(())
    } else {
        Err(format!("{form}: {what} is {got}, expected {expected}").into())
    }
}

/// Fails unless the last launch's loop ran `ITERATIONS` times.
fn expect_iterations(form: &str, loops: &[gpu_pipeline::LoopState]) -> BoxResult<()> {
    match loops {
        [one] if one.iterations() == ITERATIONS => Ok(()),
        [one] => Err(format!(
            "{form}: the loop ran {} iterations in the last launch, expected {ITERATIONS}",
            one.iterations()
        )
        .into()),
        _ => Err(format!("{form}: {} loops in the graph, expected 1", loops.len()).into()),
    }
}

/// Replays a captured graph `WARMUPS` times, synchronizes, then times `launches` replays to
/// the synchronize after the last; evaluates to µs per launch.
macro_rules! time_replays {
    ($graph:expr, $launches:expr) => {{
        let graph = &mut $graph;
        for _ in 0..WARMUPS {
            graph.launch()?;
        }
        graph.synchronize()?;
        let start = Instant::now();
        for _ in 0..$launches {
            graph.launch()?;
        }
        graph.synchronize()?;
        start.elapsed().as_secs_f64() * 1e6 / $launches as f64
    }};
}

/// One round of our four forms, each captured once and replayed: µs per launch, in `FORMS`
/// order, and the node count of each graph (`None` on the CPU backend). Every result is
/// checked after the timed launches.
pub fn time_forms(ctx: &Context, launches: usize) -> BoxResult<([f64; 4], [Option<usize>; 4])> {
    let stream = Stream::new(ctx)?;
    let total = WARMUPS + launches;
    let on_gpu = ctx.handle().is_some();
    let mut us = [0.0; 4];
    let mut nodes = [None; 4];

    // if/else: flag 0, the else branch every launch.
    {
        let mut flag = DeviceBuffer::<u32>::zeros(&stream, 1)?;
        let mut then = DeviceBuffer::<f32>::zeros(&stream, 1)?;
        let mut other = DeviceBuffer::<f32>::zeros(&stream, 1)?;
        stream.synchronize()?;
        let mut pipeline = IfElse::new(ctx)?;
        pipeline.set_fault_tracking(false);
        let mut graph = pipeline.capture(IfElseParams {
            flag: &mut flag,
            then: &mut then,
            other: &mut other,
        })?;
        us[0] = time_replays!(graph, launches);
        nodes[0] = if on_gpu {
            Some(graph.node_count()?)
        } else {
            None
        };
        drop(graph);
        expect("if_else", "then", read_f32(&stream, &then)?, 0.0)?;
        expect(
            "if_else",
            "other",
            read_f32(&stream, &other)?,
            summed(10.0, total),
        )?;
    }

    // switch: mode 2, case 2 every launch.
    {
        let mut mode = DeviceBuffer::from_slice(&stream, &[2u32])?;
        let mut out = DeviceBuffer::<f32>::zeros(&stream, 1)?;
        stream.synchronize()?;
        let mut pipeline = Switch::new(ctx)?;
        pipeline.set_fault_tracking(false);
        let mut graph = pipeline.capture(SwitchParams {
            mode: &mut mode,
            out: &mut out,
        })?;
        us[1] = time_replays!(graph, launches);
        nodes[1] = if on_gpu {
            Some(graph.node_count()?)
        } else {
            None
        };
        drop(graph);
        expect(
            "switch",
            "out",
            read_f32(&stream, &out)?,
            summed(100.0, total),
        )?;
    }

    // do-while: 5 iterations a launch.
    {
        let mut residual = DeviceBuffer::<f32>::zeros(&stream, 1)?;
        let mut iterations = DeviceBuffer::<f32>::zeros(&stream, 1)?;
        stream.synchronize()?;
        let mut pipeline = DoWhile::new(ctx)?;
        pipeline.set_fault_tracking(false);
        let mut graph = pipeline.capture(DoWhileParams {
            start: START,
            tol: TOL,
            limit: MAX_ITERATIONS,
            residual: &mut residual,
            iterations: &mut iterations,
        })?;
        us[2] = time_replays!(graph, launches);
        nodes[2] = if on_gpu {
            Some(graph.node_count()?)
        } else {
            None
        };
        let exec = graph.exec().ok_or("do_while: the step is not captured")?;
        expect_iterations("do_while", exec.loops())?;
        drop(graph);
        expect("do_while", "residual", read_f32(&stream, &residual)?, 0.0)?;
        expect(
            "do_while",
            "iterations",
            read_f32(&stream, &iterations)?,
            summed(1.0, total * ITERATIONS as usize),
        )?;
    }

    // A kernel-set while: 5 iterations a launch.
    {
        let mut residual = DeviceBuffer::<f32>::zeros(&stream, 1)?;
        stream.synchronize()?;
        let mut pipeline = KernelWhile::new(ctx)?;
        pipeline.set_fault_tracking(false);
        let mut graph = pipeline.capture(KernelWhileParams {
            start: START,
            tol: TOL,
            limit: MAX_ITERATIONS,
            residual: &mut residual,
        })?;
        us[3] = time_replays!(graph, launches);
        nodes[3] = if on_gpu {
            Some(graph.node_count()?)
        } else {
            None
        };
        let exec = graph
            .exec()
            .ok_or("kernel_while: the step is not captured")?;
        expect_iterations("kernel_while", exec.loops())?;
        drop(graph);
        expect(
            "kernel_while",
            "residual",
            read_f32(&stream, &residual)?,
            0.0,
        )?;
    }
    Ok((us, nodes))
}

/// The anchor's output for `launches` launches: one `form launches us_per_launch` line per
/// form after its header, each form once. Returns µs per launch in `FORMS` order.
pub fn parse_anchor(text: &str, launches: usize) -> BoxResult<[f64; 4]> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    if lines.next() != Some("form launches us_per_launch") {
        return Err(format!(
            "the anchor's output does not start with `form launches us_per_launch`: {text:?}"
        )
        .into());
    }
    let mut us = [None; 4];
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [form, count, time] = fields[..] else {
            return Err(format!("the anchor printed `{line}`, not `form launches us`").into());
        };
        let index = FORMS
            .iter()
            .position(|f| *f == form)
            .ok_or_else(|| format!("the anchor printed an unknown form: `{line}`"))?;
        if count.parse::<usize>().ok() != Some(launches) {
            return Err(format!("the anchor ran `{line}`, not {launches} launches").into());
        }
        let time: f64 = time
            .parse()
            .ok()
            .filter(|t: &f64| t.is_finite() && *t > 0.0)
            .ok_or_else(|| format!("the anchor printed no time in µs: `{line}`"))?;
        if us[index].replace(time).is_some() {
            return Err(format!("the anchor printed {form} twice").into());
        }
    }
    let mut out = [0.0; 4];
    for (i, t) in us.iter().enumerate() {
        out[i] = t.ok_or_else(|| format!("the anchor printed no line for {}", FORMS[i]))?;
    }
    Ok(out)
}

/// Runs the anchor binary once for `launches` launches: µs per launch in `FORMS` order.
pub fn run_anchor(anchor: &Path, launches: usize) -> BoxResult<[f64; 4]> {
    let stdout = tests::anchor::anchor_stdout(anchor, [launches.to_string()])?;
    parse_anchor(&stdout, launches)
}

/// One form's times over the rounds, ours and the anchor's (empty without one), µs per launch.
#[derive(Debug)]
pub struct FormTimes {
    /// The form's name, as the anchor prints it.
    pub form: &'static str,
    /// Ours, one per round.
    pub ours: Vec<f64>,
    /// The anchor's, one per round, or none.
    pub anchor: Vec<f64>,
    /// Our graph's node count (the last round's; `None` on the CPU backend).
    pub nodes: Option<usize>,
}

/// `rounds` rounds of our forms, each followed by one run of the anchor when there is one.
pub fn measure(
    ctx: &Context,
    launches: usize,
    rounds: usize,
    anchor: Option<&Path>,
) -> BoxResult<Vec<FormTimes>> {
    let mut times: Vec<FormTimes> = FORMS
        .iter()
        .map(|&form| FormTimes {
            form,
            ours: Vec::new(),
            anchor: Vec::new(),
            nodes: None,
        })
        .collect();
    for _ in 0..rounds {
        let (ours, nodes) = time_forms(ctx, launches)?;
        for ((t, us), n) in times.iter_mut().zip(ours).zip(nodes) {
            t.ours.push(us);
            t.nodes = n;
        }
        if let Some(anchor) = anchor {
            for (t, us) in times.iter_mut().zip(run_anchor(anchor, launches)?) {
                t.anchor.push(us);
            }
        }
    }
    Ok(times)
}

/// The Markdown table of `times`, with the anchor's columns when it ran, and the target's
/// verdict (each form at most 1.05x the anchor).
pub fn table(times: &[FormTimes]) -> String {
    let with_anchor = times.iter().all(|t| !t.anchor.is_empty());
    let mut out = String::new();
    if with_anchor {
        out.push_str(
            "| form | ours median µs | spread | anchor median µs | spread | ours/anchor |\n\
             | --- | ---: | ---: | ---: | ---: | ---: |\n",
        );
    } else {
        out.push_str("| form | ours median µs | spread |\n| --- | ---: | ---: |\n");
    }
    let mut worst = 0.0_f64;
    for t in times {
        let (ours, ours_spread) = tests::anchor::median_spread(&t.ours);
        if with_anchor {
            let (anchor, anchor_spread) = tests::anchor::median_spread(&t.anchor);
            worst = worst.max(ours / anchor);
            out.push_str(&format!(
                "| {} | {ours:.3} | {:.1}% | {anchor:.3} | {:.1}% | {:.3} |\n",
                t.form,
                ours_spread * 100.0,
                anchor_spread * 100.0,
                ours / anchor
            ));
        } else {
            out.push_str(&format!(
                "| {} | {ours:.3} | {:.1}% |\n",
                t.form,
                ours_spread * 100.0
            ));
        }
    }
    if with_anchor {
        let verdict = if worst <= 1.05 { "met" } else { "MISSED" };
        out.push_str(&format!(
            "target: every form at most 1.05x the anchor per launch: worst ours/anchor = {worst:.3}, {verdict}\n"
        ));
    }
    out
}

/// The JSON of `times`: per form, every round's µs per launch.
fn json(device: &str, launches: usize, times: &[FormTimes]) -> String {
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.4}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let forms: Vec<String> = times
        .iter()
        .map(|t| {
            format!(
                "{{\"form\":\"{}\",\"nodes\":{},\"ours_us\":[{}],\"anchor_us\":[{}]}}",
                t.form,
                t.nodes.map_or("null".to_owned(), |n| n.to_string()),
                list(&t.ours),
                list(&t.anchor)
            )
        })
        .collect();
    format!(
        "{{\"device\":\"{device}\",\"launches\":{launches},\"forms\":[{}]}}\n",
        forms.join(",")
    )
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub struct Options {
    /// Timed launches per form and round.
    pub launches: usize,
    /// Rounds of ours (and the anchor's).
    pub rounds: usize,
    /// `--check-host`: the pipelines on the checked CPU backend instead.
    pub check_host: bool,
}

/// Parses the arguments after the program's name. `--bench` (which cargo and `.gpu/run`
/// pass) is accepted and ignored; anything else unknown is an error.
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        launches: DEFAULT_LAUNCHES,
        rounds: DEFAULT_ROUNDS,
        check_host: false,
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut count = |name: &str| -> Result<usize, String> {
            let value = args
                .next()
                .ok_or_else(|| format!("{name} needs a count, e.g. `{name} 1000`"))?;
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
            "--launches" => options.launches = count("--launches")?,
            "--rounds" => options.rounds = count("--rounds")?,
            other => {
                return Err(format!(
                    "unknown argument `{other}`; the arguments are --launches N, --rounds N and \
                     --check-host"
                ));
            }
        }
    }
    Ok(options)
}

/// Our forms on the checked CPU backend, a few launches each: every result is checked and
/// the race detector must find nothing.
pub fn check_host() -> BoxResult<()> {
    let ctx = Context::cpu_checked();
    time_forms(&ctx, 3)?;
    let races = ctx.races();
    if !races.is_empty() {
        return Err(format!("{} race(s), the first: {:?}", races.len(), races[0]).into());
    }
    Ok(())
}

fn main() {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("conditionals: {e}");
            std::process::exit(2);
        }
    };
    if options.check_host {
        match check_host() {
            Ok(()) => println!("conditionals: checked CPU backend, results verified, no races"),
            Err(e) => {
                eprintln!("conditionals host check failed: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let ctx = match Context::cuda(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("conditionals bench skipped: no CUDA device ({e})");
            return;
        }
    };
    let anchor: Option<PathBuf> = std::env::var_os(ANCHOR_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    let device = ctx.device().and_then(|d| d.name().ok()).unwrap_or_default();
    let times = match measure(&ctx, options.launches, options.rounds, anchor.as_deref()) {
        Ok(times) => times,
        Err(e) => {
            eprintln!("conditionals bench failed: {e}");
            std::process::exit(1);
        }
    };
    let against = match &anchor {
        Some(path) => format!(
            "alternating with the anchor {} (benches/anchors/conditionals.cu)",
            path.display()
        ),
        None => format!("no anchor ({ANCHOR_ENV} unset)"),
    };
    println!(
        "\n{device}: µs per launch, {} launches after {WARMUPS} warm-ups, medians of {} rounds, {against}; spread = (max - min) / median",
        options.launches, options.rounds
    );
    print!("{}", table(&times));
    let nodes: Vec<String> = times
        .iter()
        .map(|t| {
            format!(
                "{} {}",
                t.form,
                t.nodes.map_or("?".into(), |n| n.to_string())
            )
        })
        .collect();
    println!(
        "nodes per graph (ours; the anchor's: if_else 2, switch 2, do_while 2, kernel_while 3): {}",
        nodes.join(", ")
    );
    if anchor.is_none() {
        println!(
            "(the anchor: nvcc -O3 -arch=sm_90 -o conditionals benches/anchors/conditionals.cu, then {ANCHOR_ENV}=./conditionals)"
        );
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    if std::fs::create_dir_all(&dir)
        .and_then(|()| {
            std::fs::write(
                dir.join("conditionals.json"),
                json(&device, options.launches, &times),
            )
        })
        .is_err()
    {
        eprintln!("could not write target/bench/conditionals.json");
    }
}

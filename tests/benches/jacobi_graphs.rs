//! NVIDIA's jacobiCudaGraphs sample written with `gpu_pipeline!` alone, against the sample's
//! three GPU methods written with raw CUDA runtime calls (`benches/anchors/jacobi_graphs.cu`),
//! per solve: issue 22 asks each method of the sample, ported to the macro, to take at most
//! 1.05x the original's time.
//!
//! The system is the sample's: a dense `n x n` matrix with `n + 1` on its diagonal and 1
//! elsewhere, `b = 2n`, `x = 0` at the start (the solution is all ones), solved by Jacobi
//! sweeps until the sweep's sum of |dx| is at most 1e-2; each sweep zeroes the device sum,
//! runs the sample's kernel (`tests/kernels/jacobi_graphs.cu`) and copies the sum to the host,
//! which tests it after a wait. Then the final error, sum of |x - 1|, is computed on the device.
//!
//! | method | the sample | the port |
//! | --- | --- | --- |
//! | `set_params` | one graph, `cudaGraphExecKernelNodeSetParams` exchanges `x` and `x_new` before each launch | `swap(x, x_new)` declared, the step captured once, `graph.swap_x_x_new()` after each launch |
//! | `exec_update` | the sweep captured from the stream every iteration, `cudaGraphExecUpdate` | `graph.recapture_with(..)` exchanges the two, the executable graph updated in place (checked) |
//! | `stream` | no graph: memset, kernel, copy enqueued every iteration | an eager `run` of the step every iteration, the buffers passed the other way round |
//!
//! Each method is timed as the sample times it, the whole solve (capture, sweeps, final error),
//! after one untimed solve by the same method; the pipelines are made (their module loaded)
//! before. With `JACOBI_GRAPHS_ANCHOR` naming the built anchor
//! (`nvcc -O3 -arch=sm_90 -o jacobi_graphs benches/anchors/jacobi_graphs.cu`), the bench runs
//! it as `ANCHOR N` in alternating rounds with its own (ours, anchor, ours, ...; `--rounds R`,
//! default 5), parses its `method iterations ms error` lines and prints one Markdown table:
//! medians over the rounds with their spread ((max - min) / median) and ours/anchor. Every
//! solve's final error is checked against a CPU solve's as the sample checks it (within 1e-2),
//! and every method of both programs must take the CPU solve's number of sweeps (within one:
//! the device sums each sweep's |dx| in no fixed order).
//!
//! Without a GPU it says so and exits successfully; `-- --check-host` runs the three ports on
//! the checked CPU backend (n = 64) and fails on a wrong result or a race.
//! `cargo bench -p tests --bench jacobi_graphs`; on the GPU machine
//! `JACOBI_GRAPHS_ANCHOR=./jacobi_graphs bash .gpu/run bench jacobi_graphs`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Stream, gpu_pipeline};

const JACOBI_PTX: &str = include_str!("../kernels/jacobi_graphs.ptx");

/// The sample's convergence threshold on a sweep's sum of |dx|.
const CONV_THRESHOLD: f32 = 1.0e-2;
/// Rows of the matrix per block of `jacobi_method` (`JACOBI_ROWS_PER_CTA` in the kernel).
const ROWS_PER_CTA: u32 = 8;
/// Threads per block of both kernels.
const THREADS: u32 = 256;
/// The sample's order, N_ROWS.
const DEFAULT_N: u32 = 512;
/// Rounds (ours, then the anchor's) unless `--rounds` says otherwise.
const DEFAULT_ROUNDS: usize = 5;
/// The environment variable naming the built anchor binary.
pub const ANCHOR_ENV: &str = "JACOBI_GRAPHS_ANCHOR";
/// The methods, in the anchor's order and under its names.
pub const METHODS: [&str; 3] = ["set_params", "exec_update", "stream"];

type BoxResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The kernels' CPU implementations, for the CPU backend and the reference solve.
mod cpu {
    /// One sweep `x -> x_new` of `A x = b`, adding the sum of |dx| to `sum[0]`.
    pub fn jacobi_method(
        n: u32,
        a: &[f32],
        b: &[f64],
        _conv: f32,
        x: &[f64],
        x_new: &mut [f64],
        sum: &mut [f64],
    ) {
        let n = n as usize;
        let mut total = 0.0;
        for i in 0..n {
            let row = &a[i * n..(i + 1) * n];
            let ax: f64 = row.iter().zip(x).map(|(&a, &x)| f64::from(a) * x).sum();
            let dx = (b[i] - ax) / f64::from(row[i]);
            x_new[i] = x[i] + dx;
            total += dx.abs();
        }
        sum[0] += total;
    }

    /// Adds the sum of |x - 1| to `g_sum[0]`.
    pub fn final_error(n: u32, x: &[f64], g_sum: &mut [f64]) {
        g_sum[0] += x[..n as usize].iter().map(|x| (x - 1.0).abs()).sum::<f64>();
    }
}

gpu_pipeline! {
    /// One sweep of the sample, `x -> x_new`, with `swap(x, x_new)`: the port of its
    /// `cudaGraphExecKernelNodeSetParams` method.
    pipeline SweepSwapped {
        streams { main(non_blocking) }
        unsafe kernels k = ptx(JACOBI_PTX) {
            fn jacobi_method(n: u32, a: &[f32; n * n], b: &[f64; n], conv: f32, x: &[f64; n], x_new: &mut [f64; n], sum: &mut [f64; 1])
                cpu = cpu::jacobi_method;
        }
        params {
            n: u32,
            conv: f32,
            a: &DeviceBuffer<f32>,
            b: &DeviceBuffer<f64>,
            x: &mut DeviceBuffer<f64>,
            x_new: &mut DeviceBuffer<f64>,
            sum_host: &mut PinnedBuffer<f64>,
        }
        scratch { sum: DeviceBuffer<f64> = 1 }
        swap(x, x_new);
        stage sweep on main {
            fill sum = 0.0f64;
            launch k::jacobi_method(n, a, b, conv, x, x_new, sum)
                grid n / ROWS_PER_CTA + 2 block THREADS shared n * 8;
            copy sum -> sum_host;
        }
    }
}

gpu_pipeline! {
    /// One sweep of the sample, `x -> x_new`: the port of its `cudaGraphExecUpdate` method
    /// (recaptured with the two exchanged) and of its method without a graph (run eagerly).
    pipeline Sweep {
        streams { main(non_blocking) }
        unsafe kernels k = ptx(JACOBI_PTX) {
            fn jacobi_method(n: u32, a: &[f32; n * n], b: &[f64; n], conv: f32, x: &[f64; n], x_new: &mut [f64; n], sum: &mut [f64; 1])
                cpu = cpu::jacobi_method;
        }
        params {
            n: u32,
            conv: f32,
            a: &DeviceBuffer<f32>,
            b: &DeviceBuffer<f64>,
            x: &mut DeviceBuffer<f64>,
            x_new: &mut DeviceBuffer<f64>,
            sum_host: &mut PinnedBuffer<f64>,
        }
        scratch { sum: DeviceBuffer<f64> = 1 }
        stage sweep on main {
            fill sum = 0.0f64;
            launch k::jacobi_method(n, a, b, conv, x, x_new, sum)
                grid n / ROWS_PER_CTA + 2 block THREADS shared n * 8;
            copy sum -> sum_host;
        }
    }
}

gpu_pipeline! {
    /// The sample's last step: the sum of |x - 1| on the device, copied to the host.
    pipeline FinalError {
        streams { main(non_blocking) }
        unsafe kernels k = ptx(JACOBI_PTX) {
            fn final_error(n: u32, x: &[f64; n], g_sum: &mut [f64; 1]) cpu = cpu::final_error;
        }
        params { n: u32, x: &DeviceBuffer<f64>, error_host: &mut PinnedBuffer<f64> }
        scratch { g_sum: DeviceBuffer<f64> = 1 }
        stage error on main {
            fill g_sum = 0.0f64;
            launch k::final_error(n, x, g_sum) grid n / THREADS + 1 block THREADS shared (THREADS / 32 + 1) * 8;
            copy g_sum -> error_host;
        }
    }
}

/// The sample's system of order `n`: `A` row-major and `b`.
fn system(n: u32) -> (Vec<f32>, Vec<f64>) {
    let n = n as usize;
    let mut a = vec![1.0f32; n * n];
    for i in 0..n {
        a[i * n + i] = n as f32 + 1.0;
    }
    (a, vec![2.0 * n as f64; n])
}

/// The sample's limit on sweeps, `4 n^2`.
fn max_iterations(n: u32) -> usize {
    4 * n as usize * n as usize
}

/// One solve: sweeps taken and the final error.
#[derive(Clone, Copy, Debug)]
struct Solved {
    iterations: usize,
    error: f64,
}

/// The solve on the host, with the CPU kernels: what every method must agree with.
fn reference(n: u32) -> Solved {
    let (a, b) = system(n);
    let (mut x, mut x_new) = (vec![0.0f64; n as usize], vec![0.0f64; n as usize]);
    let mut iterations = 0;
    while iterations < max_iterations(n) {
        let mut sum = [0.0];
        cpu::jacobi_method(n, &a, &b, CONV_THRESHOLD, &x, &mut x_new, &mut sum);
        std::mem::swap(&mut x, &mut x_new);
        iterations += 1;
        if sum[0] <= f64::from(CONV_THRESHOLD) {
            break;
        }
    }
    let mut error = [0.0];
    cpu::final_error(n, &x, &mut error);
    Solved {
        iterations,
        error: error[0],
    }
}

/// The system on the device and the pipelines, made once.
struct Ports {
    n: u32,
    stream: Stream,
    a: DeviceBuffer<f32>,
    b: DeviceBuffer<f64>,
    x: DeviceBuffer<f64>,
    x_new: DeviceBuffer<f64>,
    sum_host: PinnedBuffer<f64>,
    error_host: PinnedBuffer<f64>,
    swapped: SweepSwapped,
    sweep: Sweep,
    final_error: FinalError,
    /// `--host-cost`: run exactly this many sweeps, whatever the sums (no convergence test).
    fixed: Option<usize>,
}

impl Ports {
    fn new(ctx: &Context, n: u32) -> BoxResult<Ports> {
        let stream = Stream::new(ctx)?;
        let (a, b) = system(n);
        let mut ports = Ports {
            n,
            a: DeviceBuffer::from_slice(&stream, &a)?,
            b: DeviceBuffer::from_slice(&stream, &b)?,
            x: DeviceBuffer::zeros(&stream, n as usize)?,
            x_new: DeviceBuffer::zeros(&stream, n as usize)?,
            sum_host: PinnedBuffer::zeros(ctx, 1)?,
            error_host: PinnedBuffer::zeros(ctx, 1)?,
            swapped: SweepSwapped::new(ctx)?,
            sweep: Sweep::new(ctx)?,
            final_error: FinalError::new(ctx)?,
            stream,
            fixed: None,
        };
        ports.stream.synchronize()?;
        // The anchor tracks nothing (tracking is off by default; this says so).
        ports.swapped.set_fault_tracking(false);
        ports.sweep.set_fault_tracking(false);
        ports.final_error.set_fault_tracking(false);
        Ok(ports)
    }

    /// The last sweep a solve may run, and whether `sum` (a sweep's sum of |dx|) ends it.
    fn limit(&self) -> usize {
        self.fixed.unwrap_or_else(|| max_iterations(self.n))
    }

    fn converged(&self, sum: f64) -> bool {
        self.fixed.is_none() && sum <= f64::from(CONV_THRESHOLD)
    }

    /// Both iterates back to zero, waited for.
    fn reset(&mut self) -> BoxResult<()> {
        self.stream.memset_u8(&mut self.x, 0)?;
        self.stream.memset_u8(&mut self.x_new, 0)?;
        self.stream.synchronize()?;
        Ok(())
    }

    /// The sample's `JacobiMethodGpuCudaGraphExecKernelSetParams`, ported.
    fn set_params(&mut self) -> BoxResult<Solved> {
        let (n, max, fixed) = (self.n, self.limit(), self.fixed);
        let converged = |sum: f64| fixed.is_none() && sum <= f64::from(CONV_THRESHOLD);
        let mut graph = self.swapped.capture(SweepSwappedParams {
            n,
            conv: CONV_THRESHOLD,
            a: &self.a,
            b: &self.b,
            x: &mut self.x,
            x_new: &mut self.x_new,
            sum_host: &mut self.sum_host,
        })?;
        let mut iterations = 0;
        while iterations < max {
            graph.launch()?;
            // The next launch reads what this one wrote: no setter, the other instantiation.
            graph.swap_x_x_new()?;
            iterations += 1;
            if converged(graph.window()?.sum_host()?[0]) {
                break;
            }
        }
        // After the swap the step's `x` is the latest iterate.
        let error = Self::final_error_with(
            &mut self.final_error,
            n,
            graph.params().x,
            &mut self.error_host,
        )?;
        Ok(Solved { iterations, error })
    }

    /// The sample's `JacobiMethodGpuCudaGraphExecUpdate`, ported.
    fn exec_update(&mut self) -> BoxResult<Solved> {
        let (n, max, fixed) = (self.n, self.limit(), self.fixed);
        let converged = |sum: f64| fixed.is_none() && sum <= f64::from(CONV_THRESHOLD);
        let mut graph = self.sweep.capture(SweepParams {
            n,
            conv: CONV_THRESHOLD,
            a: &self.a,
            b: &self.b,
            x: &mut self.x,
            x_new: &mut self.x_new,
            sum_host: &mut self.sum_host,
        })?;
        let mut iterations = 0;
        loop {
            graph.launch()?;
            iterations += 1;
            if converged(graph.window()?.sum_host()?[0]) || iterations == max {
                break;
            }
            // Captured again with the iterates exchanged: the same topology, so the
            // executable graph is updated in place, as the sample's cudaGraphExecUpdate.
            let how = graph.recapture_with(|p| std::mem::swap(&mut p.x, &mut p.x_new))?;
            if !how.is_updated() {
                return Err(
                    format!("exec_update: sweep {iterations} was not updated: {how:?}").into(),
                );
            }
        }
        let error = Self::final_error_with(
            &mut self.final_error,
            n,
            graph.params().x_new,
            &mut self.error_host,
        )?;
        Ok(Solved { iterations, error })
    }

    /// The sample's `JacobiMethodGpu` (no graph), ported.
    fn stream(&mut self) -> BoxResult<Solved> {
        let (n, max) = (self.n, self.limit());
        let mut iterations = 0;
        while iterations < max {
            let (x, x_new) = if iterations % 2 == 0 {
                (&mut self.x, &mut self.x_new)
            } else {
                (&mut self.x_new, &mut self.x)
            };
            self.sweep
                .run(SweepParams {
                    n,
                    conv: CONV_THRESHOLD,
                    a: &self.a,
                    b: &self.b,
                    x,
                    x_new,
                    sum_host: &mut self.sum_host,
                })?
                .wait()?;
            iterations += 1;
            if self.converged(self.sum_host.as_slice()?[0]) {
                break;
            }
        }
        let latest = if iterations % 2 == 1 {
            &self.x_new
        } else {
            &self.x
        };
        let error = Self::final_error_with(&mut self.final_error, n, latest, &mut self.error_host)?;
        Ok(Solved { iterations, error })
    }

    /// The sample's final error of `latest`, computed on the device.
    fn final_error_with(
        pipeline: &mut FinalError,
        n: u32,
        latest: &DeviceBuffer<f64>,
        error_host: &mut PinnedBuffer<f64>,
    ) -> BoxResult<f64> {
        pipeline
            .run(FinalErrorParams {
                n,
                x: latest,
                error_host: &mut *error_host,
            })?
            .wait()?;
        Ok(error_host.as_slice()?[0])
    }

    /// One untimed solve by `method`, then a timed one: its result and milliseconds.
    fn timed(&mut self, method: &str) -> BoxResult<(Solved, f64)> {
        let mut result = None;
        for _ in 0..2 {
            self.reset()?;
            let start = Instant::now();
            let solved = match method {
                "set_params" => self.set_params()?,
                "exec_update" => self.exec_update()?,
                "stream" => self.stream()?,
                other => return Err(format!("no method {other}").into()),
            };
            result = Some((solved, start.elapsed().as_secs_f64() * 1e3));
        }
        result.ok_or_else(|| "no solve ran".into())
    }
}

/// One method's solves over the rounds, ours and the anchor's (empty without one).
#[derive(Debug)]
pub struct MethodTimes {
    /// The method's name, as the anchor prints it.
    pub method: &'static str,
    /// Our milliseconds per solve, one per round.
    pub ours: Vec<f64>,
    /// The anchor's, one per round, or none.
    pub anchor: Vec<f64>,
    /// The sweeps each solve took (ours and the anchor's, every round).
    pub iterations: Vec<usize>,
}

/// A method's line of the anchor's output: sweeps, milliseconds, final error.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnchorLine {
    /// Sweeps the timed solve took.
    pub iterations: usize,
    /// Its milliseconds.
    pub ms: f64,
    /// Its final error, sum of |x - 1|.
    pub error: f64,
}

/// Parses the anchor's `method iterations ms error` lines, in `METHODS` order: each method
/// once, a positive finite time.
pub fn parse_anchor(stdout: &str) -> BoxResult<[AnchorLine; 3]> {
    let mut lines: [Option<AnchorLine>; 3] = [None; 3];
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, iterations, ms, error] = fields[..] else {
            return Err(
                format!("the anchor printed `{line}`, not `method iterations ms error`").into(),
            );
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
        let ms = number("time", ms)?;
        if ms <= 0.0 {
            return Err(format!("the anchor's {name} line has no time: `{line}`").into());
        }
        lines[slot] = Some(AnchorLine {
            iterations: iterations
                .parse()
                .map_err(|_| format!("the anchor's {name} line has no sweep count: `{line}`"))?,
            ms,
            error: number("final error", error)?,
        });
    }
    let mut out = [AnchorLine {
        iterations: 0,
        ms: 0.0,
        error: 0.0,
    }; 3];
    for (slot, (line, method)) in out.iter_mut().zip(lines.iter().zip(METHODS)) {
        *slot = line.ok_or_else(|| format!("the anchor printed no line for {method}"))?;
    }
    Ok(out)
}

/// Runs the anchor once for the system of order `n`.
fn run_anchor(anchor: &Path, n: u32) -> BoxResult<[AnchorLine; 3]> {
    let stdout = tests::anchor::anchor_stdout(anchor, [n.to_string()])?;
    parse_anchor(&stdout)
}

/// Fails unless `solved` agrees with the CPU solve: its sweeps within one of the reference's
/// (the device adds each sweep's |dx| with atomics, in no fixed order, so its sum may cross the
/// threshold a sweep earlier or later), and the final error within the threshold of the
/// reference's (the sample's own check).
fn check(who: &str, method: &str, solved: Solved, reference: Solved) -> BoxResult<()> {
    if solved.iterations.abs_diff(reference.iterations) > 1 {
        return Err(format!(
            "{who} {method}: {} sweeps, the CPU solve took {}",
            solved.iterations, reference.iterations
        )
        .into());
    }
    // A NaN error fails too.
    let agrees = (solved.error - reference.error).abs() < f64::from(CONV_THRESHOLD);
    if !agrees {
        return Err(format!(
            "{who} {method}: final error {:e}, the CPU solve's is {:e}",
            solved.error, reference.error
        )
        .into());
    }
    Ok(())
}

/// `rounds` rounds of our three methods, each followed by one run of the anchor when there is
/// one; every solve checked against the CPU's.
pub fn measure(
    ctx: &Context,
    n: u32,
    rounds: usize,
    anchor: Option<&Path>,
) -> BoxResult<Vec<MethodTimes>> {
    let reference = reference(n);
    let mut ports = Ports::new(ctx, n)?;
    let mut times: Vec<MethodTimes> = METHODS
        .iter()
        .map(|&method| MethodTimes {
            method,
            ours: Vec::new(),
            anchor: Vec::new(),
            iterations: Vec::new(),
        })
        .collect();
    for _ in 0..rounds {
        for t in &mut times {
            let (solved, ms) = ports.timed(t.method)?;
            check("ours", t.method, solved, reference)?;
            t.ours.push(ms);
            t.iterations.push(solved.iterations);
        }
        if let Some(anchor) = anchor {
            for (t, line) in times.iter_mut().zip(run_anchor(anchor, n)?) {
                let solved = Solved {
                    iterations: line.iterations,
                    error: line.error,
                };
                check("the anchor's", t.method, solved, reference)?;
                t.anchor.push(line.ms);
                t.iterations.push(line.iterations);
            }
        }
    }
    Ok(times)
}

/// The Markdown table of `times` (ms per solve and µs per sweep), with the anchor's columns
/// when it ran, and the target's verdict (each method at most 1.05x the anchor).
pub fn table(times: &[MethodTimes]) -> String {
    let with_anchor = times.iter().all(|t| !t.anchor.is_empty());
    let mut out = String::from(if with_anchor {
        "| method | sweeps | ours median ms | spread | µs per sweep | anchor median ms | spread | ours/anchor |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    } else {
        "| method | sweeps | ours median ms | spread | µs per sweep |\n| --- | ---: | ---: | ---: | ---: |\n"
    });
    let mut worst = 0.0_f64;
    for t in times {
        let (ours, ours_spread) = tests::anchor::median_spread(&t.ours);
        let sweeps = t.iterations.first().copied().unwrap_or(0);
        let per_sweep = ours * 1e3 / sweeps.max(1) as f64;
        out.push_str(&format!(
            "| {} | {sweeps} | {ours:.3} | {:.1}% | {per_sweep:.2} |",
            t.method,
            ours_spread * 100.0
        ));
        if with_anchor {
            let (anchor, anchor_spread) = tests::anchor::median_spread(&t.anchor);
            worst = worst.max(ours / anchor);
            out.push_str(&format!(
                " {anchor:.3} | {:.1}% | {:.3} |",
                anchor_spread * 100.0,
                ours / anchor
            ));
        }
        out.push('\n');
    }
    if with_anchor {
        let verdict = if worst <= 1.05 { "met" } else { "MISSED" };
        out.push_str(&format!(
            "target: every method at most 1.05x the sample's: worst ours/anchor = {worst:.3}, {verdict}\n"
        ));
    }
    out
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub struct Options {
    /// The system's order.
    pub n: u32,
    /// Rounds of ours (and the anchor's).
    pub rounds: usize,
    /// `--check-host`: the ports on the checked CPU backend instead.
    pub check_host: bool,
    /// `--host-cost SWEEPS`: only the host's work per sweep of each port, every solve exactly
    /// SWEEPS sweeps (against `tools/fake-driver`, the library's own cost).
    pub host_cost: Option<usize>,
}

/// Parses the arguments after the program's name. `--bench` (which cargo and `.gpu/run`
/// pass) is accepted and ignored; anything else unknown is an error.
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        n: DEFAULT_N,
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
            "--host-cost" => options.host_cost = Some(number("--host-cost")?),
            "--n" => {
                let n = number("--n")?;
                options.n = u32::try_from(n)
                    .ok()
                    .filter(|n| (ROWS_PER_CTA..=4096).contains(n))
                    .ok_or_else(|| {
                        format!("--n takes an order from {ROWS_PER_CTA} to 4096, not {n}")
                    })?;
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}`; the arguments are --n N, --rounds N, --check-host and --host-cost SWEEPS"
                ));
            }
        }
    }
    Ok(options)
}

/// The three ports on the checked CPU backend at n = 64: results checked, no races. Returns
/// the sweeps each method took.
pub fn check_host() -> BoxResult<Vec<(&'static str, usize)>> {
    let ctx = Context::cpu_checked();
    let times = measure(&ctx, 64, 1, None)?;
    let races = ctx.races();
    if !races.is_empty() {
        return Err(format!("{} race(s), the first: {:?}", races.len(), races[0]).into());
    }
    Ok(times
        .iter()
        .map(|t| (t.method, t.iterations.first().copied().unwrap_or(0)))
        .collect())
}

/// `--host-cost SWEEPS`: each port's time per sweep, every solve exactly `sweeps` sweeps,
/// medians of `rounds` rounds. Against the do-nothing driver of `tools/fake-driver`
/// (`GPU_PIPELINE_LIBCUDA`), that is the library's own host work per sweep (the sums it reads
/// are garbage there, so no convergence test ends a solve); under callgrind it also counts the
/// driver calls of a sweep, to set beside the sample's (`set_params` 3, `exec_update` 8 and a
/// capture, `stream` 4).
pub fn host_cost(
    ctx: &Context,
    n: u32,
    sweeps: usize,
    rounds: usize,
) -> BoxResult<Vec<(&'static str, f64)>> {
    let mut ports = Ports::new(ctx, n)?;
    ports.fixed = Some(sweeps);
    METHODS
        .iter()
        .map(|&method| {
            let mut us = (0..rounds)
                .map(|_| Ok(ports.timed(method)?.1 * 1e3 / sweeps as f64))
                .collect::<BoxResult<Vec<f64>>>()?;
            us.sort_by(f64::total_cmp);
            Ok((method, us[us.len() / 2]))
        })
        .collect()
}

fn main() {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("jacobi_graphs: {e}");
            std::process::exit(2);
        }
    };
    if options.check_host {
        match check_host() {
            Ok(sweeps) => println!(
                "jacobi_graphs: checked CPU backend, n = 64, sweeps {sweeps:?}, each solve as the CPU's, no races"
            ),
            Err(e) => {
                eprintln!("jacobi_graphs host check failed: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let ctx = match Context::cuda(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("jacobi_graphs bench skipped: no CUDA device ({e})");
            return;
        }
    };
    if let Some(sweeps) = options.host_cost {
        match host_cost(&ctx, options.n, sweeps, options.rounds) {
            Ok(costs) => {
                println!(
                    "host work per sweep, {sweeps} sweeps a solve, medians of {} rounds:",
                    options.rounds
                );
                for (method, us) in costs {
                    println!("  {method} {us:.3} µs");
                }
            }
            Err(e) => {
                eprintln!("jacobi_graphs host cost failed: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let anchor: Option<PathBuf> = std::env::var_os(ANCHOR_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    let device = ctx.device().and_then(|d| d.name().ok()).unwrap_or_default();
    let times = match measure(&ctx, options.n, options.rounds, anchor.as_deref()) {
        Ok(times) => times,
        Err(e) => {
            eprintln!("jacobi_graphs bench failed: {e}");
            std::process::exit(1);
        }
    };
    let against = match &anchor {
        Some(path) => format!(
            "alternating with the anchor {} (benches/anchors/jacobi_graphs.cu)",
            path.display()
        ),
        None => format!("no anchor ({ANCHOR_ENV} unset)"),
    };
    println!(
        "\n{device}: n = {}, ms per solve (after one untimed solve), medians of {} rounds, {against}; spread = (max - min) / median",
        options.n, options.rounds
    );
    print!("{}", table(&times));
    if anchor.is_none() {
        println!(
            "(the anchor: nvcc -O3 -arch=sm_90 -o jacobi_graphs benches/anchors/jacobi_graphs.cu, then {ANCHOR_ENV}=./jacobi_graphs)"
        );
    }
}

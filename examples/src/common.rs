//! What every example shares: choosing and naming the backend, flag parsing and checking
//! (numbers, output paths), checks, a timings table, progress bars, writing outputs, the
//! device's copy bandwidth, CPU work spread over all cores, and the exit code.

use std::fmt;
use std::io::IsTerminal;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpu_pipeline::{Backend, Context, DeviceBuffer, Event, StepProfile, Stream};
use indicatif::{ProgressBar, ProgressStyle};

/// The error type of the examples: any error, with its message.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The backend the examples run on: [`Context::auto`] (CUDA device 0 when a driver and a GPU
/// are there, the CPU backend otherwise; `GPU_PIPELINE_BACKEND=cuda|cpu|cpu-checked`
/// forces one).
pub fn context() -> Result<Context, BoxError> {
    Ok(Context::auto()?)
}

/// One line naming the backend: `cuda (device 0: NVIDIA H100 80GB HBM3)`, `cpu`, or
/// `cpu (checked: race detector on)`.
pub fn backend_name(ctx: &Context) -> String {
    match ctx.backend() {
        Backend::Cuda => match ctx.device() {
            Some(device) => {
                let name = device.name().unwrap_or_else(|_| "unknown".to_owned());
                format!("cuda (device {}: {name})", device.ordinal())
            }
            None => "cuda".to_owned(),
        },
        Backend::Cpu if ctx.is_checked() => "cpu (checked: race detector on)".to_owned(),
        Backend::Cpu => "cpu".to_owned(),
    }
}

/// One verified property of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// What was checked, e.g. `final field vs CPU reference`.
    pub name: String,
    /// The measured value and the limit, e.g. `max |error| = 0 (limit 1e-4)`.
    pub detail: String,
    /// Whether it held.
    pub passed: bool,
}

impl Check {
    /// `value <= limit`, shown as `label = value (limit limit)`.
    pub fn at_most(name: impl Into<String>, label: &str, value: f64, limit: f64) -> Check {
        Check {
            name: name.into(),
            detail: format!("{label} = {value:.3e} (limit {limit:.1e})"),
            passed: value <= limit,
        }
    }

    /// The checked CPU backend found no race (always true on the other backends, which
    /// cannot look).
    pub fn no_races(ctx: &Context) -> Check {
        let races = ctx.races();
        let detail = if ctx.is_checked() {
            match races.first() {
                None => "0 races reported".to_owned(),
                Some(first) => format!("{} race(s), first: {first:?}", races.len()),
            }
        } else {
            "not checked on this backend (GPU_PIPELINE_BACKEND=cpu-checked checks)".to_owned()
        };
        Check {
            name: "race detector".to_owned(),
            detail,
            passed: races.is_empty(),
        }
    }
}

/// Wall-clock times of the phases of a run, printed as a table.
#[derive(Clone, Debug, Default)]
pub struct Timings {
    rows: Vec<(String, Duration, String)>,
}

impl Timings {
    /// An empty table.
    pub fn new() -> Timings {
        Timings::default()
    }

    /// Runs `f` and adds a row with its time.
    pub fn time<R>(&mut self, label: &str, f: impl FnOnce() -> R) -> R {
        let start = Instant::now();
        let result = f();
        self.add(label, start.elapsed(), "");
        result
    }

    /// Adds a row; `note` is free text such as a rate.
    pub fn add(&mut self, label: &str, elapsed: Duration, note: impl Into<String>) {
        self.rows.push((label.to_owned(), elapsed, note.into()));
    }

    /// The rows: label, time, note.
    pub fn rows(&self) -> &[(String, Duration, String)] {
        &self.rows
    }

    /// The time of the row with this label.
    pub fn get(&self, label: &str) -> Option<Duration> {
        self.rows.iter().find(|r| r.0 == label).map(|r| r.1)
    }
}

impl fmt::Display for Timings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .rows
            .iter()
            .map(|r| r.0.len())
            .max()
            .unwrap_or(5)
            .max(5);
        writeln!(f, "{:<width$}  {:>12}  note", "phase", "time")?;
        writeln!(f, "{:-<width$}  {:->12}  {:-<4}", "", "", "")?;
        for (label, elapsed, note) in &self.rows {
            writeln!(
                f,
                "{label:<width$}  {:>12}  {note}",
                format_duration(*elapsed)
            )?;
        }
        Ok(())
    }
}

/// `12.345 ms`, `1.234 s`, `56.7 µs`.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

/// `64.0 MiB`, `12.0 KiB`, `512 B`.
pub fn format_bytes(bytes: usize) -> String {
    let b = bytes as f64;
    if b >= f64::from(1u32 << 30) {
        format!("{:.1} GiB", b / f64::from(1u32 << 30))
    } else if b >= f64::from(1u32 << 20) {
        format!("{:.1} MiB", b / f64::from(1u32 << 20))
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// A progress bar over `len` units on stderr, hidden with `quiet` or when stderr is not a
/// terminal (so logs and pipes stay clean).
pub fn progress(len: u64, quiet: bool, message: &'static str) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len).with_message(message);
    if let Ok(style) = ProgressStyle::with_template(
        "{msg:>10} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, eta {eta})",
    ) {
        bar.set_style(style);
    }
    bar
}

/// What every example prints at the end: backend, checks and timings.
#[derive(Clone, Debug)]
pub struct Report {
    /// [`backend_name`] of the context it ran on.
    pub backend: String,
    /// Every check, in order.
    pub checks: Vec<Check>,
    /// The timings table.
    pub timings: Timings,
    /// Measurements worth a line of their own (bandwidths, throughputs, ratios), in order.
    pub notes: Vec<String>,
    /// The files the run wrote, each after its last byte was written successfully.
    pub outputs: Vec<PathBuf>,
}

impl Report {
    /// An empty report for `ctx`.
    pub fn new(ctx: &Context) -> Report {
        Report {
            backend: backend_name(ctx),
            checks: Vec::new(),
            timings: Timings::new(),
            notes: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// Writes `bytes` to `path` (see [`write_output`]) and lists the file in the report.
    pub fn write_output(&mut self, path: &Path, bytes: &[u8]) -> Result<(), BoxError> {
        write_output(path, bytes)?;
        self.outputs.push(path.to_owned());
        Ok(())
    }

    /// Writes one profiled step as a Chrome trace to `path` and adds its stage table to the
    /// notes.
    pub fn write_trace(&mut self, path: &Path, profile: &StepProfile) -> Result<(), BoxError> {
        self.write_output(path, profile.to_chrome_trace().as_bytes())?;
        self.notes.push(format!(
            "one profiled step of {} ({:.3} ms):\n{profile}",
            profile.pipeline,
            profile.total_ms()
        ));
        Ok(())
    }

    /// Whether every check held.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    /// The first failed check, if any.
    pub fn first_failure(&self) -> Option<&Check> {
        self.checks.iter().find(|c| !c.passed)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "checks:")?;
        for check in &self.checks {
            let mark = if check.passed { "ok  " } else { "FAIL" };
            writeln!(f, "  {mark} {}: {}", check.name, check.detail)?;
        }
        writeln!(f)?;
        write!(f, "{}", self.timings)?;
        for note in &self.notes {
            write!(f, "\n{note}")?;
            if !note.ends_with('\n') {
                writeln!(f)?;
            }
        }
        if !self.outputs.is_empty() {
            writeln!(f)?;
        }
        for path in &self.outputs {
            writeln!(f, "wrote {}", path.display())?;
        }
        Ok(())
    }
}

/// Prints the report (or the error) and returns the process exit code: 0 when every check
/// held, 1 when one failed or the run stopped on an error.
pub fn finish(result: Result<Report, BoxError>) -> std::process::ExitCode {
    match result {
        Ok(report) => {
            println!("\n{report}");
            if report.passed() {
                println!("all checks passed on {}", report.backend);
                std::process::ExitCode::SUCCESS
            } else {
                eprintln!("error: a check failed on {}", report.backend);
                std::process::ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = e.source();
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// Parses the flags and applies `validate` (rules between flags that clap cannot express,
/// output paths that must be writable), exiting with clap's usage error and status 2 when it
/// fails, as for any other bad flag. Nothing has run yet at that point.
///
/// Then turns logging on as `--log` (see [`LogArgs`]) or, without it, `RUST_LOG` asks.
pub fn parse_args<A: clap::Parser>(validate: impl FnOnce(&A) -> Result<(), String>) -> A {
    let mut command = A::command();
    let matches = command.get_matches_mut();
    let args = A::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut command).exit());
    if let Err(message) = validate(&args) {
        command
            .error(clap::error::ErrorKind::ValueValidation, message)
            .exit();
    }
    // Examples without the shared `--log` flag still honour `RUST_LOG`.
    let filter = matches.try_get_one::<String>("log").ok().flatten();
    if let Err(message) = init_logging(filter.map(String::as_str)) {
        command
            .error(clap::error::ErrorKind::ValueValidation, message)
            .exit();
    }
    args
}

/// The environment variable read for a log filter when `--log` is not given.
pub const LOG_ENV: &str = "RUST_LOG";

/// The logging flag every example shares (`#[command(flatten)]` it into the flags).
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct LogArgs {
    /// Print gpu-pipeline's `tracing` events to stderr, filtered by FILTER in `RUST_LOG`'s
    /// syntax: `info` (the backend chosen, libraries loaded), `gpu_pipeline=debug` (every
    /// module, pipeline and graph), `gpu_pipeline::cuda=trace`. Without it, `RUST_LOG` is
    /// honoured; with neither, nothing is printed.
    #[arg(long, value_name = "FILTER", value_parser = parse_log_filter)]
    pub log: Option<String>,
}

/// Checks a `--log` filter's syntax (the filter itself is built by [`init_logging`]).
pub fn parse_log_filter(text: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::builder()
        .parse(text)
        .map(|_| text.to_owned())
        .map_err(|e| format!("not a log filter ({e}); e.g. `info` or `gpu_pipeline=debug`"))
}

/// Installs a `tracing` subscriber that writes to stderr, filtered by `filter` (the `--log`
/// flag) or else by [`LOG_ENV`]; with neither, installs nothing, so logging costs nothing.
/// A second call (or another subscriber already installed) changes nothing.
pub fn init_logging(filter: Option<&str>) -> Result<(), String> {
    let text = match filter {
        Some(text) => text.to_owned(),
        None => match std::env::var(LOG_ENV) {
            Ok(text) if !text.trim().is_empty() => text,
            _ => return Ok(()),
        },
    };
    let filter = tracing_subscriber::EnvFilter::builder()
        .parse(&text)
        .map_err(|e| format!("{text:?} is not a log filter: {e}"))?;
    // `try_init` fails only when a subscriber is already set, which is fine here.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    Ok(())
}

/// What every example's `main` does: parse and validate the flags; with `--dot` print the
/// pipelines' stage graphs and exit; otherwise pick the backend, print `banner`, run, print
/// the report and return the exit code (see [`finish`]).
pub fn main_with<A: clap::Parser>(
    validate: impl FnOnce(&A) -> Result<(), String>,
    dot: impl FnOnce(&A) -> Option<String>,
    run: impl FnOnce(&Context, &A) -> Result<Report, BoxError>,
) -> std::process::ExitCode {
    let args = parse_args(validate);
    if let Some(graph) = dot(&args) {
        print!("{graph}");
        return std::process::ExitCode::SUCCESS;
    }
    finish(context().and_then(|ctx| run(&ctx, &args)))
}

/// A float flag's parser: accepts finite numbers within `range`, rejecting `nan`, `inf` and
/// anything outside with the range in the message, as clap does for integers:
/// `invalid value 'nan' for '--dt <DT>': nan is not a finite number`. Use it as
/// `#[arg(value_parser = float_in(POSITIVE))]`.
pub fn float_in(
    range: (Bound<f32>, Bound<f32>),
) -> impl Fn(&str) -> Result<f32, String> + Clone + Send + Sync + 'static {
    move |s| parse_float(s, range)
}

/// Every number above zero (for [`float_in`]).
pub const POSITIVE: (Bound<f32>, Bound<f32>) = (Bound::Excluded(0.0), Bound::Unbounded);

/// Parses `s` as a finite `f32` within `range` (see [`float_in`]).
pub fn parse_float(s: &str, range: (Bound<f32>, Bound<f32>)) -> Result<f32, String> {
    let value: f32 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    if !value.is_finite() {
        return Err(format!("{s} is not a finite number"));
    }
    if !range.contains(&value) {
        return Err(format!("{value} is not in {}", interval(range)));
    }
    Ok(value)
}

/// `(0, 0.25]`, `(0, inf)`: a range in interval notation.
fn interval((lo, hi): (Bound<f32>, Bound<f32>)) -> String {
    let lo = match lo {
        Bound::Included(v) => format!("[{v}"),
        Bound::Excluded(v) => format!("({v}"),
        Bound::Unbounded => "(-inf".to_owned(),
    };
    let hi = match hi {
        Bound::Included(v) => format!("{v}]"),
        Bound::Excluded(v) => format!("{v})"),
        Bound::Unbounded => "inf)".to_owned(),
    };
    format!("{lo}, {hi}")
}

/// Checks, before anything runs, that the file `flag` names can be written: its folder
/// exists, it is not a folder, and it opens for writing. A file that did not exist is not
/// left behind. (A device that accepts the open and then refuses the bytes, such as
/// `/dev/full`, is caught when writing: see [`write_output`].)
pub fn check_output_path(flag: &str, path: &Path) -> Result<(), String> {
    let shown = path.display();
    if path.as_os_str().is_empty() {
        return Err(format!("`{flag}` needs a file name"));
    }
    if path.is_dir() {
        return Err(format!("`{flag} {shown}`: is a directory; name a file"));
    }
    let existed = path.symlink_metadata().is_ok();
    match std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
    {
        Ok(_) => {
            if !existed {
                // Only the probe was created; the run writes the real file at the end.
                std::fs::remove_file(path).ok();
            }
            Ok(())
        }
        Err(e) => Err(format!("`{flag} {shown}`: cannot write there: {e}")),
    }
}

/// The error of a write that failed, naming the file.
#[derive(Debug)]
pub struct WriteError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub source: std::io::Error,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot write {}", self.path.display())
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Writes `bytes` to `path` through an unbuffered file, so that every failure (a full disk,
/// `/dev/full`) is an error here rather than lost in a buffer's drop.
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    std::fs::write(path, bytes).map_err(|source| WriteError {
        path: path.to_owned(),
        source,
    })
}

/// How long a run may be estimated to take on the CPU backend before it is refused (see
/// [`check_cpu_cost`]).
pub const CPU_TIME_LIMIT: Duration = Duration::from_secs(120);

/// The flag that runs a GPU-sized problem on the CPU backend anyway.
pub const CPU_ANYWAY_FLAG: &str = "--cpu-anyway";

/// Refuses, before anything runs, a problem the CPU backend would take longer than
/// [`CPU_TIME_LIMIT`] for: `work` elementary updates (`units`, e.g. "body pairs") at about
/// `per_core` a second on each of [`cpu_threads`] cores. GPU-sized inputs would otherwise
/// run for hours without a word. `anyway` is the example's [`CPU_ANYWAY_FLAG`].
pub fn check_cpu_cost(
    ctx: &Context,
    anyway: bool,
    work: f64,
    per_core: f64,
    units: &str,
) -> Result<(), BoxError> {
    if ctx.backend() != Backend::Cpu || anyway {
        return Ok(());
    }
    let rate = per_core * cpu_threads() as f64;
    let seconds = work / rate;
    if seconds <= CPU_TIME_LIMIT.as_secs_f64() {
        return Ok(());
    }
    Err(format!(
        "on the CPU backend this run would take about {} ({work:.1e} {units} at about \
         {rate:.1e} a second on {} cores), over the limit of {}; make the problem smaller, run \
         it on a GPU, or pass {CPU_ANYWAY_FLAG} to run it anyway",
        format_estimate(seconds),
        cpu_threads(),
        format_estimate(CPU_TIME_LIMIT.as_secs_f64()),
    )
    .into())
}

/// `3.2 h`, `14 min`, `45 s`: a rough duration.
fn format_estimate(seconds: f64) -> String {
    if seconds >= 2.0 * 86_400.0 {
        format!("{:.1} days", seconds / 86_400.0)
    } else if seconds >= 2.0 * 3600.0 {
        format!("{:.1} h", seconds / 3600.0)
    } else if seconds >= 120.0 {
        format!("{:.0} min", seconds / 60.0)
    } else {
        format!("{seconds:.0} s")
    }
}

/// Where a host copy of the state first holds a NaN or an infinity, if anywhere.
pub fn first_non_finite(values: &[f32]) -> Option<usize> {
    values.iter().position(|v| !v.is_finite())
}

/// How much of the CPU reference a run replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReferenceMode {
    /// `full` when its cost is within the budget (4e9 elementary updates), else `bounded`.
    // No rustdoc links in flag and value docs: clap prints them as written in `--help`.
    Auto,
    /// Replay the whole run on the CPU (all cores) and compare the end states.
    Full,
    /// Only the checks whose cost does not grow with the number of steps.
    Bounded,
}

/// The most elementary updates (cells x steps, body pairs x steps) that `--reference auto`
/// replays on the CPU: a few seconds on a few cores.
pub const REFERENCE_BUDGET: f64 = 4.0e9;

impl ReferenceMode {
    /// Whether to replay the whole run, which costs `work` elementary updates.
    pub fn full(self, work: f64) -> bool {
        match self {
            ReferenceMode::Auto => work <= REFERENCE_BUDGET,
            ReferenceMode::Full => true,
            ReferenceMode::Bounded => false,
        }
    }

    /// The note of a run that checked only `what` (e.g. "last step") rather than replaying
    /// all of it, whose full replay would cost `work` `units` (e.g. "cell updates"): why, in
    /// the user's terms.
    pub fn partial_note(self, what: &str, work: f64, units: &str) -> String {
        match self {
            ReferenceMode::Bounded => format!("{what} only (--reference bounded)"),
            _ => format!(
                "{what} only: replaying {work:.1e} {units} exceeds the budget of \
                 {REFERENCE_BUDGET:.0e} (--reference full forces it)"
            ),
        }
    }
}

/// The CPU threads to spread reference work over: every core.
pub fn cpu_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Runs `f(first_index, chunk)` over consecutive chunks of `out`, each a multiple of `unit`
/// elements long, on all cores. The result does not depend on the number of threads when
/// each element is computed on its own.
pub fn par_chunks<T: Send>(out: &mut [T], unit: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    // Below this many elements a thread costs more than it saves.
    const SERIAL: usize = 1 << 15;
    if out.len() <= SERIAL {
        f(0, out);
        return;
    }
    let units = out.len() / unit.max(1);
    let per_thread = units.div_ceil(cpu_threads()).max(1) * unit.max(1);
    std::thread::scope(|scope| {
        for (k, chunk) in out.chunks_mut(per_thread).enumerate() {
            let f = &f;
            scope.spawn(move || f(k * per_thread, chunk));
        }
    });
}

/// The device's own copy bandwidth: a device-to-device copy of `bytes` (rounded down to
/// whole `f32`s) timed with events, repeated until about 50 ms have passed, in bytes per
/// second counting the read and the write (as a kernel that reads and writes each byte
/// once would). On the CPU backend this is the CPU's `memcpy` through the same API.
pub fn copy_bandwidth(ctx: &Context, bytes: usize) -> Result<f64, BoxError> {
    let len = (bytes / 4).max(1);
    let stream = Stream::non_blocking(ctx)?;
    let src = DeviceBuffer::<f32>::zeros(&stream, len)?;
    let mut dst = DeviceBuffer::<f32>::zeros(&stream, len)?;
    let (start, end) = (Event::new(ctx)?, Event::new(ctx)?);
    // Warm up, and find how many copies take about 50 ms.
    stream.copy_dtod(&src, &mut dst)?;
    stream.record_into(&start)?;
    stream.copy_dtod(&src, &mut dst)?;
    stream.record_into(&end)?;
    end.synchronize()?;
    let once_ms = f64::from(Event::elapsed_time(&start, &end)?).max(1e-3);
    let reps = (50.0 / once_ms).clamp(3.0, 1000.0) as usize;
    stream.record_into(&start)?;
    for _ in 0..reps {
        stream.copy_dtod(&src, &mut dst)?;
    }
    stream.record_into(&end)?;
    end.synchronize()?;
    let seconds = f64::from(Event::elapsed_time(&start, &end)?) / 1e3;
    Ok(2.0 * (len * 4) as f64 * reps as f64 / seconds.max(1e-9))
}

/// A small xorshift generator: deterministic inputs without a dependency.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// A uniform value in `[0, 1)`.
    pub fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// The largest `|a[i] - b[i]|` (NaN counts as infinite).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "compared slices differ in length");
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let d = (f64::from(*x) - f64::from(*y)).abs();
            if d.is_nan() { f64::INFINITY } else { d }
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_must_be_finite_and_in_range() {
        let unit = (Bound::Excluded(0.0), Bound::Included(0.25));
        assert_eq!(parse_float("0.25", unit), Ok(0.25));
        assert_eq!(parse_float(" 1e-3 ", POSITIVE), Ok(1e-3));
        assert_eq!(
            parse_float("nan", POSITIVE),
            Err("nan is not a finite number".to_owned())
        );
        assert_eq!(
            parse_float("-inf", POSITIVE),
            Err("-inf is not a finite number".to_owned())
        );
        assert_eq!(
            parse_float("1e39", POSITIVE),
            Err("1e39 is not a finite number".to_owned())
        );
        assert_eq!(
            parse_float("0", unit),
            Err("0 is not in (0, 0.25]".to_owned())
        );
        assert_eq!(
            parse_float("-2", POSITIVE),
            Err("-2 is not in (0, inf)".to_owned())
        );
        assert_eq!(
            parse_float("x", POSITIVE),
            Err("`x` is not a number".to_owned())
        );
        assert_eq!(
            interval((Bound::Included(-1.0), Bound::Excluded(2.5))),
            "[-1, 2.5)"
        );
    }

    #[test]
    fn output_paths_are_probed_without_leaving_files() {
        let dir = std::env::temp_dir().join(format!("common-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fresh = dir.join("fresh.txt");
        check_output_path("--out", &fresh).unwrap();
        assert!(!fresh.exists());
        // An existing file is neither truncated nor removed.
        std::fs::write(&fresh, b"keep").unwrap();
        check_output_path("--out", &fresh).unwrap();
        assert_eq!(std::fs::read(&fresh).unwrap(), b"keep");
        let err = check_output_path("--out", &dir).unwrap_err();
        assert!(err.contains("is a directory"), "{err}");
        let err = check_output_path("--out", &dir.join("missing").join("f")).unwrap_err();
        assert!(err.starts_with("`--out "), "{err}");
        assert!(err.contains("cannot write there"), "{err}");
        assert!(check_output_path("--out", Path::new("")).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_refused_write_is_an_error_naming_the_file() {
        let full = Path::new("/dev/full");
        if !full.exists() {
            return;
        }
        let err = write_output(full, b"bytes").unwrap_err();
        assert_eq!(err.to_string(), "cannot write /dev/full");
        let source = std::error::Error::source(&err).unwrap().to_string();
        assert!(source.contains("No space left"), "{source}");
    }

    #[test]
    fn parallel_chunks_cover_every_element_once() {
        for len in [0usize, 7, 1 << 15, (1 << 16) + 12] {
            let mut out = vec![0usize; len];
            par_chunks(&mut out, 4, |first, chunk| {
                for (k, x) in chunk.iter_mut().enumerate() {
                    *x += first + k + 1;
                }
            });
            assert!(out.iter().enumerate().all(|(i, &x)| x == i + 1), "{len}");
        }
    }

    #[test]
    fn auto_reference_replays_within_the_budget() {
        assert!(ReferenceMode::Auto.full(REFERENCE_BUDGET));
        assert!(!ReferenceMode::Auto.full(REFERENCE_BUDGET * 2.0));
        assert!(ReferenceMode::Full.full(1e20));
        assert!(!ReferenceMode::Bounded.full(1.0));
    }

    #[test]
    fn reports_list_notes_and_written_files() {
        let mut report = Report::new(&Context::cpu());
        report.notes.push("bandwidth: 1 GB/s".to_owned());
        report.outputs.push(PathBuf::from("out.png"));
        let text = report.to_string();
        assert!(text.contains("\nbandwidth: 1 GB/s\n"), "{text}");
        assert!(text.ends_with("wrote out.png\n"), "{text}");
    }
}

//! What every example shares: choosing and naming the backend, checks, a timings table,
//! progress bars, and the exit code.

use std::fmt;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use gpu_pipeline::{Backend, Context};
use indicatif::{ProgressBar, ProgressStyle};

/// The error type of the examples: any error, with its message.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The backend the examples run on: [`Context::auto`] (CUDA device 0 when a driver and a GPU
/// are there, the host backend otherwise; `GPU_PIPELINE_BACKEND=cuda|host|host-checked`
/// forces one).
pub fn context() -> Result<Context, BoxError> {
    Ok(Context::auto()?)
}

/// One line naming the backend: `cuda (device 0: NVIDIA H100 80GB HBM3)`, `host`, or
/// `host (checked: race detector on)`.
pub fn backend_name(ctx: &Context) -> String {
    match ctx.backend() {
        Backend::Cuda => match ctx.device() {
            Some(device) => {
                let name = device.name().unwrap_or_else(|_| "unknown".to_owned());
                format!("cuda (device {}: {name})", device.ordinal())
            }
            None => "cuda".to_owned(),
        },
        Backend::Host if ctx.is_checked() => "host (checked: race detector on)".to_owned(),
        Backend::Host => "host".to_owned(),
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

    /// The checked host backend found no race (always true on the other backends, which
    /// cannot look).
    pub fn no_races(ctx: &Context) -> Check {
        let races = ctx.races();
        let detail = if ctx.is_checked() {
            match races.first() {
                None => "0 races reported".to_owned(),
                Some(first) => format!("{} race(s), first: {first:?}", races.len()),
            }
        } else {
            "not checked on this backend (GPU_PIPELINE_BACKEND=host-checked checks)".to_owned()
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
}

impl Report {
    /// An empty report for `ctx`.
    pub fn new(ctx: &Context) -> Report {
        Report {
            backend: backend_name(ctx),
            checks: Vec::new(),
            timings: Timings::new(),
        }
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
        write!(f, "{}", self.timings)
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

/// Parses the flags and applies `validate` (rules between flags that clap cannot express),
/// exiting with clap's usage error and status 2 when it fails, as for any other bad flag.
pub fn parse_args<A: clap::Parser>(validate: impl FnOnce(&A) -> Result<(), String>) -> A {
    let args = A::parse();
    if let Err(message) = validate(&args) {
        A::command()
            .error(clap::error::ErrorKind::ValueValidation, message)
            .exit();
    }
    args
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

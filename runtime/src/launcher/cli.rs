//! `gpu-pipeline-launch`'s command line: its usage text, its parsing, and its `main`.

use std::ffi::OsString;
use std::time::Duration;

use super::{DEFAULT_LAUNCH_TIMEOUT, LAUNCH_TIMEOUT_ENV, Launch, LaunchError};

/// The usage text of `gpu-pipeline-launch`.
pub const USAGE: &str = "\
usage: gpu-pipeline-launch -n N [OPTIONS] [--] PROGRAM [ARGS...]

Starts N processes of PROGRAM on this host, one per rank (one per GPU), with RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GPU_PIPELINE_MASTER_ADDR/PORT (and
MASTER_ADDR/PORT), a fresh GPU_PIPELINE_RENDEZVOUS_SECRET and NCCL_NVLS_ENABLE=0 set. The
launcher itself binds the rendezvous port and serves the rendezvous. Prefixes each output
line with [rank R]. Each rank runs in its own process group and dies with the launcher
(even by kill -9); SIGINT, SIGTERM and SIGHUP are forwarded to every rank. Exits with the
first failing rank's status after killing the others, 124 at the timeout, or 128+SIGNAL
when the launcher was signalled.

options:
  -n, --nprocs N        the number of ranks (required)
      --master-addr A   the address the rendezvous listens on (default 127.0.0.1)
      --master-port P   its port (default: one the system picks, held from the start)
      --timeout SECS    kill every rank after SECS seconds (exit status 124); `none`
                        for no limit. Default: $GPU_PIPELINE_LAUNCH_TIMEOUT, else 86400
                        (24 hours)
  -h, --help            this text";

/// A timeout as the command line or `GPU_PIPELINE_LAUNCH_TIMEOUT` gives it: seconds
/// (fractions allowed) or `none`.
///
/// ```
/// use std::time::Duration;
/// use gpu_pipeline::launcher::parse_timeout;
/// assert_eq!(parse_timeout("90"), Some(Some(Duration::from_secs(90))));
/// assert_eq!(parse_timeout("0.5"), Some(Some(Duration::from_millis(500))));
/// assert_eq!(parse_timeout("none"), Some(None)); // no limit
/// assert_eq!(parse_timeout("1h"), None); // not understood
/// ```
pub fn parse_timeout(text: &str) -> Option<Option<Duration>> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("none") {
        return Some(None);
    }
    let seconds = text.parse::<f64>().ok().filter(|s| *s > 0.0)?;
    Duration::try_from_secs_f64(seconds).ok().map(Some)
}

impl Launch {
    /// Reads `gpu-pipeline-launch`'s command line (without the program name); `Ok(None)`
    /// for `--help`. The timeout falls back to `GPU_PIPELINE_LAUNCH_TIMEOUT`, then to
    /// [`DEFAULT_LAUNCH_TIMEOUT`]; signals are forwarded ([`Launch::forward_signals`]).
    pub fn from_args<I: IntoIterator<Item = OsString>>(
        args: I,
    ) -> Result<Option<Launch>, LaunchError> {
        Launch::from_args_and_env(args, |name| std::env::var(name).ok())
    }

    /// [`Launch::from_args`] over any variable lookup.
    pub fn from_args_and_env<I: IntoIterator<Item = OsString>>(
        args: I,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Launch>, LaunchError> {
        let usage = |m: String| LaunchError::Usage(m);
        let mut args = args.into_iter();
        let mut nprocs = None;
        let mut launch = Launch::new(0, OsString::new());
        launch.forward_signals = true;
        launch.timeout = match get(LAUNCH_TIMEOUT_ENV) {
            None => Some(DEFAULT_LAUNCH_TIMEOUT),
            Some(text) => parse_timeout(&text).ok_or_else(|| {
                usage(format!(
                    "{LAUNCH_TIMEOUT_ENV}={text:?}: expected seconds above 0 or `none`"
                ))
            })?,
        };
        let mut program = None;
        while let Some(arg) = args.next() {
            let text = arg.to_string_lossy().into_owned();
            let mut value = |name: &str| {
                args.next()
                    .map(|v| v.to_string_lossy().into_owned())
                    .ok_or_else(|| usage(format!("`{name}` needs a value")))
            };
            match text.as_str() {
                "-h" | "--help" => return Ok(None),
                "-n" | "--nprocs" | "--nproc" => {
                    let v = value(&text)?;
                    let n: usize = v.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                        usage(format!("`{text} {v}`: expected a number of ranks above 0"))
                    })?;
                    nprocs = Some(n);
                }
                "--master-addr" => launch.master_addr = value(&text)?,
                "--master-port" => {
                    let v = value(&text)?;
                    launch.master_port = Some(v.parse().map_err(|_| {
                        usage(format!("`--master-port {v}`: expected a port number"))
                    })?);
                }
                "--timeout" => {
                    let v = value(&text)?;
                    launch.timeout = parse_timeout(&v).ok_or_else(|| {
                        usage(format!(
                            "`--timeout {v}`: expected seconds above 0 or `none`"
                        ))
                    })?;
                }
                "--" => {
                    program = args.next();
                    break;
                }
                flag if flag.starts_with('-') && flag.len() > 1 => {
                    return Err(usage(format!(
                        "unknown option `{flag}`; put `--` before the program if it is the program's"
                    )));
                }
                _ => {
                    program = Some(arg);
                    break;
                }
            }
        }
        launch.nprocs = nprocs.ok_or_else(|| usage("`-n N` is required".to_owned()))?;
        launch.program = program.ok_or_else(|| usage("no program given".to_owned()))?;
        launch.args = args.collect();
        Ok(Some(launch))
    }
}

/// `gpu-pipeline-launch`'s whole work: parses `args` (without the program name), runs the
/// launch, prints what went wrong, and returns the exit status (see [`USAGE`]).
///
/// ```
/// use gpu_pipeline::launcher::main_with_args;
/// // What `gpu-pipeline-launch -n 2 -- sh -c 'exit 0'` does, from a program of one's own.
/// assert_eq!(main_with_args(["-n", "2", "--", "sh", "-c", "exit 0"].map(Into::into)), 0);
/// assert_eq!(main_with_args(["-n", "1", "--", "sh", "-c", "exit 5"].map(Into::into)), 5);
/// assert_eq!(main_with_args(["--bogus"].map(Into::into)), 2); // a usage error
/// ```
pub fn main_with_args<I: IntoIterator<Item = OsString>>(args: I) -> u8 {
    let launch = match Launch::from_args(args) {
        Ok(Some(launch)) => launch,
        Ok(None) => {
            println!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("gpu-pipeline-launch: {e}");
            return 2;
        }
    };
    match launch.run() {
        Ok(report) if report.exit_code() == 0 => 0,
        Ok(report) => {
            match report.signal {
                Some(signal) => eprintln!(
                    "gpu-pipeline-launch: ended by signal {signal}, forwarded to every rank\n{}",
                    report.summary()
                ),
                None => eprintln!("gpu-pipeline-launch: a rank failed\n{}", report.summary()),
            }
            // Exit statuses are 8 bits; a code that does not fit still means failure.
            u8::try_from(report.exit_code())
                .ok()
                .filter(|&c| c != 0)
                .unwrap_or(1)
        }
        Err(e) => {
            eprintln!("gpu-pipeline-launch: {}", chain(&e));
            2
        }
    }
}

/// The error and its sources on one line (each layer displays only its own context).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

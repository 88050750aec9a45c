//! Starting one process per rank on this host: what `gpu-pipeline-launch -n N -- PROGRAM`
//! does, as a library so that tests (and programs) can launch ranks without the binary.
//!
//! Each rank gets `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, the rendezvous
//! address (`GPU_PIPELINE_MASTER_ADDR`/`_PORT`, and `MASTER_ADDR`/`MASTER_PORT` for tools
//! that read those), a random job key (`GPU_PIPELINE_RENDEZVOUS_KEY`), and always
//! `NCCL_NVLS_ENABLE=0`: NVLink multicast stays off (it can take shared GPUs out of service).
//! Output is forwarded line by line with a `[rank N] ` prefix. When a rank fails, the others
//! are killed and the launch reports the failure; an optional timeout kills every rank.
//!
//! Many hosts are the job of `mpirun` or `srun`, whose variables
//! [`RankInfo::from_env`](crate::rendezvous::RankInfo::from_env) reads as well.
//!
//! ```no_run
//! use gpu_pipeline::launcher::Launch;
//! let report = Launch::new(2, "./my-solver").arg("--steps=100").run().unwrap();
//! assert!(report.success(), "{}", report.summary());
//! ```
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::hash::{BuildHasher, RandomState};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::rendezvous::{
    LOCAL_RANK_ENV, LOCAL_WORLD_SIZE_ENV, MASTER_ADDR_ENV, MASTER_PORT_ENV, RANK_ENV,
    RENDEZVOUS_KEY_ENV, WORLD_SIZE_ENV,
};

/// The variables every rank gets whatever the caller says: NVLink multicast off.
pub const FORCED_ENV: [(&str, &str); 1] = [("NCCL_NVLS_ENABLE", "0")];

/// The usage text of `gpu-pipeline-launch`.
pub const USAGE: &str = "\
usage: gpu-pipeline-launch -n N [OPTIONS] [--] PROGRAM [ARGS...]

Starts N processes of PROGRAM on this host, one per rank (one per GPU), with RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GPU_PIPELINE_MASTER_ADDR/PORT (and
MASTER_ADDR/PORT), GPU_PIPELINE_RENDEZVOUS_KEY and NCCL_NVLS_ENABLE=0 set. Prefixes each
output line with [rank R]. Exits with the first failing rank's status, after killing the
others.

options:
  -n, --nprocs N        the number of ranks (required)
      --master-addr A   the address rank 0 listens on (default 127.0.0.1)
      --master-port P   its port (default: a free one)
      --timeout SECS    kill every rank after SECS seconds (exit status 124)
  -h, --help            this text";

/// Why a launch could not be made (a rank that fails is a [`LaunchReport`], not this).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The command line was wrong; the message says how (see [`USAGE`]).
    #[error("{0}\n\n{USAGE}")]
    Usage(String),
    /// A rank's process could not be started.
    #[error("could not start rank {rank} (`{program}`)")]
    Spawn {
        /// The rank.
        rank: usize,
        /// The program.
        program: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// No free port was found for the rendezvous.
    #[error("could not find a free port on {addr}")]
    Port {
        /// The address.
        addr: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Waiting for a rank failed.
    #[error("could not wait for rank {rank}")]
    Wait {
        /// The rank.
        rank: usize,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// A launch of one program as N ranks; see the module docs.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The number of ranks.
    pub nprocs: usize,
    /// The program every rank runs.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The address rank 0 listens on for the rendezvous.
    pub master_addr: String,
    /// Its port; `None` picks a free one.
    pub master_port: Option<u16>,
    /// Extra variables for every rank (the rank variables and [`FORCED_ENV`] win).
    pub env: Vec<(OsString, OsString)>,
    /// Kills every rank after this long.
    pub timeout: Option<Duration>,
    /// Keeps each rank's output lines in the report (they are forwarded either way).
    pub capture: bool,
}

/// How one rank ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankStatus {
    /// It exited with this code.
    Exited(i32),
    /// A signal it was not sent by the launcher ended it.
    Signaled(i32),
    /// The launcher killed it because another rank failed.
    Killed,
    /// The launcher killed it when the timeout passed.
    TimedOut,
}

/// One rank's end and, when captured, its output.
#[derive(Clone, Debug)]
pub struct RankOutcome {
    /// The rank.
    pub rank: usize,
    /// How it ended.
    pub status: RankStatus,
    /// Its standard output lines (when [`Launch::capture`] is on).
    pub stdout: Vec<String>,
    /// Its standard error lines (when captured).
    pub stderr: Vec<String>,
}

/// The end of a launch: every rank's outcome, in rank order.
#[derive(Clone, Debug)]
pub struct LaunchReport {
    /// Every rank's outcome.
    pub ranks: Vec<RankOutcome>,
    /// The rank whose failure ended the launch, if any.
    pub first_failure: Option<usize>,
}

impl LaunchReport {
    /// Whether every rank exited with status 0.
    pub fn success(&self) -> bool {
        self.ranks.iter().all(|r| r.status == RankStatus::Exited(0))
    }

    /// The launcher's exit status: 0, the first failing rank's code, 128 + its signal, or
    /// 124 after a timeout.
    pub fn exit_code(&self) -> i32 {
        if self.success() {
            return 0;
        }
        if self.ranks.iter().any(|r| r.status == RankStatus::TimedOut) {
            return 124;
        }
        match self.first_failure.map(|r| self.ranks[r].status) {
            Some(RankStatus::Exited(code)) if code != 0 => code,
            Some(RankStatus::Signaled(signal)) => 128 + signal,
            _ => 1,
        }
    }

    /// One line per rank, e.g. `rank 1: exited with 3 (the first failure)`.
    pub fn summary(&self) -> String {
        self.ranks
            .iter()
            .map(|r| {
                let status = match r.status {
                    RankStatus::Exited(code) => format!("exited with {code}"),
                    RankStatus::Signaled(signal) => format!("ended by signal {signal}"),
                    RankStatus::Killed => "killed after another rank failed".to_owned(),
                    RankStatus::TimedOut => "killed at the timeout".to_owned(),
                };
                let first = if self.first_failure == Some(r.rank) {
                    " (the first failure)"
                } else {
                    ""
                };
                format!("rank {}: {status}{first}", r.rank)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Launch {
    /// `nprocs` ranks of `program` with no arguments, rendezvous on a free loopback port.
    pub fn new(nprocs: usize, program: impl Into<OsString>) -> Launch {
        Launch {
            nprocs,
            program: program.into(),
            args: Vec::new(),
            master_addr: "127.0.0.1".to_owned(),
            master_port: None,
            env: Vec::new(),
            timeout: None,
            capture: false,
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Launch {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Launch {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets a variable for every rank.
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Launch {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Kills every rank after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Launch {
        self.timeout = Some(timeout);
        self
    }

    /// Keeps every rank's output in the report.
    pub fn capture(mut self) -> Launch {
        self.capture = true;
        self
    }

    /// Reads `gpu-pipeline-launch`'s command line (without the program name); `Ok(None)`
    /// for `--help`.
    pub fn from_args<I: IntoIterator<Item = OsString>>(
        args: I,
    ) -> Result<Option<Launch>, LaunchError> {
        let usage = |m: String| LaunchError::Usage(m);
        let mut args = args.into_iter();
        let mut nprocs = None;
        let mut launch = Launch::new(0, OsString::new());
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
                    launch.timeout = Some(
                        v.parse::<f64>()
                            .ok()
                            .and_then(|s| Duration::try_from_secs_f64(s).ok())
                            .ok_or_else(|| usage(format!("`--timeout {v}`: expected seconds")))?,
                    );
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

    /// Starts every rank, forwards their output, and waits for all of them (see the module
    /// docs). `Err` only when a rank could not be started or waited for; a failing rank is
    /// a report whose [`success`](LaunchReport::success) is false.
    pub fn run(&self) -> Result<LaunchReport, LaunchError> {
        if self.nprocs == 0 {
            return Err(LaunchError::Usage(
                "the number of ranks must be above 0".into(),
            ));
        }
        let port = match self.master_port {
            Some(port) => port,
            None => free_port(&self.master_addr)?,
        };
        let key = RandomState::new().hash_one((std::process::id(), Instant::now()));
        let mut ranks: Vec<Running> = Vec::with_capacity(self.nprocs);
        for rank in 0..self.nprocs {
            match self.spawn(rank, port, key) {
                Ok(running) => ranks.push(running),
                Err(e) => {
                    for r in &mut ranks {
                        let _ = r.child.kill();
                        let _ = r.child.wait();
                    }
                    return Err(e);
                }
            }
        }
        let deadline = self.timeout.map(|t| Instant::now() + t);
        let mut statuses: Vec<Option<RankStatus>> = vec![None; self.nprocs];
        let mut first_failure = None;
        loop {
            for (rank, running) in ranks.iter_mut().enumerate() {
                if statuses[rank].is_some() {
                    continue;
                }
                if let Some(status) = running
                    .child
                    .try_wait()
                    .map_err(|source| LaunchError::Wait { rank, source })?
                {
                    let status = rank_status(status);
                    if status != RankStatus::Exited(0) && first_failure.is_none() {
                        first_failure = Some(rank);
                    }
                    statuses[rank] = Some(status);
                }
            }
            if statuses.iter().all(Option::is_some) {
                break;
            }
            let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
            if first_failure.is_some() || timed_out {
                let marker = if timed_out && first_failure.is_none() {
                    RankStatus::TimedOut
                } else {
                    RankStatus::Killed
                };
                for (rank, running) in ranks.iter_mut().enumerate() {
                    if statuses[rank].is_none() {
                        let _ = running.child.kill();
                        let status = running
                            .child
                            .wait()
                            .map_err(|source| LaunchError::Wait { rank, source })?;
                        // A rank that exited on its own just before the kill keeps its status.
                        statuses[rank] = Some(match rank_status(status) {
                            RankStatus::Exited(code) => RankStatus::Exited(code),
                            _ => marker,
                        });
                    }
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let ranks = ranks
            .into_iter()
            .zip(statuses)
            .enumerate()
            .map(|(rank, (running, status))| {
                let (stdout, stderr) = running.finish();
                RankOutcome {
                    rank,
                    status: status.unwrap_or(RankStatus::Killed),
                    stdout,
                    stderr,
                }
            })
            .collect();
        Ok(LaunchReport {
            ranks,
            first_failure,
        })
    }

    fn spawn(&self, rank: usize, port: u16, key: u64) -> Result<Running, LaunchError> {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in &self.env {
            command.env(name, value);
        }
        let rank_text = rank.to_string();
        let size_text = self.nprocs.to_string();
        let port_text = port.to_string();
        let key_text = key.to_string();
        let vars: [(&str, &str); 9] = [
            (RANK_ENV, &rank_text),
            (WORLD_SIZE_ENV, &size_text),
            (LOCAL_RANK_ENV, &rank_text),
            (LOCAL_WORLD_SIZE_ENV, &size_text),
            (MASTER_ADDR_ENV, &self.master_addr),
            (MASTER_PORT_ENV, &port_text),
            ("MASTER_ADDR", &self.master_addr),
            ("MASTER_PORT", &port_text),
            (RENDEZVOUS_KEY_ENV, &key_text),
        ];
        for (name, value) in vars.into_iter().chain(FORCED_ENV) {
            command.env(name, value);
        }
        let mut child = command.spawn().map_err(|source| LaunchError::Spawn {
            rank,
            program: self.program.to_string_lossy().into_owned(),
            source,
        })?;
        let prefix = format!("[rank {rank}] ");
        let stdout = child
            .stdout
            .take()
            .map(|pipe| forward(pipe, prefix.clone(), false, self.capture));
        let stderr = child
            .stderr
            .take()
            .map(|pipe| forward(pipe, prefix, true, self.capture));
        Ok(Running {
            child,
            stdout,
            stderr,
        })
    }
}

/// A started rank and the threads forwarding its output.
struct Running {
    child: Child,
    stdout: Option<Forward>,
    stderr: Option<Forward>,
}

impl Running {
    /// Waits for the output to end (the process has exited) and returns the captured lines.
    fn finish(self) -> (Vec<String>, Vec<String>) {
        let take = |f: Option<Forward>| f.map(Forward::finish).unwrap_or_default();
        (take(self.stdout), take(self.stderr))
    }
}

/// How long output may trail a rank's exit: a process the rank started may hold its pipe
/// open (the launcher kills only the ranks themselves), and the launch must not wait for it.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

struct Forward {
    /// Closed when the pipe reaches its end.
    done: Receiver<()>,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Forward {
    fn finish(self) -> Vec<String> {
        // A disconnect means the forwarding thread finished; a timeout leaves it to drain
        // whatever the rank's leftovers still print.
        let _ = self.done.recv_timeout(OUTPUT_GRACE);
        std::mem::take(&mut *self.lines.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Copies `pipe` line by line to our stdout (or stderr) with `prefix`, keeping the lines
/// when `capture` is on.
fn forward(
    pipe: impl Read + Send + 'static,
    prefix: String,
    to_stderr: bool,
    capture: bool,
) -> Forward {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let kept = lines.clone();
    let (done_tx, done) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let _done = done_tx;
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&buf);
            let line = line.trim_end_matches(['\n', '\r']);
            // One write per line under the lock, so ranks' lines never interleave.
            let text = format!("{prefix}{line}\n");
            if to_stderr {
                let _ = std::io::stderr().lock().write_all(text.as_bytes());
            } else {
                let _ = std::io::stdout().lock().write_all(text.as_bytes());
            }
            if capture {
                kept.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line.to_owned());
            }
        }
    });
    Forward { done, lines }
}

fn rank_status(status: ExitStatus) -> RankStatus {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => RankStatus::Exited(code),
        (None, Some(signal)) => RankStatus::Signaled(signal),
        (None, None) => RankStatus::Exited(1),
    }
}

/// The ports [`free_port`] picks from: below Linux's ephemeral range (32768 and up), so no
/// outgoing connection holds one.
const PORTS: std::ops::Range<u16> = 20000..32000;

/// A port nobody listens on now, picked at random from [`PORTS`]: the OS's own choice
/// (`bind` to port 0) hands two launches started together the same just-freed port. Another
/// process may still take it before rank 0 binds it (rank 0 then fails to listen, and a rank
/// of the other job is refused by its key); pass [`Launch::master_port`] to choose one.
fn free_port(addr: &str) -> Result<u16, LaunchError> {
    let random = RandomState::new();
    let span = u64::from(PORTS.end - PORTS.start);
    for attempt in 0u32..64 {
        let offset = random.hash_one((std::process::id(), attempt)) % span;
        let port = PORTS.start + offset as u16;
        if TcpListener::bind((addr, port)).is_ok() {
            return Ok(port);
        }
    }
    TcpListener::bind((addr, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|source| LaunchError::Port {
            addr: addr.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Option<Launch>, LaunchError> {
        Launch::from_args(args.iter().map(OsString::from))
    }

    #[test]
    fn the_command_line_gives_the_launch() {
        let l = parse(&["-n", "4", "--timeout", "1.5", "--", "prog", "-x", "--", "y"])
            .unwrap()
            .unwrap();
        assert_eq!(l.nprocs, 4);
        assert_eq!(l.program, "prog");
        assert_eq!(l.args, ["-x", "--", "y"]);
        assert_eq!(l.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(l.master_addr, "127.0.0.1");
        let l = parse(&[
            "--nprocs",
            "2",
            "--master-addr",
            "10.1.2.3",
            "--master-port",
            "29500",
            "prog",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (l.master_addr.as_str(), l.master_port),
            ("10.1.2.3", Some(29500))
        );
        assert!(parse(&["--help"]).unwrap().is_none());
    }

    #[test]
    fn a_wrong_command_line_says_what_to_write() {
        for (args, needle) in [
            (vec!["prog"], "`-n N` is required"),
            (vec!["-n", "2"], "no program"),
            (vec!["-n", "0", "prog"], "above 0"),
            (vec!["-n"], "`-n` needs a value"),
            (
                vec!["-n", "2", "--verbose", "prog"],
                "unknown option `--verbose`",
            ),
            (vec!["-n", "2", "--master-port", "x", "p"], "port number"),
        ] {
            let err = parse(&args).unwrap_err().to_string();
            assert!(err.contains(needle), "{args:?}: {err}");
            assert!(err.contains("usage: gpu-pipeline-launch"), "{err}");
        }
    }

    #[test]
    fn exit_codes_follow_the_first_failure() {
        let outcome = |rank, status| RankOutcome {
            rank,
            status,
            stdout: vec![],
            stderr: vec![],
        };
        let report = LaunchReport {
            ranks: vec![
                outcome(0, RankStatus::Killed),
                outcome(1, RankStatus::Exited(3)),
            ],
            first_failure: Some(1),
        };
        assert!(!report.success());
        assert_eq!(report.exit_code(), 3);
        assert!(
            report
                .summary()
                .contains("rank 1: exited with 3 (the first failure)")
        );
        let signaled = LaunchReport {
            ranks: vec![outcome(0, RankStatus::Signaled(11))],
            first_failure: Some(0),
        };
        assert_eq!(signaled.exit_code(), 139);
        let timed_out = LaunchReport {
            ranks: vec![outcome(0, RankStatus::TimedOut)],
            first_failure: None,
        };
        assert_eq!(timed_out.exit_code(), 124);
    }

    #[test]
    fn ranks_get_their_variables_and_prefixed_output() {
        let report = Launch::new(3, "sh")
            .args(["-c", "echo \"$RANK/$WORLD_SIZE/$LOCAL_RANK nvls=$NCCL_NVLS_ENABLE port=$GPU_PIPELINE_MASTER_PORT\"; echo err >&2"])
            .env("NCCL_NVLS_ENABLE", "1")
            .capture()
            .run()
            .unwrap();
        assert!(report.success(), "{}", report.summary());
        let port = report.ranks[0].stdout[0]
            .rsplit('=')
            .next()
            .unwrap()
            .to_owned();
        for r in &report.ranks {
            assert_eq!(
                r.stdout,
                [format!("{0}/3/{0} nvls=0 port={port}", r.rank)],
                "NCCL_NVLS_ENABLE is forced to 0 and every rank shares the port"
            );
            assert_eq!(r.stderr, ["err"]);
        }
    }

    #[test]
    fn a_failing_rank_ends_the_launch_and_the_others_are_killed() {
        let start = Instant::now();
        let report = Launch::new(3, "sh")
            .args(["-c", "if [ \"$RANK\" = 1 ]; then exit 7; fi; exec sleep 60"])
            .run()
            .unwrap();
        assert!(start.elapsed() < Duration::from_secs(30));
        assert_eq!(report.first_failure, Some(1));
        assert_eq!(report.ranks[1].status, RankStatus::Exited(7));
        assert_eq!(report.ranks[0].status, RankStatus::Killed);
        assert_eq!(report.ranks[2].status, RankStatus::Killed);
        assert_eq!(report.exit_code(), 7);
    }

    #[test]
    fn the_timeout_kills_every_rank() {
        let report = Launch::new(2, "sleep")
            .arg("60")
            .timeout(Duration::from_millis(200))
            .run()
            .unwrap();
        assert!(
            report
                .ranks
                .iter()
                .all(|r| r.status == RankStatus::TimedOut)
        );
        assert_eq!(report.exit_code(), 124);
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let err = Launch::new(2, "/nonexistent/gpu-pipeline-program")
            .run()
            .unwrap_err();
        assert!(matches!(err, LaunchError::Spawn { rank: 0, .. }), "{err}");
    }
}

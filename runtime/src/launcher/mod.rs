//! Starting one process per rank on this host: what `gpu-pipeline-launch -n N -- PROGRAM`
//! does, as a library so that tests (and programs) can launch ranks without the binary.
//!
//! The launcher binds the rendezvous port first and keeps it: it serves the job's
//! [`TcpStore`] itself (rank 0 publishes its payload to it, the others fetch), so no other
//! process can take the port between its choice and its use. Each rank gets `RANK`,
//! `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, the rendezvous address
//! (`GPU_PIPELINE_MASTER_ADDR`/`_PORT`, and `MASTER_ADDR`/`MASTER_PORT` for tools that read
//! those), a fresh random secret (`GPU_PIPELINE_RENDEZVOUS_SECRET`),
//! `GPU_PIPELINE_RENDEZVOUS_SERVER=launcher`, and always `NCCL_NVLS_ENABLE=0`: NVLink
//! multicast stays off (it can take shared GPUs out of service). Output is forwarded line by
//! line with a `[rank N] ` prefix.
//!
//! Each rank runs in a process group of its own and gets a parent-death signal (SIGKILL):
//! when the launcher dies, even by `kill -9`, every rank dies with it. When a rank fails,
//! the other ranks' groups are killed and the launch reports the first failure; at the
//! timeout ([`DEFAULT_LAUNCH_TIMEOUT`] unless said otherwise) every group is killed. With
//! [`Launch::forward_signals`] (the binary's choice), SIGINT, SIGTERM and SIGHUP sent to the
//! launcher go to every rank's group, then SIGKILL after [`SIGNAL_GRACE`].
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

mod cli;
mod output;
mod report;
mod signals;

#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

pub use cli::{USAGE, main_with_args, parse_timeout};
pub use report::{LaunchReport, RankOutcome, RankStatus};
pub use signals::FORWARDED;

use crate::rendezvous::{
    Auth, LOCAL_RANK_ENV, LOCAL_WORLD_SIZE_ENV, MASTER_ADDR_ENV, MASTER_PORT_ENV, MAX_WORLD_SIZE,
    RANK_ENV, RENDEZVOUS_SECRET_ENV, RENDEZVOUS_SERVER_ENV, Secret, ServedBy, TcpStore,
    WORLD_SIZE_ENV,
};
use output::Forward;
use report::rank_status;

/// The variables every rank gets whatever the caller says: NVLink multicast off.
pub const FORCED_ENV: [(&str, &str); 1] = [("NCCL_NVLS_ENABLE", "0")];

/// How long a launch may run unless told otherwise: a day (a job that long should say so).
pub const DEFAULT_LAUNCH_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// The launch timeout the binary reads when `--timeout` is not given: seconds or `none`.
pub const LAUNCH_TIMEOUT_ENV: &str = "GPU_PIPELINE_LAUNCH_TIMEOUT";

/// How long ranks have to end after a forwarded signal before they are killed.
pub const SIGNAL_GRACE: Duration = Duration::from_secs(10);

/// Why a launch could not be made (a rank that fails is a [`LaunchReport`], not this).
///
/// ```
/// use gpu_pipeline::launcher::{Launch, LaunchError};
/// let err = Launch::new(2, "/no/such/program").run().unwrap_err();
/// assert!(matches!(err, LaunchError::Spawn { rank: 0, .. }), "{err}");
/// let err = Launch::from_args(["-n", "two", "--", "true"].map(Into::into)).unwrap_err();
/// assert!(matches!(err, LaunchError::Usage(_)));
/// assert!(err.to_string().contains("usage: gpu-pipeline-launch"), "{err}");
/// ```
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
    /// The rendezvous port could not be bound.
    #[error("could not listen on {addr} for the rendezvous")]
    Port {
        /// The address and port.
        addr: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The job's secret could not be made.
    #[error("could not make the job's rendezvous secret")]
    Secret(#[source] crate::rendezvous::RendezvousError),
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
///
/// ```
/// use std::time::Duration;
/// use gpu_pipeline::launcher::Launch;
/// // Two ranks of a shell command, their output kept in the report.
/// let report = Launch::new(2, "sh")
///     .args(["-c", "echo rank $RANK of $WORLD_SIZE on GPU $LOCAL_RANK"])
///     .timeout(Duration::from_secs(60))
///     .capture()
///     .run()
///     .unwrap();
/// assert!(report.success(), "{}", report.summary());
/// assert_eq!(report.ranks[1].stdout, ["rank 1 of 2 on GPU 1"]);
/// ```
#[derive(Clone, Debug)]
pub struct Launch {
    /// The number of ranks.
    pub nprocs: usize,
    /// The program every rank runs.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The address the rendezvous listens on.
    pub master_addr: String,
    /// Its port; `None` lets the system pick one (held by the launcher from then on).
    pub master_port: Option<u16>,
    /// Extra variables for every rank (the rank variables and [`FORCED_ENV`] win).
    pub env: Vec<(OsString, OsString)>,
    /// Kills every rank after this long; `None` for no limit. [`DEFAULT_LAUNCH_TIMEOUT`]
    /// unless set.
    pub timeout: Option<Duration>,
    /// Keeps each rank's output lines in the report (they are forwarded either way).
    pub capture: bool,
    /// Catches SIGINT, SIGTERM and SIGHUP while running and forwards them to the ranks (the
    /// binary does; a library caller may not want its process's signals taken).
    pub forward_signals: bool,
}

impl Launch {
    /// `nprocs` ranks of `program` with no arguments, rendezvous on a loopback port the
    /// system picks, the [`DEFAULT_LAUNCH_TIMEOUT`], signals not caught.
    ///
    /// ```
    /// use gpu_pipeline::launcher::{DEFAULT_LAUNCH_TIMEOUT, Launch};
    /// let launch = Launch::new(4, "./solver");
    /// assert_eq!((launch.nprocs, launch.master_addr.as_str()), (4, "127.0.0.1"));
    /// assert_eq!((launch.master_port, launch.timeout), (None, Some(DEFAULT_LAUNCH_TIMEOUT)));
    /// assert!(!launch.forward_signals);
    /// ```
    pub fn new(nprocs: usize, program: impl Into<OsString>) -> Launch {
        Launch {
            nprocs,
            program: program.into(),
            args: Vec::new(),
            master_addr: "127.0.0.1".to_owned(),
            master_port: None,
            env: Vec::new(),
            timeout: Some(DEFAULT_LAUNCH_TIMEOUT),
            capture: false,
            forward_signals: false,
        }
    }

    /// Adds an argument.
    ///
    /// ```
    /// use gpu_pipeline::launcher::Launch;
    /// let report = Launch::new(1, "echo").arg("--steps=100").capture().run().unwrap();
    /// assert_eq!(report.ranks[0].stdout, ["--steps=100"]);
    /// ```
    pub fn arg(mut self, arg: impl Into<OsString>) -> Launch {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    ///
    /// ```
    /// use gpu_pipeline::launcher::Launch;
    /// let launch = Launch::new(2, "./solver").args(["--grid", "4096"]).arg("--check");
    /// assert_eq!(launch.args, ["--grid", "4096", "--check"]);
    /// ```
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Launch {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets a variable for every rank.
    ///
    /// ```
    /// use gpu_pipeline::launcher::Launch;
    /// let report = Launch::new(2, "sh")
    ///     .args(["-c", "echo $SOLVER_TOL $RANK"])
    ///     .env("SOLVER_TOL", "1e-6")
    ///     .env("RANK", "7") // the rank variables win
    ///     .capture()
    ///     .run()
    ///     .unwrap();
    /// assert_eq!(report.ranks[1].stdout, ["1e-6 1"]);
    /// ```
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Launch {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Kills every rank after `timeout`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use gpu_pipeline::launcher::Launch;
    /// let sleepers = Launch::new(2, "sleep").arg("60");
    /// let report = sleepers.timeout(Duration::from_millis(300)).run().unwrap();
    /// assert_eq!(report.exit_code(), 124); // as `timeout(1)` reports it
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Launch {
        self.timeout = Some(timeout);
        self
    }

    /// Lets the ranks run as long as they like.
    ///
    /// ```
    /// use gpu_pipeline::launcher::Launch;
    /// let launch = Launch::new(1, "true").no_timeout();
    /// assert_eq!(launch.timeout, None);
    /// assert!(launch.run().unwrap().success());
    /// ```
    pub fn no_timeout(mut self) -> Launch {
        self.timeout = None;
        self
    }

    /// Keeps every rank's output in the report.
    ///
    /// ```
    /// use gpu_pipeline::launcher::Launch;
    /// let hello = Launch::new(1, "echo").arg("hello");
    /// assert!(hello.run().unwrap().ranks[0].stdout.is_empty()); // forwarded, not kept
    /// assert_eq!(hello.capture().run().unwrap().ranks[0].stdout, ["hello"]);
    /// ```
    pub fn capture(mut self) -> Launch {
        self.capture = true;
        self
    }

    /// Forwards SIGINT, SIGTERM and SIGHUP to the ranks while running.
    ///
    /// ```
    /// use gpu_pipeline::launcher::Launch;
    /// // What `gpu-pipeline-launch` does: Ctrl-C during the run reaches every rank.
    /// let launch = Launch::new(2, "true").forward_signals();
    /// assert!(launch.forward_signals);
    /// let report = launch.run().unwrap();
    /// assert!(report.success() && report.signal.is_none());
    /// ```
    pub fn forward_signals(mut self) -> Launch {
        self.forward_signals = true;
        self
    }

    /// Starts every rank, serves their rendezvous, forwards their output, and waits for all
    /// of them (see the module docs). `Err` only when the launch could not be made; a
    /// failing rank is a report whose [`success`](LaunchReport::success) is false.
    ///
    /// ```
    /// use gpu_pipeline::launcher::{Launch, LaunchError};
    /// // Each rank finds the rendezvous the launcher serves in its environment.
    /// let check = concat!(
    ///     "test $GPU_PIPELINE_RENDEZVOUS_SERVER = launcher",
    ///     " && test -n \"$GPU_PIPELINE_MASTER_PORT\""
    /// );
    /// let report = Launch::new(2, "sh").args(["-c", check]).run().unwrap();
    /// assert!(report.success(), "{}", report.summary());
    /// assert!(matches!(Launch::new(0, "true").run(), Err(LaunchError::Usage(_))));
    /// ```
    pub fn run(&self) -> Result<LaunchReport, LaunchError> {
        if self.nprocs == 0 || self.nprocs > MAX_WORLD_SIZE {
            return Err(LaunchError::Usage(format!(
                "the number of ranks must be in 1..={MAX_WORLD_SIZE}, not {}",
                self.nprocs
            )));
        }
        let secret = Secret::generate().map_err(LaunchError::Secret)?;
        let bind_addr = (self.master_addr.as_str(), self.master_port.unwrap_or(0));
        let port_error = |source| LaunchError::Port {
            addr: format!("{}:{}", bind_addr.0, bind_addr.1),
            source,
        };
        let listener = TcpListener::bind(bind_addr).map_err(port_error)?;
        let port = listener.local_addr().map_err(port_error)?.port();
        let store = TcpStore {
            served_by: ServedBy::Launcher,
            auth: Auth::Secret(secret.clone()),
            ..TcpStore::new(self.master_addr.clone(), port, secret.clone())
        };
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let stop = stop.clone();
            let nprocs = self.nprocs;
            std::thread::spawn(move || {
                if let Err(e) = store.serve_job(&listener, nprocs, &stop) {
                    tracing::warn!(error = %e, "the launcher's rendezvous failed");
                }
            })
        };
        let catcher = self.forward_signals.then(signals::Catcher::install);
        let report = self.start_and_wait(port, &secret, catcher.as_ref());
        stop.store(true, Ordering::Relaxed);
        // The server sees `stop` within a tenth of a second; it is not waited for longer.
        let give_up = Instant::now() + Duration::from_secs(1);
        while !server.is_finished() && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(10));
        }
        report
    }

    fn start_and_wait(
        &self,
        port: u16,
        secret: &Secret,
        catcher: Option<&signals::Catcher>,
    ) -> Result<LaunchReport, LaunchError> {
        let mut ranks: Vec<Running> = Vec::with_capacity(self.nprocs);
        for rank in 0..self.nprocs {
            match self.spawn(rank, port, secret) {
                Ok(running) => ranks.push(running),
                Err(e) => {
                    for r in &mut ranks {
                        let _ = r.kill();
                    }
                    return Err(e);
                }
            }
        }
        let deadline = self.timeout.map(|t| Instant::now() + t);
        let mut statuses: Vec<Option<RankStatus>> = vec![None; self.nprocs];
        let mut first_failure = None;
        let mut signal: Option<(Signal, Instant)> = None;
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
                    if status != RankStatus::Exited(0)
                        && first_failure.is_none()
                        && signal.is_none()
                    {
                        first_failure = Some(rank);
                    }
                    statuses[rank] = Some(status);
                }
            }
            if statuses.iter().all(Option::is_some) {
                break;
            }
            if let Some(received) = catcher.and_then(signals::Catcher::take) {
                tracing::info!(
                    ?received,
                    "gpu-pipeline-launch forwards a signal to every rank"
                );
                for (rank, running) in ranks.iter().enumerate() {
                    if statuses[rank].is_none() {
                        signals::signal_group(running.child.id(), received);
                    }
                }
                signal.get_or_insert((received, Instant::now() + SIGNAL_GRACE));
            }
            let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
            let grace_over = signal.is_some_and(|(_, until)| Instant::now() >= until);
            if first_failure.is_some() || timed_out || grace_over {
                let marker = if timed_out && first_failure.is_none() {
                    RankStatus::TimedOut
                } else {
                    RankStatus::Killed
                };
                for (rank, running) in ranks.iter_mut().enumerate() {
                    if statuses[rank].is_none() {
                        let status = running
                            .kill()
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
            signal: signal.map(|(s, _)| s as i32),
        })
    }

    fn spawn(&self, rank: usize, port: u16, secret: &Secret) -> Result<Running, LaunchError> {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A group of its own: the launcher's kills and forwarded signals reach what the
            // rank starts too, and a terminal's Ctrl-C reaches the launcher alone.
            .process_group(0);
        crate::sys::process::die_with_parent(
            &mut command,
            Signal::SIGKILL,
            nix::unistd::Pid::this(),
        );
        for (name, value) in &self.env {
            command.env(name, value);
        }
        let rank_text = rank.to_string();
        let size_text = self.nprocs.to_string();
        let port_text = port.to_string();
        let secret_text = String::from_utf8_lossy(secret.expose()).into_owned();
        let vars: [(&str, &str); 10] = [
            (RANK_ENV, &rank_text),
            (WORLD_SIZE_ENV, &size_text),
            (LOCAL_RANK_ENV, &rank_text),
            (LOCAL_WORLD_SIZE_ENV, &size_text),
            (MASTER_ADDR_ENV, &self.master_addr),
            (MASTER_PORT_ENV, &port_text),
            ("MASTER_ADDR", &self.master_addr),
            ("MASTER_PORT", &port_text),
            (RENDEZVOUS_SECRET_ENV, &secret_text),
            (RENDEZVOUS_SERVER_ENV, "launcher"),
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
            .map(|pipe| output::forward(pipe, prefix.clone(), false, self.capture));
        let stderr = child
            .stderr
            .take()
            .map(|pipe| output::forward(pipe, prefix, true, self.capture));
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
    /// Kills the rank's whole process group and reaps the rank.
    fn kill(&mut self) -> std::io::Result<std::process::ExitStatus> {
        signals::signal_group(self.child.id(), Signal::SIGKILL);
        let _ = self.child.kill();
        self.child.wait()
    }

    /// Waits for the output to end (the process has exited) and returns the captured lines.
    fn finish(self) -> (Vec<String>, Vec<String>) {
        let take = |f: Option<Forward>| f.map(Forward::finish).unwrap_or_default();
        (take(self.stdout), take(self.stderr))
    }
}

//! How a launch ended: each rank's status and the launcher's exit code.

use std::process::ExitStatus;

/// How one rank ended.
///
/// ```
/// use std::time::Duration;
/// use gpu_pipeline::launcher::{Launch, RankStatus};
/// // Rank 0 fails at once; rank 1 would sleep, and is killed instead.
/// let report = Launch::new(2, "sh")
///     .args(["-c", "[ \"$RANK\" = 0 ] && exit 3; sleep 60"])
///     .timeout(Duration::from_secs(50))
///     .run()
///     .unwrap();
/// assert_eq!(report.ranks[0].status, RankStatus::Exited(3));
/// assert_eq!(report.ranks[1].status, RankStatus::Killed);
/// // Past the timeout, every rank is killed.
/// let sleeper = Launch::new(1, "sleep").arg("60");
/// let report = sleeper.timeout(Duration::from_millis(200)).run().unwrap();
/// assert_eq!(report.ranks[0].status, RankStatus::TimedOut);
/// assert_eq!(report.exit_code(), 124);
/// ```
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
///
/// ```
/// use gpu_pipeline::launcher::{Launch, RankStatus};
/// let both = Launch::new(2, "sh").args(["-c", "echo out; echo err >&2"]);
/// let report = both.capture().run().unwrap();
/// for outcome in &report.ranks {
///     assert_eq!(outcome.status, RankStatus::Exited(0), "rank {}", outcome.rank);
///     assert_eq!(outcome.stdout, ["out"]);
///     assert_eq!(outcome.stderr, ["err"]);
/// }
/// ```
#[derive(Clone, Debug)]
pub struct RankOutcome {
    /// The rank.
    pub rank: usize,
    /// How it ended.
    pub status: RankStatus,
    /// Its standard output lines (when [`Launch::capture`](super::Launch::capture) is on).
    pub stdout: Vec<String>,
    /// Its standard error lines (when captured).
    pub stderr: Vec<String>,
}

/// The end of a launch: every rank's outcome, in rank order.
///
/// ```
/// use gpu_pipeline::launcher::Launch;
/// let report = Launch::new(3, "sh").args(["-c", "exit $RANK"]).run().unwrap();
/// assert!(!report.success());
/// assert!(report.first_failure.is_some());
/// assert_ne!(report.exit_code(), 0); // the first failing rank's code
/// assert!(report.summary().contains("the first failure"), "{}", report.summary());
/// ```
#[derive(Clone, Debug)]
pub struct LaunchReport {
    /// Every rank's outcome.
    pub ranks: Vec<RankOutcome>,
    /// The rank whose failure ended the launch, if any.
    pub first_failure: Option<usize>,
    /// The signal (SIGINT, SIGTERM, SIGHUP) the launcher received and forwarded to the
    /// ranks, when that ended the launch.
    pub signal: Option<i32>,
}

impl LaunchReport {
    /// Whether every rank exited with status 0.
    pub fn success(&self) -> bool {
        self.ranks.iter().all(|r| r.status == RankStatus::Exited(0))
    }

    /// The launcher's exit status: 128 + the signal the launcher received, else 0, the
    /// first failing rank's code, 128 + the signal that ended it, or 124 after a timeout.
    pub fn exit_code(&self) -> i32 {
        if let Some(signal) = self.signal {
            return 128 + signal;
        }
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

/// A rank's end as the report tells it.
pub(super) fn rank_status(status: ExitStatus) -> RankStatus {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => RankStatus::Exited(code),
        (None, Some(signal)) => RankStatus::Signaled(signal),
        (None, None) => RankStatus::Exited(1),
    }
}

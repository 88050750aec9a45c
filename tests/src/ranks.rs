//! The launch-the-ranks harness of the multi-process GPU tests (`gpu_multi.rs`,
//! `gpu_nccl.rs`, `gpu_onesided.rs`, `gpu_comm_timeout.rs`): one process per rank, as in
//! production.
//!
//! The launching test runs its own binary once per rank through `gpu_pipeline::launcher`
//! (what `gpu-pipeline-launch` runs), filtered to itself, with [`ROLE_ENV`] naming the
//! worker's role; the same test, started as a worker ([`is_worker`]), runs its rank's checks
//! and prints [`done_line`] last. [`launch_ranks`] checks that every rank exited cleanly and
//! printed it, so a worker that stopped early (or never ran its checks) fails the test.
//!
//! ```no_run
//! use tests::ranks;
//! const WORKER: &str = "my-worker";
//!
//! // A `#[test]`, `#[ignore]`d without a GPU.
//! fn my_test() {
//!     if ranks::is_worker(WORKER) {
//!         // ... this rank's checks ...
//!         let (rank, size) = (0, 1);
//!         println!("{}", ranks::done_line(WORKER, rank, size));
//!         return;
//!     }
//!     let Some(gpus) = ranks::gpus_or_skip(1) else { return };
//!     ranks::launch_ranks("my_test", WORKER, ranks::requested(gpus.min(2), 1, gpus));
//! }
//! ```

use std::time::Duration;

use gpu_pipeline::launcher::{Launch, LaunchReport};
use gpu_pipeline::{Device, nccl};

/// Names the role a launched worker plays; unset in the launching test.
pub const ROLE_ENV: &str = "GPU_PIPELINE_TEST_ROLE";

/// How many ranks to launch, where a test lets it be chosen.
pub const RANKS_ENV: &str = "GPU_PIPELINE_TEST_RANKS";

/// How long the ranks may run before the launcher kills them (and the test fails).
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// Whether this process is a worker launched in `role`.
pub fn is_worker(role: &str) -> bool {
    std::env::var(ROLE_ENV).as_deref() == Ok(role)
}

/// The number of ranks [`RANKS_ENV`] asks for, else `default`, kept within `min..=max`.
pub fn requested(default: usize, min: usize, max: usize) -> usize {
    std::env::var(RANKS_ENV)
        .ok()
        .and_then(|r| r.parse::<usize>().ok())
        .unwrap_or(default)
        .clamp(min, max.max(min))
}

/// The line a worker of `role` prints once every check of rank `rank` of `size` passed.
pub fn done_line(role: &str, rank: usize, size: usize) -> String {
    format!("{role} rank {rank} of {size}: all checks passed")
}

/// The number of GPUs, at least `min`; `None` after printing why the test is skipped (no
/// driver, too few GPUs, no NCCL library, or running under compute-sanitizer, which does
/// not follow NCCL's kernels and IPC between processes).
pub fn gpus_or_skip(min: usize) -> Option<usize> {
    if crate::skip_under_compute_sanitizer("NCCL's kernels and IPC are not sanitizer targets") {
        return None;
    }
    let gpus = match Device::count() {
        Ok(n) if n >= min.max(1) => n,
        Ok(n) => {
            println!("skipped: {n} GPU(s); this test needs {}", min.max(1));
            return None;
        }
        Err(e) => {
            println!("skipped: no CUDA driver ({e})");
            return None;
        }
    };
    match (nccl::version(), nccl::library_path()) {
        (Ok(version), Ok(path)) => {
            println!("NCCL {version} from {path}; {gpus} GPU(s)");
            Some(gpus)
        }
        (Err(e), _) | (_, Err(e)) => {
            println!("skipped: {e}");
            None
        }
    }
}

/// Launches this test binary once per rank (`ranks` of them) to run the test `test` as
/// `role`, with `NCCL_DEBUG=WARN` unless it is set, killed after [`TIMEOUT`]; asserts that
/// every rank succeeded and printed its [`done_line`]. Returns the report for the test's own
/// further checks.
pub fn launch_ranks(test: &str, role: &str, ranks: usize) -> LaunchReport {
    launch_ranks_with(test, role, ranks, TIMEOUT, &[])
}

/// [`launch_ranks`] with the ranks killed after `timeout` and `env` set for them
/// (`NCCL_DEBUG=WARN` only when neither `env` nor this process sets it).
pub fn launch_ranks_with(
    test: &str,
    role: &str,
    ranks: usize,
    timeout: Duration,
    env: &[(&str, &str)],
) -> LaunchReport {
    println!("launching {ranks} rank(s) of `{test}` as `{role}`");
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut launch = Launch::new(ranks, exe)
        .args([
            test,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE_ENV, role)
        .timeout(timeout)
        .capture();
    for &(name, value) in env {
        launch = launch.env(name, value);
    }
    if std::env::var_os("NCCL_DEBUG").is_none() && !env.iter().any(|&(n, _)| n == "NCCL_DEBUG") {
        launch = launch.env("NCCL_DEBUG", "WARN");
    }
    let report = launch.run().expect("the ranks start");
    assert!(report.success(), "a rank failed:\n{}", report.summary());
    assert_eq!(report.ranks.len(), ranks, "one outcome per rank");
    for r in &report.ranks {
        let done = done_line(role, r.rank, ranks);
        assert!(
            r.stdout.iter().any(|l| l.contains(&done)),
            "rank {} did not finish its checks; its output: {:?}",
            r.rank,
            r.stdout
        );
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_lines_name_the_role_rank_and_size() {
        assert_eq!(
            done_line("nccl-worker", 1, 2),
            "nccl-worker rank 1 of 2: all checks passed"
        );
    }

    #[test]
    fn the_requested_ranks_stay_within_their_bounds() {
        // The variable is unset in CI (and this test does not set it: tests share the
        // environment).
        if std::env::var_os(RANKS_ENV).is_none() {
            assert_eq!(requested(4, 1, 2), 2);
            assert_eq!(requested(0, 2, 8), 2);
            assert_eq!(requested(3, 1, 8), 3);
            // A `max` below `min` (fewer GPUs than the test needs) keeps `min`.
            assert_eq!(requested(3, 2, 1), 2);
        }
        assert!(!is_worker("no-such-role"));
    }
}

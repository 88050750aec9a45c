//! Ranks as processes: the launcher starts this test binary once per rank, and the ranks meet
//! through the TCP rendezvous over loopback (no GPU needed). The test that launches is also
//! the worker: with `GPU_PIPELINE_TEST_ROLE` set it plays one rank instead.

use std::time::Duration;

use gpu_pipeline::launcher::{Launch, RankStatus};
use gpu_pipeline::rendezvous::{RankInfo, Rendezvous};

const ROLE_ENV: &str = "GPU_PIPELINE_TEST_ROLE";

/// Launches `size` ranks of this binary running only `test`, in `role`.
fn launch_self(size: usize, test: &str, role: &str) -> gpu_pipeline::launcher::LaunchReport {
    let exe = std::env::current_exe().expect("the test binary's path");
    Launch::new(size, exe)
        .args([
            test,
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "--include-ignored",
        ])
        .env(ROLE_ENV, role)
        .env("GPU_PIPELINE_RENDEZVOUS_TIMEOUT", "60")
        .timeout(Duration::from_secs(120))
        .capture()
        .run()
        .expect("the ranks start")
}

#[test]
fn three_processes_meet_and_share_rank_zeros_payload() {
    if std::env::var(ROLE_ENV).as_deref() == Ok("share") {
        let me = RankInfo::from_env().unwrap();
        let store = Rendezvous::from_env().unwrap();
        let payload = format!("id-from-pid-{}", std::process::id());
        let got = store
            .share(&me, me.is_root().then_some(payload.as_bytes()))
            .unwrap();
        assert_eq!(std::env::var("NCCL_NVLS_ENABLE").as_deref(), Ok("0"));
        println!(
            "rank {} of {} got {}",
            me.rank,
            me.world_size,
            String::from_utf8(got).unwrap()
        );
        return;
    }
    let report = launch_self(
        3,
        "three_processes_meet_and_share_rank_zeros_payload",
        "share",
    );
    assert!(report.success(), "{}", report.summary());
    let lines: Vec<String> = report
        .ranks
        .iter()
        .map(|r| {
            // libtest prints `test NAME ... ` without a newline before the test's own output.
            let marker = format!("rank {} of 3 got ", r.rank);
            r.stdout
                .iter()
                .find_map(|l| l.split_once(&marker).map(|(_, payload)| payload.to_owned()))
                .unwrap_or_else(|| panic!("rank {} printed {:?}", r.rank, r.stdout))
        })
        .collect();
    // Every rank got rank 0's payload.
    assert!(lines[0].starts_with("id-from-pid-"), "{}", lines[0]);
    assert!(lines.iter().all(|p| *p == lines[0]), "{lines:?}");
}

#[test]
fn a_rank_that_fails_before_the_rendezvous_fails_the_launch_fast() {
    if std::env::var(ROLE_ENV).as_deref() == Ok("fail") {
        let me = RankInfo::from_env().unwrap();
        if me.rank == 1 {
            eprintln!("rank 1 gives up");
            std::process::exit(3);
        }
        // The others wait in the rendezvous for rank 1 until the launcher kills them.
        let store = Rendezvous::from_env().unwrap();
        let _ = store.share(&me, me.is_root().then_some(&b"x"[..]));
        std::process::exit(4);
    }
    let start = std::time::Instant::now();
    let report = launch_self(
        3,
        "a_rank_that_fails_before_the_rendezvous_fails_the_launch_fast",
        "fail",
    );
    assert!(
        start.elapsed() < Duration::from_secs(50),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(report.first_failure, Some(1), "{}", report.summary());
    assert_eq!(report.ranks[1].status, RankStatus::Exited(3));
    assert!(
        report.ranks[1]
            .stderr
            .iter()
            .any(|l| l == "rank 1 gives up")
    );
    assert_eq!(report.exit_code(), 3);
    // The others were killed, or (rank 2, when rank 0 was killed first) failed on their own
    // once their rendezvous peer hung up: an error, never a hang.
    for r in [0, 2] {
        assert!(
            matches!(
                report.ranks[r].status,
                RankStatus::Killed | RankStatus::Exited(4)
            ),
            "{}",
            report.summary()
        );
    }
}

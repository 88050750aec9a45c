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

// ---- the launcher as a process: signals, kill -9, exit status -------------------------------

/// Set for the launcher process of the tests below (and inherited by its ranks).
const LAUNCHER_ROLE: &str = "launcher";
/// Where ranks write their pids.
const PID_DIR_ENV: &str = "GPU_PIPELINE_TEST_PID_DIR";
/// What each rank does: `sleep`, or `fail` (rank 1 exits with 7, the others sleep).
const RANK_MODE_ENV: &str = "GPU_PIPELINE_TEST_RANK_MODE";
const KILL_TEST: &str = "the_launcher_as_a_process_forwards_signals_and_takes_its_ranks_along";

/// In a launched process: a rank (RANK set) sleeps after writing its pid; the launcher runs
/// exactly what `gpu-pipeline-launch` runs and exits with its status.
fn play_launcher_role() {
    if std::env::var("RANK").is_ok() {
        let rank = std::env::var("RANK").unwrap();
        let dir = std::path::PathBuf::from(std::env::var(PID_DIR_ENV).unwrap());
        std::fs::write(
            dir.join(format!("rank-{rank}")),
            std::process::id().to_string(),
        )
        .unwrap();
        if std::env::var(RANK_MODE_ENV).as_deref() == Ok("fail") && rank == "1" {
            std::process::exit(7);
        }
        std::thread::sleep(Duration::from_secs(60));
        std::process::exit(5);
    }
    let exe = std::env::current_exe().unwrap();
    let args = ["-n", "3", "--timeout", "60", "--"]
        .map(std::ffi::OsString::from)
        .into_iter()
        .chain([exe.into_os_string()])
        .chain(
            [KILL_TEST, "--exact", "--nocapture", "--test-threads=1"].map(std::ffi::OsString::from),
        );
    std::process::exit(i32::from(gpu_pipeline::launcher::main_with_args(args)));
}

/// Starts the launcher process with ranks in `mode`; returns it once every rank wrote its
/// pid, with the pids.
fn start_launcher(mode: &str, dir: &std::path::Path) -> (std::process::Child, Vec<i32>) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let launcher = std::process::Command::new(std::env::current_exe().unwrap())
        .args([KILL_TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, LAUNCHER_ROLE)
        .env(PID_DIR_ENV, dir)
        .env(RANK_MODE_ENV, mode)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let wanted = if mode == "fail" { 0 } else { 3 };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let pids = loop {
        let pids: Vec<i32> = (0..3)
            .filter_map(|r| std::fs::read_to_string(dir.join(format!("rank-{r}"))).ok())
            .filter_map(|p| p.trim().parse().ok())
            .collect();
        if pids.len() >= wanted {
            break pids;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the ranks never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    (launcher, pids)
}

/// Waits for `child` at most `limit`; kills it and fails past that.
fn wait_bounded(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the launcher did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `pid` is a live process (a zombie waiting for its reaper is not).
fn alive(pid: i32) -> bool {
    let exists = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false);
    exists && !zombie
}

/// Asserts every pid is gone within a few seconds.
fn assert_all_gone(pids: &[i32], how: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|&p| alive(p)) {
        if std::time::Instant::now() > deadline {
            let left: Vec<_> = pids.iter().filter(|&&p| alive(p)).collect();
            for &&p in &left {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            panic!("ranks {left:?} outlived a launcher ended by {how}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_launcher_as_a_process_forwards_signals_and_takes_its_ranks_along() {
    if std::env::var(ROLE_ENV).as_deref() == Ok(LAUNCHER_ROLE) {
        play_launcher_role();
        return;
    }
    use std::os::unix::process::ExitStatusExt;
    let base = std::env::temp_dir().join(format!("gpl-kill-{}", std::process::id()));
    // SIGTERM: forwarded to every rank's group; the launcher exits with 128 + 15.
    let (mut launcher, pids) = start_launcher("sleep", &base.join("term"));
    let pid = nix::unistd::Pid::from_raw(launcher.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = wait_bounded(&mut launcher, Duration::from_secs(30));
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert_all_gone(&pids, "SIGTERM");
    // SIGKILL: nothing to forward; the parent-death signal ends every rank.
    let (mut launcher, pids) = start_launcher("sleep", &base.join("kill"));
    launcher.kill().unwrap();
    let status = wait_bounded(&mut launcher, Duration::from_secs(30));
    assert_eq!(status.signal(), Some(9));
    // Before, the ranks slept on for their full minute.
    assert_all_gone(&pids, "SIGKILL");
    // A failing rank: the launcher exits with its status, the others are killed.
    let (mut launcher, _) = start_launcher("fail", &base.join("fail"));
    let status = wait_bounded(&mut launcher, Duration::from_secs(30));
    assert_eq!(status.code(), Some(7), "{status:?}");
    let pids: Vec<i32> = (0..3)
        .filter_map(|r| std::fs::read_to_string(base.join("fail").join(format!("rank-{r}"))).ok())
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    assert_all_gone(&pids, "a failing rank");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn the_rendezvous_port_is_held_from_before_the_ranks_start() {
    if std::env::var(ROLE_ENV).as_deref() == Ok("port") {
        let port: u16 = std::env::var("GPU_PIPELINE_MASTER_PORT")
            .unwrap()
            .parse()
            .unwrap();
        // Before, the launcher released the port it picked and rank 0 bound it only at the
        // rendezvous: any process could take it in between, as this rank tries to.
        match std::net::TcpListener::bind(("127.0.0.1", port)) {
            Ok(_) => {
                eprintln!("port {port} was free for the taking");
                std::process::exit(9);
            }
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}"),
        }
        return;
    }
    let report = launch_self(
        2,
        "the_rendezvous_port_is_held_from_before_the_ranks_start",
        "port",
    );
    assert!(report.success(), "{}", report.summary());
}

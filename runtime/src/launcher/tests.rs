//! The command line, the report, and launches of small shell programs.

use super::*;
use std::ffi::OsString;

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
fn the_timeout_defaults_to_a_day_and_the_variable_or_none_change_it() {
    let with = |args: &[&str], env: Option<&str>| {
        let env = env.map(str::to_owned);
        Launch::from_args_and_env(args.iter().map(OsString::from), move |name| {
            (name == LAUNCH_TIMEOUT_ENV).then(|| env.clone()).flatten()
        })
    };
    // Before, a launch without `--timeout` ran forever.
    let l = with(&["-n", "2", "prog"], None).unwrap().unwrap();
    assert_eq!(l.timeout, Some(Duration::from_secs(86_400)));
    assert!(l.forward_signals);
    assert_eq!(Launch::new(1, "p").timeout, Some(DEFAULT_LAUNCH_TIMEOUT));
    let l = with(&["-n", "2", "prog"], Some("90")).unwrap().unwrap();
    assert_eq!(l.timeout, Some(Duration::from_secs(90)));
    let l = with(&["-n", "2", "--timeout", "none", "prog"], Some("90"))
        .unwrap()
        .unwrap();
    assert_eq!(l.timeout, None);
    let l = with(&["-n", "2", "prog"], Some("none")).unwrap().unwrap();
    assert_eq!(l.timeout, None);
    for (args, env, needle) in [
        (
            &["-n", "2", "prog"][..],
            Some("soon"),
            "GPU_PIPELINE_LAUNCH_TIMEOUT=\"soon\"",
        ),
        (
            &["-n", "2", "--timeout", "-1", "prog"][..],
            None,
            "`--timeout -1`",
        ),
        (
            &["-n", "2", "--timeout", "0", "prog"][..],
            None,
            "`--timeout 0`",
        ),
    ] {
        let err = with(args, env).unwrap_err().to_string();
        assert!(err.contains(needle), "{err} lacks {needle}");
    }
    assert!(USAGE.contains("GPU_PIPELINE_LAUNCH_TIMEOUT") && USAGE.contains("`none`"));
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
        signal: None,
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
        signal: None,
    };
    assert_eq!(signaled.exit_code(), 139);
    let timed_out = LaunchReport {
        ranks: vec![outcome(0, RankStatus::TimedOut)],
        first_failure: None,
        signal: None,
    };
    assert_eq!(timed_out.exit_code(), 124);
    // The launcher signalled: 128 + that signal, whatever the ranks did.
    let signalled = LaunchReport {
        signal: Some(15),
        ..timed_out
    };
    assert_eq!(signalled.exit_code(), 143);
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

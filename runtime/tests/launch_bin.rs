//! The `gpu-pipeline-launch` binary end to end: prefixes, variables, exit statuses.

use std::process::Command;

const LAUNCH: &str = env!("CARGO_BIN_EXE_gpu-pipeline-launch");

#[test]
fn the_binary_prefixes_output_and_passes_the_rank() {
    let out = Command::new(LAUNCH)
        .args([
            "-n",
            "2",
            "--",
            "sh",
            "-c",
            "echo rank=$RANK of $WORLD_SIZE",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut lines: Vec<&str> = stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["[rank 0] rank=0 of 2", "[rank 1] rank=1 of 2"]);
}

#[test]
fn the_binary_exits_with_the_failing_ranks_status() {
    let out = Command::new(LAUNCH)
        .args([
            "-n",
            "3",
            "sh",
            "-c",
            "[ $RANK = 2 ] && exit 5; exec sleep 60",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("rank 2: exited with 5 (the first failure)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("rank 0: killed after another rank failed"),
        "{stderr}"
    );
}

#[test]
fn a_bad_command_line_is_status_two_with_the_usage() {
    let out = Command::new(LAUNCH).args(["prog"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`-n N` is required") && stderr.contains("usage:"),
        "{stderr}"
    );
}

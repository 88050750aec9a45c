//! The `gpu-pipeline-launch` binary end to end: prefixes, variables, exit statuses.
//!
//! Cargo builds the binary beside the tests; where the test binary was copied to another
//! machine (the GPU bundle), `GPU_PIPELINE_LAUNCH_BIN` names the copied launcher instead.

use std::path::PathBuf;
use std::process::Command;

/// The launcher: cargo's build, else the one `GPU_PIPELINE_LAUNCH_BIN` names.
fn launcher() -> Command {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_gpu-pipeline-launch"));
    let path = if built.exists() {
        built
    } else {
        std::env::var_os("GPU_PIPELINE_LAUNCH_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                panic!(
                    "{} is missing and GPU_PIPELINE_LAUNCH_BIN is unset: name the launcher binary",
                    built.display()
                )
            })
    };
    Command::new(path)
}

#[test]
fn the_binary_prefixes_output_and_passes_the_rank() {
    let out = launcher()
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
    let out = launcher()
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
    let out = launcher().args(["prog"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`-n N` is required") && stderr.contains("usage:"),
        "{stderr}"
    );
}

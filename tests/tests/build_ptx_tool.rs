//! `tools/build-ptx` on files it cannot compile: a usage message and status 2, never a
//! Python traceback; a file outside this repository is named by its own path (the NVRTC
//! download itself is not exercised here). Skipped where there is no `python3`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn tool() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/build-ptx")
}

fn python() -> Option<Command> {
    let found = Command::new("python3").arg("--version").output().is_ok();
    if !found {
        println!("skipped: no python3");
    }
    found.then(|| Command::new("python3"))
}

#[test]
fn usage_errors_are_messages_with_status_2() {
    let Some(_) = python() else { return };
    let dir = std::env::temp_dir().join(format!("build-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("notes.txt");
    std::fs::write(&text, "not CUDA").unwrap();
    for (arg, message) in [
        (dir.join("missing.cu"), "no such file"),
        (text, "expected a CUDA C file ending in .cu"),
    ] {
        let output = python().unwrap().arg(tool()).arg(&arg).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(message), "{stderr}");
        assert!(!stderr.contains("Traceback"), "{stderr}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn files_outside_the_repository_are_named_by_their_path() {
    let Some(mut python) = python() else { return };
    let script = format!(
        "from importlib.machinery import SourceFileLoader\n\
         from pathlib import Path\n\
         m = SourceFileLoader('build_ptx', {tool:?}).load_module()\n\
         root = m.workspace_root()\n\
         print(m.shown(Path('/elsewhere/app/step.cu'), root))\n\
         print(m.shown(root / 'examples' / 'kernels' / 'nbody.cu', root))\n",
        tool = tool().to_string_lossy()
    );
    let output = python.arg("-c").arg(script).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["/elsewhere/app/step.cu", "examples/kernels/nbody.cu"]
    );
}

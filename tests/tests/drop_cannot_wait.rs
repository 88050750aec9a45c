//! A graph dropped where its wait is refused: the params' borrows end when the drop returns,
//! so a drop that cannot wait for the work it launched or lent must not return. Found by the
//! red team: a lent instantiation launched on the caller's stream, which then begins a
//! capture, so the drop's context synchronize is refused (CUDA forbids it during a capture,
//! and the CPU backend refuses it the same way). The drop used to log the error and return,
//! and the caller could read `next` while the lent replays still wrote it. It now aborts the
//! process with a message that says what to do instead; each case runs in a child process.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpu_pipeline::{CaptureMode, Context, DeviceBuffer, Result, Stream, gpu_pipeline};

mod cpu {
    pub fn axpb(n: u32, a: f32, b: f32, x: &mut [f32]) {
        for v in &mut x[..n as usize] {
            *v = a * *v + b;
        }
    }
}

gpu_pipeline! {
    /// `next = next + 1`.
    pub pipeline Bump {
        streams { main }
        unsafe kernels k = ptx(include_str!("../kernels/language.ptx")) {
            fn axpb(n: u32, a: f32, b: f32, x: &mut [f32; n]) cpu = cpu::axpb;
        }
        params { n: u32, next: &mut DeviceBuffer<f32> }
        stage add on main {
            launch k::axpb(n, 1.0, 1.0, next) grid n.div_ceil(64) block 64;
        }
    }
}

/// Which case a child process runs.
const CASE_ENV: &str = "GPU_PIPELINE_DROP_CANNOT_WAIT_CASE";
/// What the abort prints.
const ABORT_MESSAGE: &str = "could not wait for its work before releasing its buffers";
/// What a child prints when the drop returned and every replay had finished by then.
const WAITED: &str = "drop waited: every replay had finished";

/// The case: `LAUNCHES` launches of the graph's lent instantiation on `user`, which then
/// begins a capture, and the graph dropped inside it. Returns only when the drop returned.
fn lent_launches_then_drop_inside_a_capture(ctx: &Context, n: usize) -> Result<()> {
    const LAUNCHES: usize = 40;
    let mut next = {
        let stream = Stream::non_blocking(ctx)?;
        let buffer = DeviceBuffer::from_slice(&stream, &vec![0.0f32; n])?;
        stream.synchronize()?;
        buffer
    };
    let user = Stream::non_blocking(ctx)?;
    let mut pipeline = Bump::new(ctx)?;
    {
        let mut graph = pipeline.capture(BumpParams {
            n: n as u32,
            next: &mut next,
        })?;
        let exec = graph.exec().expect("the step is captured");
        for _ in 0..LAUNCHES {
            exec.launch(&user)?;
        }
        user.begin_capture(CaptureMode::Global)?;
        drop(graph);
    }
    let _ = user.end_capture();
    // `next` is the caller's again: a read now must see every lent launch's work.
    let seen = next.to_vec(&Stream::non_blocking(ctx)?)?;
    assert!(
        seen.iter().all(|&v| v == LAUNCHES as f32),
        "the drop returned with lent launches in flight: first {}, last {}",
        seen[0],
        seen[n - 1]
    );
    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
    println!("{WAITED}");
    Ok(())
}

/// Runs `case` in a child process (this test binary, filtered to `test`) and returns its exit
/// status and output.
fn in_child(test: &str, case: &str) -> (std::process::ExitStatus, String) {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--include-ignored", "--nocapture"])
        .env(CASE_ENV, case)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let output = child.wait_with_output().unwrap();
    assert!(start.elapsed() < Duration::from_secs(120), "the child hung");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status, text)
}

/// Whether the child ended by `abort` (SIGABRT where there are signals).
fn aborted(status: &std::process::ExitStatus) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        status.signal() == Some(6)
    }
    #[cfg(not(unix))]
    {
        !status.success()
    }
}

#[test]
fn cpu_a_graph_dropped_where_it_cannot_wait_for_its_lent_launches_aborts() {
    if std::env::var(CASE_ENV).is_ok() {
        let ctx = Context::cpu_checked();
        lent_launches_then_drop_inside_a_capture(&ctx, 1 << 18).unwrap();
        return;
    }
    let (status, text) = in_child(
        "cpu_a_graph_dropped_where_it_cannot_wait_for_its_lent_launches_aborts",
        "cpu",
    );
    assert!(aborted(&status), "{status:?}: {text}");
    assert!(text.contains(ABORT_MESSAGE), "{text}");
    assert!(text.contains("pipeline `Bump`"), "{text}");
    assert!(!text.contains(WAITED), "{text}");
}

/// On CUDA the drop either waits (where the driver allows the wait during a global capture)
/// or aborts with the message; it never returns early.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_a_graph_dropped_where_it_cannot_wait_for_its_lent_launches_aborts_or_waits() {
    if std::env::var(CASE_ENV).is_ok() {
        let ctx = Context::cuda(0).unwrap();
        lent_launches_then_drop_inside_a_capture(&ctx, 1 << 24).unwrap();
        return;
    }
    let (status, text) = in_child(
        "cuda_a_graph_dropped_where_it_cannot_wait_for_its_lent_launches_aborts_or_waits",
        "cuda",
    );
    println!("child: {status:?}\n{text}");
    if aborted(&status) {
        assert!(text.contains(ABORT_MESSAGE), "{text}");
    } else {
        assert!(
            status.success() && text.contains(WAITED),
            "{status:?}: {text}"
        );
    }
}

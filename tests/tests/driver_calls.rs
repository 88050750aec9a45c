//! How many of the costly driver calls a captured step with device control flow makes per
//! capture, counted against the do-nothing driver of `tools/fake-driver` (compiled here with
//! `cc`), so that a change that puts one back on the path fails on any machine:
//!
//! - no page of host memory pinned (`cuMemHostAlloc`) or unpinned (`cuMemFreeHost`) per
//!   capture: loop states come from the context's slab of flag words;
//! - no device allocation or free per capture: condition words and loop counters are slots
//!   of the context's word slab;
//! - no memset the host waits for at once: condition words and counters are zeroed on the
//!   legacy stream while the graph is built, and waited for when it is instantiated;
//! - one context synchronize per capture: the graph's drop waits for the context once for
//!   everything only its builds use (the executable graph, condition words, loop counters
//!   and states), where each of them used to wait on its own (eight here, one of them the
//!   unloading of the library's condition kernels);
//! - no module loaded per capture: the pipeline keeps the library's condition kernels loaded
//!   (they were unloaded with the last graph that used them and loaded again for the next).
//!
//! NVIDIA's graphConditionalNodes makes and drops such a graph per call
//! (`tests/benches/conditional_nodes.rs`), and so does a simulation that recaptures.
//!
//! Each count comes from a child process (this test binary, filtered to the test) that loads
//! the fake driver: one with 1 capture, one with 1 + `MORE`, and the difference is what
//! `MORE` captures cost.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use gpu_pipeline::{Context, DeviceBuffer, Result, Stream, gpu_pipeline};

/// Captures made by the child (its first argument, through this variable).
const CAPTURES_ENV: &str = "GPU_PIPELINE_DRIVER_CALLS_CAPTURES";
/// Captures the second child makes beyond the first's one.
const MORE: u64 = 20;

mod cpu {
    use gpu_pipeline::ConditionSetter;

    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }

    pub fn set_if_greater(value: &[f32], tol: f32, mut go: ConditionSetter<'_>) {
        go.set(u32::from(value[0] > tol));
    }
}

gpu_pipeline! {
    /// A kernel-set `if`/`else` (condition words), a `while` on a comparison (the library's
    /// condition kernels, a counter and a loop state) and a `do ... while`.
    pub pipeline Branches {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        unsafe kernels c = ptx(include_str!("../kernels/conditionals.ptx")) {
            fn cb_set_if_greater(value: &[f32; 1], tol: f32, go: Condition)
                cpu = cpu::set_if_greater;
        }
        params { start: f32, tol: f32, residual: &mut DeviceBuffer<f32>, out: &mut DeviceBuffer<f32> }
        scratch { go: Condition }
        stage solve on main {
            fill residual = start;
            launch c::cb_set_if_greater(residual, tol, go) grid 1u32 block 1u32;
            if go {
                launch k::add_scalar(1u32, 1.0f32, out) grid 1u32 block 1u32;
            } else {
                launch k::add_scalar(1u32, 10.0f32, out) grid 1u32 block 1u32;
            }
            while residual > tol max 100u32 {
                launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
            }
            do {
                launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
            } while residual > tol max 100u32;
        }
    }
}

/// `captures` times: the step captured, launched, synchronized and dropped.
fn capture_and_drop(ctx: &Context, captures: u64) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut residual = DeviceBuffer::<f32>::zeros(&stream, 1)?;
    let mut out = DeviceBuffer::<f32>::zeros(&stream, 1)?;
    stream.synchronize()?;
    let mut pipeline = Branches::new(ctx)?;
    for _ in 0..captures {
        let mut graph = pipeline.capture(BranchesParams {
            start: 3.0,
            tol: 0.5,
            residual: &mut residual,
            out: &mut out,
        })?;
        graph.launch()?;
        graph.synchronize()?;
    }
    Ok(())
}

/// The fake driver, compiled into the target directory; `None` where this machine has no C
/// compiler or the checkout no driver source (a bundle run on a GPU machine).
fn fake_driver() -> Option<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/fake-driver/fake_libcuda.c");
    if !source.exists() {
        println!("skipped: {} is not here", source.display());
        return None;
    }
    // One file per call: the tests of this binary run at once, and each removes its own.
    static BUILT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let out = std::env::temp_dir().join(format!(
        "gpu-pipeline-fake-cuda-{}-{}.so",
        std::process::id(),
        BUILT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let built = Command::new("cc")
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&source)
        .arg("-ldl")
        .status();
    match built {
        Ok(status) if status.success() => Some(out),
        Ok(status) => panic!("cc could not build the fake driver: {status}"),
        Err(e) => {
            println!("skipped: no C compiler (`cc`: {e})");
            None
        }
    }
}

/// Runs the test `test` of this binary in a child process that loads the fake driver
/// `driver`, with `env` set (what the child does), and returns the counts the fake driver
/// wrote at the child's exit; fails when the child fails.
fn child_counts(driver: &Path, test: &str, env: (&str, &str)) -> HashMap<String, u64> {
    let file = std::env::temp_dir().join(format!(
        "gpu-pipeline-fake-counts-{}-{test}-{}",
        std::process::id(),
        env.1.replace(' ', "-")
    ));
    let output = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture"])
        .env(env.0, env.1)
        .env(gpu_pipeline::DRIVER_PATH_ENV, driver)
        .env(gpu_pipeline::BACKEND_ENV, "cuda")
        .env("FAKE_CUDA_COUNTS", &file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the child failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&file).expect("the fake driver wrote no counts");
    std::fs::remove_file(&file).ok();
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(name, n)| (name.to_owned(), n.trim().parse().unwrap()))
        .collect()
}

/// The counts the fake driver wrote for a child that made `captures` captures.
fn counts(driver: &Path, captures: u64) -> HashMap<String, u64> {
    child_counts(
        driver,
        "captures_pin_no_host_memory_and_wait_for_no_memset_or_context_at_once",
        (CAPTURES_ENV, &captures.to_string()),
    )
}

#[test]
fn captures_pin_no_host_memory_and_wait_for_no_memset_or_context_at_once() {
    if let Ok(captures) = std::env::var(CAPTURES_ENV) {
        // The child: the fake driver is loaded (the variables above), nothing runs.
        let ctx = Context::auto().unwrap();
        capture_and_drop(&ctx, captures.parse().unwrap()).unwrap();
        return;
    }
    let Some(driver) = fake_driver() else {
        return;
    };
    let (one, more) = (counts(&driver, 1), counts(&driver, 1 + MORE));
    std::fs::remove_file(&driver).ok();
    let added = |name: &str| more[name] - one[name];
    // The counts are real: every capture instantiates once, and zeroes its condition words.
    assert_eq!(added("cuGraphInstantiate"), MORE, "{more:?}");
    assert!(added("cuMemsetD8") >= MORE, "{more:?}");
    assert_eq!(
        added("cuMemHostAlloc"),
        0,
        "a capture pinned host memory: {more:?}"
    );
    assert_eq!(
        added("cuMemFreeHost"),
        0,
        "a drop unpinned host memory: {more:?}"
    );
    assert_eq!(
        added("unoverlapped_zeroing"),
        0,
        "a capture waited for a memset at once: {more:?}"
    );
    assert!(added("legacy_stream_sync") <= MORE, "{more:?}");
    assert!(
        added("cuCtxSynchronize") <= MORE,
        "more than one context synchronize per capture: {more:?}"
    );
    assert_eq!(
        added("cuModuleLoadData"),
        0,
        "a capture loaded a module: {more:?}"
    );
    assert_eq!(
        added("cuMemAlloc"),
        0,
        "a capture allocated device memory: {more:?}"
    );
    assert_eq!(
        added("cuMemFree"),
        0,
        "a drop freed device memory: {more:?}"
    );
}

/// What the child of `slabs_grow_by_pages_and_reuse_what_is_handed_back` makes, through this
/// variable: `FLAGS` flag cells and `HANDLES` condition handles alive at once, all dropped, then
/// as many again.
const SLABS_ENV: &str = "GPU_PIPELINE_DRIVER_CALLS_SLABS";
const FLAGS: usize = 600;
const HANDLES: usize = 5000;

fn fill_and_refill_the_slabs(ctx: &Context) -> Result<()> {
    for _ in 0..2 {
        let cells = (0..FLAGS)
            .map(|_| gpu_pipeline::FlagCell::<u64>::new(ctx, 7))
            .collect::<Result<Vec<_>>>()?;
        // A word handed back and taken again holds what `new` was given, not its last value.
        assert!(cells.iter().all(|c| c.load() == 7));
        cells.iter().for_each(|c| c.store(9));
        drop(cells);
        let mut graph = gpu_pipeline::Graph::new(ctx)?;
        let handles = (0..HANDLES)
            .map(|_| graph.condition_handle(gpu_pipeline::HandleKind::Decision))
            .collect::<Result<Vec<_>>>()?;
        drop((handles, graph));
    }
    Ok(())
}

/// Flag words (512 a page) and graph words (4096 a page) come from pages made as they are
/// needed, and words handed back are taken again before any new page is made.
#[test]
fn slabs_grow_by_pages_and_reuse_what_is_handed_back() {
    if std::env::var(SLABS_ENV).is_ok() {
        let ctx = Context::auto().unwrap();
        fill_and_refill_the_slabs(&ctx).unwrap();
        return;
    }
    let Some(driver) = fake_driver() else {
        return;
    };
    let counts = child_counts(
        &driver,
        "slabs_grow_by_pages_and_reuse_what_is_handed_back",
        (SLABS_ENV, "1"),
    );
    std::fs::remove_file(&driver).ok();
    let count = |name: &str| counts[name];
    let text = format!("{counts:?}");
    // 600 words: two pages, made once; 5000 slots: two pages, made once; every page freed
    // with the context.
    assert_eq!(count("cuMemHostAlloc"), 2, "{text}");
    assert_eq!(count("cuMemFreeHost"), 2, "{text}");
    assert_eq!(count("cuMemAlloc"), 2, "{text}");
    assert_eq!(count("cuMemFree"), 2, "{text}");
}

/// The same step on the checked CPU backend: it runs, race-free, so the counts above are of
/// a step that works.
#[test]
fn the_counted_step_runs_race_free_on_the_cpu_backend() {
    let ctx = Context::cpu_checked();
    capture_and_drop(&ctx, 2).unwrap();
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}

/// What the child of `work_a_graph_drop_runs_enqueues_is_waited_for` does, through this
/// variable: `exec` or `word`, then `inside` or `outside` (see `enqueue_then_drop`).
const HOOK_ENV: &str = "GPU_PIPELINE_DRIVER_CALLS_HOOK";

/// What a [`Hook`] runs when a clone of it is dropped, once.
type Deferred = Arc<Mutex<Option<Box<dyn FnOnce() + Send>>>>;

/// A param of `Hooked` that its host closure holds a clone of: the graph's builds drop that
/// clone, so what was put in it runs inside the graph's drop (user code: any `Drop` of a
/// value a host closure captures).
#[derive(Clone)]
pub struct Hook(Deferred);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

impl Drop for Hook {
    fn drop(&mut self) {
        let deferred = self.0.lock().unwrap().take();
        if let Some(deferred) = deferred {
            deferred();
        }
    }
}

gpu_pipeline! {
    /// A step whose host closure holds a [`Hook`].
    pub pipeline Hooked {
        streams { main }
        params { hook: Hook }
        stage s on main {
            host move || {
                let _ = &hook;
            };
        }
    }
}

/// Work enqueued on a stream, then what it touches dropped: an executable graph of the user's
/// (`exec`: launched), or a graph's condition words (`word`: copied from). `inside`: done by
/// the drop of a value a `Hooked` graph's host closure holds, while the graph is dropped;
/// `outside`: after. The drops must wait for that work either way.
fn enqueue_then_drop(ctx: &Context, what: &str, inside: bool) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut sink = DeviceBuffer::<u32>::zeros(&stream, 3)?;
    let mut user = gpu_pipeline::Graph::new(ctx)?;
    let handle = user.condition_handle(gpu_pipeline::HandleKind::Decision)?;
    handle.word();
    user.add_empty_node(&[])?;
    let exec = user.instantiate()?;
    drop(user);
    let deferred = Deferred::default();
    let mut pipeline = Hooked::new(ctx)?;
    let mut graph = pipeline.capture(HookedParams {
        hook: Hook(deferred.clone()),
    })?;
    graph.launch()?;
    graph.synchronize()?;
    stream.synchronize()?;
    let work: Box<dyn FnOnce() + Send> = if what == "exec" {
        Box::new(move || {
            exec.launch(&stream).unwrap();
            drop(exec);
        })
    } else {
        drop(exec);
        Box::new(move || {
            stream.copy_dtod(handle.word(), &mut sink).unwrap();
            drop(handle);
        })
    };
    if inside {
        *deferred.lock().unwrap() = Some(work);
        drop(graph);
    } else {
        drop(graph);
        work();
    }
    Ok(())
}

/// Code a graph's drop runs (the drop of what its host closures hold) may enqueue work and
/// drop what it touches: an executable graph, a graph's condition words. The graph's
/// `Quiesced` scope synchronized the context before that work was enqueued, so it must not
/// spare those drops their own wait: as many context synchronizes as the same code makes
/// after the graph's drop (before, none: the executable graph was destroyed and the words
/// handed back to the slab while the work could still run).
#[test]
fn work_a_graph_drop_runs_enqueues_is_waited_for() {
    if let Ok(mode) = std::env::var(HOOK_ENV) {
        let (what, place) = mode.split_once(' ').unwrap();
        let ctx = Context::auto().unwrap();
        enqueue_then_drop(&ctx, what, place == "inside").unwrap();
        return;
    }
    let Some(driver) = fake_driver() else {
        return;
    };
    let syncs = |mode: &str| -> u64 {
        child_counts(
            &driver,
            "work_a_graph_drop_runs_enqueues_is_waited_for",
            (HOOK_ENV, mode),
        )["cuCtxSynchronize"]
    };
    let counts: Vec<(String, u64, u64)> = ["exec", "word"]
        .iter()
        .map(|what| {
            let inside = syncs(&format!("{what} inside"));
            let outside = syncs(&format!("{what} outside"));
            (what.to_string(), inside, outside)
        })
        .collect();
    std::fs::remove_file(&driver).ok();
    for (what, inside, outside) in &counts {
        assert_eq!(
            inside, outside,
            "{what}: dropped inside a graph's drop, work enqueued there was not waited for \
             ({inside} context synchronizes inside, {outside} outside): {counts:?}"
        );
    }
}

/// What the child of `a_word_whose_wait_failed_keeps_its_page` does, through this variable.
const FAILED_WAIT_ENV: &str = "GPU_PIPELINE_DRIVER_CALLS_FAILED_WAIT";

/// A flag cell and a graph's condition handle, each dropped while the context synchronize
/// fails (as it does while another thread captures in global mode), then the context.
fn drop_while_synchronize_fails(ctx: Context) -> Result<()> {
    let cell = gpu_pipeline::FlagCell::<u32>::new(&ctx, 1)?;
    let mut graph = gpu_pipeline::Graph::new(&ctx)?;
    let handle = graph.condition_handle(gpu_pipeline::HandleKind::Decision)?;
    drop(graph);
    // SAFETY: the child's only test thread; nothing else reads the environment meanwhile.
    unsafe { std::env::set_var("FAKE_CUDA_FAIL_CTX_SYNC", "1") };
    drop((cell, handle));
    // SAFETY: as above.
    unsafe { std::env::remove_var("FAKE_CUDA_FAIL_CTX_SYNC") };
    drop(ctx);
    Ok(())
}

/// A flag word or graph word whose drop could not wait for its work is never handed back, and
/// the page it is on is not freed with the context either: work may still write it (before,
/// the context's drop freed both pages under it, where the words' own allocations used to be
/// leaked).
#[test]
fn a_word_whose_wait_failed_keeps_its_page() {
    if std::env::var(FAILED_WAIT_ENV).is_ok() {
        drop_while_synchronize_fails(Context::auto().unwrap()).unwrap();
        return;
    }
    let Some(driver) = fake_driver() else {
        return;
    };
    let counts = child_counts(
        &driver,
        "a_word_whose_wait_failed_keeps_its_page",
        (FAILED_WAIT_ENV, "1"),
    );
    std::fs::remove_file(&driver).ok();
    let count = |name: &str| counts[name];
    let text = format!("{counts:?}");
    // The pages were made (one each) and are not freed.
    assert_eq!(count("cuMemHostAlloc"), 1, "{text}");
    assert_eq!(count("cuMemAlloc"), 1, "{text}");
    assert_eq!(
        count("cuMemFreeHost"),
        0,
        "a page under a leaked flag word was freed: {text}"
    );
    assert_eq!(
        count("cuMemFree"),
        0,
        "a page under a leaked graph word was freed: {text}"
    );
}

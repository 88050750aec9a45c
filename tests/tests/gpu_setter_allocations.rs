//! Scalar setters of a replayed step allocate nothing once warm (issue 22: setters at the
//! driver's speed): the generated `set_value` plus `apply_updates`, and a runtime batch
//! (`GraphExec::kernel_updates`) over every kernel node, both counted by a global allocator
//! that counts this thread's allocations. Its own test binary, for that allocator. CUDA only:
//! the CPU backend packs each node's arguments into a vector of values by design.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use gpu_pipeline::{
    CaptureMode, Context, DeviceBuffer, LaunchConfig, Module, Stream, TypedKernel, gpu_pipeline,
};

/// Counts this thread's allocations.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the count is a side note.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // `try_with`: the thread-local may already be gone while a thread exits.
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The allocations `f` makes on this thread.
fn allocations_of<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    let result = f();
    (result, ALLOCATIONS.with(Cell::get) - before)
}

gpu_pipeline! {
    /// Four dependent `add_scalar`s on one buffer.
    pipeline Chain4 {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
        }
        params { n: u32, value: f32, data: &mut DeviceBuffer<f32> }
        stage chain on main {
            launch k::add_scalar(n, value, data) grid 1u32 block 32u32;
            launch k::add_scalar(n, value, data) grid 1u32 block 32u32;
            launch k::add_scalar(n, value, data) grid 1u32 block 32u32;
            launch k::add_scalar(n, value, data) grid 1u32 block 32u32;
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_warm_generated_setter_and_apply_allocate_nothing() {
    let ctx = Context::cuda(0).expect("a CUDA device");
    let stream = Stream::non_blocking(&ctx).unwrap();
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 32).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = Chain4::new(&ctx).unwrap();
    let mut graph = pipeline
        .capture(Chain4Params {
            n: 32,
            value: 1.0,
            data: &mut data,
        })
        .unwrap();
    graph.launch().unwrap();
    // Warm: the first batch may retain what the nodes point at.
    graph.set_value(2.0).unwrap();
    graph.apply_updates().unwrap();
    let ((), counted) = allocations_of(|| {
        for value in [3.0f32, 4.0, 5.0] {
            graph.set_value(value).unwrap();
            graph.apply_updates().unwrap();
        }
        // Both scalars, one batch.
        graph.set_n(32).unwrap();
        graph.set_value(5.0).unwrap();
        graph.apply_updates().unwrap();
    });
    assert_eq!(counted, 0, "allocations in 4 warm setter batches");
    // The updates took: 4 nodes adding 1.0, then 4 adding 5.0.
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    assert_eq!(data.to_vec(&stream).unwrap(), vec![24.0; 32]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_warm_runtime_batch_allocates_nothing() {
    let ctx = Context::cuda(0).expect("a CUDA device");
    let stream = Stream::non_blocking(&ctx).unwrap();
    let module =
        Module::load_ptx(&ctx, include_str!("../../runtime/kernels/test_kernels.ptx")).unwrap();
    // SAFETY: add_scalar(unsigned n, float value, float* data) indexes `data` below `n`;
    // every launch gives `n` = 32 with 32 elements.
    let add: TypedKernel<(u32, f32, &mut [f32])> =
        unsafe { module.function("add_scalar").unwrap().typed().unwrap() };
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 32).unwrap();
    let cfg = LaunchConfig::new(1u32, 32u32);
    let graph = stream
        .capture(CaptureMode::ThreadLocal, |s| {
            for _ in 0..4 {
                add.launch(s, cfg, (32u32, 1.0f32, &mut data))?;
            }
            Ok(())
        })
        .unwrap();
    let mut exec = graph.instantiate().unwrap();
    let nodes = graph.kernel_nodes_in_launch_order().unwrap();
    let mut batch = |value: f32, data: &mut DeviceBuffer<f32>| {
        let mut updates = exec.kernel_updates().unwrap();
        for node in &nodes {
            updates
                .set(node, &add, cfg, (32u32, value, &mut *data))
                .unwrap();
        }
    };
    batch(2.0, &mut data);
    let ((), counted) = allocations_of(|| {
        for value in [3.0f32, 4.0, 5.0] {
            batch(value, &mut data);
        }
    });
    assert_eq!(counted, 0, "allocations in 3 warm batches of 4 nodes");
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(data.to_vec(&stream).unwrap(), vec![20.0; 32]);
}

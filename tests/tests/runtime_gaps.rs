//! Runtime gaps of issue 14 item 8: host memory registered as pinned
//! (`PinnedBuffer::register` / `into_vec`), context scheduling policies on the CPU backend
//! (recorded), and CPU implementations that receive the launch geometry.
//!
//! The shared scenarios run on the CPU backend in checked mode (asserting the race detector
//! found nothing) and on CUDA device 0 (ignored without a GPU). The CUDA scheduling policies
//! need a process whose primary context is still inactive: they live in their own binaries,
//! `gpu_sync_policy_*.rs`.
//!
//! Captures use `CaptureMode::ThreadLocal` and the tests of this binary take one lock, so a
//! capture never meets another test's allocation or synchronize.

use std::sync::{Arc, Mutex, MutexGuard};

use gpu_pipeline::{
    Backend, CaptureMode, Context, CpuKernel, DeviceBuffer, Dim3, LaunchConfig, Module,
    PinnedBuffer, Stream, SyncPolicy, TypedKernel,
};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");

type AddScalar = (u32, f32, &'static mut [f32]);
type ReduceSum = (u32, &'static [f32], &'static mut [f32]);

static LOCK: Mutex<()> = Mutex::new(());

/// Large enough that the registered `Vec` has pages of its own on CUDA (see
/// `PinnedBuffer::register` on page granularity).
const N: usize = 1 << 18;

struct Fixture {
    _lock: MutexGuard<'static, ()>,
    ctx: Context,
    stream: Stream,
    add_scalar: TypedKernel<AddScalar>,
}

fn add_scalar_cpu(n: u32, value: f32, data: &mut [f32]) {
    data[..n as usize].iter_mut().for_each(|x| *x += value);
}

fn fixture_on(ctx: &Context) -> Fixture {
    let lock = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let stream = Stream::non_blocking(ctx).unwrap();
    let module = Module::load_ptx(ctx, PTX).unwrap().named("test_kernels");
    // SAFETY: add_scalar(unsigned n, float value, float* data) of test_kernels.cu, which
    // indexes `data` below `n`.
    let add_scalar: TypedKernel<AddScalar> =
        unsafe { module.function("add_scalar").unwrap().typed().unwrap() };
    Fixture {
        _lock: lock,
        ctx: ctx.clone(),
        stream,
        add_scalar: add_scalar.with_cpu(CpuKernel::new(add_scalar_cpu)),
    }
}

fn config() -> LaunchConfig {
    LaunchConfig::for_elements(N as u32, 256)
}

fn pattern() -> Vec<f32> {
    (0..N).map(|i| (i % 1000) as f32).collect()
}

fn assert_pattern_plus(values: &[f32], added: f32) {
    assert_eq!(values.len(), N);
    if let Some((i, v)) = values
        .iter()
        .enumerate()
        .find(|&(i, &v)| v != (i % 1000) as f32 + added)
    {
        panic!("element {i} is {v}, expected {}", (i % 1000) as f32 + added);
    }
}

/// Runs each scenario `fn name(ctx: &Context)` on the checked CPU backend (asserting no race
/// was found) and on CUDA device 0.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod cpu {
            $(
                #[test]
                fn $name() {
                    let ctx = gpu_pipeline::Context::cpu_checked();
                    super::$name(&ctx);
                    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
                }
            )*
        }
        mod cuda {
            $(
                #[test]
                #[ignore = "needs a CUDA GPU"]
                fn $name() {
                    super::$name(&gpu_pipeline::Context::cuda(0).unwrap());
                }
            )*
        }
    };
}

on_both_backends!(
    a_registered_vec_round_trips_through_the_device_and_comes_back_in_place,
    into_vec_copies_while_a_graph_holds_the_memory_and_the_graph_keeps_working,
    into_vec_is_in_place_again_once_the_graph_is_dropped,
    empty_vecs_and_zero_sized_elements_register_and_come_back,
    an_allocated_pinned_buffer_comes_back_as_a_copy,
    a_vec_handed_back_registers_again,
    cpu_implementations_receive_the_geometry_of_each_launch_and_replay,
);

fn a_registered_vec_round_trips_through_the_device_and_comes_back_in_place(ctx: &Context) {
    let f = fixture_on(ctx);
    let data = pattern();
    let (block, capacity) = (data.as_ptr(), data.capacity());
    let mut pinned = PinnedBuffer::register(&f.ctx, data)
        .unwrap()
        .named("frames");
    assert_eq!(pinned.len(), N);
    let mut device = DeviceBuffer::<f32>::alloc(&f.ctx, N).unwrap();
    f.stream.copy_htod(&pinned, &mut device).unwrap();
    f.add_scalar
        .launch(&f.stream, config(), (N as u32, 1.0f32, &mut device))
        .unwrap();
    f.stream.copy_dtoh(&device, &mut pinned).unwrap();
    // No synchronize: the host access waits for the copy on its own.
    assert_pattern_plus(&pinned.as_slice().unwrap(), 1.0);
    pinned.as_mut_slice().unwrap()[0] = -1.0;
    f.stream.copy_htod(&pinned, &mut device).unwrap();
    // into_vec waits for the copy above before handing the memory back.
    let back = pinned.into_vec().unwrap();
    assert_eq!(back.as_ptr(), block, "the same heap block comes back");
    assert_eq!(back.capacity(), capacity);
    assert_eq!(back[0], -1.0);
    for (i, &v) in back.iter().enumerate().skip(1) {
        assert_eq!(v, (i % 1000) as f32 + 1.0, "element {i}");
    }
    let on_device = device.to_vec(&f.stream).unwrap();
    assert_eq!(on_device[0], -1.0);
    assert_eq!(on_device[1..], back[1..]);
}

fn into_vec_copies_while_a_graph_holds_the_memory_and_the_graph_keeps_working(ctx: &Context) {
    let f = fixture_on(ctx);
    let data = pattern();
    let block = data.as_ptr();
    let mut pinned = PinnedBuffer::register(&f.ctx, data).unwrap();
    let mut device = DeviceBuffer::<f32>::alloc(&f.ctx, N).unwrap();
    f.stream.synchronize().unwrap();
    // Each replay: the pinned input goes up, gets 1 added, and comes back into the buffer.
    let graph = f
        .stream
        .capture(CaptureMode::ThreadLocal, |s| {
            s.copy_htod(&pinned, &mut device)?;
            f.add_scalar
                .launch(s, config(), (N as u32, 1.0f32, &mut device))?;
            s.copy_dtoh(&device, &mut pinned)
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    for round in 1..=3 {
        exec.launch(&f.stream).unwrap();
        assert_pattern_plus(&pinned.as_slice().unwrap(), round as f32);
    }
    exec.launch(&f.stream).unwrap();
    // The graph still holds the memory: the elements are copied out (after the launch).
    let copy = pinned.into_vec().unwrap();
    assert_ne!(
        copy.as_ptr(),
        block,
        "a graph holds the memory: it must not be handed back"
    );
    assert_pattern_plus(&copy, 4.0);
    // The graph's replays still use the registered memory, which it keeps alive.
    exec.launch(&f.stream).unwrap();
    f.stream.synchronize().unwrap();
    assert_pattern_plus(&device.to_vec(&f.stream).unwrap(), 5.0);
    drop(exec);
    drop(graph);
}

fn into_vec_is_in_place_again_once_the_graph_is_dropped(ctx: &Context) {
    let f = fixture_on(ctx);
    let data = pattern();
    let block = data.as_ptr();
    let mut pinned = PinnedBuffer::register(&f.ctx, data).unwrap();
    let mut device = DeviceBuffer::<f32>::alloc(&f.ctx, N).unwrap();
    f.stream.synchronize().unwrap();
    let graph = f
        .stream
        .capture(CaptureMode::ThreadLocal, |s| {
            s.copy_htod(&pinned, &mut device)?;
            f.add_scalar
                .launch(s, config(), (N as u32, 2.0f32, &mut device))?;
            s.copy_dtoh(&device, &mut pinned)
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    for _ in 0..4 {
        exec.launch(&f.stream).unwrap();
    }
    f.stream.synchronize().unwrap();
    drop(exec);
    drop(graph);
    let back = pinned.into_vec().unwrap();
    assert_eq!(back.as_ptr(), block, "nothing holds the memory any more");
    assert_pattern_plus(&back, 8.0);
}

fn empty_vecs_and_zero_sized_elements_register_and_come_back(ctx: &Context) {
    let f = fixture_on(ctx);
    // Empty, with a heap block: nothing to pin, and the block comes back.
    let empty: Vec<f32> = Vec::with_capacity(1000);
    let (block, capacity) = (empty.as_ptr(), empty.capacity());
    let mut pinned = PinnedBuffer::register(&f.ctx, empty).unwrap();
    assert!(pinned.is_empty());
    assert_eq!(pinned.size_bytes(), 0);
    assert!(pinned.as_slice().unwrap().is_empty());
    let mut device = DeviceBuffer::<f32>::alloc(&f.ctx, 0).unwrap();
    f.stream.copy_htod(&pinned, &mut device).unwrap();
    f.stream.copy_dtoh(&device, &mut pinned).unwrap();
    let back = pinned.into_vec().unwrap();
    assert!(back.is_empty());
    assert_eq!((back.as_ptr(), back.capacity()), (block, capacity));
    // Empty without a block.
    let pinned = PinnedBuffer::register(&f.ctx, Vec::<u64>::new()).unwrap();
    assert!(pinned.into_vec().unwrap().is_empty());
    // Zero-sized elements: no bytes, but the length is kept.
    let mut units = PinnedBuffer::register(&f.ctx, vec![(); 7]).unwrap();
    assert_eq!((units.len(), units.size_bytes()), (7, 0));
    assert_eq!(units.as_slice().unwrap().len(), 7);
    assert_eq!(units.as_mut_slice().unwrap().len(), 7);
    assert_eq!(units.to_vec().unwrap().len(), 7);
    assert_eq!(units.into_vec().unwrap(), vec![(); 7]);
}

fn an_allocated_pinned_buffer_comes_back_as_a_copy(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut pinned = PinnedBuffer::<f32>::zeros(&f.ctx, N).unwrap();
    let device = DeviceBuffer::from_slice(&f.stream, &pattern()).unwrap();
    f.stream.copy_dtoh(&device, &mut pinned).unwrap();
    assert_pattern_plus(&pinned.into_vec().unwrap(), 0.0);
}

fn a_vec_handed_back_registers_again(ctx: &Context) {
    // On CUDA, registering a range that is still registered fails
    // (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED): success proves `into_vec` unregistered it.
    let f = fixture_on(ctx);
    let mut data = pattern();
    let block = data.as_ptr();
    for round in 1..=3 {
        let mut pinned = PinnedBuffer::register(&f.ctx, data).unwrap();
        let device = DeviceBuffer::from_slice(&f.stream, &vec![round as f32; N]).unwrap();
        f.stream.copy_dtoh(&device, &mut pinned).unwrap();
        data = pinned.into_vec().unwrap();
        assert_eq!(data.as_ptr(), block);
        assert!(data.iter().all(|&v| v == round as f32));
    }
    // Dropping a registered buffer unregisters and frees the Vec (no leak report, no error);
    // a fresh Vec registers fine afterwards.
    drop(PinnedBuffer::register(&f.ctx, data).unwrap());
    let again = PinnedBuffer::register(&f.ctx, pattern()).unwrap();
    assert_pattern_plus(&again.as_slice().unwrap(), 0.0);
}

/// The CPU implementation of `reduce_sum` in test_kernels.cu, block by block as the CUDA
/// kernel computes it: each block tree-reduces its slice in `blockDim.x` floats of dynamic
/// shared memory, then adds its sum to `out[0]`.
fn reduce_sum_cpu(g: LaunchConfig, n: u32, input: &[f32], out: &mut [f32]) {
    let (threads, n) = (g.block.x as usize, n as usize);
    let mut partial = vec![0.0f32; g.shared_mem_bytes as usize / 4];
    for block in 0..g.grid.x as usize {
        for (tid, p) in partial.iter_mut().enumerate().take(threads) {
            let i = block * threads + tid;
            *p = if i < n { input[i] } else { 0.0 };
        }
        let mut stride = threads / 2;
        while stride > 0 {
            for tid in 0..stride {
                partial[tid] += partial[tid + stride];
            }
            stride /= 2;
        }
        out[0] += partial[0];
    }
}

fn cpu_implementations_receive_the_geometry_of_each_launch_and_replay(ctx: &Context) {
    let f = fixture_on(ctx);
    let module = Module::load_ptx(&f.ctx, PTX).unwrap();
    let seen: Arc<Mutex<Vec<LaunchConfig>>> = Arc::default();
    let record = seen.clone();
    // SAFETY: reduce_sum(unsigned n, const float* in, float* out) of test_kernels.cu, which
    // reads `in` below `n` and writes `out[0]`.
    let reduce: TypedKernel<ReduceSum> =
        unsafe { module.function("reduce_sum").unwrap().typed().unwrap() };
    let reduce = reduce.with_cpu(CpuKernel::with_geometry(
        move |g: LaunchConfig, n: u32, input: &[f32], out: &mut [f32]| {
            record.lock().unwrap().push(g);
            reduce_sum_cpu(g, n, input, out);
        },
    ));
    let n = 10_000u32;
    let input = DeviceBuffer::from_slice(&f.stream, &vec![1.0f32; n as usize]).unwrap();
    let mut out = DeviceBuffer::<f32>::zeros(&f.stream, 1).unwrap();
    // Launches of several shapes give the same sum; each one's geometry is what the CPU
    // implementation saw.
    let shapes = [64u32, 128, 256, 1024]
        .map(|block| LaunchConfig::for_elements(n, block).with_shared_mem(block * 4));
    for (k, shape) in shapes.iter().enumerate() {
        reduce
            .launch(&f.stream, *shape, (n, &input, &mut out))
            .unwrap();
        assert_eq!(out.to_vec(&f.stream).unwrap(), [(k + 1) as f32 * n as f32]);
    }
    // Plain implementations keep working beside it.
    let mut data = DeviceBuffer::from_slice(&f.stream, &[1.0f32; 8]).unwrap();
    f.add_scalar
        .launch(
            &f.stream,
            LaunchConfig::new(1u32, 8u32),
            (8u32, 1.0f32, &mut data),
        )
        .unwrap();
    assert_eq!(data.to_vec(&f.stream).unwrap(), [2.0; 8]);
    // A graph replays the captured geometry, and the geometry of an in-place update.
    let mut sum = DeviceBuffer::<f32>::zeros(&f.stream, 1).unwrap();
    f.stream.synchronize().unwrap();
    let graph = f
        .stream
        .capture(CaptureMode::ThreadLocal, |s| {
            reduce.launch(s, shapes[0], (n, &input, &mut sum))
        })
        .unwrap();
    let mut exec = graph.instantiate().unwrap();
    exec.launch(&f.stream).unwrap();
    let wider = LaunchConfig {
        grid: Dim3::x(n.div_ceil(512)),
        block: Dim3::x(512),
        shared_mem_bytes: 512 * 4,
    };
    let node = &graph.kernel_nodes().unwrap()[0];
    let mut updates = exec.kernel_updates().unwrap();
    updates
        .set(node, &reduce, wider, (n, &input, &mut sum))
        .unwrap();
    exec.launch(&f.stream).unwrap();
    f.stream.synchronize().unwrap();
    assert_eq!(sum.to_vec(&f.stream).unwrap(), [2.0 * n as f32]);
    if f.ctx.backend() == Backend::Cpu {
        let seen = seen.lock().unwrap();
        let mut expected = shapes.to_vec();
        expected.extend([shapes[0], wider]);
        assert_eq!(*seen, expected);
    }
}

#[test]
fn forgotten_host_slices_make_into_vec_copy_or_fail_instead_of_hanging() {
    let ctx = Context::cpu();
    // A forgotten shared slice keeps the memory read-locked: the Vec cannot be taken, but
    // its elements are still copied out.
    let data = vec![1.0f32; 16];
    let block = data.as_ptr();
    let pinned = PinnedBuffer::register(&ctx, data).unwrap();
    std::mem::forget(pinned.as_slice().unwrap());
    let copy = pinned.into_vec().unwrap();
    assert_ne!(copy.as_ptr(), block);
    assert_eq!(copy, [1.0; 16]);
    // A forgotten mutable slice keeps it write-locked: an error, not a hang.
    let mut pinned = PinnedBuffer::register(&ctx, vec![1.0f32; 16]).unwrap();
    std::mem::forget(pinned.as_mut_slice().unwrap());
    let err = pinned.into_vec().unwrap_err();
    assert!(
        err.to_string().contains("forgotten mutable host slice"),
        "{err}"
    );
}

#[test]
fn the_cpu_backend_records_the_scheduling_policy_it_was_given() {
    assert_eq!(Context::cpu().sync_policy().unwrap(), SyncPolicy::Auto);
    assert_eq!(
        Context::cpu_checked().sync_policy().unwrap(),
        SyncPolicy::Auto
    );
    for policy in [
        SyncPolicy::Auto,
        SyncPolicy::Spin,
        SyncPolicy::Yield,
        SyncPolicy::BlockingSync,
    ] {
        let ctx = Context::cpu_with_sync_policy(policy);
        assert_eq!(ctx.sync_policy().unwrap(), policy);
        assert!(!ctx.is_checked());
        // Clones share it, and the context works as any other.
        assert_eq!(ctx.clone().sync_policy().unwrap(), policy);
        let stream = Stream::new(&ctx).unwrap();
        let device = DeviceBuffer::from_slice(&stream, &[1u32, 2, 3]).unwrap();
        let mut host = PinnedBuffer::<u32>::zeros(&ctx, 3).unwrap();
        stream.copy_dtoh(&device, &mut host).unwrap();
        ctx.synchronize().unwrap();
        assert_eq!(host.to_vec().unwrap(), [1, 2, 3]);

        let checked = Context::cpu_checked_with_sync_policy(policy);
        assert!(checked.is_checked());
        assert_eq!(checked.sync_policy().unwrap(), policy);
    }
}

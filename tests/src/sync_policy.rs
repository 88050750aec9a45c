//! The CUDA scheduling-policy check shared by the `gpu_sync_policy_*` test binaries. Each
//! binary holds one test, so it runs in a process of its own in which nothing has used the
//! device yet: a context's scheduling can only be chosen while the primary context is
//! inactive.

use gpu_pipeline::{
    Context, CpuKernel, DeviceBuffer, Error, LaunchConfig, Module, PinnedBuffer, Stream,
    SyncPolicy, TypedKernel,
};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");

/// Some work on `ctx` that every kind of wait has to wait for: a kernel, copies, an event,
/// a pinned host slice and a context synchronize.
fn run_work(ctx: &Context) {
    let stream = Stream::non_blocking(ctx).unwrap();
    let module = Module::load_ptx(ctx, PTX).unwrap();
    // SAFETY: add_scalar(unsigned n, float value, float* data) of test_kernels.cu, which
    // indexes `data` below `n`.
    let add: TypedKernel<(u32, f32, &'static mut [f32])> =
        unsafe { module.function("add_scalar").unwrap().typed().unwrap() };
    let add = add.with_cpu(CpuKernel::new(|n: u32, v: f32, x: &mut [f32]| {
        x[..n as usize].iter_mut().for_each(|x| *x += v)
    }));
    let n = 1 << 20;
    let mut data = DeviceBuffer::from_slice(&stream, &vec![1.0f32; n]).unwrap();
    for _ in 0..10 {
        add.launch(
            &stream,
            LaunchConfig::for_elements(n as u32, 256),
            (n as u32, 1.0f32, &mut data),
        )
        .unwrap();
    }
    let done = stream.record().unwrap();
    done.synchronize().unwrap();
    let mut host = PinnedBuffer::<f32>::zeros(ctx, n).unwrap();
    stream.copy_dtoh(&data, &mut host).unwrap();
    assert!(host.as_slice().unwrap().iter().all(|&v| v == 11.0));
    stream.synchronize().unwrap();
    ctx.synchronize().unwrap();
}

fn other_than(policy: SyncPolicy) -> SyncPolicy {
    match policy {
        SyncPolicy::BlockingSync => SyncPolicy::Spin,
        _ => SyncPolicy::BlockingSync,
    }
}

/// Creates the first context of device 0 with `policy` and checks that it reports and keeps
/// it, runs work, refuses another policy while active (naming both), and, once every context
/// was dropped, takes another policy.
pub fn check_sync_policy(policy: SyncPolicy) {
    let ctx = Context::cuda_with_sync_policy(0, policy)
        .expect("the first context of the process takes any policy");
    assert_eq!(ctx.sync_policy().unwrap(), policy);
    run_work(&ctx);
    assert_eq!(ctx.sync_policy().unwrap(), policy);

    // While it is active: the same policy is fine, and plain contexts share it.
    let same = Context::cuda_with_sync_policy(0, policy).unwrap();
    assert_eq!(same.sync_policy().unwrap(), policy);
    let plain = Context::cuda(0).unwrap();
    assert_eq!(plain.sync_policy().unwrap(), policy);
    // Another is refused, never silently ignored.
    let other = other_than(policy);
    let err = Context::cuda_with_sync_policy(0, other).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(text.contains("already active"), "{text}");
    assert!(text.contains(&format!("SyncPolicy::{policy:?}")), "{text}");
    assert!(text.contains(&format!("SyncPolicy::{other:?}")), "{text}");
    assert_eq!(
        ctx.sync_policy().unwrap(),
        policy,
        "the refusal changed nothing"
    );
    drop((ctx, same, plain));

    // Every context dropped: the primary context is inactive again and takes another policy.
    let ctx = Context::cuda_with_sync_policy(0, other)
        .expect("after every Context of the device was dropped, another policy is accepted");
    assert_eq!(ctx.sync_policy().unwrap(), other);
    run_work(&ctx);
}

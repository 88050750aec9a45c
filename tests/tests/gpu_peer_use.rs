//! Memory another device's streams use, on two CUDA GPUs: a kernel on GPU 0 given a buffer of
//! GPU 1 (peer access), and a peer copy into managed memory of GPU 0 from a stream of GPU 1.
//! Freeing the buffer, and taking a host view of the managed memory, must wait for the other
//! device's work: synchronizing the memory's own context does not.
//!
//! Skipped, saying why, with fewer than two GPUs (one GPU's two handles share one context,
//! so nothing would be a peer) or without peer access between them.

use gpu_pipeline::{
    Context, Device, DeviceBuffer, LaunchConfig, ManagedBuffer, Module, Stream, TypedKernel,
};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");
type AddScalar = (u32, f32, &'static mut [f32]);

fn add_kernel(ctx: &Context) -> TypedKernel<AddScalar> {
    let module = Module::load_ptx(ctx, PTX).unwrap();
    // SAFETY: `add_scalar(unsigned n, float value, float* data)` writes `data[0..n)` only
    // (runtime/kernels/test_kernels.cu); every launch below passes the buffer's length.
    unsafe { module.function("add_scalar").unwrap().typed().unwrap() }
}

/// GPUs 0 and 1, or `None` (said why) with fewer than two.
fn two_gpus() -> Option<(Context, Context)> {
    match Device::count() {
        Ok(n) if n >= 2 => Some((Context::cuda(0).unwrap(), Context::cuda(1).unwrap())),
        Ok(n) => {
            println!("skipped: {n} GPU(s); a peer needs two");
            None
        }
        Err(e) => {
            println!("skipped: no CUDA driver ({e})");
            None
        }
    }
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn a_buffer_a_peer_kernel_writes_is_freed_after_the_kernel() {
    let Some((gpu0, gpu1)) = two_gpus() else {
        return;
    };
    if !gpu0.enable_peer_access(&gpu1).unwrap() {
        return println!("skipped: GPU 0 has no peer access to GPU 1");
    }
    let s0 = Stream::non_blocking(&gpu0).unwrap();
    let s1 = Stream::non_blocking(&gpu1).unwrap();
    let add = add_kernel(&gpu0);
    // 256 MiB, written 50 times across the link: far longer than a drop's own work.
    let n: u32 = 64 << 20;
    let mut on_gpu1 = DeviceBuffer::<f32>::zeros(&s1, n as usize).unwrap();
    s1.synchronize().unwrap();
    for _ in 0..50 {
        add.launch(
            &s0,
            LaunchConfig::for_elements(n, 256),
            (n, 1.0f32, &mut on_gpu1),
        )
        .unwrap();
    }
    drop(on_gpu1);
    assert!(
        s0.is_complete().unwrap(),
        "the buffer was freed while GPU 0's kernels still wrote it"
    );
    s0.synchronize().unwrap();
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn a_managed_host_view_waits_for_a_peer_copy_into_it() {
    let Some((gpu0, gpu1)) = two_gpus() else {
        return;
    };
    let s1 = Stream::non_blocking(&gpu1).unwrap();
    let n: usize = 64 << 20;
    let mut source = DeviceBuffer::<f32>::zeros(&s1, n).unwrap();
    let add = add_kernel(&gpu1);
    add.launch(
        &s1,
        LaunchConfig::for_elements(n as u32, 256),
        (n as u32, 2.0f32, &mut source),
    )
    .unwrap();
    let mut managed = ManagedBuffer::<f32>::zeros(&gpu0, n).unwrap();
    for _ in 0..3 {
        s1.copy_peer(&source, &mut managed).unwrap();
    }
    let view = managed.as_slice().unwrap();
    assert!(
        s1.is_complete().unwrap(),
        "the host holds a view of managed memory GPU 1 still writes"
    );
    assert!(view.iter().all(|&x| x == 2.0), "every element copied");
}

//! The cudarc conversions (feature `cudarc`) on a GPU: streams both ways, a buffer of ours
//! lent to cudarc and back, and cudarc's memory used by our kernels and a captured graph
//! without a copy, then given back. cuBLAS in a captured step is the `cublas` example's test
//! (`examples/tests/examples_run.rs`).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice};
use gpu_pipeline::{
    Context, DeviceBuffer, Error, LaunchConfig, Module, PinnedBuffer, Stream, TypedKernel,
};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");
const N: usize = 4096;

type AddScalar = (u32, f32, &'static mut [f32]);

fn add_scalar(ctx: &Context) -> TypedKernel<AddScalar> {
    let module = Module::load_ptx(ctx, PTX).unwrap();
    // SAFETY: `add_scalar(unsigned n, float value, float* data)` writes `data[i]` for
    // `i < n` only; every launch below passes `n` = the buffer's length.
    unsafe { module.function("add_scalar").unwrap().typed::<AddScalar>() }.unwrap()
}

fn config() -> LaunchConfig {
    LaunchConfig::new((N as u32).div_ceil(256), 256)
}

/// cudarc's context for our device 0, without event tracking (gpu-pipeline orders its work).
fn cudarc_context() -> Arc<CudaContext> {
    let cu = CudaContext::new(0).unwrap();
    // SAFETY: no slice of this context relies on event tracking yet.
    unsafe { cu.disable_event_tracking() };
    cu
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn our_stream_and_buffer_lent_to_cudarc() {
    let ctx = Context::cuda(0).unwrap();
    let cu = cudarc_context();
    let stream = Stream::non_blocking(&ctx).unwrap();
    // SAFETY: nothing here begins a capture through cudarc.
    let lent = unsafe { stream.to_cudarc(&cu) }.unwrap();
    assert_eq!(lent.cu_stream() as usize, stream.handle().unwrap() as usize);

    // Our upload and cudarc's read of the same buffer are ordered by the one stream.
    let host = PinnedBuffer::from_slice(&ctx, &vec![3.0f32; N]).unwrap();
    let mut buffer = DeviceBuffer::<f32>::alloc(&ctx, N).unwrap();
    stream.copy_htod(&host, &mut buffer).unwrap();
    add_scalar(&ctx)
        .launch(&stream, config(), (N as u32, 1.5f32, &mut buffer))
        .unwrap();
    {
        let view = buffer.cudarc_view(&lent).unwrap();
        let seen = lent.clone_dtoh(&view.view()).unwrap();
        lent.synchronize().unwrap();
        assert!(seen.iter().all(|&v| v == 4.5), "{:?}", &seen[..4]);
    }
    // cudarc writes through a mutable loan; our stream sees it afterwards.
    {
        let mut view = buffer.cudarc_view_mut(&lent).unwrap();
        lent.memcpy_htod(&vec![-1.0f32; N], &mut view.view_mut())
            .unwrap();
    }
    assert_eq!(buffer.to_vec(&stream).unwrap(), vec![-1.0f32; N]);

    // Another context's stream is refused.
    let other = Context::cpu();
    // SAFETY: refused before anything is borrowed.
    let err = unsafe { Stream::from_cudarc(&other, &lent) }.unwrap_err();
    assert!(matches!(err, Error::BackendMismatch { .. }), "{err}");

    // Our stream dropped while cudarc still holds it: the handle is leaked, not destroyed,
    // so cudarc's stream still works.
    let kept = Arc::clone(&*lent);
    drop(lent);
    drop(stream);
    kept.synchronize().unwrap();
    let probe = kept.clone_htod(&[1u32, 2, 3]).unwrap();
    assert_eq!(kept.clone_dtoh(&probe).unwrap(), [1, 2, 3]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cudarc_memory_in_our_kernels_and_graphs_and_back() {
    let ctx = Context::cuda(0).unwrap();
    let cu = cudarc_context();
    let cu_stream = cu.new_stream().unwrap();
    let slice: CudaSlice<f32> = cu_stream.clone_htod(&vec![1.0f32; N]).unwrap();
    let address = {
        let (ptr, _record) = cudarc::driver::DevicePtr::device_ptr(&slice, &cu_stream);
        ptr
    };

    // Moved in without a copy: the same device memory.
    let mut buffer = DeviceBuffer::from_cudarc(&ctx, slice).unwrap();
    assert_eq!(buffer.len(), N);
    // SAFETY: nothing here begins a capture through cudarc.
    let stream = unsafe { Stream::from_cudarc(&ctx, &cu_stream) }.unwrap();
    assert!(stream.is_borrowed());
    let kernel = add_scalar(&ctx);
    kernel
        .launch(&stream, config(), (N as u32, 2.0f32, &mut buffer))
        .unwrap();

    // A captured graph holds the memory: it cannot go back while the graph lives.
    stream
        .begin_capture(gpu_pipeline::CaptureMode::ThreadLocal)
        .unwrap();
    kernel
        .launch(&stream, config(), (N as u32, 10.0f32, &mut buffer))
        .unwrap();
    let graph = stream.end_capture().unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    exec.launch(&stream).unwrap();
    let refused = buffer.into_cudarc().unwrap_err();
    assert!(
        refused.error.to_string().contains("held elsewhere"),
        "{}",
        refused.error
    );
    let buffer = refused.buffer.expect("the buffer comes back");
    drop((exec, graph));

    // Back to cudarc, after our work: 1 + 2 + 10 + 10.
    let slice = buffer.into_cudarc().unwrap();
    let (ptr, _record) = cudarc::driver::DevicePtr::device_ptr(&slice, &cu_stream);
    assert_eq!(ptr, address);
    let values = cu_stream.clone_dtoh(&slice).unwrap();
    cu_stream.synchronize().unwrap();
    assert!(values.iter().all(|&v| v == 23.0), "{:?}", &values[..4]);
    drop(stream);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn loans_are_refused_where_cudarc_tracks_events() {
    let ctx = Context::cuda(0).unwrap();
    let cu = CudaContext::new(0).unwrap();
    // A second cudarc stream puts the context in multi-stream mode: with event tracking on
    // (the default), cudarc records events around every use of a slice.
    let cu_stream = cu.new_stream().unwrap();
    assert!(cu.is_managing_stream_synchronization());
    let buffer = DeviceBuffer::<f32>::alloc(&ctx, 16).unwrap();
    let err = buffer.cudarc_view(&cu_stream).unwrap_err();
    assert!(err.to_string().contains("disable_event_tracking"), "{err}");
}

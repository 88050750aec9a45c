//! Kernels on the host backend: host implementations written as plain Rust functions, the
//! errors of kernels without one, module name checks, panics, and launches over views.

use gpu_pipeline::{
    Backend, Bound, Bounds, CaptureMode, Context, DeviceBuffer, Error, HostKernel, HostKernelFn,
    LaunchConfig, ManagedBuffer, Module, Stream, TypedKernel,
};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");
const CUBIN_SM90: &[u8] = include_bytes!("../../runtime/kernels/test_kernels.sm_90.cubin");

type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);
type AddScalar = (u32, f32, &'static mut [f32]);

/// A plain function item: its borrowed parameters are inferred as higher-ranked, which is
/// what a host implementation needs.
fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
    let n = n as usize;
    for (y, x) in y[..n].iter_mut().zip(&x[..n]) {
        *y = a.mul_add(*x, *y);
    }
}

fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
    data[..n as usize].iter_mut().for_each(|x| *x += value);
}

fn module(ctx: &Context) -> Module {
    Module::load_ptx(ctx, PTX).unwrap().named("test_kernels")
}

fn typed_saxpy(module: &Module) -> TypedKernel<Saxpy> {
    let bounds = Bounds::new()
        .buffer(2, Bound::param(0))
        .buffer(3, Bound::param(0));
    // SAFETY: saxpy(unsigned n, float a, const float* x, float* y), writing only y, and
    // indexing x and y below n.
    unsafe {
        module
            .function("saxpy")
            .unwrap()
            .typed_with_bounds::<Saxpy>(bounds)
            .unwrap()
    }
}

fn typed_add_scalar(module: &Module) -> TypedKernel<AddScalar> {
    // SAFETY: add_scalar(unsigned n, float value, float* data), indexing data below n.
    unsafe {
        module
            .function("add_scalar")
            .unwrap()
            .typed_with_bounds::<AddScalar>(Bounds::new().buffer(2, Bound::param(0)))
            .unwrap()
    }
}

#[test]
fn function_items_and_typed_closures_are_host_implementations() {
    fn implements<Sig, F: HostKernelFn<Sig>>(_: &F) {}
    implements::<Saxpy, _>(&saxpy);
    implements::<AddScalar, _>(&add_scalar);
    implements::<(), _>(&|| {});
    implements::<(u64, &'static [u8]), _>(&|_: u64, _: &[u8]| {});
    // Inferred from the kernel's signature.
    let ctx = Context::host_checked();
    let kernel = typed_saxpy(&module(&ctx)).with_host(HostKernel::new(saxpy));
    assert!(kernel.has_host());
}

#[test]
fn a_launch_calls_the_host_implementation_once_with_the_buffers() {
    let ctx = Context::host_checked();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let kernel = typed_saxpy(&module(&ctx)).with_host(HostKernel::new(saxpy));
    let x = DeviceBuffer::from_slice(&stream, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let mut y = DeviceBuffer::from_slice(&stream, &[10.0f32; 4]).unwrap();
    // The grid does not matter on the host: the implementation runs once per launch.
    kernel
        .launch(
            &stream,
            LaunchConfig::new((7, 3, 2), 128),
            (4u32, 2.0f32, &x, &mut y),
        )
        .unwrap();
    assert_eq!(y.to_vec(&stream).unwrap(), [12.0, 14.0, 16.0, 18.0]);
    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
}

#[test]
fn disjoint_views_of_one_buffer_go_to_one_launch() {
    let ctx = Context::host_checked();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let kernel = typed_saxpy(&module(&ctx)).with_host(HostKernel::new(saxpy));
    let mut both = DeviceBuffer::from_slice(&stream, &[1.0f32, 2.0, 3.0, 10.0, 20.0, 30.0])
        .unwrap()
        .named("both");
    {
        let (x, mut y) = both.split_at_mut(3).unwrap();
        kernel
            .launch(&stream, LaunchConfig::new(1, 3), (3u32, 1.0f32, &x, &mut y))
            .unwrap();
    }
    assert_eq!(
        both.to_vec(&stream).unwrap(),
        [1.0, 2.0, 3.0, 11.0, 22.0, 33.0]
    );
    // Empty views launch too.
    let mut empty = DeviceBuffer::<f32>::alloc(&ctx, 0).unwrap();
    let kernel = typed_add_scalar(&module(&ctx)).with_host(HostKernel::new(add_scalar));
    kernel
        .launch(&stream, LaunchConfig::new(1, 1), (0u32, 1.0f32, &mut empty))
        .unwrap();
    stream.synchronize().unwrap();
    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
}

#[test]
fn a_kernel_without_a_host_implementation_fails_naming_it() {
    let ctx = Context::host();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let kernel = typed_add_scalar(&module(&ctx));
    assert!(!kernel.has_host());
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 8).unwrap();
    let err = kernel
        .launch(&stream, LaunchConfig::new(1, 8), (8u32, 1.0f32, &mut data))
        .unwrap_err();
    assert!(
        matches!(err, Error::BackendMismatch { backend: "cpu", .. }),
        "{err:?}"
    );
    let text = err.to_string();
    for part in [
        "`add_scalar`",
        "`test_kernels`",
        "no CPU implementation",
        "`cpu = path::to::fn`",
        "`TypedKernel::with_cpu`",
    ] {
        assert!(text.contains(part), "{part} missing from: {text}");
    }
    // The untyped launch has no signature to call a host implementation with.
    let raw = module(&ctx).function("add_scalar").unwrap();
    // SAFETY: refused before anything is enqueued.
    let err = unsafe { raw.launch(&stream, LaunchConfig::new(1, 8), (8u32, 1.0f32, &mut data)) }
        .unwrap_err();
    assert!(err.to_string().contains("no CPU implementation"), "{err}");
    // Nothing ran.
    assert_eq!(data.to_vec(&stream).unwrap(), vec![0.0; 8]);
}

#[test]
fn modules_know_their_kernels_on_the_host() {
    let ctx = Context::host();
    assert_eq!(ctx.backend(), Backend::Host);
    let module = module(&ctx);
    assert_eq!(module.kernel_names().len(), 5);
    let err = module.function("no_such_kernel").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(
        text.contains("`no_such_kernel`") && text.contains("`saxpy`"),
        "{text}"
    );
    assert!(Module::load_ptx(&ctx, "abc\0def").is_err());
    // A cubin's kernels are not read on the host: any name is accepted.
    let cubin = Module::load_cubin(&ctx, CUBIN_SM90).unwrap();
    assert!(cubin.function("anything_at_all").is_ok());
    assert!(Module::load_cubin(&ctx, b"not a cubin").is_err());
    // Kernel attributes are the device's business.
    let kernel = module.function("saxpy").unwrap();
    assert!(matches!(
        kernel.attributes(),
        Err(Error::BackendMismatch { .. })
    ));
    assert!(kernel.handle().is_none());
}

#[test]
fn a_panicking_host_kernel_is_reported_at_the_next_synchronize() {
    fn explode(_n: u32, _value: f32, _data: &mut [f32]) {
        panic!("the host kernel exploded");
    }
    let ctx = Context::host();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let kernel = typed_add_scalar(&module(&ctx)).with_host(HostKernel::new(explode));
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 4).unwrap();
    kernel
        .launch(&stream, LaunchConfig::new(1, 4), (4u32, 1.0f32, &mut data))
        .unwrap();
    let err = stream.synchronize().unwrap_err();
    let text = err.to_string();
    assert!(text.contains("launch test_kernels::add_scalar"), "{text}");
    assert!(text.contains("the host kernel exploded"), "{text}");
    // The stream and the buffer stay usable.
    let fine = typed_add_scalar(&module(&ctx)).with_host(HostKernel::new(add_scalar));
    fine.launch(&stream, LaunchConfig::new(1, 4), (4u32, 1.0f32, &mut data))
        .unwrap();
    assert_eq!(data.to_vec(&stream).unwrap(), vec![1.0; 4]);
}

#[test]
fn managed_memory_runs_kernels_and_its_slices_block_graph_launches() {
    let ctx = Context::host_checked();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let kernel = typed_add_scalar(&module(&ctx)).with_host(HostKernel::new(add_scalar));
    let mut data = ManagedBuffer::from_slice(&ctx, &[1.0f32; 16])
        .unwrap()
        .named("data");
    let graph = stream
        .capture(CaptureMode::ThreadLocal, |s| {
            kernel.launch(s, LaunchConfig::new(1, 16), (16u32, 1.0f32, &mut data))
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    exec.launch(&stream).unwrap();
    {
        let seen = data.as_slice().unwrap();
        assert_eq!(seen, [2.0f32; 16]);
        let err = exec.launch(&stream).unwrap_err();
        assert!(err.to_string().contains("drop the slice"), "{err}");
    }
    exec.launch(&stream).unwrap();
    assert_eq!(data.to_vec().unwrap(), vec![3.0f32; 16]);
    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
}

/// compute-sanitizer fails a binary that never calls CUDA; this gives it one call there.
#[test]
fn instrumented_under_compute_sanitizer() {
    tests::touch_cuda_for_compute_sanitizer();
}

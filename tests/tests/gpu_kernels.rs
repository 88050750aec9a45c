//! Modules, kernels and typed launches, checked against CPU references on fresh
//! pseudo-random inputs. The kernels are `runtime/kernels/test_kernels.cu`, embedded as PTX
//! (and, for sm_90 devices, as a cubin), with host implementations written below in Rust.
//!
//! Each shared scenario runs on the host backend in checked mode (in CI) and on CUDA device 0
//! (ignored without a GPU); device-specific ones (attributes, limits, JIT logs, cubins) are
//! CUDA-only.
//!
//! The tests of this binary take one lock: they share the process's context, and a few of
//! them read its state (attributes raised by another launch).

use std::sync::{Mutex, MutexGuard};

use gpu_pipeline::sys::CUresult;
use gpu_pipeline::{
    Bound, Bounds, Context, DeviceBuffer, Dim3, Error, HostKernel, Kernel, LaunchConfig, Module,
    Stream, TypedKernel,
};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");
const CUBIN_SM90: &[u8] = include_bytes!("../../runtime/kernels/test_kernels.sm_90.cubin");

type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);
type ReduceSum = (u32, &'static [f32], &'static mut [f32]);
type AddScalar = (u32, f32, &'static mut [f32]);

static GPU: Mutex<()> = Mutex::new(());

struct Fixture {
    _lock: MutexGuard<'static, ()>,
    ctx: Context,
    stream: Stream,
    module: Module,
}

fn fixture() -> Fixture {
    fixture_on(&Context::cuda(0).expect("a CUDA device"))
}

fn fixture_on(ctx: &Context) -> Fixture {
    let lock = GPU.lock().unwrap_or_else(|p| p.into_inner());
    let ctx = ctx.clone();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let module = Module::load_ptx(&ctx, PTX).unwrap().named("test_kernels");
    Fixture {
        _lock: lock,
        ctx,
        stream,
        module,
    }
}

/// The host implementations of `test_kernels.cu`: what one whole launch computes.
mod host_impl {
    pub fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
        let n = n as usize;
        for (y, x) in y[..n].iter_mut().zip(&x[..n]) {
            *y = a.mul_add(*x, *y);
        }
    }

    pub fn reduce_sum(n: u32, input: &[f32], out: &mut [f32]) {
        let sum: f64 = input[..n as usize].iter().map(|&v| f64::from(v)).sum();
        out[0] += sum as f32;
    }

    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }
}

fn saxpy(module: &Module) -> TypedKernel<Saxpy> {
    let bounds = Bounds::new()
        .names(&["n", "a", "x", "y"])
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
    .with_host(HostKernel::new(host_impl::saxpy))
}

fn add_scalar(module: &Module) -> TypedKernel<AddScalar> {
    let bounds = Bounds::new()
        .names(&["n", "value", "data"])
        .buffer(2, Bound::param(0));
    // SAFETY: add_scalar(unsigned n, float value, float* data), indexing data below n.
    unsafe {
        module
            .function("add_scalar")
            .unwrap()
            .typed_with_bounds::<AddScalar>(bounds)
            .unwrap()
    }
    .with_host(HostKernel::new(host_impl::add_scalar))
}

fn reduce_sum(module: &Module) -> TypedKernel<ReduceSum> {
    let bounds = Bounds::new()
        .names(&["n", "in", "out"])
        .buffer(1, Bound::param(0))
        .buffer(2, Bound::constant(1));
    // SAFETY: reduce_sum(unsigned n, const float* in, float* out), reading in below n and
    // writing only out[0].
    unsafe {
        module
            .function("reduce_sum")
            .unwrap()
            .typed_with_bounds::<ReduceSum>(bounds)
            .unwrap()
    }
    .with_host(HostKernel::new(host_impl::reduce_sum))
}

/// Runs each scenario `fn name(ctx: &Context)` on both backends: the host in checked mode
/// (asserting the race detector found nothing) and CUDA.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod host {
            $(
                #[test]
                fn $name() {
                    let ctx = gpu_pipeline::Context::host_checked();
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
    saxpy_matches_the_cpu_reference,
    reduce_sum_matches_the_cpu_reference,
    views_launch_on_their_sub_range_only,
    kernels_keep_their_module_loaded,
    a_missing_kernel_names_the_kernel_and_the_module,
    zero_extents_are_rejected_on_every_backend,
    saxpy_on_two_streams_with_an_event_between,
);

/// xorshift64*: a fresh, seeded stream of pseudo-random numbers per test.
struct Rng(u64);

impl Rng {
    fn seeded() -> Rng {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let seed = nanos | 1;
        eprintln!("rng seed {seed:#x}");
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in `[-1, 1)`.
    fn signed(&mut self) -> f32 {
        self.unit() * 2.0 - 1.0
    }
}

fn saxpy_matches_the_cpu_reference(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut rng = Rng::seeded();
    let n = 1_000_003usize; // not a multiple of the block
    let a = rng.signed() * 4.0;
    let x: Vec<f32> = (0..n).map(|_| rng.signed()).collect();
    // The tail past `n` is poisoned: the kernel must not write it.
    let tail = 61;
    let mut y: Vec<f32> = (0..n).map(|_| rng.signed()).collect();
    y.extend(std::iter::repeat_n(f32::NAN, tail));

    let x_dev = DeviceBuffer::from_slice(&f.stream, &x).unwrap();
    let mut y_dev = DeviceBuffer::from_slice(&f.stream, &y).unwrap();
    let kernel = saxpy(&f.module);
    kernel
        .launch(
            &f.stream,
            LaunchConfig::for_elements(n as u32, 256),
            (n as u32, a, &x_dev, &mut y_dev),
        )
        .unwrap();
    let out = y_dev.to_vec(&f.stream).unwrap();

    for i in 0..n {
        let expected = a.mul_add(x[i], y[i]);
        let tolerance = 1e-6 * expected.abs().max(1.0);
        assert!(
            (out[i] - expected).abs() <= tolerance,
            "y[{i}] = {} but a * x + y = {expected}",
            out[i]
        );
    }
    assert!(out[n..].iter().all(|v| v.is_nan()), "saxpy wrote past n");
}

fn reduce_sum_matches_the_cpu_reference(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut rng = Rng::seeded();
    let n = (1usize << 20) + 17;
    let input: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
    let expected: f64 = input.iter().map(|&v| f64::from(v)).sum();

    let in_dev = DeviceBuffer::from_slice(&f.stream, &input).unwrap();
    let mut out = DeviceBuffer::<f32>::zeros(&f.stream, 1).unwrap();
    let kernel = reduce_sum(&f.module);
    let block = 256u32;
    let config = LaunchConfig::for_elements(n as u32, block).with_shared_mem(block * 4);
    kernel
        .launch(&f.stream, config, (n as u32, &in_dev, &mut out))
        .unwrap();
    let sum = f64::from(out.to_vec(&f.stream).unwrap()[0]);
    assert!(
        (sum - expected).abs() <= 1e-3 * expected,
        "device sum {sum}, CPU sum {expected}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn dynamic_shared_memory_above_48_kib_is_raised_automatically() {
    let f = fixture();
    let kernel = unsafe {
        // SAFETY: as in reduce_sum_matches_the_cpu_reference.
        f.module
            .function("reduce_sum")
            .unwrap()
            .typed::<ReduceSum>()
            .unwrap()
    };
    let opt_in = kernel.kernel().limits().max_dynamic_shared_bytes();
    assert!(opt_in > 48 * 1024, "device opt-in limit {opt_in}");
    let n = 4096u32;
    let input = DeviceBuffer::from_slice(&f.stream, &vec![1.0f32; n as usize]).unwrap();
    let mut out = DeviceBuffer::<f32>::zeros(&f.stream, 1).unwrap();
    // 64 KiB per block: more than the default cap, which the launch raises on its own.
    let config = LaunchConfig::for_elements(n, 256).with_shared_mem(64 * 1024);
    kernel
        .launch(&f.stream, config, (n, &input, &mut out))
        .unwrap();
    assert_eq!(out.to_vec(&f.stream).unwrap(), [n as f32]);
    let attributes = kernel.kernel().attributes().unwrap();
    assert!(
        attributes.max_dynamic_shared_bytes >= 64 * 1024,
        "{attributes:?}"
    );
}

fn views_launch_on_their_sub_range_only(ctx: &Context) {
    let f = fixture_on(ctx);
    let mut data = DeviceBuffer::from_slice(&f.stream, &[0.0f32; 32]).unwrap();
    let kernel = add_scalar(&f.module);
    {
        let view = data.slice_mut(10..20).unwrap();
        kernel
            .launch(
                &f.stream,
                LaunchConfig::for_elements(10, 32),
                (10u32, 3.0f32, view),
            )
            .unwrap();
    }
    let out = data.to_vec(&f.stream).unwrap();
    for (i, v) in out.iter().enumerate() {
        let expected = if (10..20).contains(&i) { 3.0 } else { 0.0 };
        assert_eq!(*v, expected, "element {i}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_untyped_launch_takes_any_arguments() {
    let f = fixture();
    let mut data = DeviceBuffer::from_slice(&f.stream, &[1.0f32; 100]).unwrap();
    let kernel = f.module.function("add_scalar").unwrap();
    // SAFETY: add_scalar(unsigned n, float value, float* data), given in that order.
    unsafe {
        kernel
            .launch(
                &f.stream,
                LaunchConfig::for_elements(100, 64),
                (100u32, 0.5f32, &mut data),
            )
            .unwrap();
    }
    let empty = f.module.function("empty").unwrap();
    // SAFETY: empty() takes no parameters.
    unsafe {
        empty
            .launch(&f.stream, LaunchConfig::new(1, 1), ())
            .unwrap()
    };
    assert_eq!(data.to_vec(&f.stream).unwrap(), vec![1.5f32; 100]);
}

fn kernels_keep_their_module_loaded(ctx: &Context) {
    let f = fixture_on(ctx);
    let kernel = add_scalar(&f.module);
    drop(f.module);
    let mut data = DeviceBuffer::from_slice(&f.stream, &[2.0f32; 8]).unwrap();
    kernel
        .launch(
            &f.stream,
            LaunchConfig::new(1, 8),
            (8u32, 1.0f32, &mut data),
        )
        .unwrap();
    assert_eq!(data.to_vec(&f.stream).unwrap(), vec![3.0f32; 8]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn kernel_attributes_and_param_sizes_are_reported() {
    let f = fixture();
    let kernel = f.module.function("saxpy").unwrap();
    assert_eq!(kernel.name(), "saxpy");
    assert_eq!(kernel.module_name(), "test_kernels");
    let a = kernel.attributes().unwrap();
    assert!(a.num_regs > 0, "{a:?}");
    assert!(
        a.max_threads_per_block >= 256 && a.max_threads_per_block <= 1024,
        "{a:?}"
    );
    assert_eq!(a.static_shared_bytes, 0, "{a:?}");
    assert!(a.ptx_version >= 60, "{a:?}");
    let (major, minor) = f.ctx.device().unwrap().compute_capability().unwrap();
    assert_eq!(a.binary_version, major * 10 + minor, "{a:?}");
    assert_eq!(
        kernel.limits().max_threads_per_block,
        a.max_threads_per_block
    );
    assert_eq!(kernel.limits().max_block.z, 64);

    // Where the driver reports parameter sizes (CUDA 12.4+), a wrong declaration fails early.
    // Asking past the last parameter is a driver error on purpose: not under the sanitizer.
    if tests::skip_under_compute_sanitizer("probes past the last kernel parameter") {
        return;
    }
    match kernel.param_sizes() {
        Ok(sizes) => {
            assert_eq!(sizes, [4, 4, 8, 8]);
            // SAFETY: rejected before any launch.
            let err = unsafe { kernel.typed::<(u32, f32, &[f32], &mut [f32], u32)>() }.unwrap_err();
            assert!(
                err.to_string()
                    .contains("the signature declares 5 parameters but the kernel takes 4"),
                "{err}"
            );
            // SAFETY: rejected before any launch.
            let err = unsafe { kernel.typed::<(u32, f64, &[f32], &mut [f32])>() }.unwrap_err();
            assert!(err.to_string().contains("parameter 1"), "{err}");
        }
        Err(Error::Unsupported { .. }) => eprintln!("driver older than 12.4: no param info"),
        Err(e) => panic!("param_sizes: {e}"),
    }
    assert_eq!(f.module.kernel_names().len(), 5);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_ptx_that_does_not_load_reports_the_jit_log() {
    if tests::skip_under_compute_sanitizer("loads an invalid PTX image on purpose") {
        return;
    }

    let f = fixture();
    let garbage = ".version 7.0\n.target sm_75\n.address_size 64\n\n\
                   .visible .entry broken()\n{\n\tthis is not an instruction;\n\tret;\n}\n";
    let err = Module::load_ptx(&f.ctx, garbage).unwrap_err();
    let code = err.code();
    assert!(
        code == Some(CUresult::CUDA_ERROR_INVALID_PTX)
            || code == Some(CUresult::CUDA_ERROR_INVALID_IMAGE),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("cuModuleLoadDataEx"), "{text}");
    assert!(text.contains("JIT log"), "{text}");
    // A NUL inside the text is refused before the driver sees it.
    let err = Module::load_ptx(&f.ctx, "abc\0def").unwrap_err();
    assert!(matches!(err, Error::InvalidImage { .. }), "{err:?}");
}

fn a_missing_kernel_names_the_kernel_and_the_module(ctx: &Context) {
    if ctx.backend() == gpu_pipeline::Backend::Cuda
        && tests::skip_under_compute_sanitizer("asks the driver for a missing kernel on purpose")
    {
        return;
    }

    let f = fixture_on(ctx);
    let err = f.module.function("no_such_kernel").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(text.contains("`no_such_kernel`"), "{text}");
    assert!(text.contains("`test_kernels`"), "{text}");
    assert!(text.contains("`saxpy`"), "{text}");
}

fn zero_extents_are_rejected_on_every_backend(ctx: &Context) {
    let f = fixture_on(ctx);
    let kernel = add_scalar(&f.module);
    let mut data = DeviceBuffer::<f32>::zeros(&f.stream, 16).unwrap();
    for config in [LaunchConfig::new(0, 32), LaunchConfig::new(1, (32, 0, 1))] {
        let err = kernel
            .launch(&f.stream, config, (16u32, 1.0f32, &mut data))
            .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert!(text.contains("zero extent"), "{text}");
        assert!(
            text.contains("`add_scalar` of module `test_kernels`"),
            "{text}"
        );
    }
    assert_eq!(data.to_vec(&f.stream).unwrap(), vec![0.0f32; 16]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_launch_configurations_are_rejected_with_the_limit() {
    let f = fixture();
    let kernel = add_scalar(&f.module);
    let mut data = DeviceBuffer::<f32>::zeros(&f.stream, 16).unwrap();
    let mut launch = |config: LaunchConfig| {
        kernel
            .launch(&f.stream, config, (16u32, 1.0f32, &mut data))
            .unwrap_err()
    };
    let cases = [
        (LaunchConfig::new(0, 32), "zero extent"),
        (LaunchConfig::new(1, (32, 0, 1)), "zero extent"),
        (LaunchConfig::new(1, 2048), "threads per block"),
        (LaunchConfig::new(1, (1, 1, 65)), "z extent 65"),
        (LaunchConfig::new((1, 1 << 20, 1), 32), "y extent 1048576"),
        (
            LaunchConfig::new(1, 32).with_shared_mem(16 << 20),
            "dynamic shared memory",
        ),
    ];
    for (config, expected) in cases {
        let err = launch(config);
        let text = err.to_string();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert!(text.contains(expected), "{config:?}: {text}");
        assert!(
            text.contains("`add_scalar` of module `test_kernels`"),
            "{text}"
        );
    }
    // Nothing was enqueued by the refused launches.
    assert_eq!(data.to_vec(&f.stream).unwrap(), vec![0.0f32; 16]);
    assert_eq!(kernel.kernel().limits().max_grid.y, 65535);
    let _ = Dim3::default();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cubin_loads_and_runs_on_sm_90() {
    let f = fixture();
    assert!(Module::load_cubin(&f.ctx, b"not a cubin").is_err());
    assert!(Module::load_fatbin(&f.ctx, b"not a fatbin").is_err());
    let cc = f.ctx.device().unwrap().compute_capability().unwrap();
    if cc != (9, 0) {
        eprintln!("skipped: the embedded cubin is for sm_90, this device is {cc:?}");
        return;
    }
    // An unaligned copy of the image exercises the aligned re-copy.
    let mut unaligned = vec![0u8; CUBIN_SM90.len() + 1];
    unaligned[1..].copy_from_slice(CUBIN_SM90);
    let module = Module::load_cubin(&f.ctx, &unaligned[1..])
        .unwrap()
        .named("cubin");
    let mut names = module.kernel_names().to_vec();
    names.sort();
    assert_eq!(
        names,
        [
            "add_scalar",
            "empty",
            "reduce_sum",
            "saxpy",
            "write_out_of_bounds"
        ]
    );
    let kernel: Kernel = module.function("add_scalar").unwrap();
    // SAFETY: add_scalar(unsigned n, float value, float* data).
    let kernel = unsafe { kernel.typed::<AddScalar>().unwrap() };
    let mut data = DeviceBuffer::from_slice(&f.stream, &[1.0f32; 64]).unwrap();
    kernel
        .launch(
            &f.stream,
            LaunchConfig::new(1, 64),
            (64u32, 41.0f32, &mut data),
        )
        .unwrap();
    assert_eq!(data.to_vec(&f.stream).unwrap(), vec![42.0f32; 64]);
}

fn saxpy_on_two_streams_with_an_event_between(ctx: &Context) {
    let f = fixture_on(ctx);
    let other = Stream::non_blocking(&f.ctx).unwrap();
    let kernel = saxpy(&f.module);
    let n = 4096u32;
    let x = DeviceBuffer::from_slice(&f.stream, &vec![1.0f32; n as usize]).unwrap();
    let mut y = DeviceBuffer::from_slice(&f.stream, &vec![0.0f32; n as usize]).unwrap();
    let config = LaunchConfig::for_elements(n, 128);
    kernel
        .launch(&f.stream, config, (n, 2.0f32, &x, &mut y))
        .unwrap();
    other.join(&f.stream).unwrap();
    kernel
        .launch(&other, config, (n, 3.0f32, &x, &mut y))
        .unwrap();
    assert_eq!(y.to_vec(&other).unwrap(), vec![5.0f32; n as usize]);
}

//! A `call` statement whose function launches one of our kernels through its `TypedStream`
//! between two `launch` statements: the called launch's kernel node is the function's, like a
//! library's, so the setters of the captured step still update exactly the statements' nodes.
//! All three launches run the same kernel, so a setter that picked the wrong node would not be
//! refused: it would change the result, which is checked.

use std::cell::RefCell;

use gpu_pipeline::{
    Context, CpuKernel, DeviceBuffer, Module, PinnedBuffer, Result, TypedKernel, TypedStream,
    gpu_pipeline,
};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");

fn add_scalar_on_cpu(n: u32, value: f32, data: &mut [f32]) {
    for v in &mut data[..n as usize] {
        *v += value;
    }
}

gpu_pipeline! {
    /// `data += first`, then a called function's own `data += inner`, then `data += second`.
    pub pipeline Layered {
        streams { compute, copy(non_blocking) }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = add_scalar_on_cpu;
        }
        params {
            n: u32,
            first: f32,
            inner: f32,
            second: f32,
            data: &mut DeviceBuffer<f32>,
            out: &mut PinnedBuffer<f32>,
        }
        stage work on compute {
            launch k::add_scalar(n, first, data) grid n.div_ceil(128) block 128;
            call add_inner(n, inner, data) writes(data);
            launch k::add_scalar(n, second, data) grid n.div_ceil(128) block 128;
        }
        stage download on copy {
            copy data -> out;
        }
    }
}

type AddScalar = (u32, f32, &'static mut [f32]);

thread_local! {
    /// The called function's own kernel: loaded at its first (eager) call, per test thread
    /// (each test uses one context on its own thread).
    static INNER: RefCell<Option<TypedKernel<AddScalar>>> = const { RefCell::new(None) };
}

/// What the `call` runs: its own launch of `add_scalar`, as a library would launch its kernels.
fn add_inner(
    stream: &TypedStream<'_, LayeredCompute>,
    n: u32,
    inner: f32,
    data: &mut DeviceBuffer<f32>,
) -> Result<()> {
    let kernel = INNER.with(|cell| -> Result<TypedKernel<AddScalar>> {
        if let Some(kernel) = cell.borrow().as_ref() {
            return Ok(kernel.clone());
        }
        let module = Module::load_ptx(stream.context(), PTX)?;
        // SAFETY: `add_scalar(unsigned n, float value, float* data)` writes `data[i]` for
        // `i < n` only, and `n` is the buffer's length below.
        let kernel = unsafe { module.function("add_scalar")?.typed::<AddScalar>()? }
            .with_cpu(CpuKernel::new(add_scalar_on_cpu));
        *cell.borrow_mut() = Some(kernel.clone());
        Ok(kernel)
    })?;
    let config = gpu_pipeline::LaunchConfig::new(n.div_ceil(128), 128);
    stream.launch(&kernel, config, (n, inner, data))
}

fn params<'a>(
    n: u32,
    data: &'a mut DeviceBuffer<f32>,
    out: &'a mut PinnedBuffer<f32>,
) -> LayeredParams<'a> {
    LayeredParams {
        n,
        first: 1.0,
        inner: 10.0,
        second: 100.0,
        data,
        out,
    }
}

fn setters_update_the_statements_nodes(ctx: &Context) {
    let n = 1000u32;
    let mut data = DeviceBuffer::<f32>::alloc(ctx, n as usize).unwrap();
    let mut out = PinnedBuffer::<f32>::zeros(ctx, n as usize).unwrap();
    let mut pipeline = Layered::new(ctx).unwrap();
    let zeros = PinnedBuffer::<f32>::zeros(ctx, n as usize).unwrap();
    let upload = gpu_pipeline::Stream::new(ctx).unwrap();
    upload.copy_htod(&zeros, &mut data).unwrap();
    upload.synchronize().unwrap();

    pipeline
        .run(params(n, &mut data, &mut out))
        .unwrap()
        .wait()
        .unwrap();
    let mut want = 111.0f32;
    assert!(out.to_vec().unwrap().iter().all(|&v| v == want));

    {
        let mut graph = pipeline.capture(params(n, &mut data, &mut out)).unwrap();
        graph.launch().unwrap();
        want += 111.0;
        // `second` feeds only the last launch statement: its node is updated in place. Had
        // the called launch's node counted as a statement's, this would change `inner`'s.
        graph.set_second(1000.0).unwrap();
        graph.launch().unwrap();
        want += 1011.0;
        // `first` feeds the first statement.
        graph.set_first(-1.0).unwrap();
        graph.launch().unwrap();
        want += 1009.0;
        graph.synchronize().unwrap();
    }
    let got = out.to_vec().unwrap();
    assert!(
        got.iter().all(|&v| v == want),
        "got {}, want {want}",
        got[0]
    );
}

#[test]
fn cpu_setters_update_the_statements_nodes() {
    let ctx = Context::cpu_checked();
    setters_update_the_statements_nodes(&ctx);
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_setters_update_the_statements_nodes() {
    setters_update_the_statements_nodes(&Context::cuda(0).unwrap());
}

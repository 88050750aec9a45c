//! A kernel declaration is checked against the parameter list its PTX image declares, on
//! both backends, when the pipeline (or a typed kernel) is created: a three-parameter
//! declaration of the four-parameter `saxpy` fails on the CPU backend as it would on a GPU,
//! naming the kernel and both lists, rather than running "fine" in CI. So does an integer
//! declared where the image takes a float (two scalars of one width swapped).

use gpu_pipeline::{Context, DeviceBuffer, Error, Module, gpu_pipeline};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");

mod cpu_impl {
    pub fn saxpy_without_a(n: u32, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += x[i];
        }
    }

    pub fn saxpy_swapped(a: f32, n: u32, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += a * x[i];
        }
    }

    pub fn saxpy_f64(n: u32, a: f64, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += a as f32 * x[i];
        }
    }
}

gpu_pipeline! {
    /// Declares `saxpy(n, a, x, y)` without its `a`.
    pipeline MissingParam {
        streams { compute }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, x: &[f32; n], y: &mut [f32; n]) cpu = cpu_impl::saxpy_without_a;
        }
        params { n: u32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage axpy on compute { launch k::saxpy(n, x, y) grid n.div_ceil(256) block 256; }
    }
}

gpu_pipeline! {
    /// Declares `saxpy`'s `float a` as an `f64`.
    pipeline WrongWidth {
        streams { compute }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f64, x: &[f32; n], y: &mut [f32; n]) cpu = cpu_impl::saxpy_f64;
        }
        params { n: u32, a: f64, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage axpy on compute { launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256; }
    }
}

gpu_pipeline! {
    /// Declares `saxpy(unsigned n, float a, ..)` as `(a: f32, n: u32, ..)`: the sizes agree.
    pipeline SwappedScalars {
        streams { compute }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(a: f32, n: u32, x: &[f32; n], y: &mut [f32; n]) cpu = cpu_impl::saxpy_swapped;
        }
        params { n: u32, a: f32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage axpy on compute { launch k::saxpy(a, n, x, y) grid n.div_ceil(256) block 256; }
    }
}

fn refusal_message(err: Error) -> String {
    let text = err.report().to_string();
    assert!(
        matches!(
            err.root(),
            Error::InvalidArgument {
                call: "Kernel::typed",
                ..
            }
        ),
        "{err:?}"
    );
    text
}

fn missing_param_is_refused(ctx: &Context) {
    let err = MissingParam::new(ctx).map(|_| ()).unwrap_err();
    let message = refusal_message(err);
    assert!(message.contains("`saxpy` of module"), "{message}");
    assert!(
        message.contains("the signature declares 3 parameters but the kernel takes 4"),
        "{message}"
    );
    // Both lists: the declaration's and the image's.
    assert!(
        message.contains("declared (scalar (4 B), &[_] (8 B), &mut [_] (8 B))"),
        "{message}"
    );
    assert!(
        message.contains(
            "the image's `.entry` takes (.u32 saxpy_param_0 (4 B), .f32 saxpy_param_1 (4 B), \
             .u64 saxpy_param_2 (8 B), .u64 saxpy_param_3 (8 B))"
        ),
        "{message}"
    );
}

fn wrong_width_is_refused(ctx: &Context) {
    let message = refusal_message(WrongWidth::new(ctx).map(|_| ()).unwrap_err());
    assert!(
        message.contains("parameter 1 is declared 8 bytes wide but the kernel's is 4 bytes"),
        "{message}"
    );
}

fn swapped_scalars_are_refused(ctx: &Context) {
    let message = refusal_message(SwappedScalars::new(ctx).map(|_| ()).unwrap_err());
    assert!(
        message.contains(
            "parameter 1 is declared an integer (`u32`) but the kernel's `saxpy_param_1` is \
             `.f32`, a floating-point number; declare it `f32`"
        ),
        "{message}"
    );
    assert!(
        message.contains("check the order of the parameters"),
        "{message}"
    );
}

fn module_lookup_is_checked(ctx: &Context) {
    let module = Module::load_ptx(ctx, PTX).unwrap().named("test_kernels");
    let saxpy = module.function("saxpy").unwrap();
    // SAFETY: never launched: the declaration is refused.
    let err = unsafe { saxpy.typed::<(u32, &[f32], &mut [f32])>() }.unwrap_err();
    let message = refusal_message(err);
    assert!(
        message.contains("`saxpy` of module `test_kernels`"),
        "{message}"
    );
    assert!(message.contains("declares 3 parameters"), "{message}");
    // The right declaration passes.
    // SAFETY: never launched here; the declaration matches test_kernels.cu.
    unsafe { saxpy.typed::<(u32, f32, &[f32], &mut [f32])>() }.unwrap();
    // SAFETY: as above; `empty()` takes nothing.
    unsafe { module.function("empty").unwrap().typed::<()>() }.unwrap();
    // SAFETY: never launched: refused.
    assert!(unsafe { module.function("empty").unwrap().typed::<(u32,)>() }.is_err());
}

#[test]
fn cpu_a_pipeline_missing_a_parameter_is_refused() {
    missing_param_is_refused(&Context::cpu());
}

#[test]
fn cpu_a_pipeline_with_a_wrong_width_is_refused() {
    wrong_width_is_refused(&Context::cpu());
}

#[test]
fn cpu_a_pipeline_with_swapped_scalars_of_one_width_is_refused() {
    swapped_scalars_are_refused(&Context::cpu());
}

#[test]
fn cpu_a_typed_module_lookup_is_checked() {
    module_lookup_is_checked(&Context::cpu());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_mismatched_signatures_are_refused() {
    let ctx = Context::cuda(0).expect("a CUDA device");
    missing_param_is_refused(&ctx);
    wrong_width_is_refused(&ctx);
    swapped_scalars_are_refused(&ctx);
    module_lookup_is_checked(&ctx);
}

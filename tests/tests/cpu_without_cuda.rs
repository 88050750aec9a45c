//! CPU-only development needs no CUDA toolchain: a pipeline whose kernels are CUDA C source
//! (`cuda_c(include_str!(..))`), with a CPU implementation for each, builds and runs on the
//! CPU backend with no PTX file, no NVRTC and no `nvrtc` feature (this crate does not enable
//! it). On CUDA the source is compiled by NVRTC; without the feature that is a clear error.

use gpu_pipeline::{Context, DeviceBuffer, Error, PinnedBuffer, gpu_pipeline};

fn scale_on_cpu(n: u32, factor: f32, data: &mut [f32]) {
    for x in &mut data[..n as usize] {
        *x *= factor;
    }
}

gpu_pipeline! {
    /// Scales a buffer and copies it out.
    pipeline Scale {
        streams { compute }
        unsafe kernels k = cuda_c(include_str!("../cuda_source/scale.cu")) {
            fn scale(n: u32, factor: f32, data: &mut [f32; n]) cpu = scale_on_cpu;
        }
        params { n: u32, factor: f32, data: &mut DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage scale on compute { launch k::scale(n, factor, data) grid n.div_ceil(256) block 256; }
        stage download on compute { copy data -> out; }
    }
}

#[test]
fn a_cuda_c_pipeline_builds_and_runs_on_the_cpu_backend_without_a_toolchain() {
    for ctx in [Context::cpu(), Context::cpu_checked()] {
        let stream = gpu_pipeline::Stream::new(&ctx).unwrap();
        let mut data = DeviceBuffer::from_slice(&stream, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let mut out = PinnedBuffer::<f32>::zeros(&ctx, 4).unwrap();
        let mut pipeline = Scale::new(&ctx).unwrap();
        pipeline
            .run(ScaleParams {
                n: 4,
                factor: 2.5,
                data: &mut data,
                out: &mut out,
            })
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(out.to_vec().unwrap(), [2.5, 5.0, 7.5, 10.0]);
        // Captured and replayed as well.
        let mut graph = pipeline
            .capture(ScaleParams {
                n: 4,
                factor: 2.0,
                data: &mut data,
                out: &mut out,
            })
            .unwrap();
        graph.launch().unwrap();
        graph.synchronize().unwrap();
        drop(graph);
        assert_eq!(out.to_vec().unwrap(), [5.0, 10.0, 15.0, 20.0]);
        assert!(ctx.races().is_empty(), "{:?}", ctx.races());
    }
}

#[test]
fn a_kernel_the_source_does_not_define_is_the_usual_error() {
    let err = gpu_pipeline::__private_0_1::compile_cuda_c(
        &Context::cpu(),
        include_str!("../cuda_source/scale.cu"),
        "scale.cu",
    )
    .unwrap()
    .function("missing")
    .unwrap_err();
    assert!(err.to_string().contains("`missing`"), "{err}");
}

/// On a GPU, without the `nvrtc` feature, the source cannot be compiled: a clear error, not a
/// failure at launch.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_without_the_nvrtc_feature_is_a_clear_error() {
    let ctx = Context::cuda(0).expect("a CUDA device");
    let err = Scale::new(&ctx).map(|_| ()).unwrap_err();
    assert!(
        matches!(
            err.root(),
            Error::Unsupported {
                symbol: "nvrtc",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("nvrtc"), "{err}");
}

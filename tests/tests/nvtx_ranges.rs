//! Stages as NVTX ranges: named `Pipeline/stage`, opened only on the CUDA backend while a
//! profiler's injection library is loaded (`NVTX_INJECTION64_PATH`), nothing otherwise.

use gpu_pipeline::{Context, DeviceBuffer, gpu_pipeline, nvtx};

fn scale(n: u32, factor: f32, data: &mut [f32]) {
    for x in &mut data[..n as usize] {
        *x *= factor;
    }
}

gpu_pipeline! {
    /// One stage.
    pipeline Named {
        streams { compute }
        unsafe kernels k = cuda_c(include_str!("../cuda_source/scale.cu")) {
            fn scale(n: u32, factor: f32, data: &mut [f32; n]) cpu = scale;
        }
        params { n: u32, data: &mut DeviceBuffer<f32> }
        stage double on compute { launch k::scale(n, 2.0f32, data) grid 1 block 32; }
    }
}

#[test]
fn stage_ranges_are_named_pipeline_slash_stage() {
    assert_eq!(
        nvtx::stage_range_name(Named::NAME, "double"),
        "Named/double"
    );
    assert_eq!(Named::STAGES, ["double"]);
}

#[test]
fn the_cpu_backend_opens_no_range_and_runs_as_before() {
    let ctx = Context::cpu();
    let stream = gpu_pipeline::Stream::new(&ctx).unwrap();
    assert!(gpu_pipeline::__private_0_1::stage_range(&stream, "Named", "double").is_none());
    let mut data = DeviceBuffer::from_slice(&stream, &[1.0f32, 2.0]).unwrap();
    let mut pipeline = Named::new(&ctx).unwrap();
    pipeline
        .run(NamedParams {
            n: 2,
            data: &mut data,
        })
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(data.to_vec(&stream).unwrap(), [2.0, 4.0]);
}

/// Under `nsys profile --trace=cuda,nvtx` (which sets `NVTX_INJECTION64_PATH`) the ranges
/// are recorded: the report lists `Named/double`. Without a profiler, none is opened.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_stages_are_ranges_while_a_profiler_listens() {
    let ctx = Context::cuda(0).expect("a CUDA device");
    let stream = gpu_pipeline::Stream::new(&ctx).unwrap();
    let profiled = std::env::var_os(nvtx::NVTX_INJECTION_ENV).is_some();
    assert_eq!(nvtx::is_active(), profiled);
    let range = gpu_pipeline::__private_0_1::stage_range(&stream, "Named", "double");
    assert_eq!(range.is_some(), profiled);
    drop(range);
}

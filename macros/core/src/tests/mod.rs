//! Unit tests of every phase, on pipelines given as source text.
//!
//! Inputs are parsed with `syn::parse_str` rather than `quote!` so their spans carry source
//! positions: with proc-macro2's `span-locations` feature enabled (not on by default here),
//! `Span::source_text` returns the offending token and [`assert_error`] checks it too; without
//! it, the tests check messages only.

mod accesses;
mod bounds;
mod checks;
mod comm_ranges;
mod conditionals;
mod control;
mod dot;
mod iterations;
mod kernel_set;
mod language;
mod limits;
mod lowering;
mod multi;
mod parse;
mod properties;
mod protocols;
mod ranges;
mod stub;
mod windows;

use crate::lower::{BufferId, Pipeline, StageId, StreamId};
use crate::{analyse, ast};

/// The heat-diffusion example of the crate documentation.
pub const HEAT: &str = r#"
    /// One explicit Euler step of 2-D heat diffusion, with a snapshot streamed back.
    pub pipeline HeatStep {
        streams { compute(priority = high), copy(non_blocking) }
        unsafe kernels heat = ptx(include_str!("../kernels/heat.ptx")) {
            /// One stencil application.
            fn stencil(nx: u32, ny: u32, alpha: f32, src: &[f32; unbounded], dst: &mut [f32; unbounded])
                host = crate::heat_host::stencil;
        }
        params {
            nx: u32, ny: u32, alpha: f32,
            field: &mut DeviceBuffer<f32>,
            next: &mut DeviceBuffer<f32>,
            snapshot: &mut PinnedBuffer<f32>,
            done: &mut FlagCell,
        }
        scratch { tmp: DeviceBuffer<f32> = (nx * ny) as usize }
        stage step on compute {
            launch heat::stencil(nx, ny, alpha, field, next) grid (nx * ny).div_ceil(256) block 256;
        }
        stage save on copy { copy next -> snapshot; }
        stage clear on compute { fill tmp = 0.0; }
        stage publish on copy after clear { write done = 1; }
        concurrent(save, clear);
    }
"#;

/// A small pipeline with two streams, a generic kernel and one buffer of each kind, with
/// `items` appended to its body.
pub fn with(items: &str) -> String {
    format!(
        r#"pipeline P {{
            streams {{ s1, s2 }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn scale(n: u32, alpha: f32, src: &[f32; unbounded], dst: &mut [f32; unbounded]);
                fn touch(buf: &mut [f32]);
                fn wide(x: f64, src: &[f64]);
                fn sum(x: &[f32], y: &[f32], out: &mut [f32]);
            }}
            params {{
                n: u32, alpha: f32, big: u64,
                a: &mut DeviceBuffer<f32>, b: &mut DeviceBuffer<f32>, c: &DeviceBuffer<f32>,
                d: &mut DeviceBuffer<f64>,
                h: &mut PinnedBuffer<f32>, hc: &PinnedBuffer<f32>,
                v: &mut Vec<f32>, sl: &[f32],
                flag: &mut FlagCell, shared_flag: &FlagCell,
                handle: &mut BlasHandle,
            }}
            {items}
        }}"#
    )
}

/// Parses a pipeline.
pub fn parse(source: &str) -> syn::Result<ast::Pipeline> {
    syn::parse_str(source)
}

/// Parses, checks and lowers a pipeline. The syntax tree is leaked so that the lowered
/// pipeline, which refers to it, can outlive this call (a few kilobytes per test).
pub fn compile(source: &str) -> syn::Result<Pipeline<'static>> {
    let input: &'static ast::Pipeline = Box::leak(Box::new(parse(source)?));
    analyse(input)
}

/// Lowers a pipeline that must be valid.
pub fn lower_ok(source: &str) -> Pipeline<'static> {
    match compile(source) {
        Ok(pipeline) => pipeline,
        Err(error) => panic!("unexpected errors: {:#?}", messages(&error)),
    }
}

/// Every message of a combined error.
pub fn messages(error: &syn::Error) -> Vec<String> {
    error
        .clone()
        .into_iter()
        .map(|error| error.to_string())
        .collect()
}

/// Every error of compiling `source`, which must fail.
pub fn errors(source: &str) -> Vec<String> {
    match compile(source) {
        Ok(_) => panic!("expected errors, but the pipeline compiled"),
        Err(error) => messages(&error),
    }
}

/// Compiling `source` fails with exactly one error, `message`, on the token `token` (checked
/// when spans carry source text).
#[track_caller]
pub fn assert_error(source: &str, message: &str, token: &str) {
    let error = match compile(source) {
        Ok(_) => panic!("expected `{message}`, but the pipeline compiled"),
        Err(error) => error,
    };
    let all = messages(&error);
    assert_eq!(all, [message], "messages");
    if let Some(text) = error.span().source_text() {
        assert_eq!(text, token, "span of `{message}`");
    }
}

/// A stage id, for short expectations.
pub fn stage(id: usize) -> StageId {
    StageId(id)
}

/// A stream id.
pub fn stream(id: usize) -> StreamId {
    StreamId(id)
}

/// A buffer id.
pub fn buffer(id: usize) -> BufferId {
    BufferId(id)
}

/// The GPU bundle also runs every test binary under compute-sanitizer, which fails a binary
/// that never calls CUDA: there (only), this one calls `cuInit` through the driver library.
#[test]
#[allow(
    unsafe_code,
    reason = "dlopen and cuInit, only under compute-sanitizer"
)]
fn instrumented_under_compute_sanitizer() {
    let under_sanitizer = std::env::var_os("NVTX_INJECTION64_PATH")
        .is_some_and(|path| path.to_string_lossy().contains("sanitizer"));
    if !under_sanitizer {
        return;
    }
    // SAFETY: loading the CUDA driver library runs its initialisers, which have no
    // preconditions.
    let Ok(library) = (unsafe { libloading::Library::new("libcuda.so.1") }) else {
        return;
    };
    // SAFETY: `cuInit` has this signature in every CUDA driver.
    if let Ok(cu_init) = unsafe { library.get::<unsafe extern "C" fn(u32) -> i32>(b"cuInit\0") } {
        // SAFETY: cuInit takes flags that must be 0.
        assert_eq!(unsafe { cu_init(0) }, 0);
    }
}

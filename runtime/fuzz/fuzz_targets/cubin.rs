//! Arbitrary bytes as a cubin: the check must never panic (libFuzzer reports a panic as a
//! crash). Seed the corpus with `runtime/kernels/*.cubin` to start from valid images.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gpu_pipeline::image::check_cubin(data);
});

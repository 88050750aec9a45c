//! Arbitrary bytes as a fatbin: the check must never panic (libFuzzer reports a panic as a
//! crash).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gpu_pipeline::image::check_fatbin(data);
});

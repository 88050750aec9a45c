//! Arbitrary text as PTX: the check must never panic, and what it accepts has no NUL and
//! does not start like a binary image.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if gpu_pipeline::image::check_ptx(text).is_ok() {
        assert!(!text.contains('\0'));
        assert!(!text.starts_with("\x7fELF"));
    }
});

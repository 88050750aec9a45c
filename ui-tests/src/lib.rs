//! trybuild cases for `gpu_pipeline!`; see `tests/ui.rs` and `README.md`.

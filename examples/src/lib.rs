//! Host implementations and shared helpers for the example programs in `examples/examples/`.

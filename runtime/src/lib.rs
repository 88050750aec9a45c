//! gpu-pipeline: safe multi-stream CUDA.
pub use gpu_pipeline_macros::gpu_pipeline;

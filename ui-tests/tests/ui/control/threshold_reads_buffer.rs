//! A threshold computed from a buffer on the host: it is read when the step is enqueued,
//! before the stages that write it run (class 3). Use a scalar param.

use gpu_pipeline::{DeviceBuffer, FlagCell, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { tol: f32, every: u32, residual: &mut DeviceBuffer<f32>, counts: &mut DeviceBuffer<u64>, snapshot: &mut PinnedBuffer<f32>, flag: &mut FlagCell<u32> }
        stage solve on main {
            while residual > snapshot.len() as f32 + snapshot.as_slice().map(|s| s[0]).unwrap_or(0.0) max 10 {
                launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
            }
        }
    }
}

fn main() {}

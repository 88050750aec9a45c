//! A condition that is neither `buffer OP value` nor `step % k == r`.

use gpu_pipeline::{DeviceBuffer, FlagCell, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { tol: f32, every: u32, residual: &mut DeviceBuffer<f32>, counts: &mut DeviceBuffer<u64>, snapshot: &mut PinnedBuffer<f32>, flag: &mut FlagCell<u32> }
        stage solve on main {
            if residual + 1.0 {
                launch k::add_scalar(1u32, -1.0f32, residual) grid 1u32 block 1u32;
            }
        }
    }
}

fn main() {}

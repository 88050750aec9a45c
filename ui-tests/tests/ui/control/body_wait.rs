//! A flag `wait` inside a device loop: stream memory operations are not conditional body
//! nodes; wait before the loop instead.

use gpu_pipeline::{DeviceBuffer, FlagCell, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { tol: f32, every: u32, residual: &mut DeviceBuffer<f32>, counts: &mut DeviceBuffer<u64>, snapshot: &mut PinnedBuffer<f32>, flag: &mut FlagCell<u32> }
        stage solve on main {
            while residual > tol max 10 {
                wait flag == 1;
            }
        }
    }
}

fn main() {}

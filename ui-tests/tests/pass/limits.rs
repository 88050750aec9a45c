//! Launch values at CUDA's limits are accepted: 1024 threads per block, 64 in z, 65535
//! blocks in y, 227 KiB of dynamic shared memory, non-constant values (checked by the runtime),
//! and priorities 0 and below.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Edges {
        streams { main(priority = -1), side(priority = 0) }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, threads: u32, y: &mut DeviceBuffer<f32> }
        scratch { partials: DeviceBuffer<f32> = n as usize }
        stage big on main {
            fill partials = 0.0;
            launch k::add_scalar(n, 1.0, y) grid (n, 65_535, 1) block (16, 1, 64) shared 227 * 1024;
            launch k::saxpy(n, 1.0, partials, y) grid n block (32, 32);
            launch k::add_scalar(n, 1.0, y) grid n block threads * 4 shared threads * 8;
        }
    }
}

fn step(ctx: &Context, y: &mut DeviceBuffer<f32>) -> Result<()> {
    Edges::new(ctx)?.run(EdgesParams { n: 64, threads: 64, y })?.wait()
}

fn main() {
    let _ = step;
}

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Overlap {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { f: &mut DeviceBuffer<f32>, xs: &mut [DeviceBuffer<f32>] }
        stage shift on main { copy f[0..6] -> f[4..10]; }
        stage halves on main { launch k::saxpy(4, 1.0, f[0..4], f[2..]) grid 1u32 block 32u32; }
        stage element on main { copy xs[1][0..3] -> xs[1][2..5]; }
    }
}

fn main() {}

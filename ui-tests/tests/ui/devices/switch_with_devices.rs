//! A device `switch` in a pipeline over two devices: such a step is captured from its streams,
//! where no conditional node can be made. Decide on the host, or use one rank per GPU.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Split {
        devices { gpu0, gpu1 }
        streams { main, other on gpu1 }
        params { mode: &mut DeviceBuffer<u32>, a: &mut DeviceBuffer<f32>, b: &mut DeviceBuffer<f32> on gpu1 }
        stage pick on main {
            switch mode {
                0 => { fill a = 0.0; }
                1 => { fill a = 1.0; }
            }
        }
        stage zero on other { fill b = 0.0; }
    }
}

fn main() {}

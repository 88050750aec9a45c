//! A flag `write` inside a `do ... while` body: a stream memory operation is not a conditional
//! body node. Write the flag before or after the loop, or `fill` a device buffer inside it.

use gpu_pipeline::{DeviceBuffer, FlagCell, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Solve {
        streams { main }
        params { residual: &mut DeviceBuffer<f32>, flag: &mut FlagCell<u32> }
        stage solve on main {
            do {
                fill residual = 0.0;
                write flag = 1;
            } while residual > 0.5f32 max 10;
        }
    }
}

fn main() {}

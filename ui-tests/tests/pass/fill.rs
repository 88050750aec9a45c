//! `fill` on param and scratch device buffers, with literal and computed values.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { value: f32, y: &mut DeviceBuffer<f32>, counts: &mut DeviceBuffer<u32> }
        scratch { tmp: DeviceBuffer<u8> = 64 }
        stage clear on main {
            fill y = value * 2.0;
            fill counts = 0;
            fill tmp = 0xff;
        }
    }
}

fn step(ctx: &Context, y: &mut DeviceBuffer<f32>, counts: &mut DeviceBuffer<u32>) -> Result<()> {
    let mut pipeline = Clear::new(ctx)?;
    pipeline.run(ClearParams { value: 0.5, y, counts })?.wait()
}

fn main() {
    let _ = step;
}

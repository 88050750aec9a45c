//! A cast in a range or a flag value means what Rust's `as` means: `(260u32 as u8) as usize`
//! is 4, so the copy's ranges are apart, and `(256u32 as u8) as u32` writes 0.

use gpu_pipeline::{Context, DeviceBuffer, FlagCell, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Wrapped {
        streams { produce, consume }
        params { f: &mut DeviceBuffer<f32> }
        scratch { t: DeviceBuffer<f32> = 16, done: FlagCell }
        stage shift on produce {
            copy f[0..4] -> f[(260u32 as u8) as usize..8];
            fill t[0..(272u32 as u8) as usize] = 0.0;
            write done = (256u32 as u8) as u32;
        }
        stage receive on consume {
            wait done == 0;
            copy t[0..16] -> f[8..24];
        }
    }
}

fn step(ctx: &Context, f: &mut DeviceBuffer<f32>) -> Result<()> {
    Wrapped::new(ctx)?.run(WrappedParams { f })?.wait()
}

fn main() {
    let _ = step;
}

//! A pipeline declared through `macro_rules!`, whose `$t:ty` and `$e:expr` fragments reach
//! the macro wrapped in invisible groups.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

macro_rules! clear_pipeline {
    ($name:ident, $elem:ty, $value:expr) => {
        gpu_pipeline! {
            pub pipeline $name {
                streams { main }
                params { y: &mut DeviceBuffer<$elem> }
                stage clear on main { fill y = $value; }
            }
        }
    };
}

clear_pipeline!(ClearF32, f32, 0.0);
clear_pipeline!(ClearU32, u32, 7);

fn step(ctx: &Context, a: &mut DeviceBuffer<f32>, b: &mut DeviceBuffer<u32>) -> Result<()> {
    ClearF32::new(ctx)?.run(ClearF32Params { y: a })?.wait()?;
    ClearU32::new(ctx)?.run(ClearU32Params { y: b })?.wait()
}

fn main() {
    let _ = step;
}

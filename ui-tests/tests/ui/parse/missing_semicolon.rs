//! Statements end with `;`: without it the next statement's keyword is unexpected. The
//! syntax error is the only error, also for code that uses the pipeline (the macro still
//! emits its types).

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Clear {
        streams { main }
        params { x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage clear on main {
            fill x = 0.0
            fill y = 0.0;
        }
    }
}

fn step(ctx: &Context, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) -> Result<()> {
    let _: (&gpu_pipeline::Stream, ClearMain) = (Clear::new(ctx)?.main_stream(), ClearMain);
    Clear::new(ctx)?.run(ClearParams { x, y })?.wait()
}

fn main() {
    let _ = step;
}

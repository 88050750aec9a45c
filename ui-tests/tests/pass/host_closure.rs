//! A host closure runs on the CPU in stream order: here after the copy it is declared to
//! read, capturing a scalar param by value.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Report {
        streams { compute, copy }
        params { round: u32, y: &DeviceBuffer<f32>, out: &mut PinnedBuffer<f32> }
        stage download on copy {
            copy y -> out;
        }
        stage report on compute {
            host move || eprintln!("round {round} downloaded") reads(out);
        }
    }
}

fn step(ctx: &Context, y: &DeviceBuffer<f32>, out: &mut PinnedBuffer<f32>) -> Result<()> {
    let mut pipeline = Report::new(ctx)?;
    pipeline.run(ReportParams { round: 1, y, out })?.wait()
}

fn main() {
    let _ = step;
}

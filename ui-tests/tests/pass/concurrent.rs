//! A `concurrent` claim that holds: the three stages share no buffer and run on different
//! streams. The DOT text shows the stage graph.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Overlap {
        streams { compute, upload, download }
        params {
            work: &mut DeviceBuffer<f32>,
            next_in: &PinnedBuffer<f32>,
            next: &mut DeviceBuffer<f32>,
            prev: &DeviceBuffer<f32>,
            prev_out: &mut PinnedBuffer<f32>,
        }
        stage compute_step on compute { fill work = 0.0; }
        stage prefetch on upload { copy next_in -> next; }
        stage drain on download { copy prev -> prev_out; }
        concurrent(compute_step, prefetch, drain);
    }
}

fn step(
    ctx: &Context,
    work: &mut DeviceBuffer<f32>,
    next_in: &PinnedBuffer<f32>,
    next: &mut DeviceBuffer<f32>,
    prev: &DeviceBuffer<f32>,
    prev_out: &mut PinnedBuffer<f32>,
) -> Result<()> {
    assert!(Overlap::DOT.contains("prefetch"));
    let mut pipeline = Overlap::new(ctx)?;
    pipeline.run(OverlapParams { work, next_in, next, prev, prev_out })?.wait()
}

fn main() {
    let _ = step;
}

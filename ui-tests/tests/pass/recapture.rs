//! A captured step re-recorded from new params (`recapture`, `recapture_with`, which say
//! whether the executable graph was updated in place), cloned (`clone_step`), and an input
//! written by the host between replays (`write_x()`).

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Recaptured, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Sweep {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { n: u32, a: f32, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        stage sweep on main { launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256; }
    }
}

fn sweeps(ctx: &Context, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, other: &mut DeviceBuffer<f32>, fresh: &mut DeviceBuffer<f32>, input: &PinnedBuffer<f32>) -> Result<bool> {
    let mut pipeline = Sweep::new(ctx)?;
    let mut graph = pipeline.capture(SweepParams { n: 1024, a: 0.5, x, y })?;
    graph.write_x()?.upload(input)?;
    graph.launch()?;
    let swapped: Recaptured = graph.recapture_with(|p| std::mem::swap(&mut p.x, &mut p.y))?;
    graph.launch()?;
    {
        let mut clone = graph.clone_step()?;
        clone.set_a(2.0)?;
        clone.write_x()?.fill(0.0)?;
        clone.launch()?;
    }
    let replaced = graph.recapture(SweepParams { n: 1024, a: 1.0, x: other, y: fresh })?;
    graph.launch()?;
    graph.synchronize()?;
    Ok(swapped.is_updated() && replaced.is_updated())
}

fn main() {
    let _ = sweeps;
}

//! New input each replay: between launches a captured graph's window hands out its pinned
//! buffers (`x_mut()` to write the next input, `x()` to read the last output) and replays
//! the step with its own `launch`.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Frames {
        streams { main, copy }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, frame: &mut PinnedBuffer<f32>, x: &mut DeviceBuffer<f32>, result: &mut PinnedBuffer<f32> }
        stage load on copy { copy frame -> x; }
        stage compute on main { launch k::add_scalar(n, 1.0, x) grid n.div_ceil(256) block 256; }
        stage store on copy { copy x -> result; }
    }
}

fn frames(ctx: &Context, frame: &mut PinnedBuffer<f32>, x: &mut DeviceBuffer<f32>, result: &mut PinnedBuffer<f32>) -> Result<f32> {
    let mut pipeline = Frames::new(ctx)?;
    let mut graph = pipeline.capture(FramesParams { n: 1024, frame, x, result })?;
    let mut total = 0.0;
    for k in 0..10 {
        let mut window = graph.window()?;
        total += window.result()?.iter().sum::<f32>();
        window.frame_mut()?.fill(k as f32);
        let _ = window.params().n;
        window.launch()?;
    }
    graph.set_n(512)?;
    graph.window()?.launch()?;
    graph.synchronize()?;
    Ok(total)
}

fn main() {
    let _ = frames;
}

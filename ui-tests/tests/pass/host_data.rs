//! Host closures that see data: a closure receives the pinned buffers it declares as slices,
//! and scalar params that are not `Copy` (an `Arc<Mutex<Vec<f32>>>` log) can be used inside.

use std::sync::{Arc, Mutex};

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Logged {
        streams { main, copy }
        params {
            log: Arc<Mutex<Vec<f32>>>,
            scale: f32,
            x: &DeviceBuffer<f32>,
            snapshot: &mut PinnedBuffer<f32>,
            feedback: &mut PinnedBuffer<u32>,
        }
        stage save on copy { copy x -> snapshot; }
        stage inspect on copy {
            host |snapshot: &[f32], feedback| {
                let total: f32 = snapshot.iter().sum();
                feedback[0] = (total * scale) as u32;
                if let Ok(mut log) = log.lock() {
                    log.push(total);
                }
            } reads(snapshot) writes(feedback);
            host || { let _ = scale; };
        }
    }
}

fn run(ctx: &Context, x: &DeviceBuffer<f32>, snapshot: &mut PinnedBuffer<f32>, feedback: &mut PinnedBuffer<u32>) -> Result<usize> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut pipeline = Logged::new(ctx)?;
    pipeline.run(LoggedParams { log: log.clone(), scale: 2.0, x, snapshot: &mut *snapshot, feedback: &mut *feedback })?.wait()?;
    let mut graph = pipeline.capture(LoggedParams { log: log.clone(), scale: 2.0, x, snapshot, feedback })?;
    graph.launch()?;
    graph.set_scale(1.0)?;
    graph.launch()?;
    graph.synchronize()?;
    drop(graph);
    Ok(log.lock().map(|log| log.len()).unwrap_or(0))
}

fn main() {
    let _ = run;
}

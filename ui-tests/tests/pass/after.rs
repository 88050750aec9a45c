//! `after` orders stages no data access orders: across streams, naming a later stage, and an
//! empty barrier stage.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Ordered {
        streams { a, b, c }
        params { x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, z: &mut DeviceBuffer<f32> }
        stage first on a after third {
            fill x = 1.0;
        }
        stage second on b {
            fill y = 2.0;
        }
        stage third on c {
            fill z = 3.0;
        }
        stage barrier on b after first, third {}
    }
}

fn step(ctx: &Context, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, z: &mut DeviceBuffer<f32>) -> Result<()> {
    assert_eq!(Ordered::STAGES, ["first", "second", "third", "barrier"]);
    let mut pipeline = Ordered::new(ctx)?;
    pipeline.run(OrderedParams { x, y, z })?.wait()
}

fn main() {
    let _ = step;
}

//! A host closure runs at every replay of the captured step, outside the borrow of the step's
//! params, so it cannot use `snapshot`; list it in `reads(...)` for ordering and read it on the
//! host after the step.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Report {
        streams { compute, copy }
        params { y: &DeviceBuffer<f32>, snapshot: &mut PinnedBuffer<f32> }
        stage download on copy {
            copy y -> snapshot;
        }
        stage report on compute {
            host move || println!("{}", snapshot.len()) reads(snapshot);
        }
    }
}

fn main() {}

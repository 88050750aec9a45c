//! A `copy` goes between buffers of one element type, compared through aliases: `Real` is
//! `f64` here and `snapshot` holds `f32`.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

type Real = f64;

gpu_pipeline! {
    pub pipeline Save {
        streams { main }
        params { field: &DeviceBuffer<Real>, snapshot: &mut PinnedBuffer<f32> }
        stage save on main {
            copy field -> snapshot;
        }
    }
}

fn main() {}

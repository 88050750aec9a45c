//! A fill is a memset of 1 or 4 bytes: an 8-byte `f64` element takes only a value whose
//! bytes are all equal. `1.5f64` is a literal, so this is decided at compile time.

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Init {
        streams { main }
        params { d: &mut DeviceBuffer<f64>, counts: &mut DeviceBuffer<i64> }
        stage clear on main {
            fill d = 1.5f64;
            fill counts = -1i64;
        }
    }
}

fn main() {}

//! `for i in 0..comm.size()`: the step's shape (its loop bounds, `let`s, stream indices and
//! subscripts) is computed before the communicator is looked at. Pass the size (or rank) as a
//! scalar param.

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline AllToAll {
        streams { main }
        params { comm: &Communicator, c: usize, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
        for i in 0..comm.size() {
            stage swap on main {
                send x[i * c..(i + 1) * c] to i;
                recv y[i * c..(i + 1) * c] from i;
            }
        }
    }
}

fn main() {}

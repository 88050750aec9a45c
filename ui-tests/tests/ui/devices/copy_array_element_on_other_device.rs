//! A peer copy between elements of a buffer array goes on a stream of one of their devices:
//! `copy f[1] -> f[2]` on a stream of `gpu[0]` is neither, known from the constant indices,
//! as for a `fill` or a kernel's arguments (it was refused only when the step ran).

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Spread {
        devices { gpu[3] }
        streams { main on gpu[0] }
        params { f: &mut [DeviceBuffer<f32>] on gpu[..] }
        stage move_on on main {
            copy f[1] -> f[2];
        }
    }
}

fn main() {}

//! A halo exchange whose rows are `nx` long: the `send` carries `nx` elements and the `recv`
//! takes `nx + 1`, which differ whatever `nx` is, so no pairing works, and the ranks fail (CPU
//! backend) or hang (NCCL).

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Halo {
        streams { main }
        params {
            comm: &Communicator,
            nx: usize, up: usize, down: usize,
            field: &mut DeviceBuffer<f32>, halo: &mut DeviceBuffer<f32>,
        }
        stage exchange on main {
            send field[nx..2 * nx] to up;
            recv halo[0..nx + 1] from down;
        }
    }
}

fn main() {}

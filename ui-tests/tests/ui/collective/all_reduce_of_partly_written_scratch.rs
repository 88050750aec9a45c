//! Half of an 8-element scratch buffer filled from a param, then reduced in place over the
//! ranks: an in-place `all_reduce` reads every element before writing it, and nothing wrote
//! `sums[4..8]`. Write them first, or reduce only what was written (`all_reduce(sum) sums[0..4]`).

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Totals {
        streams { main }
        params { comm: &Communicator, partial: &DeviceBuffer<f32>, total: &mut DeviceBuffer<f32> }
        scratch { sums: DeviceBuffer<f32> = 8 }
        stage reduce on main {
            copy partial[0..4] -> sums[0..4];
            all_reduce(sum) sums;
            copy sums[0..4] -> total[0..4];
        }
    }
}

fn main() {}

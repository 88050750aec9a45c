//! A scratch buffer of 16 elements written at `tmp[0..8]`, then copied whole: a copy reads
//! every element of its source, and nothing wrote 8..16. Write them first.

use gpu_pipeline::{DeviceBuffer, PinnedBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Parts {
        streams { main, copy }
        params { input: &DeviceBuffer<f32>, snapshot: &mut PinnedBuffer<f32> }
        scratch { tmp: DeviceBuffer<f32> = 16 }
        stage stage_in on main { copy input[0..8] -> tmp[0..8]; }
        stage save on copy { copy tmp -> snapshot; }
    }
}

fn main() {}

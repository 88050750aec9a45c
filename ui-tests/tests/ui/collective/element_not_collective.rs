//! A buffer of `u16`: NCCL reduces `i8`, `u8`, `i32`, `u32`, `i64`, `u64`, `f32` and `f64`
//! (our trait's E0277, on the statement).

use gpu_pipeline::{Communicator, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Count {
        streams { main }
        params { comm: &Communicator, hits: &mut DeviceBuffer<u16> }
        stage reduce on main {
            all_reduce(sum) hits;
        }
    }
}

fn main() {}

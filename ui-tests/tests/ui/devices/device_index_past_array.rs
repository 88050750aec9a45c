//! `on gpu[2]` on a device array of two: the index is past the array. Name `gpu[0]` or
//! `gpu[1]`, or put element `k` of a stream array on `gpu[k]` with `on gpu[..]`.

use gpu_pipeline::gpu_pipeline;

gpu_pipeline! {
    pub pipeline Pair {
        devices { gpu[2] }
        streams { main on gpu[0], side on gpu[2] }
        stage idle on side after idle0 {}
        stage idle0 on main {}
    }
}

fn main() {}

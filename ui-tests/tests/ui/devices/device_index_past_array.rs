//! `on gpu[2]` on a device array of two: the index is past the array. Name `gpu[0]` or
//! `gpu[1]`, or put element `k` of a stream array on `gpu[k]` with `on gpu[..]`.

use gpu_pipeline::{FlagCell, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Pair {
        devices { gpu[2] }
        streams { main on gpu[0], side on gpu[2] }
        params { done: &mut FlagCell on gpu[0] }
        stage finish on main { write done = 1; }
    }
}

fn main() {}

//! `on gpu` where `gpu` is a device array: name one element, `on gpu[0]`, or put element
//! `k` of a stream array on `gpu[k]` with `on gpu[..]`.

use gpu_pipeline::{FlagCell, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Pair {
        devices { gpu[2] }
        streams { main on gpu }
        params { done: &mut FlagCell on gpu[0] }
        stage finish on main { write done = 1; }
    }
}

fn main() {}

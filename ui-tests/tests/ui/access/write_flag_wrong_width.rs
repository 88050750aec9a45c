//! The value of a `write` has the flag cell's word type: `done` is a 32-bit `FlagCell`, so a
//! `u64` does not fit. rustc reports it on the value.

use gpu_pipeline::{FlagCell, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Signal {
        streams { main }
        params { round: u64, done: &mut FlagCell }
        stage signal on main {
            write done = round;
        }
    }
}

fn main() {}

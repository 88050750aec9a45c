//! `write` sets a flag cell, which must be declared `&mut`: `done` is declared `&`.

use gpu_pipeline::{FlagCell, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Signal {
        streams { main }
        params { done: &FlagCell }
        stage signal on main {
            write done = 1;
        }
    }
}

fn main() {}

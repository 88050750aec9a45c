//! Statements of a stage run in order: a `wait` before the only `write` that satisfies it, on
//! the same stream, waits for ever. Put the write before the wait.

use gpu_pipeline::{FlagCell, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Signal {
        streams { main }
        params { ready: &mut FlagCell }
        stage handshake on main {
            wait ready == 1;
            write ready = 1;
        }
    }
}

fn main() {}

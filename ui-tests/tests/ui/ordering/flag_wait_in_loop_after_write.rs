//! A wait inside a `for` after a write before the loop: each iteration sees `write ready = 1`,
//! so iteration `i = 1`, waiting for 2, waits for ever.

use gpu_pipeline::{FlagCell, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Rounds {
        streams { main, work[4] }
        params { ready: &mut FlagCell }
        stage signal on main {
            write ready = 1;
        }
        for i in 0..4 {
            stage round on work[i] {
                wait ready == (i + 1) as u32;
            }
        }
    }
}

fn main() {}

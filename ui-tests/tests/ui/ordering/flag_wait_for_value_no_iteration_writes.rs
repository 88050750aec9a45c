//! A write inside a `for` with constant bounds writes one value per iteration: `write flag =
//! i as u32` over `0..4` writes 0 to 3, so `wait flag == 4u32` after the loop is satisfied by
//! none of them and would wait for ever. Wait for a value written, or write the value waited for.

use gpu_pipeline::{FlagCell, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Rounds {
        streams { main, work[4] }
        params { flag: &mut FlagCell }
        for i in 0..4 {
            stage round on work[i] { write flag = i as u32; }
        }
        stage done on main { wait flag == 4u32; }
    }
}

fn main() {}

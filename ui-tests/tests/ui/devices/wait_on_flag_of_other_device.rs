//! A `wait` on a flag cell of `gpu1` from a stream of `gpu0`: a flag operation reaches only
//! its own device's memory, and `copy` does not take a flag cell. Declare the flag `on gpu0`,
//! or run the stage on a stream of `gpu1`.

use gpu_pipeline::{FlagCell, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Handshake {
        devices { gpu0, gpu1 }
        streams { a on gpu0, b on gpu1 }
        params { f1: &mut FlagCell on gpu1 }
        stage post on b { write f1 = 1u32; }
        stage gate on a { wait f1 == 1u32; }
    }
}

fn main() {}

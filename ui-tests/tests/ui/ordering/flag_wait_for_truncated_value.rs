//! A cast truncates as Rust's `as` does: `(256u32 as u8) as u32` writes 0, which never
//! satisfies `wait done == 256`.

use gpu_pipeline::{FlagCell, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Signal {
        streams { produce, consume }
        params { done: &mut FlagCell }
        stage signal on produce {
            write done = (256u32 as u8) as u32;
        }
        stage receive on consume {
            wait done == 256;
        }
    }
}

fn main() {}

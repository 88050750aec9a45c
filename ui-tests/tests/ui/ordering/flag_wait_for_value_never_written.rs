//! The last write before a `wait` decides what it sees: `write done = 1` never satisfies
//! `wait done == 2`. Wait for the value written, or write the value waited for.

use gpu_pipeline::{FlagCell, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Signal {
        streams { produce, consume }
        params { done: &mut FlagCell }
        stage signal on produce {
            write done = 1;
        }
        stage receive on consume {
            wait done == 2;
        }
    }
}

fn main() {}

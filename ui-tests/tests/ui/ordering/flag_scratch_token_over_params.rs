//! A token chain over a scratch flag in a `for` over a param: the first step passes the token
//! from 0 to `rounds`, and leaves `rounds` in the flag, so the second step's first wait, for
//! 0, never returns. Reset the flag at the end of the step.

use gpu_pipeline::gpu_pipeline;

gpu_pipeline! {
    pub pipeline Ring {
        streams { main, work[2] }
        params { rounds: usize }
        scratch { token: FlagCell }
        for i in 0..rounds {
            stage pass on work[i % 2] {
                wait token == i as u32;
                write token = (i + 1) as u32;
            }
        }
    }
}

fn main() {}

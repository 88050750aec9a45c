//! A scratch flag is made once, at 0, and keeps what each step leaves: the token chain holds
//! in the first step, but the second starts with 4 in `token` and its first wait, for 0,
//! never returns. Reset the flag at the end of the step.

use gpu_pipeline::gpu_pipeline;

gpu_pipeline! {
    pub pipeline Ring {
        streams { main, work[4] }
        scratch { token: FlagCell }
        for i in 0..4 {
            stage pass on work[i] {
                wait token == i as u32;
                write token = (i + 1) as u32;
            }
        }
    }
}

fn main() {}

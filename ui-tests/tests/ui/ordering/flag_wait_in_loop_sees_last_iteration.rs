//! Inside a `for`, each iteration waits for 0 and writes 1: the first iteration finds 0, the
//! second finds the 1 the first left, and waits for ever (in the first step: the reset at the
//! end of the step comes too late). Pass a token from iteration to iteration instead.

use gpu_pipeline::gpu_pipeline;

gpu_pipeline! {
    pub pipeline Lanes {
        streams { main, work[4] }
        scratch { busy: FlagCell }
        for i in 0..4 {
            stage take on work[i] {
                wait busy == 0u32;
                write busy = 1;
            }
        }
        stage reset on main { write busy = 0; }
    }
}

fn main() {}

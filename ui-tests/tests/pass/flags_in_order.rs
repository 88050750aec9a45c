//! Flag protocols the derived order satisfies: a write before the wait on another stream, a
//! write earlier in the same stage, a param flag set outside the pipeline, and a reset after
//! the wait (which cannot satisfy it, so the value comes from outside).

use gpu_pipeline::{Context, FlagCell, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Protocol {
        streams { produce, consume }
        params { round: u32, go: &FlagCell, ready: &mut FlagCell, armed: &mut FlagCell }
        stage signal on produce {
            write ready = round;
            wait ready >= round;
        }
        stage receive on consume {
            wait ready == round;
            wait go & 1;
            wait armed == 1;
            write armed = 0;
        }
    }
}

fn step(ctx: &Context, go: &FlagCell, ready: &mut FlagCell, armed: &mut FlagCell) -> Result<()> {
    Protocol::new(ctx)?.run(ProtocolParams { round: 1, go, ready, armed })?.wait()
}

fn main() {
    let _ = step;
}

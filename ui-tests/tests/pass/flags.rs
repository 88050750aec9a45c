//! `wait` with each condition and `write`, on 32-bit and 64-bit flag cells given as params:
//! a handshake between two streams and with the host.

use gpu_pipeline::{Context, FlagCell, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Handshake {
        streams { producer, consumer }
        params {
            round: u32,
            go: &FlagCell,
            ready: &mut FlagCell,
            progress: &mut FlagCell<u64>,
            done: &mut FlagCell<u64>,
        }
        stage produce on producer {
            wait go >= round;
            write ready = round;
            write progress = 1;
        }
        stage consume on consumer {
            wait ready == round;
            wait progress & 1;
            write done = u64::from(round);
        }
    }
}

fn step(ctx: &Context, go: &FlagCell, ready: &mut FlagCell, progress: &mut FlagCell<u64>, done: &mut FlagCell<u64>) -> Result<()> {
    let mut pipeline = Handshake::new(ctx)?;
    pipeline.run(HandshakeParams { round: 1, go, ready, progress, done })?.wait()
}

fn main() {
    let _ = step;
}

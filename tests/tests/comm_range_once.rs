//! A communication operand's range is evaluated once per step, by the step's plan, and the
//! statement runs on the elements the plan ordered: a range expression that gives another
//! value when evaluated again (a host function with state) does not make the statement touch
//! elements a stage on another stream, which the plan let run beside it, touches.

use std::cell::Cell;

use gpu_pipeline::{Communicator, Context, DeviceBuffer, Result, Stream, gpu_pipeline};

thread_local! {
    /// How many times `grows` was called on this rank's thread.
    static CALLS: Cell<usize> = const { Cell::new(0) };
}

/// `n` the first two times it is called on a thread (the plan's evaluation of the two
/// ranges), `2 * n` after that.
fn grows(n: usize) -> usize {
    let calls = CALLS.with(|c| {
        c.set(c.get() + 1);
        c.get()
    });
    if calls <= 2 { n } else { 2 * n }
}

gpu_pipeline! {
    /// Sends `a[0..grows(nx)]` while another stream fills `a[nx..2 * nx]`.
    pub pipeline Grows {
        streams { main, side }
        params {
            comm: &Communicator,
            nx: usize,
            peer: usize,
            a: &mut DeviceBuffer<f32>,
            b: &mut DeviceBuffer<f32>,
        }
        stage exchange on main {
            send a[0..grows(nx)] to peer;
            recv b[0..grows(nx)] from peer;
        }
        stage refill on side { fill a[nx..2 * nx] = 7.0; }
        concurrent(exchange, refill);
    }
}

/// Runs `rank` on two CPU ranks and returns what each returned, in rank order.
fn two_ranks<T: Send>(rank: impl Fn(usize, &Communicator) -> T + Sync) -> Vec<T> {
    tests::cpu_ranks::on_cpu_ranks(2, rank)
}

const NX: usize = 4;

#[test]
fn a_range_that_changes_when_evaluated_again_runs_as_planned() {
    let results = two_ranks(|r, comm| -> Result<Vec<f32>> {
        let ctx = Context::cpu_checked();
        let stream = Stream::new(&ctx)?;
        let start: Vec<f32> = (0..2 * NX).map(|i| (r * 10 + i) as f32).collect();
        let mut a = DeviceBuffer::from_slice(&stream, &start)?;
        let mut b = DeviceBuffer::from_slice(&stream, &[-1.0f32; 2 * NX])?;
        stream.synchronize()?;
        let mut pipeline = Grows::new(&ctx)?;
        pipeline
            .run(GrowsParams {
                comm,
                nx: NX,
                peer: 1 - r,
                a: &mut a,
                b: &mut b,
            })?
            .wait()?;
        assert!(ctx.races().is_empty(), "rank {r}: {:#?}", ctx.races());
        b.to_vec(&stream)
    });
    for (r, b) in results.into_iter().enumerate() {
        let mut want: Vec<f32> = (0..NX).map(|i| ((1 - r) * 10 + i) as f32).collect();
        want.extend([-1.0; NX]);
        assert_eq!(b.unwrap(), want, "rank {r}");
    }
}

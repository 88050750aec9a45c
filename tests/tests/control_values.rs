//! The host values of a step's `while`/`if` statements (a loop's `max`, `k` and `r` of `step %
//! k == r`) are checked before anything of an eager step is enqueued, as every other rule on
//! params is: a refused step leaves the buffers as they were and is not counted as a step. They
//! were checked where the statement ran, after the stages before it had run (checked CPU
//! backend).

use gpu_pipeline::{Context, DeviceBuffer, Error, Stream, gpu_pipeline};

// The kernels' CPU twins.
use tests::condition_kernels as cpu;

gpu_pipeline! {
    /// Bumps `a`, then `c` on every `every`-th step, then runs a loop of one iteration with at
    /// most `limit`; `for` instances test their own `max`.
    pipeline Values {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
        }
        params {
            every: u32,
            limit: u32,
            rounds: usize,
            a: &mut DeviceBuffer<u32>,
            c: &mut DeviceBuffer<u32>,
            r: &mut DeviceBuffer<u32>,
        }
        stage first on main {
            launch k::gp_bump(a) grid 1u32 block 1u32;
        }
        stage second on main {
            if step % every == 0 {
                launch k::gp_bump(c) grid 1u32 block 1u32;
            }
        }
        for i in 0..rounds {
            stage third on main {
                fill r = 1u32;
                while r != 0u32 max limit - i as u32 {
                    fill r = 0u32;
                }
            }
        }
    }
}

#[test]
fn a_loop_max_or_step_modulus_from_params_is_refused_before_the_step_runs() {
    let ctx = Context::cpu_checked();
    let stream = Stream::new(&ctx).unwrap();
    let zero = || DeviceBuffer::from_slice(&stream, &[0u32]).unwrap();
    let (mut a, mut c, mut r) = (zero(), zero(), zero());
    stream.synchronize().unwrap();
    let mut pipeline = Values::new(&ctx).unwrap();
    // `step % 0`, `step % 2 == 2` (`r` is a constant here: `every` is 0 below), `max 0` in
    // the second iteration of `third` (`limit - 1`).
    for (every, limit, stage) in [(0, 5, "second"), (2, 1, "third")] {
        let refused = pipeline.run(ValuesParams {
            every,
            limit,
            rounds: 2,
            a: &mut a,
            c: &mut c,
            r: &mut r,
        });
        match refused.map(drop) {
            Err(Error::Stage { stage: s, .. }) => assert_eq!(s, stage),
            other => panic!("expected a refusal naming `{stage}`, got {other:?}"),
        }
        ctx.synchronize().unwrap();
        assert_eq!(
            a.to_vec(&stream).unwrap(),
            [0],
            "nothing of a refused step ran"
        );
    }
    // The refused steps were not counted: this is step 0, which `step % 2 == 0` selects.
    pipeline
        .run(ValuesParams {
            every: 2,
            limit: 5,
            rounds: 2,
            a: &mut a,
            c: &mut c,
            r: &mut r,
        })
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(a.to_vec(&stream).unwrap(), [1]);
    assert_eq!(c.to_vec(&stream).unwrap(), [1], "step 0 runs the `if`");
    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
}

//! A `copy` whose two sides name ranges of different lengths, known only when the step runs
//! (from `let`s of a `for`, or params), is refused before anything of the step runs, naming the
//! stage instance and both lengths: eagerly, when captured, and after a setter.

use gpu_pipeline::{Context, DeviceBuffer, Error, Stream, gpu_pipeline};

gpu_pipeline! {
    /// Copies `a` into `b` in two chunks of 4; the second chunk's destination is `shrink`
    /// elements shorter.
    pub pipeline Chunks {
        streams { main }
        params { shrink: usize, a: &DeviceBuffer<f32>, b: &mut DeviceBuffer<f32> }
        for i in 0..2 {
            let lo = i * 4;
            let hi = lo + 4 - i * shrink;
            stage chunk on main { copy a[lo..lo + 4] -> b[lo..hi]; }
        }
    }
}

fn upload(stream: &Stream, data: &[f32]) -> DeviceBuffer<f32> {
    let buffer = DeviceBuffer::from_slice(stream, data).unwrap();
    stream.synchronize().unwrap();
    buffer
}

/// `err` is the refusal of chunk `i = 1`, copying 4 elements into 3.
#[track_caller]
fn assert_mismatch(err: &Error) {
    let message = err.to_string();
    assert!(
        message.contains("stage `chunk[1]` copies 4 element(s) of `a` into 3 of `b`"),
        "{message}"
    );
}

#[test]
fn a_copy_between_ranges_of_two_lengths_is_refused_before_anything_runs() {
    let ctx = Context::cpu_checked();
    let stream = Stream::new(&ctx).unwrap();
    let a = upload(&stream, &(1..=8).map(|i| i as f32).collect::<Vec<_>>());
    let mut b = upload(&stream, &[0.0; 8]);
    let mut pipeline = Chunks::new(&ctx).unwrap();
    let refused = pipeline
        .run(ChunksParams {
            shrink: 1,
            a: &a,
            b: &mut b,
        })
        .and_then(|run| run.wait())
        .expect_err("the second chunk copies 4 elements into 3");
    assert_mismatch(&refused);
    // Not even the first chunk ran.
    assert_eq!(b.to_vec(&stream).unwrap(), vec![0.0; 8]);
    let refused = pipeline
        .capture(ChunksParams {
            shrink: 1,
            a: &a,
            b: &mut b,
        })
        .map(drop)
        .expect_err("captured too");
    assert_mismatch(&refused);
    {
        let mut graph = pipeline
            .capture(ChunksParams {
                shrink: 0,
                a: &a,
                b: &mut b,
            })
            .unwrap();
        graph.launch().unwrap();
        assert_mismatch(
            &graph
                .set_shrink(1)
                .expect_err("the setter builds again and refuses"),
        );
        graph.launch().unwrap();
        graph.synchronize().unwrap();
    }
    assert_eq!(
        b.to_vec(&stream).unwrap(),
        (1..=8).map(|i| i as f32).collect::<Vec<_>>()
    );
    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
}

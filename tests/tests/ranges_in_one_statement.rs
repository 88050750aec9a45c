//! Two ranges of one buffer in one statement, one of them written (issue 23, class 1): apart,
//! they run, eagerly, from a captured graph and after a setter; overlapping ranges the
//! compiler cannot see are refused before the step is enqueued, naming the elements.

use gpu_pipeline::{Context, DeviceBuffer, Stream, gpu_pipeline};

/// `y += a * x` over the first `n` elements.
fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
    for i in 0..n as usize {
        y[i] += a * x[i];
    }
}

gpu_pipeline! {
    pub pipeline Periodic {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = saxpy;
        }
        params { a: f32, lo: usize, f: &mut DeviceBuffer<f32>, xs: &mut [DeviceBuffer<f32>] }
        stage wrap on main { copy f[0..4] -> f[8..12]; }
        stage halves on side { launch k::saxpy(2, a, f[lo..lo + 2], f[4..6]) grid 1u32 block 32u32; }
        stage element on main {
            copy xs[0][0..2] -> xs[0][2..4];
            launch k::saxpy(2, a, xs[1][0..2], xs[1][2..4]) grid 1u32 block 32u32;
        }
    }
}

fn params(d: &mut Data, a: f32, lo: usize) -> PeriodicParams<'_> {
    PeriodicParams {
        a,
        lo,
        f: &mut d.f,
        xs: &mut d.xs,
    }
}

struct Data {
    stream: Stream,
    f: DeviceBuffer<f32>,
    xs: Vec<DeviceBuffer<f32>>,
}

fn data(ctx: &Context) -> Data {
    let stream = Stream::new(ctx).unwrap();
    let f =
        DeviceBuffer::from_slice(&stream, &(0..12).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    let xs = vec![
        DeviceBuffer::from_slice(&stream, &[1.0f32, 2.0, 0.0, 0.0]).unwrap(),
        DeviceBuffer::from_slice(&stream, &[1.0f32, 2.0, 10.0, 20.0]).unwrap(),
    ];
    Data { stream, f, xs }
}

#[test]
fn apart_ranges_of_one_buffer_run_eagerly_captured_and_after_a_setter() {
    let ctx = Context::cpu_checked();
    let mut d = data(&ctx);
    let mut pipeline = Periodic::new(&ctx).unwrap();
    pipeline
        .run(params(&mut d, 1.0, 0))
        .unwrap()
        .wait()
        .unwrap();
    let f = d.f.to_vec(&d.stream).unwrap();
    assert_eq!(&f[8..12], [0.0, 1.0, 2.0, 3.0]);
    assert_eq!(&f[4..6], [4.0, 6.0]);
    assert_eq!(d.xs[0].to_vec(&d.stream).unwrap(), [1.0, 2.0, 1.0, 2.0]);
    assert_eq!(d.xs[1].to_vec(&d.stream).unwrap(), [1.0, 2.0, 11.0, 22.0]);

    // Captured with the other range, replayed, then `a` changed in place.
    let mut graph = pipeline.capture(params(&mut d, 1.0, 8)).unwrap();
    graph.launch().unwrap();
    graph.set_a(10.0).unwrap();
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    let f = d.f.to_vec(&d.stream).unwrap();
    // f[8..10] is [0, 1] at every replay: 4 + 0 + 0, 6 + 1 + 10.
    assert_eq!(&f[4..6], [4.0, 17.0]);
    assert_eq!(d.xs[1].to_vec(&d.stream).unwrap(), [1.0, 2.0, 22.0, 44.0]);
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}

#[test]
fn overlapping_ranges_the_compiler_cannot_see_are_refused_before_anything_runs() {
    let ctx = Context::cpu();
    let mut d = data(&ctx);
    let before = d.f.to_vec(&d.stream).unwrap();
    let mut pipeline = Periodic::new(&ctx).unwrap();
    let err = pipeline
        .run(PeriodicParams {
            a: 1.0,
            lo: 3,
            f: &mut d.f,
            xs: &mut d.xs,
        })
        .and_then(|step| step.wait())
        .unwrap_err();
    let message = format!("{err:#}");
    assert!(
        message.contains("elements 3..5 and 4..6 of `f`") && message.contains("overlap"),
        "{message}"
    );
    assert_eq!(
        d.f.to_vec(&d.stream).unwrap(),
        before,
        "nothing of the step ran"
    );
}

gpu_pipeline! {
    pub pipeline EmptyBeside {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = saxpy;
        }
        params { a: f32, xs: &mut [DeviceBuffer<f32>] }
        // An empty range names no element of the whole element beside it.
        stage element on main {
            launch k::saxpy(0, a, xs[1][0..0], xs[1]) grid 1u32 block 32u32;
        }
    }
}

/// An empty range beside the whole element of a buffer array shares no element with it: it
/// compiles (it was refused as two names of one buffer), and the step lends both.
#[test]
fn an_empty_range_beside_its_whole_element_runs() {
    let ctx = Context::cpu_checked();
    let mut d = data(&ctx);
    let mut pipeline = EmptyBeside::new(&ctx).unwrap();
    pipeline
        .run(EmptyBesideParams {
            a: 1.0,
            xs: &mut d.xs,
        })
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(d.xs[1].to_vec(&d.stream).unwrap(), [1.0, 2.0, 10.0, 20.0]);
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}

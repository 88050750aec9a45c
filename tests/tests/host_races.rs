//! The host backend's race detector on kernels and copies, and the allocation locks that keep
//! unordered host operations memory-safe.

use gpu_pipeline::{
    Bound, Bounds, Condition, Context, DeviceBuffer, Error, Event, Graph, Hazard, HostKernel,
    LaunchConfig, Module, PinnedBuffer, Stream, TypedKernel,
};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");

type AddScalar = (u32, f32, &'static mut [f32]);

fn add_scalar_host(n: u32, value: f32, data: &mut [f32]) {
    data[..n as usize].iter_mut().for_each(|x| *x += value);
}

fn add_scalar(ctx: &Context) -> TypedKernel<AddScalar> {
    let module = Module::load_ptx(ctx, PTX).unwrap().named("test_kernels");
    // SAFETY: add_scalar(unsigned n, float value, float* data), indexing data below n.
    unsafe {
        module
            .function("add_scalar")
            .unwrap()
            .typed_with_bounds::<AddScalar>(Bounds::new().buffer(2, Bound::param(0)))
    }
    .unwrap()
    .with_host(HostKernel::new(add_scalar_host))
}

const N: u32 = 1024;

/// A step with a kernel on `compute` and a copy of its output on `copy`; `wire` says whether
/// the copy waits on an event recorded after the kernel.
fn step(ctx: &Context, wire: bool) -> (Result<(), Error>, Vec<f32>) {
    let compute = Stream::non_blocking(ctx).unwrap();
    let copy = Stream::non_blocking(ctx).unwrap();
    let kernel = add_scalar(ctx);
    let mut field = DeviceBuffer::from_slice(&compute, &vec![1.0f32; N as usize])
        .unwrap()
        .named("field");
    let mut snapshot = PinnedBuffer::<f32>::zeros(ctx, N as usize)
        .unwrap()
        .named("snapshot");
    kernel
        .launch(
            &compute,
            LaunchConfig::for_elements(N, 256),
            (N, 1.0f32, &mut field),
        )
        .unwrap();
    if wire {
        let done = Event::new(ctx).unwrap();
        compute.record_into(&done).unwrap();
        copy.wait_event(&done).unwrap();
    }
    copy.copy_dtoh(&field, &mut snapshot).unwrap();
    let outcome = copy.synchronize();
    compute.synchronize().unwrap();
    (outcome, snapshot.to_vec().unwrap())
}

#[test]
fn a_missing_event_between_a_kernel_and_a_copy_is_reported() {
    let ctx = Context::host_checked();
    let (outcome, _) = step(&ctx, false);
    // The copy's stream reports the race at its synchronize.
    let err = outcome.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Cpu(_)), "{err:?}");
    for part in [
        "`field`",
        "`launch test_kernels::add_scalar`",
        "`copy_dtoh field -> snapshot`",
    ] {
        assert!(text.contains(part), "{part} missing from: {text}");
    }
    let races = ctx.races();
    assert_eq!(races.len(), 1, "{races:#?}");
    let race = &races[0];
    assert_eq!(&*race.buffer_name, "field");
    assert_eq!(race.hazard, Hazard::ReadAfterWrite);
    assert_eq!(&*race.earlier.op, "launch test_kernels::add_scalar");
    assert_eq!(&*race.later.op, "copy_dtoh field -> snapshot");
    assert_ne!(race.earlier.stream, race.later.stream);
}

#[test]
fn the_same_step_with_its_event_reports_nothing() {
    let ctx = Context::host_checked();
    let (outcome, snapshot) = step(&ctx, true);
    outcome.unwrap();
    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
    assert_eq!(snapshot, vec![2.0f32; N as usize]);
}

/// Two streams that add to every element of one buffer, with no event between them. On a GPU
/// that is a race with an unspecified result; on the host backend it must not be a data race
/// (undefined behaviour in Rust): each launch holds the buffer's write lock while it runs,
/// so no update is lost, whichever order the launches take.
fn unordered_increments(ctx: &Context, launches: usize) -> Vec<f32> {
    let a = Stream::non_blocking(ctx).unwrap();
    let b = Stream::non_blocking(ctx).unwrap();
    let kernel = add_scalar(ctx);
    let mut data = DeviceBuffer::<f32>::zeros(&a, 4096)
        .unwrap()
        .named("counters");
    a.synchronize().unwrap();
    let config = LaunchConfig::for_elements(4096, 256);
    for _ in 0..launches {
        kernel
            .launch(&a, config, (4096, 1.0f32, &mut data))
            .unwrap();
        kernel
            .launch(&b, config, (4096, 1.0f32, &mut data))
            .unwrap();
    }
    let _ = a.synchronize();
    let _ = b.synchronize();
    data.to_vec(&a).unwrap()
}

#[test]
fn unordered_launches_on_two_streams_lose_no_update() {
    let ctx = Context::host();
    let counters = unordered_increments(&ctx, 1000);
    assert!(
        counters.iter().all(|&c| c == 2000.0),
        "{:?}",
        &counters[..8]
    );
}

#[test]
fn unordered_launches_are_reported_and_still_exact_in_checked_mode() {
    let ctx = Context::host_checked();
    let counters = unordered_increments(&ctx, 20);
    assert!(counters.iter().all(|&c| c == 40.0), "{:?}", &counters[..8]);
    let races = ctx.races();
    assert!(!races.is_empty());
    assert!(races.iter().all(|r| &*r.buffer_name == "counters"));
    assert!(races.iter().all(|r| r.hazard == Hazard::WriteAfterWrite));
}

#[test]
fn unordered_copies_into_one_buffer_stay_whole() {
    // Two streams copying different patterns into one buffer without ordering: the result is
    // one pattern or the other, never a torn mix, since each copy holds the write lock.
    let ctx = Context::host();
    let a = Stream::non_blocking(&ctx).unwrap();
    let b = Stream::non_blocking(&ctx).unwrap();
    let ones = DeviceBuffer::from_slice(&a, &vec![1u32; 1 << 16]).unwrap();
    let twos = DeviceBuffer::from_slice(&a, &vec![2u32; 1 << 16]).unwrap();
    let mut target = DeviceBuffer::<u32>::zeros(&a, 1 << 16).unwrap();
    a.synchronize().unwrap();
    for _ in 0..50 {
        a.copy_dtod(&ones, &mut target).unwrap();
        b.copy_dtod(&twos, &mut target).unwrap();
        b.join(&a).unwrap();
        let seen = target.to_vec(&b).unwrap();
        assert!(
            seen.iter().all(|&v| v == seen[0]),
            "a torn copy: {:?}",
            &seen[..4]
        );
    }
}

/// compute-sanitizer fails a binary that never calls CUDA; this gives it one call there.
/// Two streams run `add_scalar` on views `a` and `b` of one buffer, with no event between
/// them, and a third copies `c` back; returns the races the checked detector reported.
fn views_on_two_streams(
    a: std::ops::Range<usize>,
    b: std::ops::Range<usize>,
) -> (Vec<gpu_pipeline::RaceReport>, Vec<f32>) {
    let ctx = Context::host_checked();
    let (s1, s2) = (
        Stream::non_blocking(&ctx).unwrap(),
        Stream::non_blocking(&ctx).unwrap(),
    );
    let kernel = add_scalar(&ctx);
    let mut field = DeviceBuffer::from_slice(&s1, &vec![0.0f32; 64])
        .unwrap()
        .named("field");
    s1.synchronize().unwrap();
    for (stream, range, value) in [(&s1, a, 1.0f32), (&s2, b, 2.0)] {
        let n = range.len() as u32;
        let mut view = field.slice_mut(range).unwrap();
        kernel
            .launch(
                stream,
                LaunchConfig::for_elements(n, 64),
                (n, value, &mut view),
            )
            .unwrap();
    }
    // In checked mode a race is also the error of the synchronize that observes it.
    let synced = [s1.synchronize(), s2.synchronize()];
    assert_eq!(
        synced.iter().any(Result::is_err),
        !ctx.races().is_empty(),
        "{synced:?}"
    );
    let values = field.to_vec(&s1).unwrap();
    (ctx.races(), values)
}

#[test]
fn kernels_on_disjoint_views_of_one_buffer_do_not_race() {
    let (races, values) = views_on_two_streams(0..32, 32..64);
    assert!(races.is_empty(), "{races:#?}");
    assert!(values[..32].iter().all(|&x| x == 1.0));
    assert!(values[32..].iter().all(|&x| x == 2.0));
}

#[test]
fn kernels_on_overlapping_views_of_one_buffer_race() {
    let (races, values) = views_on_two_streams(0..33, 32..64);
    assert_eq!(races.len(), 1, "{races:#?}");
    assert_eq!(races[0].hazard, Hazard::WriteAfterWrite);
    assert_eq!(&*races[0].buffer_name, "field");
    // The locks keep the overlapping element exact.
    assert_eq!(values[32], 3.0);
}

#[test]
fn copies_into_disjoint_views_of_one_pinned_buffer_do_not_race() {
    let ctx = Context::host_checked();
    let (s1, s2) = (
        Stream::non_blocking(&ctx).unwrap(),
        Stream::non_blocking(&ctx).unwrap(),
    );
    let src =
        DeviceBuffer::from_slice(&s1, &(0..16).map(|x| x as f32).collect::<Vec<_>>()).unwrap();
    s1.synchronize().unwrap();
    let mut out = PinnedBuffer::<f32>::zeros(&ctx, 16).unwrap().named("out");
    {
        let (mut lo, mut hi) = out.split_at_mut(8).unwrap();
        s1.copy_dtoh(&src.slice(..8).unwrap(), &mut lo).unwrap();
        s2.copy_dtoh(&src.slice(8..).unwrap(), &mut hi).unwrap();
    }
    s1.synchronize().unwrap();
    s2.synchronize().unwrap();
    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
    let got = out.to_vec().unwrap();
    assert_eq!(got, (0..16).map(|x| x as f32).collect::<Vec<_>>());
}

#[test]
fn instrumented_under_compute_sanitizer() {
    tests::touch_cuda_for_compute_sanitizer();
}

/// One write to `x[0..4]`, then `accesses` writes to `x[4..8]` on the same stream, then a
/// read of `x[0..4]` on another stream that nothing orders after the first write: its
/// synchronize reports the race.
fn read_after_many_writes_elsewhere(accesses: usize) -> Result<(), Error> {
    let ctx = Context::cpu_checked();
    let (writer, reader) = (Stream::new(&ctx)?, Stream::new(&ctx)?);
    let mut x = DeviceBuffer::<u32>::zeros(&writer, 8)?.named("x");
    let mut out = PinnedBuffer::<u32>::zeros(&ctx, 4)?;
    writer.synchronize()?;
    writer.memset_u32(&mut x.slice_mut(0..4)?, 1)?;
    for _ in 0..accesses {
        writer.memset_u32(&mut x.slice_mut(4..8)?, 2)?;
    }
    reader.copy_dtoh(&x.slice(0..4)?, &mut out)?;
    let read = reader.synchronize();
    writer.synchronize()?;
    read
}

#[test]
fn a_race_is_found_however_many_accesses_to_other_bytes_came_between() {
    for accesses in [10, 5000, 20_000] {
        let err = read_after_many_writes_elsewhere(accesses).expect_err("the unordered read");
        assert!(err.to_string().contains("`x`"), "{accesses}: {err}");
    }
}

fn one() -> LaunchConfig {
    LaunchConfig::new(1u32, 32u32)
}

/// A graph builder that adds two unordered writers of `data` somewhere.
type Writers = fn(&mut Graph, &TypedKernel<AddScalar>, &mut DeviceBuffer<f32>, &DeviceBuffer<u32>);

/// Two kernel nodes writing `data` with no edge between them, at the top of a graph, inside a
/// child graph, and inside an `if` body: each is a race (on a GPU they run at once), found at
/// the first checked launch.
#[test]
fn unordered_nodes_race_inside_child_graphs_and_bodies() {
    let cases: [(&str, Writers); 3] = [
        ("top", |graph, add, data, _| {
            graph
                .add_kernel_node(&[], add, one(), (4u32, 1.0f32, &mut *data))
                .unwrap();
            graph
                .add_kernel_node(&[], add, one(), (4u32, 2.0f32, &mut *data))
                .unwrap();
        }),
        ("child", |graph, add, data, _| {
            let mut child = Graph::new(graph.context()).unwrap();
            child
                .add_kernel_node(&[], add, one(), (4u32, 1.0f32, &mut *data))
                .unwrap();
            child
                .add_kernel_node(&[], add, one(), (4u32, 2.0f32, &mut *data))
                .unwrap();
            graph.add_child_graph_node(&[], &child).unwrap();
        }),
        ("if", |graph, add, data, flag| {
            graph
                .add_if_node(&[], Condition::value(flag), |body| {
                    body.add_kernel_node(&[], add, one(), (4u32, 1.0f32, &mut *data))?;
                    body.add_kernel_node(&[], add, one(), (4u32, 2.0f32, &mut *data))?;
                    Ok(())
                })
                .unwrap();
        }),
    ];
    for (case, build) in cases {
        let ctx = Context::cpu_checked();
        let stream = Stream::new(&ctx).unwrap();
        let add = add_scalar(&ctx);
        let mut data = DeviceBuffer::<f32>::zeros(&stream, 4)
            .unwrap()
            .named("data");
        let flag = DeviceBuffer::from_slice(&stream, &[1u32]).unwrap();
        stream.synchronize().unwrap();
        let mut graph = Graph::new(&ctx).unwrap();
        build(&mut graph, &add, &mut data, &flag);
        let exec = graph.instantiate().unwrap();
        exec.launch(&stream).unwrap();
        let err = stream.synchronize().expect_err(case);
        assert!(err.to_string().contains("`data`"), "{case}: {err}");
        assert_eq!(data.to_vec(&stream).unwrap(), [3.0; 4], "{case}");
    }
}

gpu_pipeline::gpu_pipeline! {
    /// Adds 1 to `x` on its one stream.
    pub pipeline Bump {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = add_scalar_host;
        }
        params { n: u32, x: &mut DeviceBuffer<f32> }
        stage bump on main { launch k::add_scalar(n, 1.0, x) grid 1u32 block 32u32; }
    }
}

/// A race with a pipeline's work names the param and the pipeline's stream, not "device
/// buffer #N" and "stream #N" (a buffer its owner named keeps that name).
#[test]
fn a_race_with_a_pipeline_names_its_param_and_stream() {
    let ctx = Context::cpu_checked();
    let other = Stream::new(&ctx).unwrap();
    let mut x = DeviceBuffer::<f32>::zeros(&other, 4).unwrap();
    let mut out = PinnedBuffer::<f32>::zeros(&ctx, 4).unwrap();
    other.synchronize().unwrap();
    let mut bump = Bump::new(&ctx).unwrap();
    // The run's guard forgotten: nothing orders the copy after the kernel.
    std::mem::forget(bump.run(BumpParams { n: 4, x: &mut x }).unwrap());
    other.copy_dtoh(&x, &mut out).unwrap();
    let err = other
        .synchronize()
        .expect_err("the copy races with the kernel");
    let report = err.to_string();
    assert!(report.contains("`x`"), "{report}");
    assert!(report.contains("Bump.main"), "{report}");
    ctx.synchronize().unwrap();
}

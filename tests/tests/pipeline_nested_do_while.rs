//! A `do ... while` inside a device loop's body runs its body again every time the outer loop
//! reaches it, in each of its three forms (a comparison, a ping-pong with `swap`, a condition a
//! kernel sets): eagerly, and as a built graph (captured twice, launched once each), on the checked CPU backend and,
//! `#[ignore = "needs a CUDA GPU"]`, on a GPU. (A do-while's handle starts at 1 only once per
//! launch of the whole graph; in a body the graph sets it to 1 before the node.)

use gpu_pipeline::{Context, DeviceBuffer, Stream, gpu_pipeline};

// The kernels' CPU twins.
use tests::condition_kernels as cpu;

gpu_pipeline! {
    /// An outer loop of `outer - 1` iterations (a kernel counts `outer` down and decides),
    /// each running three do-whiles whose test fails after their first iteration: one bumps
    /// `once`, one steps `p` down through `q` with a swap, one bumps `set` and has a kernel
    /// set its test from `zero`.
    pipeline Nested {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_count_down(n: &mut [u32; unbounded], go: Condition) cpu = cpu::count_down;
            fn gp_set_to(value: &[u32; unbounded], go: Condition) cpu = cpu::set_to;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = cpu::step;
        }
        params {
            outer: &mut DeviceBuffer<u32>,
            zero: &DeviceBuffer<u32>,
            three: &DeviceBuffer<u32>,
            spare: &mut DeviceBuffer<u32>,
            left: &mut DeviceBuffer<u32>,
            once: &mut DeviceBuffer<u32>,
            p: &mut DeviceBuffer<u32>,
            q: &mut DeviceBuffer<u32>,
            pr: &mut DeviceBuffer<u32>,
            set: &mut DeviceBuffer<u32>,
        }
        scratch { go: Condition, again: Condition }
        stage solve on main {
            launch k::gp_count_down(outer, go) grid 1u32 block 1u32;
            while go max 100u32 {
                do {
                    launch k::gp_bump(once) grid 1u32 block 1u32;
                    launch k::gp_step(three, spare, left) grid 1u32 block 1u32;
                } while left > 5u32 max 100u32;
                do {
                    launch k::gp_step(p, q, pr) grid 1u32 block 1u32;
                    swap(p, q);
                } while pr > 1000000u32 max 100u32;
                do {
                    launch k::gp_bump(set) grid 1u32 block 1u32;
                    launch k::gp_set_to(zero, again) grid 1u32 block 1u32;
                } while again max 100u32;
                launch k::gp_count_down(outer, go) grid 1u32 block 1u32;
            }
        }
    }
}

fn read(stream: &Stream, buffer: &DeviceBuffer<u32>) -> u32 {
    buffer.to_vec(stream).unwrap()[0]
}

fn set(stream: &Stream, buffer: &mut DeviceBuffer<u32>, value: u32) {
    *buffer = DeviceBuffer::from_slice(stream, &[value]).unwrap();
    stream.synchronize().unwrap();
}

/// From `outer = 4` the outer loop runs 3 times, and each do-while once in each: `once` and
/// `set` count 3 per step and `p` goes down by 3, eagerly and in each of two graph launches.
fn a_do_while_in_a_loop_body_runs_at_every_outer_iteration(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let word = |value: u32| DeviceBuffer::from_slice(&stream, &[value]).unwrap();
    let (mut outer, zero, three) = (word(4), word(0), word(3));
    let (mut spare, mut left, mut once) = (word(0), word(0), word(0));
    let (mut p, mut q, mut pr, mut set_count) = (word(100), word(0), word(0), word(0));
    stream.synchronize().unwrap();
    let mut pipeline = Nested::new(ctx).unwrap();
    pipeline.set_fault_tracking(false);
    macro_rules! params {
        () => {
            NestedParams {
                outer: &mut outer,
                zero: &zero,
                three: &three,
                spare: &mut spare,
                left: &mut left,
                once: &mut once,
                p: &mut p,
                q: &mut q,
                pr: &mut pr,
                set: &mut set_count,
            }
        };
    }
    pipeline.run(params!()).unwrap().wait().unwrap();
    let counts = |stream: &Stream, once: &DeviceBuffer<u32>, set: &DeviceBuffer<u32>| {
        (read(stream, once), read(stream, set))
    };
    assert_eq!(counts(&stream, &once, &set_count), (3, 3), "eager");
    assert_eq!(read(&stream, &p), 97, "eager: three steps of p through q");

    set(&stream, &mut outer, 4);
    let mut graph = pipeline.capture(params!()).unwrap();
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    assert_eq!(
        counts(&stream, &once, &set_count),
        (6, 6),
        "first launch: each do-while ran at every outer iteration"
    );
    assert_eq!(read(&stream, &p), 94, "first launch");

    set(&stream, &mut outer, 4);
    let mut graph = pipeline.capture(params!()).unwrap();
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    assert_eq!(counts(&stream, &once, &set_count), (9, 9), "second launch");
    assert_eq!(read(&stream, &p), 91, "second launch");
}

tests::on_both_backends!(a_do_while_in_a_loop_body_runs_at_every_outer_iteration,);

//! The correct programs beside the checker's compile errors of issue 23 run, on the checked
//! CPU backend and (`#[ignore = "needs a CUDA GPU"]`) on a GPU: windows exactly as long as a constant bound, chunks apart on streams of their
//! own, `concurrent` claims that hold in every iteration, the length of one element of a
//! buffer array as a scalar, a scratch buffer written and then read inside a device loop, and
//! `after` across steps that run ahead.

use std::sync::{Arc, Mutex};

use gpu_pipeline::{Context, DeviceBuffer, Stream, gpu_pipeline};

mod cpu {
    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }

    pub fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += a * x[i];
        }
    }
}

/// A `const` item the compiler checks against the kernel's bound.
const HEAD: usize = 4;

gpu_pipeline! {
    /// A window exactly as long as the kernel's constant bound; chunks `i * s .. (i + 1) * s`
    /// on streams of their own, one iteration's two stages claimed concurrent; the length of
    /// one element of an array as a scalar.
    pub pipeline Chunks {
        streams { main, work[lanes] }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = cpu::saxpy;
        }
        params {
            lanes: usize,
            chunks: usize,
            s: usize,
            x: &mut DeviceBuffer<f32>,
            y: &mut DeviceBuffer<f32>,
            parts: &mut [DeviceBuffer<f32>],
        }
        stage head on main { launch k::add_scalar(HEAD as u32, 100.0, y[0..HEAD]) grid 1u32 block 32u32; }
        for i in 0..chunks {
            stage chunk on work[i % lanes] {
                launch k::add_scalar(s as u32, 1.0, x[i * s..(i + 1) * s]) grid 1u32 block 64u32;
            }
            stage part on work[(i + 1) % lanes] {
                launch k::add_scalar(parts[i].len() as u32, 2.0, parts[i]) grid 1u32 block 64u32;
            }
            concurrent(chunk, part);
        }
    }
}

fn chunks_apart_windows_at_their_bound_and_element_lengths_run(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let mut x = DeviceBuffer::<f32>::zeros(&stream, 12).unwrap();
    let mut y = DeviceBuffer::<f32>::zeros(&stream, 6).unwrap();
    let mut parts = vec![
        DeviceBuffer::<f32>::zeros(&stream, 2).unwrap(),
        DeviceBuffer::<f32>::zeros(&stream, 3).unwrap(),
        DeviceBuffer::<f32>::zeros(&stream, 1).unwrap(),
    ];
    stream.synchronize().unwrap();
    let mut pipeline = Chunks::new(ctx).unwrap();
    for _ in 0..2 {
        pipeline
            .run(ChunksParams {
                lanes: 2,
                chunks: 3,
                s: 4,
                x: &mut x,
                y: &mut y,
                parts: &mut parts,
            })
            .unwrap()
            .wait()
            .unwrap();
    }
    // Every element of every chunk once per step, none twice.
    assert_eq!(x.to_vec(&stream).unwrap(), [2.0; 12]);
    assert_eq!(
        y.to_vec(&stream).unwrap(),
        [200.0, 200.0, 200.0, 200.0, 0.0, 0.0]
    );
    for (part, len) in parts.iter().zip([2, 3, 1]) {
        assert_eq!(part.to_vec(&stream).unwrap(), vec![4.0; len]);
    }
}

gpu_pipeline! {
    /// Lowers `residual` by `drop` per iteration, through a scratch buffer the body writes
    /// before it reads it.
    pub pipeline ScratchLoop {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = cpu::saxpy;
        }
        params { drop: f32, residual: &mut DeviceBuffer<f32>, iterations: &mut DeviceBuffer<f32> }
        scratch { decrement: DeviceBuffer<f32> = 1 }
        stage solve on main {
            while residual > 0.5f32 max 100 {
                fill decrement = 0.0f32;
                launch k::add_scalar(1u32, drop, decrement) grid 1u32 block 1u32;
                launch k::saxpy(1u32, -1.0f32, decrement, residual) grid 1u32 block 1u32;
                launch k::add_scalar(1u32, 1.0f32, iterations) grid 1u32 block 1u32;
            }
        }
    }
}

fn a_scratch_buffer_written_then_read_inside_a_while_runs_eagerly_and_captured(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let mut residual = DeviceBuffer::from_slice(&stream, &[4.0f32]).unwrap();
    let mut iterations = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    stream.synchronize().unwrap();
    let mut pipeline = ScratchLoop::new(ctx).unwrap();
    pipeline
        .run(ScratchLoopParams {
            drop: 1.0,
            residual: &mut residual,
            iterations: &mut iterations,
        })
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(residual.to_vec(&stream).unwrap(), [0.0]);
    assert_eq!(iterations.to_vec(&stream).unwrap(), [4.0]);

    let mut residual = DeviceBuffer::from_slice(&stream, &[3.0f32]).unwrap();
    stream.synchronize().unwrap();
    let mut graph = pipeline
        .capture(ScratchLoopParams {
            drop: 0.5,
            residual: &mut residual,
            iterations: &mut iterations,
        })
        .unwrap();
    graph.launch().unwrap();
    graph.synchronize().unwrap();
    drop(graph);
    assert_eq!(residual.to_vec(&stream).unwrap(), [0.5]);
    assert_eq!(iterations.to_vec(&stream).unwrap(), [9.0]);
}

/// What the two stages of `Ordered` did, in the order they did it.
type Log = Arc<Mutex<Vec<char>>>;

gpu_pipeline! {
    /// Two host calls on two streams ordered only by `after` (as two library calls sharing a
    /// handle would be): `b` is slow, so a step running ahead would start its `a` during the
    /// step before's `b` if `after` stopped applying across steps.
    pub pipeline Ordered {
        streams { main, first, second }
        params { log: Log }
        stage a on first {
            host move || log.lock().unwrap().push('a');
        }
        stage b on second after a {
            host move || {
                std::thread::sleep(std::time::Duration::from_millis(2));
                log.lock().unwrap().push('b');
            };
        }
    }
}

fn after_keeps_ordering_steps_that_run_ahead(ctx: &Context) {
    let mut pipeline = Ordered::new(ctx).unwrap();
    let log = Log::default();
    pipeline
        .run_ahead(OrderedParams { log: log.clone() }, 20)
        .unwrap()
        .wait()
        .unwrap();
    let log: String = log.lock().unwrap().iter().collect();
    assert_eq!(log, "ab".repeat(20));
}

tests::on_both_backends!(
    chunks_apart_windows_at_their_bound_and_element_lengths_run,
    a_scratch_buffer_written_then_read_inside_a_while_runs_eagerly_and_captured,
    after_keeps_ordering_steps_that_run_ahead,
);

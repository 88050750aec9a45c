//! Ranges whose bounds are params, inside every kind of device body (`if`/`else`, `switch`
//! cases, `do ... while`): the params are bound where the step is described, the ranges are
//! checked and ordered like top-level ones, eager and replayed. On the checked CPU backend
//! (no race) and, ignored without a GPU, on CUDA.

use gpu_pipeline::{Context, DeviceBuffer, Result, Stream, gpu_pipeline};

mod cpu {
    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }
}

gpu_pipeline! {
    /// Each stage's body forms reach `x` and `y` only through `lo..hi` or `0..lo`.
    pipeline BodyRanges {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = crate::cpu::add_scalar;
        }
        params {
            lo: usize,
            hi: usize,
            mode: &mut DeviceBuffer<u32>,
            r: &mut DeviceBuffer<f32>,
            x: &mut DeviceBuffer<f32>,
            y: &mut DeviceBuffer<f32>,
        }
        stage branches on main {
            if mode != 0u32 { fill x[lo..hi] = 7.0f32; } else { fill x[0..lo] = 9.0f32; }
        }
        stage cases on main {
            switch mode {
                0 => { fill y[lo..hi] = 1.0f32; }
                1 => { copy x[lo..hi] -> y[lo..hi]; }
            }
        }
        stage repeat on main {
            do {
                launch k::add_scalar(1u32, 1.0f32, y[lo..hi]) grid 1u32 block 1u32;
                launch k::add_scalar(1u32, -1.0f32, r) grid 1u32 block 1u32;
            } while r > 0.5f32 max 10u32;
        }
    }
}

/// `x` and `y` after one step with `mode`, from zeros, `lo..hi` = 2..5 and `r` = 3: the
/// `do ... while` adds 1 to `y[2]` three times.
fn expected(mode: u32) -> ([f32; 8], [f32; 8]) {
    if mode == 1 {
        (
            [0., 0., 7., 7., 7., 0., 0., 0.],
            [0., 0., 10., 7., 7., 0., 0., 0.],
        )
    } else {
        (
            [9., 9., 0., 0., 0., 0., 0., 0.],
            [0., 0., 4., 1., 1., 0., 0., 0.],
        )
    }
}

fn param_ranges_inside_bodies(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut pipeline = BodyRanges::new(ctx)?;
    for mode in [1u32, 0] {
        for captured in [false, true] {
            let mut m = DeviceBuffer::from_slice(&stream, &[mode])?;
            let mut r = DeviceBuffer::from_slice(&stream, &[3.0f32])?;
            let mut x = DeviceBuffer::<f32>::zeros(&stream, 8)?;
            let mut y = DeviceBuffer::<f32>::zeros(&stream, 8)?;
            stream.synchronize()?;
            let params = BodyRangesParams {
                lo: 2,
                hi: 5,
                mode: &mut m,
                r: &mut r,
                x: &mut x,
                y: &mut y,
            };
            if captured {
                let mut graph = pipeline.capture(params)?;
                graph.launch()?;
                graph.synchronize()?;
            } else {
                pipeline.run(params)?.wait()?;
            }
            let (want_x, want_y) = expected(mode);
            let how = if captured { "replayed" } else { "eager" };
            assert_eq!(x.to_vec(&stream)?, want_x, "x, mode {mode}, {how}");
            assert_eq!(y.to_vec(&stream)?, want_y, "y, mode {mode}, {how}");
        }
    }
    Ok(())
}

/// A range inside a body that runs past the buffer is refused before anything runs.
fn a_param_range_past_the_buffer_in_a_body_is_refused(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut pipeline = BodyRanges::new(ctx)?;
    let mut m = DeviceBuffer::from_slice(&stream, &[1u32])?;
    let mut r = DeviceBuffer::from_slice(&stream, &[3.0f32])?;
    let mut x = DeviceBuffer::<f32>::zeros(&stream, 8)?;
    let mut y = DeviceBuffer::<f32>::zeros(&stream, 8)?;
    stream.synchronize()?;
    // The guard, were it given, would wait as it drops: only the refusal is kept.
    let outcome = pipeline
        .run(BodyRangesParams {
            lo: 2,
            hi: 9,
            mode: &mut m,
            r: &mut r,
            x: &mut x,
            y: &mut y,
        })
        .map(drop);
    let error = outcome.expect_err("a range past the end is refused");
    assert!(error.to_string().contains("x"), "{error}");
    assert_eq!(x.to_vec(&stream)?, [0.0; 8], "nothing ran");
    assert_eq!(r.to_vec(&stream)?, [3.0], "nothing ran");
    Ok(())
}

tests::on_both_backends_race_free!(
    param_ranges_inside_bodies,
    a_param_range_past_the_buffer_in_a_body_is_refused,
);

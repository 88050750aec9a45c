//! Copies between device and pinned host memory inside device conditional bodies: a `while`
//! whose body reports its residual to the host, an `if` whose body uploads new input, and a
//! `switch` case that does both. CUDA allows a conditional body's copies only between device
//! memory and device-mapped pinned memory, which is what a `PinnedBuffer` is; a driver that
//! refused them would fail the capture. The setters of scalars that kernels inside the bodies
//! take update those nodes of the executable graph. Eagerly and as a built graph replayed twice, on the
//! checked CPU backend and, `#[ignore = "needs a CUDA GPU"]`, on a GPU.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, Stream, gpu_pipeline};

mod cpu {
    pub fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }
}

gpu_pipeline! {
    /// Steps `residual` from `start` by `down` while above 0.5, copying each value to `seen`;
    /// then copies `input` into `dst` when `flag != 0`, and in case 1 of `mode` adds `lift` to
    /// `dst` and copies it to `echo`.
    pipeline Report {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
        }
        params {
            start: f32,
            down: f32,
            lift: f32,
            residual: &mut DeviceBuffer<f32>,
            seen: &mut PinnedBuffer<f32>,
            flag: &DeviceBuffer<u32>,
            mode: &DeviceBuffer<u32>,
            input: &PinnedBuffer<f32>,
            dst: &mut DeviceBuffer<f32>,
            echo: &mut PinnedBuffer<f32>,
        }
        stage solve on main {
            fill residual = start;
            while residual > 0.5f32 max 100u32 {
                launch k::add_scalar(1u32, down, residual) grid 1u32 block 1u32;
                copy residual -> seen;
            }
            if flag != 0u32 {
                copy input -> dst;
            }
            switch mode {
                0 => { launch k::add_scalar(2u32, 1.0f32, dst) grid 1u32 block 2u32; }
                1 => {
                    launch k::add_scalar(2u32, lift, dst) grid 1u32 block 2u32;
                    copy dst -> echo;
                }
            }
        }
    }
}

fn buffer<T: gpu_pipeline::Pod>(stream: &Stream, values: &[T]) -> Result<DeviceBuffer<T>> {
    let b = DeviceBuffer::from_slice(stream, values)?;
    stream.synchronize()?;
    Ok(b)
}

fn copies_to_and_from_pinned_memory_run_inside_conditional_bodies(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut residual = buffer(&stream, &[0.0f32])?;
    let (on, one) = (buffer(&stream, &[1u32])?, buffer(&stream, &[1u32])?);
    let mut dst = buffer(&stream, &[0.0f32; 2])?;
    let mut seen = PinnedBuffer::from_slice(ctx, &[-7.0f32])?;
    let input = PinnedBuffer::from_slice(ctx, &[3.0f32, 4.0])?;
    let mut echo = PinnedBuffer::from_slice(ctx, &[-1.0f32; 2])?;
    let mut pipeline = Report::new(ctx)?;
    pipeline
        .run(ReportParams {
            start: 2.0,
            down: -1.0,
            lift: 100.0,
            residual: &mut residual,
            seen: &mut seen,
            flag: &on,
            mode: &one,
            input: &input,
            dst: &mut dst,
            echo: &mut echo,
        })?
        .wait()?;
    assert_eq!(
        (seen.as_slice()?[0], &echo.as_slice()?[..]),
        (0.0, &[103.0, 104.0][..])
    );
    seen.as_mut_slice()?[0] = -7.0;
    echo.as_mut_slice()?.fill(-1.0);
    let mut graph = pipeline.capture(ReportParams {
        start: 3.5,
        down: -1.0,
        lift: 100.0,
        residual: &mut residual,
        seen: &mut seen,
        flag: &on,
        mode: &one,
        input: &input,
        dst: &mut dst,
        echo: &mut echo,
    })?;
    graph.launch()?;
    graph.launch()?;
    {
        let window = graph.window()?;
        assert_eq!(window.seen()?[0], 0.5, "the last value the loop copied");
        assert_eq!(
            &window.echo()?[..],
            &[103.0, 104.0],
            "the switch case's copy"
        );
    }
    // Setters of scalars that kernels inside the bodies take.
    graph.set_down(-2.0)?;
    graph.set_lift(1000.0)?;
    graph.launch()?;
    {
        let window = graph.window()?;
        assert_eq!(window.seen()?[0], -0.5, "3.5 stepped down by 2.0 twice");
        assert_eq!(&window.echo()?[..], &[1003.0, 1004.0], "the new lift");
    }
    drop(graph);
    assert_eq!(dst.to_vec(&stream)?, [1003.0, 1004.0]);
    Ok(())
}

tests::on_both_backends_race_free!(copies_to_and_from_pinned_memory_run_inside_conditional_bodies);

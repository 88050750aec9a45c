//! What a called function can do with its stage's stream: launch a kernel of the pipeline's
//! module declared elsewhere, copy, set memory, write and wait on flags, enqueue a host
//! function, and hand the raw handle to another library.

use gpu_pipeline::{Context, DeviceBuffer, FlagCell, LaunchConfig, PinnedBuffer, Result, TypedKernel, TypedStream, WaitCondition, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Library {
        streams { main }
        params { x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, h: &mut PinnedBuffer<f32>, flag: &mut FlagCell }
        stage work on main {
            call work(x, y, h, flag) reads(x) writes(y, h, flag);
        }
    }
}

type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);

fn work(s: &TypedStream<'_, LibraryMain>, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, h: &mut PinnedBuffer<f32>, flag: &mut FlagCell) -> Result<()> {
    let kernel: Option<&TypedKernel<Saxpy>> = None;
    if let Some(kernel) = kernel {
        s.launch(kernel, LaunchConfig::new(4, 256), (1024u32, 2.0f32, x, &mut *y))?;
    }
    s.copy_dtod(x, y)?;
    s.memset_u32(y, 0)?;
    s.copy_dtoh(y, h)?;
    s.write_value_32(flag, 1)?;
    s.wait_value_32(flag, WaitCondition::GreaterOrEqual, 1)?;
    s.launch_host_fn(std::sync::Arc::new(|| {}))?;
    let _ = (s.handle(), s.label(), s.id(), s.context(), s.is_capturing()?);
    Ok(())
}

fn step(ctx: &Context, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, h: &mut PinnedBuffer<f32>, flag: &mut FlagCell) -> Result<()> {
    Library::new(ctx)?.run(LibraryParams { x, y, h, flag })?.wait()
}

fn main() {
    let _ = step;
}

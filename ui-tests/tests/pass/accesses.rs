//! Every way a statement may name a buffer: launch arguments, a length in a dimension or a
//! scalar argument, and `call` arguments bare, borrowed, reborrowed mutably or inside an
//! expression (a view), each as its clause declares; a closure parameter that shadows a
//! buffer's name is not the buffer.

use gpu_pipeline::{Context, DeviceBuffer, DeviceView, Result, TypedStream, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Accesses {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, z: &mut DeviceBuffer<f32> }
        stage scale on main {
            launch k::add_scalar(y.len() as u32, [1.0f32].iter().map(|x| x * 2.0).sum(), y)
                grid (y.len() as u32).div_ceil(256) block 256;
        }
        stage library on side {
            call library(x, &z, x.as_view(), y.len()) reads(x) writes(z);
            call library_mut(&mut z, x) reads(x) writes(z);
        }
    }
}

fn library(_s: &TypedStream<'_, AccessesSide>, _x: &DeviceBuffer<f32>, _z: &DeviceBuffer<f32>, _view: DeviceView<'_, f32>, _len: usize) -> Result<()> {
    Ok(())
}

fn library_mut(_s: &TypedStream<'_, AccessesSide>, _z: &mut DeviceBuffer<f32>, _x: &DeviceBuffer<f32>) -> Result<()> {
    Ok(())
}

fn step(ctx: &Context, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, z: &mut DeviceBuffer<f32>) -> Result<()> {
    Accesses::new(ctx)?.run(AccessesParams { n: 1024, x, y, z })?.wait()
}

fn main() {
    let _ = step;
}

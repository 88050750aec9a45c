//! A pipeline over two devices: streams and buffers on each, a kernel per device on its own
//! memory, peer copies both ways (on a stream of either device), pinned memory and a flag on
//! the second device, a `call` on the second device's stream, and `new` taking one context
//! per device.

use gpu_pipeline::{Context, DeviceBuffer, FlagCell, PinnedBuffer, Result, TypedStream, gpu_pipeline};

fn stats(_stream: &TypedStream<SplitOther>, _data: &DeviceBuffer<f32>) -> Result<()> {
    Ok(())
}

gpu_pipeline! {
    pub pipeline Split {
        devices { gpu0, gpu1 }
        streams { main on gpu0, other(priority = high) on gpu1 }
        unsafe kernels k = ptx("") {
            fn scale(n: u32, data: &mut [f32; unbounded]);
        }
        params {
            n: u32,
            left: &mut DeviceBuffer<f32>,
            right: &mut DeviceBuffer<f32> on gpu1,
            snapshot: &mut PinnedBuffer<f32> on gpu1,
            done: &mut FlagCell on gpu1,
        }
        scratch {
            right_copy: DeviceBuffer<f32> on gpu0 = n as usize,
        }
        stage grow_left on main {
            launch k::scale(n, left) grid n.div_ceil(256) block 256;
        }
        stage grow_right on other {
            launch k::scale(n, right) grid n.div_ceil(256) block 256;
            call stats(right) reads(right);
        }
        stage pull on main {
            copy right -> right_copy;
        }
        stage push on other {
            copy left -> right;
            copy right -> snapshot;
            write done = 1;
        }
    }
}

fn step(
    gpu0: &Context,
    gpu1: &Context,
    left: &mut DeviceBuffer<f32>,
    right: &mut DeviceBuffer<f32>,
    snapshot: &mut PinnedBuffer<f32>,
    done: &mut FlagCell,
) -> Result<()> {
    let mut pipeline = Split::new(gpu0, gpu1)?;
    assert_eq!(pipeline.devices().len(), 2);
    let n = left.len() as u32;
    pipeline.run(SplitParams { n, left: &mut *left, right: &mut *right, snapshot: &mut *snapshot, done: &mut *done })?.wait()?;
    let mut graph = pipeline.capture(SplitParams { n, left, right, snapshot, done })?;
    graph.launch()?;
    graph.synchronize()
}

fn main() {
    let _ = step;
}

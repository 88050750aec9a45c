//! `swap(a, b);` at the end of `while` and `do ... while` bodies (a ping-pong with no copy per
//! iteration), two pairs at once, beside a nested `if`; run eagerly and as a graph on the CPU
//! backend.

use gpu_pipeline::{Context, DeviceBuffer, gpu_pipeline};

fn step(src: &[u32], dst: &mut [u32], r: &mut [u32]) {
    dst[0] = src[0].wrapping_sub(1);
    r[0] = dst[0];
}

gpu_pipeline! {
    pub pipeline PingPong {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = step;
        }
        params {
            x: &mut DeviceBuffer<u32>, y: &mut DeviceBuffer<u32>,
            a: &mut DeviceBuffer<u32>, b: &mut DeviceBuffer<u32>,
            r: &mut DeviceBuffer<u32>, s: &mut DeviceBuffer<u32>,
        }
        scratch { t: DeviceBuffer<u32> = 1 }
        stage sweep on main {
            while r > 0u32 max 100 {
                launch k::gp_step(x, y, r) grid 1u32 block 1u32;
                if r > 2u32 {
                    launch k::gp_step(a, b, s) grid 1u32 block 1u32;
                }
                swap(x, y);
                swap(a, b);
            }
            fill t = 3u32;
            do {
                launch k::gp_step(t, y, s) grid 1u32 block 1u32;
                swap(t, y);
            } while s > 0u32 max 100;
        }
    }
}

fn main() -> gpu_pipeline::Result<()> {
    let ctx = Context::cpu();
    let stream = gpu_pipeline::Stream::new(&ctx)?;
    let one = |v: u32| DeviceBuffer::from_slice(&stream, &[v]);
    let (mut x, mut y, mut a, mut b, mut r, mut s) = (one(4)?, one(0)?, one(9)?, one(0)?, one(4)?, one(0)?);
    let mut pipeline = PingPong::new(&ctx)?;
    macro_rules! params {
        () => {
            PingPongParams { x: &mut x, y: &mut y, a: &mut a, b: &mut b, r: &mut r, s: &mut s }
        };
    }
    pipeline.run(params!())?.wait()?;
    assert_eq!(x.to_vec(&stream)?, [0]);
    let mut graph = pipeline.capture(params!())?;
    graph.launch()?;
    graph.synchronize()?;
    Ok(())
}

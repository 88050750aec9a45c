//! The correct programs beside the checker's errors of issue 23 compile: chunks apart on
//! streams of their own, a ring that reaches its neighbour through `peer`, claims that hold in
//! every iteration, the length of one element of a buffer array as a scalar, windows exactly
//! as long as a constant bound, a scratch buffer written then read inside a `while`, and
//! sweeps alternated by hand beside a `swap`. (tests/tests/checker_exact.rs runs them.)

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

/// Constants the compiler checks against the bounds and ranges they meet.
const HEAD: usize = 4;
const EVERY: u32 = 3;

gpu_pipeline! {
    pub pipeline Chunks {
        streams { main, work[lanes] }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; n]);
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { lanes: usize, chunks: usize, s: usize, tol: f32, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, residual: &mut DeviceBuffer<f32>, parts: &mut [DeviceBuffer<f32>] }
        scratch { tmp: DeviceBuffer<f32> = 4 }
        stage head on main {
            launch k::add_scalar(HEAD as u32, 1.0, y[0..HEAD]) grid 1u32 block 32u32;
            copy y[HEAD..2 * HEAD] -> x[0..HEAD];
            if step % EVERY == EVERY - 1 { fill y[..HEAD] = 0.0; }
        }
        for i in 0..chunks {
            stage chunk on work[i % lanes] {
                launch k::saxpy(s as u32, 2.0, y[i * s..(i + 1) * s + 1], x[i * s..(i + 1) * s]) grid 1u32 block 256u32;
            }
            stage part on work[(i + 1) % lanes] {
                launch k::add_scalar(parts[i].len() as u32, 1.0, parts[i]) grid 1u32 block 256u32;
            }
            concurrent(chunk, part);
        }
        stage solve on main {
            while residual > tol max 100 {
                fill tmp = 1.0;
                launch k::saxpy(1, -1.0, tmp[0..1], residual) grid 1u32 block 1u32;
                launch k::add_scalar(4, 1.0, tmp) grid 1u32 block 32u32;
            }
        }
    }
}

gpu_pipeline! {
    pub pipeline Ring {
        devices { gpu[4] }
        streams { main on gpu[0], work[4] on gpu[..] }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { nx: usize, fields: &mut [DeviceBuffer<f32>] on gpu[..], halos: &mut [DeviceBuffer<f32>] on gpu[..] }
        for i in 0..4 {
            stage send on work[i] {
                launch k::saxpy(nx as u32, 1.0, fields[i][..nx], halos[(i + 1) % 4][..nx]) grid 1u32 block 256u32 peer(halos);
            }
        }
        for i in 0..4 {
            stage mix on work[i] {
                launch k::saxpy(nx as u32, 0.5, halos[i][..nx], fields[i][..nx]) grid 1u32 block 256u32;
            }
        }
    }
}

gpu_pipeline! {
    pub pipeline Sweeps {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params { n: u32, u: &mut DeviceBuffer<f32>, v: &mut DeviceBuffer<f32> }
        swap(u, v);
        for sweep in 0..2 {
            stage relax on main {
                launch k::saxpy(n, 1.0, u, v) grid n.div_ceil(256) block 256;
                launch k::saxpy(n, 1.0, v, u) grid n.div_ceil(256) block 256;
            }
        }
    }
}

fn build(ctx: &Context, devices: &[Context; 4]) -> Result<()> {
    let _ = (Chunks::new(ctx)?, Ring::new(devices)?, Sweeps::new(ctx)?);
    Ok(())
}

fn main() {
    let _ = build;
}

//! Scratch buffers the pipeline owns: device and pinned buffers sized by an expression over
//! the params, and a flag cell.

use gpu_pipeline::{Context, DeviceBuffer, FlagCell, PinnedBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Staged {
        streams { compute, copy }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { n: u32, input: &PinnedBuffer<f32>, out: &mut PinnedBuffer<f32> }
        scratch {
            /// Device copy of the input.
            tmp: DeviceBuffer<f32> = n as usize,
            staging: PinnedBuffer<f32> = (n as usize) * 2,
            ready: FlagCell,
        }
        stage upload on copy {
            copy input -> tmp;
            write ready = 1;
        }
        stage bump on compute {
            wait ready == 1;
            launch k::add_scalar(n, 1.0, tmp) grid n.div_ceil(256) block 256;
        }
        stage download on copy {
            copy tmp -> out;
            host move || {} reads(staging);
        }
    }
}

gpu_pipeline! {
    /// A scratch buffer written on every path through device control flow before it is
    /// read: both bodies of an `if`/`else`, and a `do ... while` body (it always runs).
    pub pipeline EveryPath {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded]);
        }
        params { m: u32, flag: &DeviceBuffer<u32>, r: &mut DeviceBuffer<f32>, out: &mut DeviceBuffer<f32> }
        scratch { branches: DeviceBuffer<f32> = m as usize, looped: DeviceBuffer<f32> = m as usize }
        stage prepare on main {
            if flag != 0u32 { fill branches = 0.0f32; } else { fill branches = 1.0f32; }
            do {
                fill looped = 0.0f32;
                launch k::add_scalar(1u32, -1.0, r) grid 1 block 1;
            } while r > 0.5f32 max 10u32;
        }
        stage finish on main {
            launch k::saxpy(m, 1.0, branches, out) grid 1 block 256;
            launch k::saxpy(m, 1.0, looped, out) grid 1 block 256;
        }
    }
}

fn step(ctx: &Context, input: &PinnedBuffer<f32>, out: &mut PinnedBuffer<f32>) -> Result<()> {
    let mut pipeline = Staged::new(ctx)?;
    pipeline.run(StagedParams { n: 1024, input, out })?.wait()
}

fn main() {
    let _ = step;
    let _ = EveryPath::new;
    let _ = std::marker::PhantomData::<FlagCell>;
    let _ = std::marker::PhantomData::<DeviceBuffer<f32>>;
}

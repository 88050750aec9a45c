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

fn step(ctx: &Context, input: &PinnedBuffer<f32>, out: &mut PinnedBuffer<f32>) -> Result<()> {
    let mut pipeline = Staged::new(ctx)?;
    pipeline.run(StagedParams { n: 1024, input, out })?.wait()
}

fn main() {
    let _ = step;
    let _ = std::marker::PhantomData::<FlagCell>;
    let _ = std::marker::PhantomData::<DeviceBuffer<f32>>;
}

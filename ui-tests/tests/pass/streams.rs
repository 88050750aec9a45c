//! Streams with every option: named and numeric priorities, `non_blocking`, both together.
//! The first stream is the origin; each stream has an accessor and a marker type.

use gpu_pipeline::{Context, DeviceBuffer, Result, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Streams {
        streams {
            compute(priority = high),
            copy(non_blocking),
            background(priority = low, non_blocking),
            plain(priority = default),
            numbered(priority = -1),
        }
        params {
            a: &mut DeviceBuffer<f32>,
            b: &mut DeviceBuffer<f32>,
            c: &mut DeviceBuffer<f32>,
            d: &mut DeviceBuffer<f32>,
            e: &mut DeviceBuffer<f32>,
        }
        stage fill_a on compute { fill a = 0.0; }
        stage fill_b on copy { fill b = 0.0; }
        stage fill_c on background { fill c = 0.0; }
        stage fill_d on plain { fill d = 0.0; }
        stage fill_e on numbered { fill e = 0.0; }
    }
}

fn step(ctx: &Context, bufs: [&mut DeviceBuffer<f32>; 5]) -> Result<()> {
    let [a, b, c, d, e] = bufs;
    let mut pipeline = Streams::new(ctx)?;
    let _: &gpu_pipeline::Stream = pipeline.compute_stream();
    let _: (StreamsCompute, StreamsBackground) = (StreamsCompute, StreamsBackground);
    let _ = (pipeline.copy_stream(), pipeline.plain_stream(), pipeline.numbered_stream());
    pipeline.run(StreamsParams { a, b, c, d, e })?.wait()
}

fn main() {
    let _ = step;
}

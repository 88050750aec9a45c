//! The library's own CPU time to build a 100-kernel step and instantiate it, per graph: the
//! runtime's node-by-node build (`Graph::add_kernel_node`) and a generated pipeline's
//! `capture`, three rounds each.
//!
//! Against the real driver this is the driver's time plus ours (`graph_build` sets it beside
//! raw driver calls). Against the do-nothing driver of `tools/fake-driver` it is ours alone,
//! on a machine without a GPU, which is what a profiler should look at:
//!
//! ```sh
//! cc -O2 -shared -fPIC -o target/libfake_cuda.so tools/fake-driver/fake_libcuda.c -ldl
//! GPU_PIPELINE_LIBCUDA=$PWD/target/libfake_cuda.so cargo bench -p gpu-pipeline --bench build_cost
//! ```
//!
//! Arguments (after `--` with cargo): the case (`runtime`, `generated`, or nothing for both)
//! and the graphs per round (default 2000). Without a CUDA driver it times the CPU backend.

use std::time::Instant;

use gpu_pipeline::{
    Context, CpuKernel, DeviceBuffer, Graph, LaunchConfig, Module, Stream, TypedKernel,
};

/// The step: 100 dependent `add_scalar` launches on one buffer (as `graph_build`'s).
macro_rules! chain_pipeline {
    ($($i:literal)*) => {
        gpu_pipeline::gpu_pipeline! {
            /// 100 dependent kernels on one stream.
            pipeline Chain {
                streams { main }
                unsafe kernels k = ptx(include_str!("../kernels/test_kernels.ptx")) {
                    fn add_scalar(n: u32, value: f32, data: &mut [f32; unbounded])
                        cpu = add_scalar_cpu;
                }
                params { n: u32, value: f32, data: &mut DeviceBuffer<f32> }
                // `$i` only makes each repetition distinct; the grid is always one block.
                stage chain on main { $( launch k::add_scalar(n, value, data) grid 1u32 + 0 * $i block 32u32; )* }
            }
        }
    };
}

chain_pipeline!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33
    34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
    64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93
    94 95 96 97 98 99
);

type AddScalar = (u32, f32, &'static mut [f32]);
type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// `add_scalar` on the CPU backend: adds `value` to the first `n` elements.
fn add_scalar_cpu(n: u32, value: f32, data: &mut [f32]) {
    for x in data.iter_mut().take(n as usize) {
        *x += value;
    }
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let case = args.next().unwrap_or_default();
    let graphs: u32 = match args.next() {
        Some(text) => text
            .parse()
            .map_err(|_| format!("graphs per round: `{text}` is not a number"))?,
        None => 2000,
    };
    if !["", "runtime", "generated"].contains(&case.as_str()) {
        return Err(format!("unknown case `{case}` (runtime, generated, or none for both)").into());
    }
    let ctx = Context::auto()?;
    let module = Module::load_ptx(&ctx, include_str!("../kernels/test_kernels.ptx"))?;
    // SAFETY: `add_scalar(unsigned n, float value, float* data)` writes `data[0..n)` only
    // (runtime/kernels/test_kernels.cu); every launch passes n = 32, the buffer's length.
    let add: TypedKernel<AddScalar> =
        unsafe { module.function("add_scalar")?.typed()? }.with_cpu(CpuKernel::new(add_scalar_cpu));
    let stream = Stream::non_blocking(&ctx)?;
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 32)?;
    stream.synchronize()?;
    let mut chain = Chain::new(&ctx)?;
    chain.set_fault_tracking(false);
    let config = LaunchConfig::new(1u32, 32u32);
    println!(
        "{:?} backend, {graphs} graphs of 100 kernel nodes per round",
        ctx.backend()
    );
    let per_graph = |start: Instant| start.elapsed().as_secs_f64() * 1e6 / f64::from(graphs);
    for round in 1..=3 {
        if case.is_empty() || case == "runtime" {
            let start = Instant::now();
            for _ in 0..graphs {
                let mut graph = Graph::new(&ctx)?;
                let mut last = Vec::with_capacity(1);
                for _ in 0..100 {
                    let node =
                        graph.add_kernel_node(&last, &add, config, (32u32, 1.0f32, &mut data))?;
                    last.clear();
                    last.push(node.node());
                }
                drop(graph.instantiate()?);
            }
            println!(
                "round {round}: runtime build {:.2} µs/graph",
                per_graph(start)
            );
        }
        if case.is_empty() || case == "generated" {
            let start = Instant::now();
            for _ in 0..graphs {
                let params = ChainParams {
                    n: 32,
                    value: 1.0,
                    data: &mut data,
                };
                drop(chain.capture(params)?);
            }
            println!(
                "round {round}: generated capture {:.2} µs/graph",
                per_graph(start)
            );
        }
    }
    Ok(())
}

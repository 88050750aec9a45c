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
//! Arguments (after `--` with cargo): the case (`runtime`, `generated`, `set`, or nothing for
//! the first two) and the graphs per round (default 2000). `set` times the in-place update of
//! the scalar of all 100 nodes instead, per update of the whole graph: the generated setter
//! and `apply_updates`, then the runtime's `kernel_updates` batch. Without a CUDA driver it
//! times the CPU backend.

#[path = "common/chain.rs"]
mod chain;

use std::time::Instant;

use chain::{Chain, ChainParams, add_scalar_cpu};

use gpu_pipeline::{
    Context, CpuKernel, DeviceBuffer, Graph, LaunchConfig, Module, Stream, TypedKernel,
};

type AddScalar = (u32, f32, &'static mut [f32]);
type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let case = args.next().unwrap_or_default();
    let graphs: u32 = match args.next() {
        Some(text) => text
            .parse()
            .map_err(|_| format!("graphs per round: `{text}` is not a number"))?,
        None => 2000,
    };
    if !["", "runtime", "generated", "set"].contains(&case.as_str()) {
        return Err(format!(
            "unknown case `{case}` (runtime, generated, set, or none for both builds)"
        )
        .into());
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
    if case == "set" {
        return time_sets(&ctx, &add, &mut chain, &mut data, graphs);
    }
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

/// The `set` case: `updates` in-place updates of the scalar of all 100 kernel nodes, through
/// the generated setter and through the runtime's batch, three rounds each.
fn time_sets(
    ctx: &Context,
    add: &TypedKernel<AddScalar>,
    chain: &mut Chain,
    data: &mut DeviceBuffer<f32>,
    updates: u32,
) -> Result<()> {
    let config = LaunchConfig::new(1u32, 32u32);
    let per_update = |start: Instant| start.elapsed().as_secs_f64() * 1e6 / f64::from(updates);
    let mut hand = Graph::new(ctx)?;
    let mut nodes = Vec::with_capacity(100);
    for k in 0..100 {
        let after: Vec<_> = nodes
            .last()
            .map(|n: &gpu_pipeline::KernelNode| n.node())
            .into_iter()
            .collect();
        nodes.push(hand.add_kernel_node(&after, add, config, (32u32, 1.0f32, &mut *data))?);
        debug_assert_eq!(nodes.len(), k + 1);
    }
    let mut exec = hand.instantiate()?;
    let mut second = DeviceBuffer::<f32>::zeros(&Stream::non_blocking(ctx)?, 32)?;
    let mut graph = chain.capture(ChainParams {
        n: 32,
        value: 1.0,
        data: &mut second,
    })?;
    let mut value = 1.0f32;
    for round in 1..=3 {
        let start = Instant::now();
        for _ in 0..updates {
            value += 1.0;
            graph.set_value(value)?;
            graph.apply_updates()?;
        }
        println!(
            "round {round}: generated set {:.2} µs/update",
            per_update(start)
        );
        let start = Instant::now();
        for _ in 0..updates {
            value += 1.0;
            let mut batch = exec.kernel_updates()?;
            for node in &nodes {
                batch.set(node, add, config, (32u32, value, &mut *data))?;
            }
        }
        println!(
            "round {round}: runtime set {:.2} µs/update",
            per_update(start)
        );
    }
    Ok(())
}

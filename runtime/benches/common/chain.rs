//! The 100-kernel step that `graph_build` and `build_cost` build: 100 dependent `add_scalar`
//! launches on one buffer, one stream.

// Each bench uses a part of the generated API (captures, not eager runs or windows).
#![allow(dead_code)]

use std::time::{Duration, Instant};

use gpu_pipeline::{DeviceBuffer, gpu_pipeline};

/// `add_scalar` on the CPU backend: adds `value` to the first `n` elements.
pub fn add_scalar_cpu(n: u32, value: f32, data: &mut [f32]) {
    for x in data.iter_mut().take(n as usize) {
        *x += value;
    }
}

/// A stage of 100 launches of `add_scalar` on one buffer.
macro_rules! chain_pipeline {
    ($($i:literal)*) => {
        gpu_pipeline! {
            /// 100 dependent kernels on one stream.
            pub pipeline Chain {
                streams { main }
                unsafe kernels k = ptx(include_str!("../../kernels/test_kernels.ptx")) {
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

/// One capture-to-runnable of the chain in [`graph_build`]'s phases: the pipeline's build
/// (prepare, plan, one node per launch), instantiation, then dropping both. It calls the
/// generated `__build` directly, which `capture` calls before instantiating, so the two can be
/// timed apart; only the bench does that.
pub fn build_to_runnable(
    chain: &mut Chain,
    data: &mut DeviceBuffer<f32>,
) -> Result<[Duration; 3], Box<dyn std::error::Error>> {
    let start = Instant::now();
    let params = &mut ChainParams {
        n: 32,
        value: 1.0,
        data,
    };
    let built = chain.__build(0, params)?;
    let built_at = Instant::now();
    let captured = gpu_pipeline::__private_0_1::instantiate(built)?;
    let instantiated = Instant::now();
    drop(captured);
    Ok([
        built_at - start,
        instantiated - built_at,
        instantiated.elapsed(),
    ])
}

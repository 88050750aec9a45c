//! Kernel bounds: every form a bound takes (a parameter, a product, parentheses, a scale, an
//! added literal, a constant; unsigned, signed and aliased integer types), buffers with and
//! without one, a CPU implementation over plain slices, a step, a capture and the setter of
//! a bounding scalar; and the runtime's `Kernel::typed_with_bounds` with a `const`
//! declaration. Each bound holds by reading its kernel.

use gpu_pipeline::{
    Bound, Bounds, Context, DeviceBuffer, Module, Result, TypedKernel, gpu_pipeline,
};

type Len = u64;

/// Kernels over grids, compiled at run time; each comment says what it indexes.
const GRIDS: &str = r#"
// data below nx * ny * nz
extern "C" __global__ void fill_grid(unsigned int nx, long long ny, unsigned long long nz,
                                     float v, float* data) {
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    long long y = blockIdx.y;
    unsigned long long z = blockIdx.z;
    if (x < nx && y < ny && z < nz) data[(z * ny + y) * nx + x] = v;
}
// src below n + 1 (each cell reads its right neighbour), dst below n
extern "C" __global__ void pairs(unsigned int n, const float* src, float* dst) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] + src[i + 1];
}
// pos below 3 * n (x, y, z per body), mass below n
extern "C" __global__ void lift(unsigned int n, const float* mass, float* pos) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) pos[3 * i + 2] += mass[i];
}
"#;

mod cpu {
    pub fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += a * x[i];
        }
    }
}

gpu_pipeline! {
    /// One launch per form of bound.
    pub pipeline Bounded {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../../runtime/kernels/test_kernels.ptx")) {
            /// `x` and `y` below `n`; the CPU implementation takes plain slices.
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = cpu::saxpy;
            /// `input` below `n`, `out` only at 0: a constant bound.
            fn reduce_sum(n: u32, input: &[f32; n], out: &mut [f32; 1]);
            fn empty();
        }
        unsafe kernels grids = cuda_c(GRIDS) {
            fn fill_grid(nx: u32, ny: i64, nz: Len, v: f32, data: &mut [f32; (nx * ny) * nz]);
            fn pairs(n: u32, src: &[f32; n + 1], dst: &mut [f32; n]);
            fn lift(n: u32, mass: &[f32; n], pos: &mut [f32; 3 * n]);
        }
        params {
            n: u32, a: f32, nx: u32, ny: i64, nz: Len,
            x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, sum: &mut DeviceBuffer<f32>,
        }
        stage compute on main {
            launch k::saxpy(n, a, x, y) grid n.div_ceil(256) block 256;
            launch k::reduce_sum(n, x, sum) grid 1 block 256 shared 256 * 4;
            launch k::empty() grid 1 block 1;
            launch grids::fill_grid(nx, ny, nz, a, y) grid (nx.div_ceil(32), ny as u32, nz as u32) block 32;
            launch grids::pairs(n - 1, x, y) grid n.div_ceil(256) block 256;
            launch grids::lift(n / 3, x, y) grid n.div_ceil(256) block 256;
        }
    }
}

type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);

/// The same bounds for the runtime, by parameter position.
const SAXPY: Bounds = Bounds::new()
    .names(&["n", "a", "x", "y"])
    .buffer(2, Bound::param(0))
    .buffer(3, Bound::param(0));

fn declared(module: &Module) -> Result<TypedKernel<Saxpy>> {
    // SAFETY: `saxpy(unsigned n, float a, const float* x, float* y)` indexes `x` and `y`
    // below `n`.
    unsafe { module.function("saxpy")?.typed_with_bounds(SAXPY) }
}

fn step(ctx: &Context, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, sum: &mut DeviceBuffer<f32>) -> Result<()> {
    let mut pipeline = Bounded::new(ctx)?;
    let params = BoundedParams { n: 1024, a: 0.5, nx: 32, ny: 8, nz: 4, x, y, sum };
    let mut graph = pipeline.capture(params)?;
    graph.launch()?;
    // `n` bounds `x` and `y`: a value past them is refused, and the graph keeps the old one.
    let _refused = graph.set_n(1 << 20).unwrap_err();
    graph.set_a(2.0)?;
    graph.synchronize()
}

fn main() {
    let _ = (step, declared);
}

//! A kernel parameter taken by value must be plain data (`DeviceRepr`, which requires
//! `bytemuck::Pod`): a struct holding a `Vec` carries a host heap pointer the device cannot
//! follow, so it cannot appear in a kernel signature.
//
// expected: error[E0277]: `Params` cannot be passed to a kernel by value
//   --> kernel.typed::<(u32, Params)>()   label: not a `DeviceRepr` type
//   note: kernel scalars are the numeric primitives, arrays of them, or `#[repr(C)]` structs
//         that derive `bytemuck::Pod` and `unsafe impl DeviceRepr`

use gpu_pipeline::{Kernel, Result, TypedKernel};

struct Params {
    weights: Vec<f32>,
}

fn declare(kernel: &Kernel) -> Result<TypedKernel<(u32, Params)>> {
    // SAFETY: never reached; the signature is rejected at compile time.
    unsafe { kernel.typed::<(u32, Params)>() }
}

fn main() {
    let _ = declare;
    let _ = Params { weights: Vec::new() }.weights;
}

//! cuBLAS SGEMM through cudarc inside a captured pipeline step, between two of our kernels,
//! replayed and checked. See `examples/src/cublas.rs`.
//!
//! ```text
//! cargo run --release -p examples --example cublas -- --m 1024 --n 1024 --k 1024
//! ```

use examples::common::{backend_name, main_with};
use examples::cublas::{self, CublasArgs};

fn main() -> std::process::ExitCode {
    main_with(CublasArgs::validate, CublasArgs::dot, |ctx, args| {
        println!(
            "cublas: {}x{} = {}x{} · {}x{} on {}",
            args.m,
            args.n,
            args.m,
            args.k,
            args.k,
            args.n,
            backend_name(ctx)
        );
        Ok(cublas::run(ctx, args)?.report)
    })
}

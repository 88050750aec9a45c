//! The cost of kernel bounds on the host, with no GPU: what `TypedKernel::launch`,
//! `GraphExec::set_kernel_params` and a generated step add per launch to check the declared
//! bounds (`TypedKernel::check_bounds`, the same code), against the same kernel declared
//! without bounds, and the allocations the check makes (a counting global allocator: it
//! must make none).
//!
//! | case | kernel | bounds |
//! | --- | --- | --- |
//! | `none` | `saxpy(n, a, x, y)` | none (the fast path: one comparison) |
//! | `saxpy` | `saxpy(n, a, x, y)` | `x` and `y` below `n` |
//! | `grid` | `stencil(nx, ny, nz, src, dst)` | `src` and `dst` below `nx * ny * nz + 2` |
//!
//! Each case runs `CHECKS` checks once to warm up, then `REPS` times; the table shows the
//! median ns per check. For scale: a CUDA kernel launch costs 2 to 4 µs of host time
//! (`cargo bench -p gpu-pipeline --bench launch` on a GPU machine). Run with
//! `cargo bench -p gpu-pipeline --bench bounds`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use gpu_pipeline::{Bound, Bounds, Context, DeviceBuffer, Module, Stream, TypedKernel};

const PTX: &str = include_str!("../kernels/test_kernels.ptx");
const CHECKS: u32 = 1_000_000;
const REPS: usize = 7;

type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);
type Stencil = (u32, u32, u32, &'static [f32], &'static mut [f32]);

/// Counts this thread's allocations, to show the check makes none.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the count is a side note.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // `try_with`: the thread-local may already be gone while a thread exits.
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Median ns per call of `CHECKS` calls of `check`, and the allocations one pass made.
fn measure(check: &mut dyn FnMut() -> bool) -> (f64, u64) {
    let pass = |check: &mut dyn FnMut() -> bool| {
        for _ in 0..CHECKS {
            assert!(black_box(check()), "every checked launch fits");
        }
    };
    pass(check);
    let before = allocations();
    pass(check);
    let allocated = allocations() - before;
    let mut samples: Vec<Duration> = (0..REPS)
        .map(|_| {
            let start = Instant::now();
            pass(check);
            start.elapsed()
        })
        .collect();
    samples.sort();
    let ns = samples[REPS / 2].as_secs_f64() * 1e9 / f64::from(CHECKS);
    (ns, allocated)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::cpu();
    let stream = Stream::non_blocking(&ctx)?;
    let module = Module::load_ptx(&ctx, PTX)?;
    let saxpy = module.function("saxpy")?;
    // SAFETY: `saxpy(unsigned, float, const float*, float*)` indexes `x` and `y` below `n`.
    // Never launched here: only checked.
    let unbounded: TypedKernel<Saxpy> = unsafe { saxpy.typed()? };
    // SAFETY: as above.
    let bounded: TypedKernel<Saxpy> = unsafe {
        saxpy.typed_with_bounds(
            Bounds::new()
                .buffer(2, Bound::param(0))
                .buffer(3, Bound::param(0)),
        )?
    };
    // A 3-D grid with a halo, over the same entry point: the signature only has to be one
    // the check can read, since nothing is launched.
    let grid = Bound::param(0).times(1).times(2).plus(2);
    // SAFETY: never launched: only checked.
    let stencil: TypedKernel<Stencil> =
        unsafe { saxpy.typed_with_bounds(Bounds::new().buffer(3, grid).buffer(4, grid))? };

    let x = DeviceBuffer::<f32>::zeros(&stream, 4096)?;
    let y = DeviceBuffer::<f32>::zeros(&stream, 4096)?;
    let n = black_box(4096u32);
    let (nx, ny, nz) = (black_box(16u32), black_box(16u32), black_box(15u32));

    let rows = [
        (
            "none",
            measure(&mut || unbounded.check_bounds(&(n, 2.0f32, &x, &y)).is_ok()),
        ),
        (
            "saxpy",
            measure(&mut || bounded.check_bounds(&(n, 2.0f32, &x, &y)).is_ok()),
        ),
        (
            "grid",
            measure(&mut || stencil.check_bounds(&(nx, ny, nz, &x, &y)).is_ok()),
        ),
    ];
    println!("\nkernel bounds on the host: medians of {REPS} runs of {CHECKS} checks");
    println!("| case | ns/check | allocations per {CHECKS} checks |");
    println!("| --- | ---: | ---: |");
    for (case, (ns, allocated)) in rows {
        println!("| {case} | {ns:.1} | {allocated} |");
    }
    let leaked: u64 = rows.iter().map(|(_, (_, a))| a).sum();
    if leaked != 0 {
        eprintln!("the bound checks allocated {leaked} times; they must not allocate");
        std::process::exit(1);
    }
    Ok(())
}

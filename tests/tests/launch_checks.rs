//! Launch checks that need no GPU: configuration validation against a set of limits, the
//! layout of packed arguments, and which arguments the type system accepts for a kernel
//! signature.

use std::ffi::c_void;

use gpu_pipeline::{
    DeviceBuffer, DeviceView, DeviceViewMut, Dim3, KernelArgs, KernelArgsFor, LaunchConfig,
    LaunchConfigError, LaunchLimits, ManagedBuffer, ParamLayout, Signature, check_param_sizes,
};
use proptest::prelude::*;

/// The limits of an H100 (sm_90) for a kernel without static shared memory.
const H100: LaunchLimits = LaunchLimits {
    max_threads_per_block: 1024,
    max_block: Dim3::new(1024, 1024, 64),
    max_grid: Dim3::new(2_147_483_647, 65535, 65535),
    max_shared_per_block_opt_in: 232_448,
    static_shared_bytes: 0,
};

#[test]
fn valid_configurations_pass() {
    for config in [
        LaunchConfig::for_elements(1 << 20, 256),
        LaunchConfig::new(1, 1),
        LaunchConfig::new((65535, 65535, 65535), (1, 1, 64)),
        LaunchConfig::new(2_147_483_647, 1024),
        LaunchConfig::new(1, (32, 32, 1)).with_shared_mem(232_448),
    ] {
        assert_eq!(config.validate(&H100), Ok(()), "{config:?}");
    }
}

#[test]
fn zero_extents_are_rejected_naming_grid_or_block() {
    let err = LaunchConfig::new((4, 0, 1), 32)
        .validate(&H100)
        .unwrap_err();
    assert_eq!(
        err,
        LaunchConfigError::ZeroDimension {
            what: "grid",
            dims: Dim3::new(4, 0, 1)
        }
    );
    let err = LaunchConfig::new(1, 0).validate(&H100).unwrap_err();
    assert!(
        err.to_string()
            .contains("the block (0, 1, 1) has a zero extent"),
        "{err}"
    );
}

#[test]
fn too_many_threads_says_the_limit() {
    let err = LaunchConfig::new(1, 1025).validate(&H100).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the block (1025, 1, 1) has 1025 threads; at most 1024 threads per block are allowed"
    );
    // Within every axis limit, but too many in total.
    let err = LaunchConfig::new(1, (64, 32, 1))
        .validate(&H100)
        .unwrap_err();
    assert!(matches!(
        err,
        LaunchConfigError::TooManyThreads {
            threads: 2048,
            max: 1024,
            ..
        }
    ));
    // A kernel whose registers allow fewer threads narrows the limit.
    let heavy = LaunchLimits {
        max_threads_per_block: 256,
        ..H100
    };
    assert!(LaunchConfig::new(1, 512).validate(&heavy).is_err());
}

#[test]
fn extents_over_the_device_maximum_name_the_axis_and_limit() {
    let err = LaunchConfig::new(1, (1, 1, 65))
        .validate(&H100)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the block's z extent 65 is above the device's maximum of 64"
    );
    let err = LaunchConfig::new((1, 65536, 1), 32)
        .validate(&H100)
        .unwrap_err();
    assert_eq!(
        err,
        LaunchConfigError::DimensionTooLarge {
            what: "grid",
            axis: 'y',
            value: 65536,
            max: 65535
        }
    );
}

#[test]
fn shared_memory_over_the_opt_in_maximum_says_the_limit() {
    let err = LaunchConfig::new(1, 32)
        .with_shared_mem(232_449)
        .validate(&H100)
        .unwrap_err();
    assert!(
        err.to_string().contains("at most 232448 are available"),
        "{err}"
    );
    // Static shared memory counts against the same budget.
    let with_static = LaunchLimits {
        static_shared_bytes: 16 * 1024,
        ..H100
    };
    assert_eq!(with_static.max_dynamic_shared_bytes(), 232_448 - 16 * 1024);
    assert!(
        LaunchConfig::new(1, 32)
            .with_shared_mem(220 * 1024)
            .validate(&with_static)
            .is_err()
    );
}

#[test]
fn for_elements_covers_every_element_with_whole_blocks() {
    let config = LaunchConfig::for_elements(1000, 128);
    assert_eq!(config.grid, Dim3::x(8));
    assert_eq!(config.block, Dim3::x(128));
    assert_eq!(config.shared_mem_bytes, 0);
}

proptest! {
    /// Validation accepts exactly the configurations within every limit.
    #[test]
    fn validation_matches_the_limits(
        grid in (0u32..70_000, 0u32..70_000, 0u32..70_000),
        block in (0u32..1100, 0u32..1100, 0u32..70),
        shared in 0u32..300_000,
    ) {
        let config = LaunchConfig::new(grid, block).with_shared_mem(shared);
        let (g, b) = (config.grid, config.block);
        let fits = g.volume() > 0
            && b.volume() > 0
            && b.volume() <= 1024
            && b.x <= 1024 && b.y <= 1024 && b.z <= 64
            && g.y <= 65535 && g.z <= 65535
            && shared <= 232_448;
        prop_assert_eq!(config.validate(&H100).is_ok(), fits);
    }

    /// `for_elements` launches enough threads, and less than one block too many.
    #[test]
    fn for_elements_is_a_tight_cover(n in 1u32..u32::MAX / 2, block in 1u32..=1024) {
        let config = LaunchConfig::for_elements(n, block);
        let threads = config.grid.volume() * config.block.volume();
        prop_assert!(threads >= u64::from(n));
        prop_assert!(threads < u64::from(n) + u64::from(block));
    }
}

fn read<T: Copy>(p: *mut c_void) -> T {
    // SAFETY: the tests pass pointers to packed values of type `T`.
    unsafe { p.cast::<T>().read() }
}

#[test]
fn scalar_arguments_pack_with_their_own_size_and_alignment() {
    assert_eq!(
        <(u32, f32, u64, i8, f64) as KernelArgs>::ARG_LAYOUTS,
        &[
            ParamLayout { size: 4, align: 4 },
            ParamLayout { size: 4, align: 4 },
            ParamLayout { size: 8, align: 8 },
            ParamLayout { size: 1, align: 1 },
            ParamLayout { size: 8, align: 8 },
        ]
    );
    (3u32, -1.25f32, u64::MAX, -7i8, 2.5f64).with_params(|params| {
        assert_eq!(params.len(), 5);
        assert_eq!(read::<u32>(params[0]), 3);
        assert_eq!(read::<f32>(params[1]), -1.25);
        assert_eq!(read::<u64>(params[2]), u64::MAX);
        assert_eq!(read::<i8>(params[3]), -7);
        assert_eq!(read::<f64>(params[4]), 2.5);
        for (i, (p, layout)) in params
            .iter()
            .zip(<(u32, f32, u64, i8, f64) as KernelArgs>::ARG_LAYOUTS)
            .enumerate()
        {
            assert_eq!(*p as usize % layout.align, 0, "argument {i} misaligned");
        }
    });
}

#[test]
fn twelve_arguments_pack_in_order() {
    let args = (
        0u32, 1u32, 2u32, 3u32, 4u32, 5u32, 6u32, 7u32, 8u32, 9u32, 10u32, 11u32,
    );
    args.with_params(|params| {
        let values: Vec<u32> = params.iter().map(|&p| read::<u32>(p)).collect();
        assert_eq!(values, (0..12).collect::<Vec<_>>());
    });
}

#[test]
fn signatures_describe_the_kernel_side() {
    type Saxpy<'a> = (u32, f32, &'a [f32], &'a mut [f32]);
    assert_eq!(Saxpy::WRITES, &[false, false, false, true]);
    // Buffers arrive as 64-bit device addresses whatever their element type.
    assert_eq!(
        <(&[u8], &mut [f64]) as Signature>::PARAM_LAYOUTS,
        &[ParamLayout { size: 8, align: 8 }; 2]
    );
    assert_eq!(
        check_param_sizes(Saxpy::PARAM_LAYOUTS, &[4, 4, 8, 8]),
        Ok(())
    );
    assert!(check_param_sizes(Saxpy::PARAM_LAYOUTS, &[4, 8, 8, 8]).is_err());
    assert!(check_param_sizes(Saxpy::PARAM_LAYOUTS, &[4, 4, 8]).is_err());
}

/// Compiles only when `A` may be passed for `Sig`.
fn accepts<Sig: Signature, A: KernelArgsFor<Sig>>(_: fn() -> A) {}

#[test]
fn buffers_are_accepted_where_the_signature_allows() {
    type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);
    // Types only: nothing is called, so no buffer is made.
    fn never<T>() -> T {
        unreachable!()
    }
    accepts::<Saxpy, (u32, f32, &DeviceBuffer<f32>, &mut DeviceBuffer<f32>)>(never);
    // An exclusive buffer may be passed where the kernel only reads.
    accepts::<Saxpy, (u32, f32, &mut DeviceBuffer<f32>, &mut DeviceBuffer<f32>)>(never);
    // Views and managed buffers too.
    accepts::<
        Saxpy,
        (
            u32,
            f32,
            DeviceView<'static, f32>,
            DeviceViewMut<'static, f32>,
        ),
    >(never);
    accepts::<Saxpy, (u32, f32, &ManagedBuffer<f32>, &mut ManagedBuffer<f32>)>(never);
    accepts::<(&'static mut [u32],), (&mut DeviceViewMut<'static, u32>,)>(never);
    accepts::<(), ()>(never);
}

/// compute-sanitizer fails a binary that never calls CUDA; this gives it one call there.
#[test]
fn instrumented_under_compute_sanitizer() {
    tests::touch_cuda_for_compute_sanitizer();
}

/// The CPU backend refuses a geometry no GPU runs (more than 1024 threads a block, a grid's
/// y extent past 65535, more dynamic shared memory than the largest GPU's 227 KiB), as CUDA
/// would, so the mistake shows in CI rather than first on a GPU; the largest geometry every
/// GPU runs, with what the largest GPUs offer of shared memory, is accepted.
#[test]
fn the_cpu_backend_refuses_what_no_gpu_runs() {
    use gpu_pipeline::{Context, CpuKernel, Module, Stream, TypedKernel};
    fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
        data[..n as usize].iter_mut().for_each(|x| *x += value);
    }
    let ctx = Context::cpu();
    let stream = Stream::new(&ctx).unwrap();
    let module =
        Module::load_ptx(&ctx, include_str!("../../runtime/kernels/test_kernels.ptx")).unwrap();
    // SAFETY: add_scalar(unsigned n, float value, float* data), indexing data below n.
    let add: TypedKernel<(u32, f32, &mut [f32])> =
        unsafe { module.function("add_scalar").unwrap().typed().unwrap() }
            .with_cpu(CpuKernel::new(add_scalar));
    let mut data = DeviceBuffer::<f32>::zeros(&stream, 4).unwrap();
    for (config, says) in [
        (LaunchConfig::new(1, 2048), "1024"),
        (LaunchConfig::new((1, 70_000, 1), 32), "65535"),
        (LaunchConfig::new(1, (1, 1, 128)), "64"),
        (
            LaunchConfig::new(1, 32).with_shared_mem(16 << 20),
            "16777216 bytes of dynamic shared memory requested; at most 232448",
        ),
    ] {
        let err = add
            .launch(&stream, config, (4u32, 1.0f32, &mut data))
            .expect_err("a geometry no GPU runs");
        assert!(err.to_string().contains(says), "{config:?}: {err}");
    }
    add.launch(
        &stream,
        LaunchConfig::new((2_147_483_647, 65535, 65535), (1024, 1, 1)).with_shared_mem(232_448),
        (4u32, 1.0f32, &mut data),
    )
    .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(data.to_vec(&stream).unwrap(), [1.0; 4]);
}

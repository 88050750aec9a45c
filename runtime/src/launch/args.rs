//! Kernel arguments and kernel signatures.
//!
//! The driver cannot check what a kernel expects: `cuLaunchKernel` copies as many bytes from
//! each argument pointer as the kernel's parameter is wide. So the types are checked here,
//! in two halves that meet in a trait bound:
//!
//! - a *signature* is a tuple of [`KernelParam`] types written in the kernel's own words:
//!   `(u32, f32, &[f32], &mut [f32])` for
//!   `saxpy(unsigned n, float a, const float* x, float* y)`. Declaring one is the single
//!   `unsafe` step ([`Kernel::typed`](crate::Kernel::typed));
//! - the *arguments* of a launch are a tuple of [`KernelArg`] values, and
//!   [`KernelArgsFor<Sig>`] holds only when each one may be passed for its parameter
//!   ([`PassedAs`]): the same scalar type, a `&DeviceBuffer<T>` for `&[T]`, a
//!   `&mut DeviceBuffer<T>` for `&mut [T]` (or for `&[T]`).
//!
//! Packing builds the `void*[]` the driver wants on the stack: no allocation per launch.

use std::ffi::c_void;

use bytemuck::Pod;

use crate::launch::index::ParamKind;
use crate::memory::view::DeviceRegion;
use crate::memory::view::sealed::DeviceMemory;
use crate::memory::{DeviceBuffer, DeviceView, DeviceViewMut, ManagedBuffer};

pub(crate) use crate::launch::param::sealed;
pub use crate::launch::param::{DeviceRepr, KernelParam, ParamLayout};

/// One argument of a launch as the backends read it: a scalar's bytes, or the device memory
/// region of a buffer argument with its element size.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum ArgRef<'a> {
    /// A by-value argument.
    Scalar(&'a [u8]),
    /// A buffer argument.
    Buffer {
        /// The memory it covers.
        region: DeviceRegion<'a>,
        /// Size of one element.
        elem_size: usize,
    },
}

/// A value passed to a kernel: a [`DeviceRepr`] scalar, or a device buffer (`&DeviceBuffer<T>`
/// or `&mut DeviceBuffer<T>`, and their views), passed as its device address.
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, KernelArg, Stream};
/// fn packed_size<A: KernelArg>(_: &A) -> usize {
///     std::mem::size_of::<A::Packed>()
/// }
/// let ctx = Context::cpu();
/// let x = DeviceBuffer::<f32>::zeros(&Stream::new(&ctx)?, 1000)?;
/// assert_eq!(packed_size(&&x), 8); // a buffer: its device address
/// assert_eq!(packed_size(&7u16), 2); // a scalar: itself
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed to a kernel",
    label = "not a kernel argument",
    note = "pass a `DeviceRepr` scalar (a numeric primitive, or a `#[repr(C)]` `bytemuck::Pod` \
            struct with `unsafe impl DeviceRepr`), `&DeviceBuffer<T>` or `&mut DeviceBuffer<T>`"
)]
pub trait KernelArg: sealed::Arg {
    /// The bytes the kernel receives: the value itself, or a device address.
    type Packed: Copy;
    /// The packed value.
    #[doc(hidden)]
    fn pack(&self) -> Self::Packed;
    /// The argument as the backends read it.
    #[doc(hidden)]
    fn arg_ref(&self) -> ArgRef<'_>;
    /// The memory it passes, for a buffer argument (`None` for a scalar): what a backend
    /// checks and keeps on its hot path, with no dynamic call. Read from [`arg_ref`] unless
    /// an argument type says it more cheaply (scalars and device buffers do); the two must
    /// agree, which `buffer_regions_agree_with_arg_refs` checks.
    ///
    /// [`arg_ref`]: KernelArg::arg_ref
    #[doc(hidden)]
    #[inline(always)]
    fn buffer_region(&self) -> Option<DeviceRegion<'_>> {
        match self.arg_ref() {
            ArgRef::Buffer { region, .. } => Some(region),
            ArgRef::Scalar(_) => None,
        }
    }
    /// The condition handle it is, for a `SetsCondition` argument: where it may be set from
    /// is checked before a launch or node is made.
    #[doc(hidden)]
    #[inline(always)]
    fn condition(&self) -> Option<&crate::graph::ConditionHandle> {
        None
    }
}

impl<T: DeviceRepr> sealed::Arg for T {}
impl<T: DeviceRepr> KernelArg for T {
    type Packed = T;
    #[inline(always)]
    fn pack(&self) -> T {
        *self
    }
    fn arg_ref(&self) -> ArgRef<'_> {
        ArgRef::Scalar(bytemuck::bytes_of(self))
    }
    #[inline(always)]
    fn buffer_region(&self) -> Option<DeviceRegion<'_>> {
        None
    }
}

/// `Self` may be passed for a kernel parameter declared as `P`.
///
/// ```
/// use gpu_pipeline::{DeviceBuffer, PassedAs};
/// fn passes<P: gpu_pipeline::KernelParam, A: PassedAs<P>>() {}
/// passes::<&[f32], &DeviceBuffer<f32>>(); // a buffer the kernel reads
/// passes::<&[f32], &mut DeviceBuffer<f32>>(); // `&mut` lends as `&` too
/// passes::<&mut [f32], &mut DeviceBuffer<f32>>();
/// passes::<u32, u32>(); // a scalar of exactly its type
/// ```
///
/// A buffer the kernel writes cannot be passed by shared reference:
///
/// ```compile_fail
/// use gpu_pipeline::{DeviceBuffer, PassedAs};
/// fn passes<P: gpu_pipeline::KernelParam, A: PassedAs<P>>() {}
/// passes::<&mut [f32], &DeviceBuffer<f32>>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a kernel parameter declared `{P}`",
    label = "expected an argument for `{P}`",
    note = "a scalar parameter takes a value of exactly its type; `&[T]` takes `&DeviceBuffer<T>` \
            or `&mut DeviceBuffer<T>`; `&mut [T]` takes `&mut DeviceBuffer<T>`"
)]
pub trait PassedAs<P: KernelParam>: KernelArg + sealed::PassedAs<P> {}

impl<T: DeviceRepr> sealed::PassedAs<T> for T {}
impl<T: DeviceRepr> PassedAs<T> for T {}

/// Device memory arguments: passed as the device address of their first element.
macro_rules! device_args {
    ($([$($lt:lifetime),*] $ty:ty $(=> $writes:ident)?;)*) => {$(
        impl<$($lt,)* T: Pod> sealed::Arg for $ty {}
        impl<$($lt,)* T: Pod> KernelArg for $ty {
            type Packed = u64;
            #[inline(always)]
            fn pack(&self) -> u64 {
                // CPU-backend memory has no device address; the CPU backend never packs.
                self.device_region().ptr().unwrap_or(0)
            }
            fn arg_ref(&self) -> ArgRef<'_> {
                ArgRef::Buffer {
                    region: self.device_region(),
                    elem_size: std::mem::size_of::<T>(),
                }
            }
            #[inline(always)]
            fn buffer_region(&self) -> Option<DeviceRegion<'_>> {
                Some(self.device_region())
            }
        }
        impl<'p, $($lt,)* T: Pod> sealed::PassedAs<&'p [T]> for $ty {}
        impl<'p, $($lt,)* T: Pod> PassedAs<&'p [T]> for $ty {}
        device_args!(@$($writes)? [$($lt),*] $ty);
    )*};
    (@writes [$($lt:lifetime),*] $ty:ty) => {
        impl<'p, $($lt,)* T: Pod> sealed::PassedAs<&'p mut [T]> for $ty {}
        impl<'p, $($lt,)* T: Pod> PassedAs<&'p mut [T]> for $ty {}
    };
    (@ [$($lt:lifetime),*] $ty:ty) => {};
}

device_args! {
    ['r] &'r DeviceBuffer<T>;
    ['r] &'r mut DeviceBuffer<T> => writes;
    ['r] &'r ManagedBuffer<T>;
    ['r] &'r mut ManagedBuffer<T> => writes;
    ['r] DeviceView<'r, T>;
    ['r, 'v] &'r DeviceView<'v, T>;
    ['r] DeviceViewMut<'r, T> => writes;
    ['r, 'v] &'r DeviceViewMut<'v, T>;
    ['r, 'v] &'r mut DeviceViewMut<'v, T> => writes;
}

/// A kernel signature: a tuple (up to 12) of [`KernelParam`] types.
///
/// ```
/// use gpu_pipeline::{ParamLayout, Signature};
/// type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);
/// assert_eq!(Saxpy::WRITES, [false, false, false, true]);
/// assert_eq!(Saxpy::PARAM_LAYOUTS[0], ParamLayout { size: 4, align: 4 });
/// assert_eq!(Saxpy::PARAM_LAYOUTS[3], ParamLayout::of::<u64>());
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a kernel signature",
    note = "a signature is a tuple of up to 12 kernel parameter types, e.g. \
            `(u32, f32, &[f32], &mut [f32])`; a kernel without parameters is `()`"
)]
pub trait Signature: sealed::Tuple {
    /// Each parameter's layout, in order.
    const PARAM_LAYOUTS: &'static [ParamLayout];
    /// Whether each parameter is written by the kernel, in order.
    const WRITES: &'static [bool];
    /// What each parameter is, in order: what [`Bounds`](crate::Bounds) are checked against.
    const KINDS: &'static [ParamKind];
}

/// The arguments of one launch: a tuple (up to 12) of [`KernelArg`] values.
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, KernelArgs, ParamLayout, Stream};
/// let ctx = Context::cpu();
/// let y = DeviceBuffer::<f32>::zeros(&Stream::new(&ctx)?, 16)?;
/// let args = (16u32, 2.0f64, &y);
/// assert_eq!(
///     <(u32, f64, &DeviceBuffer<f32>) as KernelArgs>::ARG_LAYOUTS,
///     [ParamLayout::of::<u32>(), ParamLayout::of::<f64>(), ParamLayout::of::<u64>()]
/// );
/// // The driver's `void*[]`: one pointer per argument, to its packed value.
/// // SAFETY: `params[0]` points to the packed `u32`, alive during the closure.
/// let n = args.with_params(|params| unsafe { *(params[0] as *const u32) });
/// assert_eq!(n, 16);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tuple of kernel arguments",
    note = "pass the arguments as a tuple: `(n, a, &x, &mut y)`; one argument is `(x,)`, none \
            is `()`"
)]
pub trait KernelArgs: sealed::Tuple {
    /// Each argument's packed layout, in order.
    const ARG_LAYOUTS: &'static [ParamLayout];

    /// Packs the arguments on the stack and calls `f` with the `void*[]` the driver reads,
    /// one pointer per argument. The pointers are valid only during `f`.
    fn with_params<R>(&self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R;

    /// Calls `f` with each argument as the backends read it, in order.
    #[doc(hidden)]
    fn visit(&self, f: &mut dyn FnMut(usize, ArgRef<'_>));

    /// Calls `f` with each condition handle among the arguments.
    #[doc(hidden)]
    fn visit_conditions(&self, f: &mut dyn FnMut(&crate::graph::ConditionHandle)) {
        let _ = f;
    }

    /// Calls `f` with the index and memory of each buffer argument, in order: [`visit`]
    /// restricted to buffers, statically dispatched, so a scalar costs nothing (the CUDA
    /// backend's launches, node adds and setters check every buffer this way).
    ///
    /// [`visit`]: KernelArgs::visit
    #[doc(hidden)]
    #[inline(always)]
    fn visit_buffers(&self, f: impl FnMut(usize, DeviceRegion<'_>)) {
        let _ = f;
    }
}

/// Arguments that match the signature `Sig` one by one.
///
/// ```
/// use gpu_pipeline::{DeviceBuffer, KernelArgsFor};
/// type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);
/// fn matches<Sig: gpu_pipeline::Signature, A: KernelArgsFor<Sig>>() {}
/// matches::<Saxpy, (u32, f32, &DeviceBuffer<f32>, &mut DeviceBuffer<f32>)>();
/// ```
///
/// A scalar of another type than the declared one is refused (no conversions):
///
/// ```compile_fail
/// use gpu_pipeline::{DeviceBuffer, KernelArgsFor};
/// type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);
/// fn matches<Sig: gpu_pipeline::Signature, A: KernelArgsFor<Sig>>() {}
/// matches::<Saxpy, (usize, f32, &DeviceBuffer<f32>, &mut DeviceBuffer<f32>)>();
/// ```
#[diagnostic::on_unimplemented(
    message = "these arguments do not match the kernel signature `{Sig}`",
    label = "arguments `{Self}`",
    note = "pass one argument per parameter, in order: a scalar of the parameter's exact type, \
            `&DeviceBuffer<T>` for `&[T]`, `&mut DeviceBuffer<T>` for `&mut [T]`"
)]
pub trait KernelArgsFor<Sig: Signature>: KernelArgs + sealed::ArgsFor<Sig> {}

impl sealed::Tuple for () {}
impl Signature for () {
    const PARAM_LAYOUTS: &'static [ParamLayout] = &[];
    const WRITES: &'static [bool] = &[];
    const KINDS: &'static [ParamKind] = &[];
}
impl KernelArgs for () {
    const ARG_LAYOUTS: &'static [ParamLayout] = &[];
    #[inline(always)]
    fn with_params<R>(&self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
        f(&mut [])
    }
    fn visit(&self, _f: &mut dyn FnMut(usize, ArgRef<'_>)) {}
}
impl sealed::ArgsFor<()> for () {}
impl KernelArgsFor<()> for () {}

macro_rules! tuples {
    ($( ($($i:tt $P:ident $A:ident),+) )*) => {$(
        impl<$($P),+> sealed::Tuple for ($($P,)+) {}

        impl<$($P: KernelParam),+> Signature for ($($P,)+) {
            const PARAM_LAYOUTS: &'static [ParamLayout] = &[$($P::LAYOUT),+];
            const WRITES: &'static [bool] = &[$($P::WRITES),+];
            const KINDS: &'static [ParamKind] = &[$($P::KIND),+];
        }

        impl<$($A: KernelArg),+> KernelArgs for ($($A,)+) {
            const ARG_LAYOUTS: &'static [ParamLayout] = &[$(ParamLayout::of::<$A::Packed>()),+];

            #[inline(always)]
            fn with_params<R>(&self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
                let packed = ($(self.$i.pack(),)+);
                // The driver only reads through these pointers; `*mut` is the C signature.
                let mut params = [$(&packed.$i as *const $A::Packed as *mut c_void),+];
                f(&mut params)
            }

            #[inline(always)]
            fn visit(&self, f: &mut dyn FnMut(usize, ArgRef<'_>)) {
                $(f($i, self.$i.arg_ref());)+
            }

            #[inline(always)]
            fn visit_conditions(&self, f: &mut dyn FnMut(&crate::graph::ConditionHandle)) {
                $(if let ::core::option::Option::Some(c) = self.$i.condition() { f(c); })+
            }

            #[inline(always)]
            fn visit_buffers(&self, mut f: impl FnMut(usize, DeviceRegion<'_>)) {
                $(if let ::core::option::Option::Some(r) = self.$i.buffer_region() { f($i, r); })+
            }
        }

        impl<$($P: KernelParam,)+ $($A: PassedAs<$P>),+> sealed::ArgsFor<($($P,)+)> for ($($A,)+) {}
        impl<$($P: KernelParam,)+ $($A: PassedAs<$P>),+> KernelArgsFor<($($P,)+)> for ($($A,)+) {}
    )*};
}

tuples! {
    (0 P0 A0)
    (0 P0 A0, 1 P1 A1)
    (0 P0 A0, 1 P1 A1, 2 P2 A2)
    (0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3)
    (0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4)
    (0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5)
    (0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5, 6 P6 A6)
    (0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5, 6 P6 A6, 7 P7 A7)
    (0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5, 6 P6 A6, 7 P7 A7, 8 P8 A8)
    (0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5, 6 P6 A6, 7 P7 A7, 8 P8 A8, 9 P9 A9)
    (0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5, 6 P6 A6, 7 P7 A7, 8 P8 A8, 9 P9 A9,
     10 P10 A10)
    (0 P0 A0, 1 P1 A1, 2 P2 A2, 3 P3 A3, 4 P4 A4, 5 P5 A5, 6 P6 A6, 7 P7 A7, 8 P8 A8, 9 P9 A9,
     10 P10 A10, 11 P11 A11)
}

/// Compares a signature's layouts with the parameter sizes the driver reports for a kernel
/// (`cuFuncGetParamInfo`), so a declaration that cannot match fails before any launch.
/// Pure; `Err` says which parameter differs.
///
/// ```
/// use gpu_pipeline::{Signature, check_param_sizes};
/// type Scale = (u32, f32, &'static mut [f32]);
/// assert!(check_param_sizes(Scale::PARAM_LAYOUTS, &[4, 4, 8]).is_ok());
/// // The kernel takes a `double` where the declaration says `f32`.
/// let err = check_param_sizes(Scale::PARAM_LAYOUTS, &[4, 8, 8]).unwrap_err();
/// assert!(err.contains("parameter 1"), "{err}");
/// ```
pub fn check_param_sizes(declared: &[ParamLayout], kernel: &[usize]) -> Result<(), String> {
    if declared.len() != kernel.len() {
        return Err(format!(
            "the signature declares {} parameter{} but the kernel takes {}",
            declared.len(),
            if declared.len() == 1 { "" } else { "s" },
            kernel.len()
        ));
    }
    for (i, (d, &k)) in declared.iter().zip(kernel).enumerate() {
        if d.size != k {
            return Err(format!(
                "parameter {i} is declared {} bytes wide but the kernel's is {k} bytes",
                d.size
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_know_what_the_kernel_writes() {
        type Saxpy<'a> = (u32, f32, &'a [f32], &'a mut [f32]);
        assert_eq!(Saxpy::WRITES, &[false, false, false, true]);
        assert_eq!(
            Saxpy::KINDS,
            &[
                ParamKind::Scalar {
                    index: Some(crate::launch::index::IndexType::U32)
                },
                ParamKind::Scalar { index: None },
                ParamKind::Buffer {
                    writes: false,
                    elem_size: 4
                },
                ParamKind::Buffer {
                    writes: true,
                    elem_size: 4
                },
            ]
        );
        assert_eq!(Saxpy::PARAM_LAYOUTS[2], ParamLayout { size: 8, align: 8 });
    }

    /// What an argument is, as `visit_buffers` and `visit` each report it: its index, and
    /// for a buffer its allocation's address and the bytes it covers.
    fn regions_of(args: &impl KernelArgs) -> [Vec<(usize, usize, usize, usize)>; 2] {
        let key = |index, r: DeviceRegion<'_>| {
            let alloc: *const crate::alloc::DeviceAlloc = r.alloc;
            (index, alloc as usize, r.offset, r.bytes)
        };
        let mut fast = Vec::new();
        args.visit_buffers(|index, region| fast.push(key(index, region)));
        let mut slow = Vec::new();
        args.visit(&mut |index, arg| {
            if let ArgRef::Buffer { region, .. } = arg {
                slow.push(key(index, region));
            }
        });
        [fast, slow]
    }

    /// The hot paths read buffers through `visit_buffers`; every argument type must report
    /// there exactly the buffer its `arg_ref` names (or there would be memory a graph does not
    /// keep alive).
    #[test]
    fn buffer_regions_agree_with_arg_refs() {
        let ctx = crate::Context::cpu();
        let stream = crate::Stream::new(&ctx).unwrap();
        let mut a = DeviceBuffer::<f32>::zeros(&stream, 16).unwrap();
        let b = DeviceBuffer::<f64>::zeros(&stream, 8).unwrap();
        let view = b.slice(2..6).unwrap();
        let [fast, slow] = regions_of(&(3u32, &b, 1.5f32, &view, view, &mut a));
        assert_eq!(fast.len(), 4, "{fast:?}");
        assert_eq!(fast, slow);
        let mut view_mut = a.slice_mut(4..).unwrap();
        let [fast, slow] = regions_of(&(&mut view_mut, 7u8));
        assert_eq!(fast.len(), 1);
        assert_eq!(fast, slow);
        let [fast, slow] = regions_of(&(1u64, 2i32));
        assert!(fast.is_empty() && slow.is_empty());
    }

    #[test]
    fn param_size_mismatches_name_the_parameter() {
        let declared = <(u32, f64) as Signature>::PARAM_LAYOUTS;
        assert_eq!(check_param_sizes(declared, &[4, 8]), Ok(()));
        assert_eq!(
            check_param_sizes(declared, &[4, 4]).unwrap_err(),
            "parameter 1 is declared 8 bytes wide but the kernel's is 4 bytes"
        );
        assert_eq!(
            check_param_sizes(declared, &[4]).unwrap_err(),
            "the signature declares 2 parameters but the kernel takes 1"
        );
    }
}

/// The packing tests of [`DeviceRepr`] scalars and structs (they were beside the trait
/// until it moved to `param.rs`, below this module).
#[cfg(test)]
mod device_repr_tests {
    use std::ffi::c_void;

    use super::*;
    use crate::launch::{KernelArgs, KernelArgsFor, ParamLayout, Signature};

    fn read<T: Copy>(p: *mut c_void) -> T {
        // SAFETY: the tests pass pointers to packed values of type `T`.
        unsafe { p.cast::<T>().read() }
    }

    #[test]
    fn scalars_pack_in_place_with_their_own_layout() {
        (7u8, -2i64, 1.5f32, [1u16, 2, 3]).with_params(|params| {
            assert_eq!(params.len(), 4);
            assert_eq!(read::<u8>(params[0]), 7);
            assert_eq!(read::<i64>(params[1]), -2);
            assert_eq!(read::<f32>(params[2]), 1.5);
            assert_eq!(read::<[u16; 3]>(params[3]), [1, 2, 3]);
            for (p, layout) in params
                .iter()
                .zip(<(u8, i64, f32, [u16; 3]) as KernelArgs>::ARG_LAYOUTS)
            {
                assert_eq!(*p as usize % layout.align, 0);
            }
        });
        assert_eq!(
            <(u8, i64) as KernelArgs>::ARG_LAYOUTS,
            &[
                ParamLayout { size: 1, align: 1 },
                ParamLayout { size: 8, align: 8 }
            ]
        );
        ().with_params(|params| assert!(params.is_empty()));
    }

    #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C)]
    struct Params {
        nx: u32,
        ny: u32,
        alpha: f32,
        _pad: u32,
        origin: [f64; 2],
    }

    // SAFETY: `#[repr(C)]` of C-compatible fields.
    unsafe impl DeviceRepr for Params {}

    #[test]
    fn pod_structs_pass_by_value_with_their_c_layout() {
        let p = Params {
            nx: 3,
            ny: 4,
            alpha: 0.5,
            _pad: 0,
            origin: [1.0, -1.0],
        };
        (p, 9u8).with_params(|params| {
            assert_eq!(read::<Params>(params[0]), p);
            assert_eq!(params[0] as usize % 8, 0);
        });
        assert_eq!(
            <(Params,) as Signature>::PARAM_LAYOUTS,
            &[ParamLayout { size: 32, align: 8 }]
        );
        fn accepts<Sig: Signature, A: KernelArgsFor<Sig>>(_: &A) {}
        accepts::<(Params, u8), _>(&(p, 9u8));
    }
}

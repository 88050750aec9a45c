//! Kernel parameter types: what a kernel signature may name, and the scalars it may take by
//! value ([`DeviceRepr`]: the promise a by-value kernel argument rests on, since the driver
//! copies as many bytes from each argument pointer as the kernel's parameter is wide).
//!
//! Shared vocabulary: both backends read parameters by these traits; the arguments that
//! fill them (buffers, views) are public types, in `args.rs`.

use bytemuck::Pod;

use crate::launch::index::{IndexType, ParamKind};

/// A plain value a kernel can take by value: its bytes are its meaning, with no pointers,
/// padding or invalid bit patterns, laid out as C lays out the kernel's parameter type.
///
/// Implemented for the numeric primitives and arrays of them. For a `#[repr(C)]` struct
/// that derives [`bytemuck::Pod`]:
///
/// ```
/// # use gpu_pipeline::DeviceRepr;
/// #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
/// #[repr(C)]
/// struct Params { nx: u32, ny: u32, alpha: f32 }
/// // SAFETY: `#[repr(C)]`, matching `struct Params { unsigned nx, ny; float alpha; }`.
/// unsafe impl DeviceRepr for Params {}
/// ```
///
/// # Safety
/// The type's layout must be the C layout of the matching CUDA type (`#[repr(C)]` or
/// `#[repr(transparent)]` over such a type).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed to a kernel by value",
    label = "not a `DeviceRepr` type",
    note = "kernel scalars are the numeric primitives, arrays of them, or `#[repr(C)]` structs \
            that derive `bytemuck::Pod` and `unsafe impl DeviceRepr`"
)]
pub unsafe trait DeviceRepr: bytemuck::Pod + Send + Sync {
    /// The integer type `Self` is, when it is one of the integer primitives: only those may
    /// bound a buffer's indices in a kernel declaration (see
    /// [`Bounds`](crate::Bounds)). Leave it `None` (the default) in your own impls.
    const INDEX: Option<IndexType> = None;
}

macro_rules! device_repr {
    ($($t:ty => $index:expr),*) => {$(
        // SAFETY: a primitive with the same size, alignment and meaning as its C type.
        unsafe impl DeviceRepr for $t {
            const INDEX: Option<IndexType> = $index;
        }
    )*};
}
device_repr!(
    u8 => Some(IndexType::U8),
    u16 => Some(IndexType::U16),
    u32 => Some(IndexType::U32),
    u64 => Some(IndexType::U64),
    usize => Some(IndexType::USIZE),
    i8 => Some(IndexType::I8),
    i16 => Some(IndexType::I16),
    i32 => Some(IndexType::I32),
    i64 => Some(IndexType::I64),
    isize => Some(IndexType::ISIZE),
    f32 => None,
    f64 => None
);

// SAFETY: `half::f16` is `#[repr(transparent)]` over the `u16` of its IEEE binary16 bits, the
// layout of CUDA's `__half` (a struct of one `unsigned short`, 2-byte aligned); `bf16` holds
// the bfloat16 bits the same way, the layout of `__nv_bfloat16`.
#[cfg(feature = "half")]
unsafe impl DeviceRepr for half::f16 {}
// SAFETY: as above.
#[cfg(feature = "half")]
unsafe impl DeviceRepr for half::bf16 {}

// SAFETY: a C array of a `DeviceRepr` type has the same layout as the Rust array.
unsafe impl<T: DeviceRepr, const N: usize> DeviceRepr for [T; N] where [T; N]: bytemuck::Pod {}

/// The size and alignment of one parameter as the kernel receives it.
///
/// ```
/// use gpu_pipeline::{KernelParam, ParamLayout};
/// assert_eq!(ParamLayout::of::<f64>(), ParamLayout { size: 8, align: 8 });
/// // A buffer parameter is passed as its 8-byte device address.
/// assert_eq!(<&[u8] as KernelParam>::LAYOUT, ParamLayout::of::<u64>());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParamLayout {
    /// Bytes.
    pub size: usize,
    /// Alignment in bytes.
    pub align: usize,
}

impl ParamLayout {
    /// The layout of `T`.
    pub const fn of<T>() -> ParamLayout {
        ParamLayout {
            size: std::mem::size_of::<T>(),
            align: std::mem::align_of::<T>(),
        }
    }
}

/// Private supertraits: only this crate implements the launch traits, so no impl outside it
/// can pair an argument with a parameter it does not match.
pub(crate) mod sealed {
    pub trait Param {}
    pub trait Arg {}
    pub trait Tuple {}
    pub trait PassedAs<P> {}
    pub trait ArgsFor<S> {}
}

/// A type a kernel signature may name for one parameter: a [`DeviceRepr`] scalar, `&[T]`
/// for device memory the kernel only reads, or `&mut [T]` for device memory it writes.
///
/// ```
/// use gpu_pipeline::{KernelParam, ParamKind};
/// assert!(<&mut [f32] as KernelParam>::WRITES);
/// assert!(!<&[f32] as KernelParam>::WRITES);
/// assert_eq!(
///     <&mut [f64] as KernelParam>::KIND,
///     ParamKind::Buffer { writes: true, elem_size: 8 }
/// );
/// assert_eq!(<u32 as KernelParam>::LAYOUT.size, 4);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a kernel parameter type",
    label = "not allowed in a kernel signature",
    note = "a kernel parameter is a `DeviceRepr` scalar, `&[T]` for device memory the kernel \
            reads, or `&mut [T]` for device memory it writes"
)]
pub trait KernelParam: sealed::Param {
    /// How the kernel receives it.
    const LAYOUT: ParamLayout;
    /// Whether the kernel may write through it (`&mut [T]`).
    const WRITES: bool;
    /// A buffer, or a scalar and its integer type: what a bound may name.
    const KIND: ParamKind;
}

impl<T: DeviceRepr> sealed::Param for T {}
impl<T: DeviceRepr> KernelParam for T {
    const LAYOUT: ParamLayout = ParamLayout::of::<T>();
    const WRITES: bool = false;
    const KIND: ParamKind = ParamKind::Scalar { index: T::INDEX };
}

impl<T: Pod> sealed::Param for &[T] {}
impl<T: Pod> KernelParam for &[T] {
    const LAYOUT: ParamLayout = ParamLayout::of::<u64>();
    const WRITES: bool = false;
    const KIND: ParamKind = ParamKind::Buffer {
        writes: false,
        elem_size: std::mem::size_of::<T>(),
    };
}

impl<T: Pod> sealed::Param for &mut [T] {}
impl<T: Pod> KernelParam for &mut [T] {
    const LAYOUT: ParamLayout = ParamLayout::of::<u64>();
    const WRITES: bool = true;
    const KIND: ParamKind = ParamKind::Buffer {
        writes: true,
        elem_size: std::mem::size_of::<T>(),
    };
}

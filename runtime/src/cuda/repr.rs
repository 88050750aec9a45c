//! Kernel scalars by C layout: the promise a by-value kernel argument rests on, since the
//! driver copies as many bytes from each argument pointer as the kernel's parameter is wide.

use crate::launch::index::IndexType;

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

#[cfg(test)]
mod tests {
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

//! The reductions, over bytes holding elements of one kind, in rank order.

use crate::collective::{ElementKind, ReduceOp};

/// Reduces every rank's input (all present, all the same length) in rank order.
pub(super) fn reduce_all(
    kind: ElementKind,
    op: ReduceOp,
    inputs: &[Option<Vec<u8>>],
    size: usize,
) -> Vec<u8> {
    let mut inputs = inputs.iter().flatten();
    let mut acc = inputs.next().cloned().unwrap_or_default();
    for input in inputs {
        reduce_into(kind, op, &mut acc, input);
    }
    if op == ReduceOp::Avg {
        divide(kind, &mut acc, size);
    }
    acc
}

/// Applies `op` element-wise: `acc[i] = acc[i] op x[i]`. `Avg` sums here (see [`divide`]).
fn reduce_into(kind: ElementKind, op: ReduceOp, acc: &mut [u8], x: &[u8]) {
    macro_rules! int {
        ($ty:ty) => {
            zip_elements::<$ty, { std::mem::size_of::<$ty>() }>(acc, x, |a, b| match op {
                ReduceOp::Sum | ReduceOp::Avg => a.wrapping_add(b),
                ReduceOp::Prod => a.wrapping_mul(b),
                ReduceOp::Max => a.max(b),
                ReduceOp::Min => a.min(b),
            })
        };
    }
    macro_rules! float {
        ($ty:ty) => {
            zip_elements::<$ty, { std::mem::size_of::<$ty>() }>(acc, x, |a, b| match op {
                ReduceOp::Sum | ReduceOp::Avg => a + b,
                ReduceOp::Prod => a * b,
                ReduceOp::Max => a.max(b),
                ReduceOp::Min => a.min(b),
            })
        };
    }
    match kind {
        ElementKind::I8 => int!(i8),
        ElementKind::U8 => int!(u8),
        ElementKind::I32 => int!(i32),
        ElementKind::U32 => int!(u32),
        ElementKind::I64 => int!(i64),
        ElementKind::U64 => int!(u64),
        ElementKind::F32 => float!(f32),
        ElementKind::F64 => float!(f64),
    }
}

/// Divides a float sum by the number of ranks (`Avg`; checked to be a float kind).
fn divide(kind: ElementKind, acc: &mut [u8], size: usize) {
    match kind {
        ElementKind::F32 => map_elements::<f32, 4>(acc, |a| a / size as f32),
        ElementKind::F64 => map_elements::<f64, 8>(acc, |a| a / size as f64),
        _ => {}
    }
}

/// Native-endian conversion of a fixed-size element; implemented for every element type.
trait NeBytes<const N: usize>: Copy {
    fn from_ne(bytes: [u8; N]) -> Self;
    fn to_ne(self) -> [u8; N];
}

macro_rules! ne_bytes {
    ($($ty:ty),*) => {$(
        impl NeBytes<{ std::mem::size_of::<$ty>() }> for $ty {
            fn from_ne(bytes: [u8; std::mem::size_of::<$ty>()]) -> Self {
                <$ty>::from_ne_bytes(bytes)
            }
            fn to_ne(self) -> [u8; std::mem::size_of::<$ty>()] {
                self.to_ne_bytes()
            }
        }
    )*};
}

ne_bytes!(i8, u8, i32, u32, i64, u64, f32, f64);

/// `acc[i] = f(acc[i], x[i])` over elements of `T` stored as bytes (of any alignment).
fn zip_elements<T: NeBytes<N>, const N: usize>(acc: &mut [u8], x: &[u8], f: impl Fn(T, T) -> T) {
    for (a, b) in acc.chunks_exact_mut(N).zip(x.chunks_exact(N)) {
        let (Ok(a_bytes), Ok(b_bytes)) = (<[u8; N]>::try_from(&*a), <[u8; N]>::try_from(b)) else {
            continue;
        };
        a.copy_from_slice(&f(T::from_ne(a_bytes), T::from_ne(b_bytes)).to_ne());
    }
}

/// `acc[i] = f(acc[i])` over elements of `T` stored as bytes.
fn map_elements<T: NeBytes<N>, const N: usize>(acc: &mut [u8], f: impl Fn(T) -> T) {
    for a in acc.chunks_exact_mut(N) {
        let Ok(bytes) = <[u8; N]>::try_from(&*a) else {
            continue;
        };
        a.copy_from_slice(&f(T::from_ne(bytes)).to_ne());
    }
}

//! What both backends' collectives share: the element kinds they reduce and the reduction
//! operators, with the one rule that ties them together ([`ReduceOp::check`]).
//!
//! NCCL ([`crate::nccl`]) maps an [`ElementKind`] to its `ncclDataType_t`; the CPU backend's
//! [`World`] reduces bytes of that kind itself. Keeping both on
//! these types means a program that passes the checks on one backend passes them on the other.
//!
//! Both backends also share the communication deadline (`deadline.rs`: [`COMM_TIMEOUT_ENV`],
//! [`DEFAULT_COMM_TIMEOUT`]), what a failed communication reports (`failure.rs`:
//! [`CommFailure`], carried by [`Error::Communication`](crate::Error::Communication)), and
//! the operations themselves (`op.rs`: each operation once, with the checks both backends
//! make, the ranges it reads and writes and its words in a report). The backends are NCCL
//! ([`crate::nccl`]) and its twin, the CPU collectives (`cpu/collective/`, mounted here).
#![forbid(unsafe_code)]

use std::fmt;

use bytemuck::Pod;

#[path = "cpu/collective/mod.rs"]
mod cpu;
mod deadline;
mod failure;
pub(crate) mod op;

pub use cpu::{CollectiveError, Comm, CommGroup, DEFAULT_TIMEOUT, World};
pub(crate) use cpu::{IssueOrder, StageFailure, enqueue_cpu_stage};
pub(crate) use deadline::check_timeout;
pub use deadline::{
    COMM_TIMEOUT_ENV, DEFAULT_COMM_TIMEOUT, comm_timeout_from_env, parse_comm_timeout,
};
pub(crate) use failure::{AbortState, Names};
pub use failure::{CommCause, CommFailure};

/// The element types collectives move and reduce: those NCCL and Rust share.
///
/// (NCCL's half, bfloat16 and fp8 types have no `std` Rust type and are left out.)
///
/// ```
/// use gpu_pipeline::collective::{Element, ElementKind};
/// assert_eq!(f64::KIND, ElementKind::F64);
/// assert_eq!((ElementKind::U8.size(), ElementKind::F64.size()), (1, 8));
/// assert_eq!(ElementKind::I32.to_string(), "i32");
/// assert!(ElementKind::F32.is_float() && !ElementKind::U64.is_float());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElementKind {
    /// `i8`.
    I8,
    /// `u8`.
    U8,
    /// `i32`.
    I32,
    /// `u32`.
    U32,
    /// `i64`.
    I64,
    /// `u64`.
    U64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

impl ElementKind {
    /// Every kind, for tests and tables.
    pub const ALL: [ElementKind; 8] = [
        ElementKind::I8,
        ElementKind::U8,
        ElementKind::I32,
        ElementKind::U32,
        ElementKind::I64,
        ElementKind::U64,
        ElementKind::F32,
        ElementKind::F64,
    ];

    /// The size of one element in bytes.
    ///
    /// ```
    /// use gpu_pipeline::collective::ElementKind;
    /// // The bytes an all-gather of 1000 `f64` from each of 4 ranks fills.
    /// assert_eq!(4 * 1000 * ElementKind::F64.size(), 32_000);
    /// ```
    pub const fn size(self) -> usize {
        match self {
            ElementKind::I8 | ElementKind::U8 => 1,
            ElementKind::I32 | ElementKind::U32 | ElementKind::F32 => 4,
            ElementKind::I64 | ElementKind::U64 | ElementKind::F64 => 8,
        }
    }

    /// The Rust name of the type, e.g. `f32`.
    ///
    /// ```
    /// use gpu_pipeline::collective::{Element, ElementKind};
    /// assert_eq!(ElementKind::U64.name(), "u64");
    /// assert_eq!(f32::KIND.name(), std::any::type_name::<f32>());
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            ElementKind::I8 => "i8",
            ElementKind::U8 => "u8",
            ElementKind::I32 => "i32",
            ElementKind::U32 => "u32",
            ElementKind::I64 => "i64",
            ElementKind::U64 => "u64",
            ElementKind::F32 => "f32",
            ElementKind::F64 => "f64",
        }
    }

    /// Whether the kind is a floating-point type.
    ///
    /// ```
    /// use gpu_pipeline::collective::ElementKind;
    /// let floats: Vec<_> = ElementKind::ALL.into_iter().filter(|k| k.is_float()).collect();
    /// assert_eq!(floats, [ElementKind::F32, ElementKind::F64]);
    /// ```
    pub const fn is_float(self) -> bool {
        matches!(self, ElementKind::F32 | ElementKind::F64)
    }
}

impl fmt::Display for ElementKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type collectives can carry: `i8`, `u8`, `i32`, `u32`, `i64`, `u64`, `f32`, `f64`.
///
/// Sealed: NCCL trusts [`KIND`](Element::KIND) for the element size, so a foreign
/// implementation that lied about it could make NCCL write past a buffer.
#[diagnostic::on_unimplemented(
    message = "collectives cannot carry `{Self}`",
    label = "not an element type NCCL reduces",
    note = "sends, receives and collectives move buffers of `i8`, `u8`, `i32`, `u32`, `i64`, \
            `u64`, `f32` or `f64`"
)]
///
/// ```
/// use gpu_pipeline::collective::{Element, ElementKind, World};
/// /// Sums `x` over every rank, for any type collectives carry.
/// fn total<T: Element>(comm: &gpu_pipeline::collective::Comm, x: T) -> T {
///     let mut sum = [x];
///     comm.all_reduce_in_place(&mut sum, gpu_pipeline::collective::ReduceOp::Sum).unwrap();
///     assert_eq!(T::KIND.size(), std::mem::size_of::<T>());
///     sum[0]
/// }
/// let sums = World::run(3, |comm| Ok(total(&comm, comm.rank() as u64 + 1))).unwrap();
/// assert!(sums.iter().all(|sum| *sum.as_ref().unwrap() == 6));
/// assert_eq!(u64::KIND, ElementKind::U64);
/// ```
pub trait Element: Pod + sealed::Sealed {
    /// The kind of this type.
    const KIND: ElementKind;
}

macro_rules! elements {
    ($($ty:ty => $kind:ident,)*) => {$(
        impl sealed::Sealed for $ty {}
        impl Element for $ty {
            const KIND: ElementKind = ElementKind::$kind;
        }
    )*};
}

elements! {
    i8 => I8,
    u8 => U8,
    i32 => I32,
    u32 => U32,
    i64 => I64,
    u64 => U64,
    f32 => F32,
    f64 => F64,
}

/// A reduction operator for `all_reduce` and `reduce_scatter`.
///
/// Integer sums and products wrap, as on the GPU.
///
/// ```
/// use gpu_pipeline::collective::{ElementKind, ReduceOp, World};
/// let maxima = World::run(4, |comm| {
///     let mut x = [comm.rank() as f32, -(comm.rank() as f32)];
///     comm.all_reduce_in_place(&mut x, ReduceOp::Max)?;
///     Ok(x)
/// })
/// .unwrap();
/// assert!(maxima.iter().all(|x| *x.as_ref().unwrap() == [3.0, 0.0]));
/// // `avg` is for floating-point elements only, on both backends.
/// assert!(ReduceOp::Avg.check(ElementKind::F32).is_ok());
/// assert!(ReduceOp::Avg.check(ElementKind::I32).unwrap_err().contains("`sum`"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The product.
    Prod,
    /// The maximum.
    Max,
    /// The minimum.
    Min,
    /// The mean over the ranks (floating-point kinds only).
    Avg,
}

impl ReduceOp {
    /// Every operator, for tests and tables.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Avg,
    ];

    /// The operator's name, e.g. `sum`.
    ///
    /// ```
    /// use gpu_pipeline::collective::ReduceOp;
    /// // The names `all_reduce(OP)` takes in `gpu_pipeline!`.
    /// assert_eq!(ReduceOp::ALL.map(ReduceOp::name), ["sum", "prod", "max", "min", "avg"]);
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Avg => "avg",
        }
    }

    /// The rule both backends apply before reducing: `avg` is only defined for floating-point
    /// kinds (NCCL's integer mean truncates in a way the CPU backend would have to copy
    /// bit for bit; a sum and a division say what is meant instead).
    ///
    /// ```
    /// use gpu_pipeline::collective::{ElementKind, ReduceOp};
    /// assert!(ReduceOp::Max.check(ElementKind::I64).is_ok());
    /// let err = ReduceOp::Avg.check(ElementKind::U32).unwrap_err();
    /// assert!(err.contains("divide by the number of ranks"), "{err}");
    /// ```
    pub fn check(self, kind: ElementKind) -> Result<(), String> {
        if self == ReduceOp::Avg && !kind.is_float() {
            return Err(format!(
                "`avg` needs a floating-point element type, not `{kind}`; reduce with `sum` \
                 and divide by the number of ranks"
            ));
        }
        Ok(())
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_match_their_rust_types() {
        fn check<T: Element>() {
            assert_eq!(T::KIND.size(), std::mem::size_of::<T>(), "{}", T::KIND);
            assert_eq!(T::KIND.name(), std::any::type_name::<T>());
        }
        check::<i8>();
        check::<u8>();
        check::<i32>();
        check::<u32>();
        check::<i64>();
        check::<u64>();
        check::<f32>();
        check::<f64>();
        assert_eq!(ElementKind::ALL.iter().filter(|k| k.is_float()).count(), 2);
    }

    #[test]
    fn avg_is_for_floats_only() {
        assert!(ReduceOp::Avg.check(ElementKind::F32).is_ok());
        assert!(ReduceOp::Avg.check(ElementKind::F64).is_ok());
        let err = ReduceOp::Avg.check(ElementKind::I32).unwrap_err();
        assert!(err.contains("`i32`") && err.contains("`sum`"), "{err}");
        for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
            for kind in ElementKind::ALL {
                assert!(op.check(kind).is_ok(), "{op} {kind}");
            }
        }
    }
}

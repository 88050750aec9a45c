//! What a kernel parameter is, as kernel bounds need to know it: a buffer, or a scalar and,
//! when the scalar is an integer, which one (so its bytes can be read as a count).
//!
//! A leaf module: the `DeviceRepr` impls of the integer primitives name [`IndexType`], and the
//! bound checks read arguments with it.

/// The integer type of a scalar kernel parameter that may bound a buffer's indices.
///
/// Only the integer primitives have one (`u8` to `u64`, `usize`, `i8` to `i64`, `isize`;
/// [`DeviceRepr::INDEX`](crate::DeviceRepr::INDEX)); it cannot be constructed outside this
/// crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
///
/// ```
/// use gpu_pipeline::{DeviceRepr, KernelParam, ParamKind};
/// let index = |kind: ParamKind| match kind {
///     ParamKind::Scalar { index } => index.map(|t| t.name()),
///     ParamKind::Buffer { .. } => None,
/// };
/// assert_eq!(index(<u32 as KernelParam>::KIND), Some("u32"));
/// assert_eq!(index(<i64 as KernelParam>::KIND), Some("i64"));
/// assert_eq!(index(<f32 as KernelParam>::KIND), None); // a float bounds nothing
/// assert_eq!(<usize as DeviceRepr>::INDEX.unwrap().name(), "usize");
/// ```
pub struct IndexType(Int);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Int {
    U8,
    U16,
    U32,
    U64,
    Usize,
    I8,
    I16,
    I32,
    I64,
    Isize,
}

/// A scalar argument read as a count: its value, or the negative value it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Count {
    /// Zero or more.
    Value(u64),
    /// Below zero: no count of elements.
    Negative(i64),
}

impl IndexType {
    pub(crate) const U8: IndexType = IndexType(Int::U8);
    pub(crate) const U16: IndexType = IndexType(Int::U16);
    pub(crate) const U32: IndexType = IndexType(Int::U32);
    pub(crate) const U64: IndexType = IndexType(Int::U64);
    pub(crate) const USIZE: IndexType = IndexType(Int::Usize);
    pub(crate) const I8: IndexType = IndexType(Int::I8);
    pub(crate) const I16: IndexType = IndexType(Int::I16);
    pub(crate) const I32: IndexType = IndexType(Int::I32);
    pub(crate) const I64: IndexType = IndexType(Int::I64);
    pub(crate) const ISIZE: IndexType = IndexType(Int::Isize);

    /// The Rust name of the type: `"u32"`.
    pub fn name(self) -> &'static str {
        match self.0 {
            Int::U8 => "u8",
            Int::U16 => "u16",
            Int::U32 => "u32",
            Int::U64 => "u64",
            Int::Usize => "usize",
            Int::I8 => "i8",
            Int::I16 => "i16",
            Int::I32 => "i32",
            Int::I64 => "i64",
            Int::Isize => "isize",
        }
    }

    /// Reads a scalar argument's bytes (native endian, as packed for the kernel) as a count.
    /// `None` when the byte count is not this type's size: the argument is not of this type.
    /// Every conversion is lossless: all these types fit an `i64` or a `u64`.
    #[inline]
    pub(crate) fn read(self, bytes: &[u8]) -> Option<Count> {
        fn array<const N: usize>(bytes: &[u8]) -> Option<[u8; N]> {
            bytes.try_into().ok()
        }
        let signed = |value: i64| {
            if value < 0 {
                Count::Negative(value)
            } else {
                Count::Value(value.unsigned_abs())
            }
        };
        Some(match self.0 {
            Int::U8 => Count::Value(u64::from(u8::from_ne_bytes(array(bytes)?))),
            Int::U16 => Count::Value(u64::from(u16::from_ne_bytes(array(bytes)?))),
            Int::U32 => Count::Value(u64::from(u32::from_ne_bytes(array(bytes)?))),
            Int::U64 => Count::Value(u64::from_ne_bytes(array(bytes)?)),
            Int::Usize => Count::Value(usize::from_ne_bytes(array(bytes)?) as u64),
            Int::I8 => signed(i64::from(i8::from_ne_bytes(array(bytes)?))),
            Int::I16 => signed(i64::from(i16::from_ne_bytes(array(bytes)?))),
            Int::I32 => signed(i64::from(i32::from_ne_bytes(array(bytes)?))),
            Int::I64 => signed(i64::from_ne_bytes(array(bytes)?)),
            Int::Isize => signed(isize::from_ne_bytes(array(bytes)?) as i64),
        })
    }
}

/// What a kernel parameter is, for bound declarations ([`Signature::KINDS`](crate::Signature::KINDS)).
///
/// ```
/// use gpu_pipeline::{ParamKind, Signature};
/// type Scale = (u32, f32, &'static mut [f32]);
/// assert!(matches!(Scale::KINDS[0], ParamKind::Scalar { index: Some(_) }));
/// assert!(matches!(Scale::KINDS[1], ParamKind::Scalar { index: None }));
/// assert_eq!(Scale::KINDS[2], ParamKind::Buffer { writes: true, elem_size: 4 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A value passed by copy; `index` is its integer type when it is one, the only scalars
    /// that may bound a buffer.
    Scalar {
        /// The integer type, or `None` (a float, an array, a struct).
        index: Option<IndexType>,
    },
    /// Device memory passed as a pointer: `&[T]`, or `&mut [T]` when `writes`.
    Buffer {
        /// Whether the kernel may write through it.
        writes: bool,
        /// The size of one element `T`, in bytes: what a bound counts in.
        elem_size: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_every_integer_losslessly_and_refuse_other_widths() {
        let u = |t: IndexType, bytes: &[u8]| t.read(bytes);
        assert_eq!(
            u(IndexType::U32, &7u32.to_ne_bytes()),
            Some(Count::Value(7))
        );
        assert_eq!(
            u(IndexType::U64, &u64::MAX.to_ne_bytes()),
            Some(Count::Value(u64::MAX))
        );
        assert_eq!(
            u(IndexType::USIZE, &usize::MAX.to_ne_bytes()),
            Some(Count::Value(usize::MAX as u64))
        );
        assert_eq!(
            u(IndexType::I32, &(-3i32).to_ne_bytes()),
            Some(Count::Negative(-3))
        );
        assert_eq!(
            u(IndexType::I64, &i64::MIN.to_ne_bytes()),
            Some(Count::Negative(i64::MIN))
        );
        assert_eq!(
            u(IndexType::I64, &i64::MAX.to_ne_bytes()),
            Some(Count::Value(i64::MAX as u64))
        );
        assert_eq!(u(IndexType::I8, &[0x80]), Some(Count::Negative(-128)));
        assert_eq!(u(IndexType::U8, &[0x80]), Some(Count::Value(128)));
        assert_eq!(
            u(IndexType::ISIZE, &(-1isize).to_ne_bytes()),
            Some(Count::Negative(-1))
        );
        // A byte count that is not the type's size is not that type.
        assert_eq!(u(IndexType::U32, &[0; 8]), None);
        assert_eq!(u(IndexType::U16, &[]), None);
        assert_eq!(IndexType::U16.name(), "u16");
    }
}

//! Argument checks for buffers, views, copies and memsets, written as pure functions so they
//! run (and are tested) without a GPU. Each returns [`Error::InvalidArgument`] naming the API
//! that rejected the argument; none panics, whatever the input.

use std::ops::{Bound, RangeBounds};

use crate::error::{Error, Result};

/// The byte size of `len` elements of `elem_size` bytes each. Fails when it overflows `usize`
/// or exceeds `isize::MAX`, the most any Rust slice (and so any host view) can span.
pub(crate) fn byte_len(call: &'static str, len: usize, elem_size: usize) -> Result<usize> {
    len.checked_mul(elem_size)
        .filter(|bytes| isize::try_from(*bytes).is_ok())
        .ok_or_else(|| {
            Error::invalid(
                call,
                format!(
                    "{len} elements of {elem_size} bytes exceed the address space (at most \
                     `isize::MAX` bytes)"
                ),
            )
        })
}

/// Resolves `range` against a buffer of `len` elements into `(offset, count)`.
pub(crate) fn resolve_range(
    call: &'static str,
    range: &impl RangeBounds<usize>,
    len: usize,
) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(start), Some(end)) if start <= end && end <= len => Ok((start, end - start)),
        _ => Err(Error::invalid(
            call,
            format!(
                "range `{}` is out of bounds for {len} elements",
                show_range(range)
            ),
        )),
    }
}

/// `range` as Rust source would spell it, e.g. `2..=7`.
fn show_range(range: &impl RangeBounds<usize>) -> String {
    let start = match range.start_bound() {
        Bound::Included(s) => s.to_string(),
        // No Rust syntax excludes the start; say what it means.
        Bound::Excluded(s) => format!("(excluded {s})"),
        Bound::Unbounded => String::new(),
    };
    let end = match range.end_bound() {
        Bound::Included(e) => format!("={e}"),
        Bound::Excluded(e) => e.to_string(),
        Bound::Unbounded => String::new(),
    };
    format!("{start}..{end}")
}

/// Where to split `len` elements; `mid == len` gives an empty second half.
pub(crate) fn split_point(call: &'static str, mid: usize, len: usize) -> Result<()> {
    if mid <= len {
        Ok(())
    } else {
        Err(Error::invalid(
            call,
            format!("split point {mid} is past the end of {len} elements"),
        ))
    }
}

/// A copy moves whole elements between regions of the same length.
pub(crate) fn same_len(call: &'static str, src: usize, dst: usize) -> Result<()> {
    if src == dst {
        Ok(())
    } else {
        Err(Error::invalid(
            call,
            format!(
                "the source has {src} elements but the destination has {dst}; copies need \
                 equal lengths (take a view of the longer one with `slice` or `slice_mut`)"
            ),
        ))
    }
}

/// The number of 32-bit words `memset_u32` writes over `bytes` bytes at device address
/// `ptr`, for elements of `elem_size` bytes: only whole, aligned words, and only when every
/// element is made of whole words (so the pattern lines up with each element).
pub(crate) fn memset_u32_words(
    call: &'static str,
    elem_size: usize,
    bytes: usize,
    ptr: u64,
) -> Result<usize> {
    if !elem_size.is_multiple_of(4) {
        return Err(Error::invalid(
            call,
            format!(
                "`memset_u32` needs elements whose size is a multiple of 4 bytes, and these are \
                 {elem_size} bytes; use `memset_u8`"
            ),
        ));
    }
    if !bytes.is_multiple_of(4) || !ptr.is_multiple_of(4) {
        return Err(Error::invalid(
            call,
            format!(
                "`memset_u32` needs a 4-byte aligned region of whole words (address {ptr:#x}, \
                 {bytes} bytes); use `memset_u8`"
            ),
        ));
    }
    Ok(bytes / 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn message(e: Error) -> String {
        match e {
            Error::InvalidArgument { message, .. } => message,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn byte_len_multiplies_and_rejects_overflow() {
        assert_eq!(byte_len("t", 10, 4).unwrap(), 40);
        assert_eq!(byte_len("t", 0, 8).unwrap(), 0);
        assert_eq!(byte_len("t", usize::MAX, 0).unwrap(), 0);
        assert!(byte_len("t", usize::MAX, 2).is_err());
        // Fits in usize but not in isize: no slice may span it.
        assert!(byte_len("t", isize::MAX as usize + 1, 1).is_err());
        let m = message(byte_len("t", usize::MAX / 2 + 1, 4).unwrap_err());
        assert!(m.contains("exceed the address space"), "{m}");
    }

    #[test]
    fn ranges_resolve_to_offset_and_count() {
        assert_eq!(resolve_range("t", &(..), 8).unwrap(), (0, 8));
        assert_eq!(resolve_range("t", &(2..5), 8).unwrap(), (2, 3));
        assert_eq!(resolve_range("t", &(2..=5), 8).unwrap(), (2, 4));
        assert_eq!(resolve_range("t", &(3..), 8).unwrap(), (3, 5));
        assert_eq!(resolve_range("t", &(..8), 8).unwrap(), (0, 8));
        assert_eq!(resolve_range("t", &(8..8), 8).unwrap(), (8, 0));
        assert_eq!(resolve_range("t", &(0..0), 0).unwrap(), (0, 0));
        let excluded = (Bound::Excluded(1), Bound::Included(3));
        assert_eq!(resolve_range("t", &excluded, 8).unwrap(), (2, 2));
    }

    #[test]
    fn bad_ranges_are_errors_naming_the_range_and_length() {
        let m = message(resolve_range("t", &(3..10), 8).unwrap_err());
        assert_eq!(m, "range `3..10` is out of bounds for 8 elements");
        let m = message(resolve_range("t", &(2..=8), 8).unwrap_err());
        assert_eq!(m, "range `2..=8` is out of bounds for 8 elements");
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 5..2;
        assert!(resolve_range("t", &reversed, 8).is_err());
        assert!(resolve_range("t", &(9..), 8).is_err());
        assert!(resolve_range("t", &(..=usize::MAX), usize::MAX).is_err());
        let excluded = (Bound::Excluded(usize::MAX), Bound::Unbounded);
        assert!(resolve_range("t", &excluded, usize::MAX).is_err());
    }

    #[test]
    fn split_points_stay_within_the_length() {
        assert!(split_point("t", 0, 0).is_ok());
        assert!(split_point("t", 4, 4).is_ok());
        assert!(split_point("t", 2, 4).is_ok());
        let m = message(split_point("t", 5, 4).unwrap_err());
        assert_eq!(m, "split point 5 is past the end of 4 elements");
    }

    #[test]
    fn length_mismatch_names_both_lengths() {
        assert!(same_len("t", 3, 3).is_ok());
        let e = same_len("Stream::copy_htod", 10, 8).unwrap_err();
        assert!(e.to_string().starts_with("Stream::copy_htod: "), "{e}");
        let m = message(e);
        assert!(
            m.contains("10 elements") && m.contains("destination has 8"),
            "{m}"
        );
    }

    #[test]
    fn memset_u32_needs_whole_aligned_words() {
        assert_eq!(memset_u32_words("t", 4, 40, 0x1000).unwrap(), 10);
        assert_eq!(memset_u32_words("t", 8, 16, 0x1008).unwrap(), 4);
        assert_eq!(memset_u32_words("t", 12, 0, 0x1000).unwrap(), 0);
        assert_eq!(memset_u32_words("t", 0, 0, 0x1000).unwrap(), 0);
        let m = message(memset_u32_words("t", 2, 8, 0x1000).unwrap_err());
        assert!(m.contains("2 bytes") && m.contains("memset_u8"), "{m}");
        assert!(memset_u32_words("t", 1, 4, 0x1000).is_err());
        assert!(memset_u32_words("t", 4, 6, 0x1000).is_err());
        assert!(memset_u32_words("t", 4, 8, 0x1002).is_err());
    }

    proptest! {
        #[test]
        fn resolved_ranges_lie_within_the_buffer(
            len in 0usize..1000,
            a in 0usize..1100,
            b in 0usize..1100,
        ) {
            match resolve_range("t", &(a..b), len) {
                Ok((offset, count)) => {
                    prop_assert_eq!(offset, a);
                    prop_assert_eq!(offset + count, b);
                    prop_assert!(b <= len);
                }
                Err(_) => prop_assert!(a > b || b > len),
            }
        }

        #[test]
        fn byte_len_never_panics(len in any::<usize>(), size in 0usize..4096) {
            match byte_len("t", len, size) {
                Ok(bytes) => prop_assert_eq!(Some(bytes), len.checked_mul(size)),
                Err(_) => prop_assert!(
                    len.checked_mul(size).is_none_or(|b| b > isize::MAX as usize)
                ),
            }
        }
    }
}

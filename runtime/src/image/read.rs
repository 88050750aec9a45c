//! Bounds-checked little-endian reads and overflow-safe ranges: the only way the checks
//! look at image bytes, so no check can index past the end or wrap an offset.

/// An image, or a part of one, read by offset. Every read returns `None` past the end.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bytes<'a> {
    bytes: &'a [u8],
}

impl<'a> Bytes<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Bytes { bytes }
    }

    /// The length, as the `u64` that file offsets are.
    pub(crate) fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The bytes in `[offset, offset + len)`, when all of them lie within.
    pub(crate) fn get(&self, offset: u64, len: u64) -> Option<&'a [u8]> {
        let start = usize::try_from(offset).ok()?;
        let end = usize::try_from(end(offset, len)?).ok()?;
        self.bytes.get(start..end)
    }

    /// Whether `[offset, offset + len)` lies within.
    pub(crate) fn contains(&self, offset: u64, len: u64) -> bool {
        end(offset, len).is_some_and(|end| end <= self.len())
    }

    pub(crate) fn u8(&self, offset: u64) -> Option<u8> {
        Some(self.get(offset, 1)?[0])
    }

    pub(crate) fn u16(&self, offset: u64) -> Option<u16> {
        Some(u16::from_le_bytes(self.get(offset, 2)?.try_into().ok()?))
    }

    pub(crate) fn u32(&self, offset: u64) -> Option<u32> {
        Some(u32::from_le_bytes(self.get(offset, 4)?.try_into().ok()?))
    }

    pub(crate) fn u64(&self, offset: u64) -> Option<u64> {
        Some(u64::from_le_bytes(self.get(offset, 8)?.try_into().ok()?))
    }

    /// The bytes from `offset` to the end (empty past the end).
    pub(crate) fn rest(&self, offset: u64) -> &'a [u8] {
        usize::try_from(offset)
            .ok()
            .and_then(|at| self.bytes.get(at..))
            .unwrap_or_default()
    }

    /// The part `[offset, offset + len)` as its own `Bytes`, when it lies within.
    pub(crate) fn sub(&self, offset: u64, len: u64) -> Option<Bytes<'a>> {
        self.get(offset, len).map(Bytes::new)
    }
}

/// `offset + len`, or `None` when it overflows.
pub(crate) fn end(offset: u64, len: u64) -> Option<u64> {
    offset.checked_add(len)
}

/// Whether the byte ranges `(offset, len)` `a` and `b` share a byte (empty ranges share
/// none); computed without overflow.
pub(crate) fn overlap(a: (u64, u64), b: (u64, u64)) -> bool {
    let (a_end, b_end) = (
        u128::from(a.0) + u128::from(a.1),
        u128::from(b.0) + u128::from(b.1),
    );
    a.1 != 0 && b.1 != 0 && u128::from(a.0) < b_end && u128::from(b.0) < a_end
}

/// `base + index * stride`, or `None` when it overflows.
pub(crate) fn element(base: u64, index: u64, stride: u64) -> Option<u64> {
    base.checked_add(index.checked_mul(stride)?)
}

/// `fatBinaryHeader.magic`: how a fatbin starts (the ELF checks name it when a fatbin is
/// passed as a cubin).
pub(crate) const FATBIN_MAGIC: u32 = 0xBA55_ED50;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_the_end_and_never_wrap() {
        let b = Bytes::new(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(b.u16(0), Some(0x0201));
        assert_eq!(b.u32(5), Some(0x0908_0706));
        assert_eq!(b.u32(6), None);
        assert_eq!(b.u64(1), Some(0x0908_0706_0504_0302));
        assert_eq!(b.u64(2), None);
        assert_eq!(b.u8(u64::MAX), None);
        assert_eq!(b.get(u64::MAX, 2), None);
        assert_eq!(b.get(9, 0), Some(&[][..]));
        assert_eq!(b.get(10, 0), None);
        assert!(b.contains(9, 0));
        assert!(!b.contains(1, u64::MAX));
        assert_eq!(b.rest(7), &[8, 9]);
        assert_eq!(b.rest(u64::MAX), &[] as &[u8]);
        assert_eq!(element(u64::MAX - 1, 1, 2), None);
        assert_eq!(element(8, 3, 64), Some(200));
        assert_eq!(b.sub(2, 3).map(|s| s.len()), Some(3));
        assert!(overlap((0, 4), (3, 1)) && overlap((3, 1), (0, 4)));
        assert!(!overlap((0, 4), (4, 1)) && !overlap((0, 0), (0, 4)));
        assert!(overlap((u64::MAX, u64::MAX), (u64::MAX - 1, 2)));
    }
}

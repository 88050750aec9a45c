//! Host slices of pinned and managed memory: guards that count themselves in the allocation.
//!
//! A graph launch borrows nothing (it replays copies and kernels captured long before), so
//! the borrow checker alone cannot keep it from writing memory the host is reading. The
//! guards close that hole: while one is alive the allocation counts a host borrow, and
//! [`GraphExec::launch`](crate::GraphExec::launch) refuses to run a graph that touches a
//! borrowed allocation. Forgetting a guard (`mem::forget`) keeps the count up, which only
//! makes later launches of such graphs fail.

use std::fmt;
use std::ops::{Deref, DerefMut};

use super::alloc::BorrowCount;

/// The elements of a [`PinnedBuffer`](crate::PinnedBuffer) or
/// [`ManagedBuffer`](crate::ManagedBuffer), readable by the host: derefs to `[T]`. Taken
/// after the work that touches the memory has completed; while it lives, launching a graph
/// that touches the memory fails.
pub struct HostSlice<'a, T> {
    slice: &'a [T],
    borrow: &'a BorrowCount,
}

/// The elements of a [`PinnedBuffer`](crate::PinnedBuffer) or
/// [`ManagedBuffer`](crate::ManagedBuffer), writable by the host: derefs to `&mut [T]`.
/// Like [`HostSlice`], it makes graph launches touching the memory fail while it lives.
pub struct HostSliceMut<'a, T> {
    slice: &'a mut [T],
    borrow: &'a BorrowCount,
}

impl<'a, T> HostSlice<'a, T> {
    /// Wraps a slice whose borrow was already counted in `borrow`.
    pub(crate) fn new(slice: &'a [T], borrow: &'a BorrowCount) -> Self {
        HostSlice { slice, borrow }
    }
}

impl<'a, T> HostSliceMut<'a, T> {
    /// Wraps a slice whose borrow was already counted in `borrow`.
    pub(crate) fn new(slice: &'a mut [T], borrow: &'a BorrowCount) -> Self {
        HostSliceMut { slice, borrow }
    }
}

impl<T> Drop for HostSlice<'_, T> {
    fn drop(&mut self) {
        self.borrow.release();
    }
}

impl<T> Drop for HostSliceMut<'_, T> {
    fn drop(&mut self) {
        self.borrow.release();
    }
}

impl<T> Deref for HostSlice<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.slice
    }
}

impl<T> Deref for HostSliceMut<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.slice
    }
}

impl<T> DerefMut for HostSliceMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.slice
    }
}

impl<T> AsRef<[T]> for HostSlice<'_, T> {
    fn as_ref(&self) -> &[T] {
        self.slice
    }
}

impl<T> AsRef<[T]> for HostSliceMut<'_, T> {
    fn as_ref(&self) -> &[T] {
        self.slice
    }
}

impl<T> AsMut<[T]> for HostSliceMut<'_, T> {
    fn as_mut(&mut self) -> &mut [T] {
        self.slice
    }
}

impl<'s, T> IntoIterator for &'s HostSlice<'_, T> {
    type Item = &'s T;
    type IntoIter = std::slice::Iter<'s, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.slice.iter()
    }
}

impl<'s, T> IntoIterator for &'s mut HostSliceMut<'_, T> {
    type Item = &'s mut T;
    type IntoIter = std::slice::IterMut<'s, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.slice.iter_mut()
    }
}

impl<T: fmt::Debug> fmt::Debug for HostSlice<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.slice.fmt(f)
    }
}

impl<T: fmt::Debug> fmt::Debug for HostSliceMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.slice.fmt(f)
    }
}

/// Comparisons with slices, arrays and vectors, so `assert_eq!(buf.as_slice()?, data)` reads
/// as it would with a plain slice.
macro_rules! compare {
    ($($guard:ident),*) => {$(
        impl<T: PartialEq<U>, U> PartialEq<[U]> for $guard<'_, T> {
            fn eq(&self, other: &[U]) -> bool {
                self.slice[..] == *other
            }
        }
        impl<T: PartialEq<U>, U> PartialEq<&[U]> for $guard<'_, T> {
            fn eq(&self, other: &&[U]) -> bool {
                self.slice[..] == **other
            }
        }
        impl<T: PartialEq<U>, U, const N: usize> PartialEq<[U; N]> for $guard<'_, T> {
            fn eq(&self, other: &[U; N]) -> bool {
                self.slice[..] == other[..]
            }
        }
        impl<T: PartialEq<U>, U> PartialEq<Vec<U>> for $guard<'_, T> {
            fn eq(&self, other: &Vec<U>) -> bool {
                self.slice[..] == other[..]
            }
        }
    )*};
}

compare!(HostSlice, HostSliceMut);

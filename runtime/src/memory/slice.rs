//! Host slices of pinned and managed memory: guards that count themselves in the allocation
//! (and, on the CPU backend, hold its lock).
//!
//! A graph launch borrows nothing (it replays copies and kernels captured long before), so
//! the borrow checker alone cannot keep it from writing memory the host is reading. The
//! guards close that hole: while one is alive the allocation counts a host borrow, and
//! [`GraphExec::launch`](crate::GraphExec::launch) refuses to run a graph that touches a
//! borrowed allocation. Forgetting a guard (`mem::forget`) keeps the count up, which only
//! makes later launches of such graphs fail.

use std::fmt;
use std::ops::{Deref, DerefMut};

use bytemuck::Pod;

use crate::cpu;
use crate::cuda;

/// The elements of a [`PinnedBuffer`](crate::PinnedBuffer) or
/// [`ManagedBuffer`](crate::ManagedBuffer), readable by the host: derefs to `[T]`. Taken
/// after the work that touches the memory has completed; while it lives, launching a graph
/// that touches the memory fails.
pub struct HostSlice<'a, T: Pod> {
    inner: SliceOf<'a, T>,
}

enum SliceOf<'a, T> {
    Cuda(cuda::HostSlice<'a, T>),
    Cpu(cpu::HostSlice<'a, T>),
}

/// The elements of a [`PinnedBuffer`](crate::PinnedBuffer) or
/// [`ManagedBuffer`](crate::ManagedBuffer), writable by the host: derefs to `&mut [T]`.
/// Like [`HostSlice`], it makes graph launches touching the memory fail while it lives.
pub struct HostSliceMut<'a, T: Pod> {
    inner: SliceMutOf<'a, T>,
}

enum SliceMutOf<'a, T> {
    Cuda(cuda::HostSliceMut<'a, T>),
    Cpu(cpu::HostSliceMut<'a, T>),
}

impl<'a, T: Pod> From<cuda::HostSlice<'a, T>> for HostSlice<'a, T> {
    fn from(slice: cuda::HostSlice<'a, T>) -> Self {
        HostSlice {
            inner: SliceOf::Cuda(slice),
        }
    }
}

impl<'a, T: Pod> From<cpu::HostSlice<'a, T>> for HostSlice<'a, T> {
    fn from(slice: cpu::HostSlice<'a, T>) -> Self {
        HostSlice {
            inner: SliceOf::Cpu(slice),
        }
    }
}

impl<'a, T: Pod> From<cuda::HostSliceMut<'a, T>> for HostSliceMut<'a, T> {
    fn from(slice: cuda::HostSliceMut<'a, T>) -> Self {
        HostSliceMut {
            inner: SliceMutOf::Cuda(slice),
        }
    }
}

impl<'a, T: Pod> From<cpu::HostSliceMut<'a, T>> for HostSliceMut<'a, T> {
    fn from(slice: cpu::HostSliceMut<'a, T>) -> Self {
        HostSliceMut {
            inner: SliceMutOf::Cpu(slice),
        }
    }
}

impl<T: Pod> HostSlice<'_, T> {
    fn slice(&self) -> &[T] {
        match &self.inner {
            SliceOf::Cuda(s) => s.get(),
            SliceOf::Cpu(s) => s.get(),
        }
    }
}

impl<T: Pod> HostSliceMut<'_, T> {
    fn slice(&self) -> &[T] {
        match &self.inner {
            SliceMutOf::Cuda(s) => s.get(),
            SliceMutOf::Cpu(s) => s.get(),
        }
    }

    fn slice_mut(&mut self) -> &mut [T] {
        match &mut self.inner {
            SliceMutOf::Cuda(s) => s.get_mut(),
            SliceMutOf::Cpu(s) => s.get_mut(),
        }
    }
}

impl<T: Pod> Deref for HostSlice<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.slice()
    }
}

impl<T: Pod> Deref for HostSliceMut<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.slice()
    }
}

impl<T: Pod> DerefMut for HostSliceMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.slice_mut()
    }
}

impl<T: Pod> AsRef<[T]> for HostSlice<'_, T> {
    fn as_ref(&self) -> &[T] {
        self.slice()
    }
}

impl<T: Pod> AsRef<[T]> for HostSliceMut<'_, T> {
    fn as_ref(&self) -> &[T] {
        self.slice()
    }
}

impl<T: Pod> AsMut<[T]> for HostSliceMut<'_, T> {
    fn as_mut(&mut self) -> &mut [T] {
        self.slice_mut()
    }
}

impl<'s, T: Pod> IntoIterator for &'s HostSlice<'_, T> {
    type Item = &'s T;
    type IntoIter = std::slice::Iter<'s, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.slice().iter()
    }
}

impl<'s, T: Pod> IntoIterator for &'s mut HostSliceMut<'_, T> {
    type Item = &'s mut T;
    type IntoIter = std::slice::IterMut<'s, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.slice_mut().iter_mut()
    }
}

impl<T: Pod + fmt::Debug> fmt::Debug for HostSlice<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.slice().fmt(f)
    }
}

impl<T: Pod + fmt::Debug> fmt::Debug for HostSliceMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.slice().fmt(f)
    }
}

/// Comparisons with slices, arrays and vectors, so `assert_eq!(buf.as_slice()?, data)` reads
/// as it would with a plain slice.
macro_rules! compare {
    ($($guard:ident),*) => {$(
        impl<T: Pod + PartialEq<U>, U> PartialEq<[U]> for $guard<'_, T> {
            fn eq(&self, other: &[U]) -> bool {
                self.slice()[..] == *other
            }
        }
        impl<T: Pod + PartialEq<U>, U> PartialEq<&[U]> for $guard<'_, T> {
            fn eq(&self, other: &&[U]) -> bool {
                self.slice()[..] == **other
            }
        }
        impl<T: Pod + PartialEq<U>, U, const N: usize> PartialEq<[U; N]> for $guard<'_, T> {
            fn eq(&self, other: &[U; N]) -> bool {
                self.slice()[..] == other[..]
            }
        }
        impl<T: Pod + PartialEq<U>, U> PartialEq<Vec<U>> for $guard<'_, T> {
            fn eq(&self, other: &Vec<U>) -> bool {
                self.slice()[..] == other[..]
            }
        }
    )*};
}

compare!(HostSlice, HostSliceMut);

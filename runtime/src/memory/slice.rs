//! Host views of pinned and managed memory: guards that count themselves in the allocation
//! (and, on the CPU backend, hold its lock), and deref to the slice of elements.
//!
//! They are views, not slices: a view is not itself an iterator (`view.iter().zip(..)`, or
//! `for x in &view`), and while it lives it borrows its buffer, so a step that writes the
//! buffer cannot start until it is dropped. Copy the elements out (`to_vec`) or end the
//! view's scope before the next step. (Earlier versions called them `HostSlice` and
//! `HostSliceMut`; those names remain as deprecated aliases.)
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
/// [`ManagedBuffer`](crate::ManagedBuffer), readable by the host: a guard that derefs to
/// `[T]`. Taken after the work that touches the memory has completed; while it lives,
/// launching a graph that touches the memory fails.
///
/// ```
/// use gpu_pipeline::{Context, PinnedBuffer};
/// let ctx = Context::cpu();
/// let buf = PinnedBuffer::from_slice(&ctx, &[1.0f32, 2.0, 3.0])?;
/// let view = buf.as_slice()?;
/// // Slice methods through `Deref`, iteration through `&view`.
/// let dot: f32 = view.iter().zip([4.0, 5.0, 6.0]).map(|(a, b)| a * b).sum();
/// assert_eq!(dot, 32.0);
/// let mut sum = 0.0;
/// for x in &view {
///     sum += x;
/// }
/// assert_eq!(sum, 6.0);
/// assert_eq!(view, [1.0, 2.0, 3.0]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub struct HostView<'a, T: Pod> {
    inner: SliceOf<'a, T>,
}

enum SliceOf<'a, T> {
    Cuda(cuda::HostSlice<'a, T>),
    Cpu(cpu::HostSlice<'a, T>),
}

/// The elements of a [`PinnedBuffer`](crate::PinnedBuffer) or
/// [`ManagedBuffer`](crate::ManagedBuffer), writable by the host: a guard that derefs to
/// `&mut [T]`. Like [`HostView`], it makes graph launches touching the memory fail while it
/// lives.
///
/// ```
/// use gpu_pipeline::{Context, PinnedBuffer};
/// let ctx = Context::cpu();
/// let mut buf = PinnedBuffer::<u32>::zeros(&ctx, 4)?;
/// let mut view = buf.as_mut_slice()?;
/// for (i, x) in (&mut view).into_iter().enumerate() {
///     *x = i as u32 * 10;
/// }
/// let total: u32 = (&view).into_iter().sum();
/// assert_eq!(total, 60);
/// drop(view); // ends the borrow of `buf`
/// assert_eq!(buf.to_vec()?, [0, 10, 20, 30]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub struct HostViewMut<'a, T: Pod> {
    inner: SliceMutOf<'a, T>,
}

enum SliceMutOf<'a, T> {
    Cuda(cuda::HostSliceMut<'a, T>),
    Cpu(cpu::HostSliceMut<'a, T>),
}

impl<'a, T: Pod> From<cuda::HostSlice<'a, T>> for HostView<'a, T> {
    fn from(slice: cuda::HostSlice<'a, T>) -> Self {
        HostView {
            inner: SliceOf::Cuda(slice),
        }
    }
}

impl<'a, T: Pod> From<cpu::HostSlice<'a, T>> for HostView<'a, T> {
    fn from(slice: cpu::HostSlice<'a, T>) -> Self {
        HostView {
            inner: SliceOf::Cpu(slice),
        }
    }
}

impl<'a, T: Pod> From<cuda::HostSliceMut<'a, T>> for HostViewMut<'a, T> {
    fn from(slice: cuda::HostSliceMut<'a, T>) -> Self {
        HostViewMut {
            inner: SliceMutOf::Cuda(slice),
        }
    }
}

impl<'a, T: Pod> From<cpu::HostSliceMut<'a, T>> for HostViewMut<'a, T> {
    fn from(slice: cpu::HostSliceMut<'a, T>) -> Self {
        HostViewMut {
            inner: SliceMutOf::Cpu(slice),
        }
    }
}

impl<T: Pod> HostView<'_, T> {
    fn slice(&self) -> &[T] {
        match &self.inner {
            SliceOf::Cuda(s) => s.get(),
            SliceOf::Cpu(s) => s.get(),
        }
    }
}

impl<T: Pod> HostViewMut<'_, T> {
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

impl<T: Pod> Deref for HostView<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.slice()
    }
}

impl<T: Pod> Deref for HostViewMut<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.slice()
    }
}

impl<T: Pod> DerefMut for HostViewMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.slice_mut()
    }
}

impl<T: Pod> AsRef<[T]> for HostView<'_, T> {
    fn as_ref(&self) -> &[T] {
        self.slice()
    }
}

impl<T: Pod> AsRef<[T]> for HostViewMut<'_, T> {
    fn as_ref(&self) -> &[T] {
        self.slice()
    }
}

impl<T: Pod> AsMut<[T]> for HostViewMut<'_, T> {
    fn as_mut(&mut self) -> &mut [T] {
        self.slice_mut()
    }
}

impl<'s, T: Pod> IntoIterator for &'s HostView<'_, T> {
    type Item = &'s T;
    type IntoIter = std::slice::Iter<'s, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.slice().iter()
    }
}

impl<'s, T: Pod> IntoIterator for &'s HostViewMut<'_, T> {
    type Item = &'s T;
    type IntoIter = std::slice::Iter<'s, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.slice().iter()
    }
}

impl<'s, T: Pod> IntoIterator for &'s mut HostViewMut<'_, T> {
    type Item = &'s mut T;
    type IntoIter = std::slice::IterMut<'s, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.slice_mut().iter_mut()
    }
}

impl<T: Pod + fmt::Debug> fmt::Debug for HostView<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.slice().fmt(f)
    }
}

impl<T: Pod + fmt::Debug> fmt::Debug for HostViewMut<'_, T> {
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

compare!(HostView, HostViewMut);

/// [`HostView`] under its earlier name.
#[deprecated(
    since = "0.1.0",
    note = "renamed `HostView`: a guard that derefs to a slice, not a slice (iterate with \
            `.iter()` or `for x in &view`)"
)]
pub type HostSlice<'a, T> = HostView<'a, T>;

/// [`HostViewMut`] under its earlier name.
#[deprecated(since = "0.1.0", note = "renamed `HostViewMut`")]
pub type HostSliceMut<'a, T> = HostViewMut<'a, T>;

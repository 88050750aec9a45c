//! What a stage's statements make of a resolved buffer reference ([`Ref`]): an element of a
//! buffer array, a view of a range of a buffer, and copies and fills between views.

use bytemuck::Pod;

use super::ops::CopyInto;
use super::plan::Ref;
use crate::error::{Error, Result};
use crate::memory::{
    DeviceBuffer, DeviceDest, DeviceView, DeviceViewMut, PinnedBuffer, PinnedView, PinnedViewMut,
};
use crate::stream::Stream;

/// A buffer a statement can take a range of: `x[lo..hi]`.
pub trait Sliced {
    /// The shared view of a range.
    type View<'a>
    where
        Self: 'a;
    /// The exclusive view of a range.
    type ViewMut<'a>
    where
        Self: 'a;
    /// The elements `r.start..r.end`, read.
    fn view(&self, r: Ref) -> Result<Self::View<'_>>;
    /// The elements `r.start..r.end`, written.
    fn view_mut(&mut self, r: Ref) -> Result<Self::ViewMut<'_>>;
}

impl<T: Pod> Sliced for DeviceBuffer<T> {
    type View<'a> = DeviceView<'a, T>;
    type ViewMut<'a> = DeviceViewMut<'a, T>;
    fn view(&self, r: Ref) -> Result<DeviceView<'_, T>> {
        self.slice(r.start..r.end)
    }
    fn view_mut(&mut self, r: Ref) -> Result<DeviceViewMut<'_, T>> {
        self.slice_mut(r.start..r.end)
    }
}

impl<T: Pod> Sliced for PinnedBuffer<T> {
    type View<'a> = PinnedView<'a, T>;
    type ViewMut<'a> = PinnedViewMut<'a, T>;
    fn view(&self, r: Ref) -> Result<PinnedView<'_, T>> {
        self.slice(r.start..r.end)
    }
    fn view_mut(&mut self, r: Ref) -> Result<PinnedViewMut<'_, T>> {
        self.slice_mut(r.start..r.end)
    }
}

/// What a statement reads a range from: a buffer it borrows, or one of several ranges of a
/// buffer the statement names more than once ([`Apart`]).
pub trait ReadSource {
    /// The view of a range.
    type View;
    /// The elements `r.start..r.end`, read.
    fn read(self, r: Ref) -> Result<Self::View>;
}

/// What a statement writes a range of: a buffer it borrows exclusively, or one of several
/// ranges of a buffer the statement names more than once ([`Apart`]).
pub trait WriteSource {
    /// The view of a range.
    type ViewMut;
    /// The elements `r.start..r.end`, written.
    fn write(self, r: Ref) -> Result<Self::ViewMut>;
}

impl<'b, B: Sliced + ?Sized> ReadSource for &'b B {
    type View = B::View<'b>;
    fn read(self, r: Ref) -> Result<B::View<'b>> {
        self.view(r)
    }
}

impl<'b, B: Sliced + ?Sized> WriteSource for &'b mut B {
    type ViewMut = B::ViewMut<'b>;
    fn write(self, r: Ref) -> Result<B::ViewMut<'b>> {
        self.view_mut(r)
    }
}

/// `x[lo..hi]` read by a statement.
pub fn view<S: ReadSource>(source: S, r: Ref) -> Result<S::View> {
    source.read(r)
}

/// `x[lo..hi]` written by a statement.
pub fn view_mut<S: WriteSource>(source: S, r: Ref) -> Result<S::ViewMut> {
    source.write(r)
}

/// The ranges one statement names of one buffer when one of them is written (a copy from
/// `f[0..4]` to `f[8..12]`, a launch given two halves): views handed out from one exclusive
/// borrow for as long as the statement needs them, each checked against those handed out
/// before it, so that a written range never overlaps another (the step's plan refused such a
/// statement already; this keeps the views sound on their own).
///
/// A statement that names several ranges of a buffer array takes an `Apart` of the array; the
/// ranges of different elements never overlap.
pub struct Apart<'a, B> {
    buffers: &'a [B],
    given: std::cell::RefCell<GivenRanges>,
}

/// The ranges an [`Apart`] has handed out: inline for the few one statement names.
#[derive(Default)]
struct GivenRanges {
    inline: [Option<Ref>; 4],
    more: Vec<Ref>,
}

impl GivenRanges {
    fn iter(&self) -> impl Iterator<Item = &Ref> {
        self.inline.iter().flatten().chain(&self.more)
    }

    fn push(&mut self, r: Ref) {
        match self.inline.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some(r),
            None => self.more.push(r),
        }
    }
}

impl<'a, B> Apart<'a, B> {
    /// The ranges of one buffer.
    pub fn new(buffer: &'a mut B) -> Apart<'a, B> {
        Apart::of_array(std::slice::from_mut(buffer))
    }

    /// The ranges of the elements of a buffer array.
    pub fn of_array(buffers: &'a mut [B]) -> Apart<'a, B> {
        Apart {
            buffers,
            given: std::cell::RefCell::new(GivenRanges::default()),
        }
    }

    /// The element `r` names, after checking `r` against the ranges handed out before.
    fn take(&self, r: Ref, write: bool) -> Result<&'a B> {
        let mut given = self.given.borrow_mut();
        let clash = given.iter().find(|g| {
            g.element == r.element && (g.write || write) && g.start < r.end && r.start < g.end
        });
        if let Some(g) = clash {
            return Err(Error::invalid(
                "pipeline step",
                format!(
                    "one statement names elements {}..{} and {}..{} of one buffer, and one of \
                     them is written: they overlap at {}..{}",
                    g.start,
                    g.end,
                    r.start,
                    r.end,
                    g.start.max(r.start),
                    g.end.min(r.end)
                ),
            ));
        }
        let len = self.buffers.len();
        let buffer = self
            .buffers
            .get(r.element)
            .ok_or_else(|| no_element(len, r))?;
        given.push(Ref { write, ..r });
        Ok(buffer)
    }
}

impl<B> std::fmt::Debug for Apart<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Apart")
            .field("buffers", &self.buffers.len())
            .finish_non_exhaustive()
    }
}

/// Implements reading and writing ranges of an [`Apart`] of one buffer type.
macro_rules! apart {
    ($buffer:ident, $view:ident, $view_mut:ident) => {
        impl<'a, T: Pod> ReadSource for &Apart<'a, $buffer<T>> {
            type View = $view<'a, T>;
            fn read(self, r: Ref) -> Result<$view<'a, T>> {
                self.take(r, false)?.slice(r.start..r.end)
            }
        }

        impl<'a, T: Pod> WriteSource for &mut Apart<'a, $buffer<T>> {
            type ViewMut = $view_mut<'a, T>;
            fn write(self, r: Ref) -> Result<$view_mut<'a, T>> {
                self.take(r, true)?.slice_mut_apart(r.start..r.end)
            }
        }
    };
}

apart!(DeviceBuffer, DeviceView, DeviceViewMut);
apart!(PinnedBuffer, PinnedView, PinnedViewMut);

/// A buffer array a statement takes elements of: a slice of buffers, or an [`Apart`] of one.
pub trait Elements {
    /// An element, read.
    type Read<'b>
    where
        Self: 'b;
    /// An element, written.
    type Write<'b>
    where
        Self: 'b;
    /// `xs[k]`, read.
    fn element(&self, r: Ref) -> Result<Self::Read<'_>>;
    /// `xs[k]`, written.
    fn element_mut(&mut self, r: Ref) -> Result<Self::Write<'_>>;
}

impl<B> Elements for [B] {
    type Read<'b>
        = &'b B
    where
        B: 'b;
    type Write<'b>
        = &'b mut B
    where
        B: 'b;
    fn element(&self, r: Ref) -> Result<&B> {
        self.get(r.element).ok_or_else(|| no_element(self.len(), r))
    }
    fn element_mut(&mut self, r: Ref) -> Result<&mut B> {
        let len = self.len();
        self.get_mut(r.element).ok_or_else(|| no_element(len, r))
    }
}

impl<'a, B> Elements for Apart<'a, B> {
    type Read<'b>
        = &'b Apart<'a, B>
    where
        Self: 'b;
    type Write<'b>
        = &'b mut Apart<'a, B>
    where
        Self: 'b;
    // The element is picked when the range is: `r.element` names it there.
    fn element(&self, _: Ref) -> Result<&Apart<'a, B>> {
        Ok(self)
    }
    fn element_mut(&mut self, _: Ref) -> Result<&mut Apart<'a, B>> {
        Ok(self)
    }
}

fn no_element(len: usize, r: Ref) -> Error {
    Error::invalid(
        "pipeline step",
        format!(
            "element {} of an array of {len} buffers (the array changed after the step was planned)",
            r.element
        ),
    )
}

/// `xs[k]` of a buffer array, read.
pub fn element<E: Elements + ?Sized>(buffers: &E, r: Ref) -> Result<E::Read<'_>> {
    buffers.element(r)
}

/// `xs[k]` of a buffer array, written.
pub fn element_mut<E: Elements + ?Sized>(buffers: &mut E, r: Ref) -> Result<E::Write<'_>> {
    buffers.element_mut(r)
}

/// The scratch buffer `name`, read (its length, when a step is described).
pub fn scratch_ref<'a, B>(slot: Option<&'a B>, name: &'static str) -> Result<&'a B> {
    slot.ok_or_else(|| {
        Error::invalid(
            "pipeline step",
            format!("scratch buffer `{name}` is not allocated"),
        )
    })
}

/// Implements [`CopyInto`] for each pair of source and destination types, through the
/// stream copy `$copy`.
macro_rules! copies {
    ($copy:ident: $([$($lt:lifetime),*] $src:ty => $dst:ty;)*) => {$(
        impl<$($lt,)* T: Pod> CopyInto<$dst> for $src {
            fn copy_into(&self, stream: &Stream, dst: &mut $dst) -> Result<()> {
                stream.$copy(self, dst)
            }
        }
    )*};
}

copies! { copy_dtoh:
    ['s] DeviceView<'s, T> => PinnedBuffer<T>;
    ['s] DeviceViewMut<'s, T> => PinnedBuffer<T>;
    ['d] DeviceBuffer<T> => PinnedViewMut<'d, T>;
    ['s, 'd] DeviceView<'s, T> => PinnedViewMut<'d, T>;
    ['s, 'd] DeviceViewMut<'s, T> => PinnedViewMut<'d, T>;
}

// Between devices a peer copy; within one, a device-to-device copy (as for whole buffers).
copies! { copy_peer:
    ['s] DeviceView<'s, T> => DeviceBuffer<T>;
    ['s] DeviceViewMut<'s, T> => DeviceBuffer<T>;
    ['d] DeviceBuffer<T> => DeviceViewMut<'d, T>;
    ['s, 'd] DeviceView<'s, T> => DeviceViewMut<'d, T>;
    ['s, 'd] DeviceViewMut<'s, T> => DeviceViewMut<'d, T>;
}

copies! { copy_htod:
    ['s] PinnedView<'s, T> => DeviceBuffer<T>;
    ['s] PinnedViewMut<'s, T> => DeviceBuffer<T>;
    ['d] PinnedBuffer<T> => DeviceViewMut<'d, T>;
    ['s, 'd] PinnedView<'s, T> => DeviceViewMut<'d, T>;
    ['s, 'd] PinnedViewMut<'s, T> => DeviceViewMut<'d, T>;
}

/// `fill x[lo..hi] = value;`: like [`fill`](super::ops::fill), on a view.
pub fn fill_view<T: Pod, D: DeviceDest<T>>(stream: &Stream, dst: &mut D, value: T) -> Result<()> {
    super::ops::fill_dest(stream, dst, value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Context;

    #[test]
    fn views_elements_and_copies_between_them() {
        let ctx = Context::cpu();
        let stream = Stream::non_blocking(&ctx).unwrap();
        let mut xs = [
            DeviceBuffer::<u32>::zeros(&stream, 8).unwrap(),
            DeviceBuffer::<u32>::zeros(&stream, 8).unwrap(),
        ];
        let r = Ref {
            buffer: 0,
            write: true,
            element: 1,
            start: 2,
            end: 6,
        };
        let mut pinned = PinnedBuffer::from_slice(&ctx, &[7u32; 8]).unwrap();
        let src = view(&pinned, r).unwrap();
        let mut dst = view_mut(element_mut(&mut xs[..], r).unwrap(), r).unwrap();
        super::super::ops::copy(&stream, &src, &mut dst).unwrap();
        fill_view(&stream, &mut view_mut(&mut xs[0], r).unwrap(), 3u32).unwrap();
        let back = view(element(&xs[..], r).unwrap(), r).unwrap();
        let mut out = view_mut(
            &mut pinned,
            Ref {
                element: 0,
                start: 0,
                end: 4,
                ..r
            },
        )
        .unwrap();
        super::super::ops::copy(&stream, &back, &mut out).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(xs[1].to_vec(&stream).unwrap(), [0, 0, 7, 7, 7, 7, 0, 0]);
        assert_eq!(xs[0].to_vec(&stream).unwrap(), [0, 0, 3, 3, 3, 3, 0, 0]);
        assert_eq!(pinned.to_vec().unwrap(), [7, 7, 7, 7, 7, 7, 7, 7]);
        let missing = Ref { element: 2, ..r };
        assert!(element(&xs[..], missing).is_err());
    }
}

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

/// `x[lo..hi]` read by a statement.
pub fn view<B: Sliced + ?Sized>(buffer: &B, r: Ref) -> Result<B::View<'_>> {
    buffer.view(r)
}

/// `x[lo..hi]` written by a statement.
pub fn view_mut<B: Sliced + ?Sized>(buffer: &mut B, r: Ref) -> Result<B::ViewMut<'_>> {
    buffer.view_mut(r)
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
pub fn element<B>(buffers: &[B], r: Ref) -> Result<&B> {
    buffers
        .get(r.element)
        .ok_or_else(|| no_element(buffers.len(), r))
}

/// `xs[k]` of a buffer array, written.
pub fn element_mut<B>(buffers: &mut [B], r: Ref) -> Result<&mut B> {
    let len = buffers.len();
    buffers.get_mut(r.element).ok_or_else(|| no_element(len, r))
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
        let mut xs = vec![
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
        let mut dst = view_mut(element_mut(&mut xs, r).unwrap(), r).unwrap();
        super::super::ops::copy(&stream, &src, &mut dst).unwrap();
        fill_view(&stream, &mut view_mut(&mut xs[0], r).unwrap(), 3u32).unwrap();
        let back = view(element(&xs, r).unwrap(), r).unwrap();
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
        assert!(element(&xs, missing).is_err());
    }
}

//! `as_slice()` returns a view (a guard that derefs to a slice): slice methods work through
//! `Deref`, and `&view` iterates, for pinned and managed memory alike; the earlier names
//! still compile as deprecated aliases.

use gpu_pipeline::{Context, HostView, HostViewMut, PinnedBuffer};

#[test]
fn views_iterate_and_zip_like_slices() {
    let ctx = Context::cpu();
    let a = PinnedBuffer::from_slice(&ctx, &[1u32, 2, 3]).unwrap();
    let mut b = PinnedBuffer::from_slice(&ctx, &[10u32, 20, 30]).unwrap();
    let va: HostView<'_, u32> = a.as_slice().unwrap();
    {
        let mut vb: HostViewMut<'_, u32> = b.as_mut_slice().unwrap();
        // `.iter().zip(..)` through Deref, and `for x in &mut view`.
        let sums: Vec<u32> = va.iter().zip(vb.iter()).map(|(x, y)| x + y).collect();
        assert_eq!(sums, [11, 22, 33]);
        for y in &mut vb {
            *y += 1;
        }
        let mut seen = Vec::new();
        for y in &vb {
            seen.push(*y);
        }
        assert_eq!(seen, [11, 21, 31]);
    }
    let mut total = 0;
    for x in &va {
        total += x;
    }
    assert_eq!(total, 6);
    assert_eq!(va.len(), 3);
    drop(va);
    assert_eq!(b.to_vec().unwrap(), [11, 21, 31]);
}

#[test]
#[allow(deprecated)]
fn the_earlier_names_still_compile() {
    let ctx = Context::cpu();
    let a = PinnedBuffer::from_slice(&ctx, &[1.5f32]).unwrap();
    let view: gpu_pipeline::HostSlice<'_, f32> = a.as_slice().unwrap();
    assert_eq!(view[0], 1.5);
}

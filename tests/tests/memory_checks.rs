//! Memory API checks that need no GPU: thread-safety of the types, and that copies and
//! memsets accept every buffer and view they should (a compile-time check: the functions
//! below are type-checked, never run). Argument validation itself is unit-tested in the
//! runtime crate (`memory::check`, `memory::alloc`), as pure functions.

use gpu_pipeline::{
    AttachScope, DeviceBuffer, DeviceView, DeviceViewMut, FreeMode, ManagedBuffer, MemoryPool,
    PinnedBuffer, PinnedView, PinnedViewMut, Result, Stream,
};

fn send_sync<T: Send + Sync>() {}

#[test]
fn buffers_views_and_pools_are_send_and_sync() {
    send_sync::<DeviceBuffer<f32>>();
    send_sync::<PinnedBuffer<f32>>();
    send_sync::<ManagedBuffer<f32>>();
    send_sync::<DeviceView<'static, u8>>();
    send_sync::<DeviceViewMut<'static, u8>>();
    send_sync::<PinnedView<'static, u8>>();
    send_sync::<PinnedViewMut<'static, u8>>();
    send_sync::<MemoryPool>();
}

#[test]
fn shared_views_are_copy() {
    fn copy<T: Copy>() {}
    copy::<DeviceView<'static, [f32; 3]>>();
    copy::<PinnedView<'static, u64>>();
}

#[test]
fn attach_scope_defaults_to_global_as_allocated() {
    assert_eq!(AttachScope::default(), AttachScope::Global);
    assert_ne!(FreeMode::StreamOrdered, FreeMode::Synchronized);
    assert_ne!(FreeMode::Synchronized, FreeMode::Deferred);
}

/// Every source/destination combination the copies accept; never called.
#[allow(dead_code)]
fn copies_take_buffers_and_views(
    s: &Stream,
    dev: &mut DeviceBuffer<u32>,
    other: &mut DeviceBuffer<u32>,
    pinned: &mut PinnedBuffer<u32>,
    managed: &mut ManagedBuffer<u32>,
) -> Result<()> {
    s.copy_htod(pinned, dev)?;
    s.copy_htod(&pinned.slice(..4)?, &mut dev.slice_mut(4..8)?)?;
    s.copy_htod(&pinned.as_view(), managed)?;
    s.copy_dtoh(dev, pinned)?;
    s.copy_dtoh(&dev.slice(1..)?, &mut pinned.slice_mut(1..)?)?;
    s.copy_dtoh(&managed.slice(..2)?, &mut pinned.slice_mut(..2)?)?;
    s.copy_dtod(dev, other)?;
    s.copy_dtod(&dev.as_view(), &mut other.as_view_mut())?;
    s.copy_dtod(managed, dev)?;
    {
        let (mut lo, mut hi) = dev.split_at_mut(2)?;
        s.copy_dtod(&lo.as_view(), &mut hi.slice_mut(..2)?)?;
        s.memset_u8(&mut lo, 0)?;
    }
    let mut view = other.slice_mut(..)?;
    s.memset_u8(&mut view.slice_mut(1..2)?, 0xff)?;
    s.memset_u32(&mut view, 7)?;
    s.memset_u32(managed, 1)?;
    s.attach_mem_async(managed, AttachScope::Single)?;
    let buffer = s.alloc_async::<u32>(16)?;
    let _: FreeMode = s.free_async(buffer)?;
    Ok(())
}

/// compute-sanitizer fails a binary that never calls CUDA; this gives it one call there.
#[test]
fn instrumented_under_compute_sanitizer() {
    tests::touch_cuda_for_compute_sanitizer();
}

//! Tests of the memory API: device, pinned and managed buffers, views, copies, memsets, the
//! pinned fences, stream-ordered allocation and the pool.
//!
//! Each shared scenario runs twice: on the host backend in checked mode (in CI, asserting
//! the race detector found nothing) and on CUDA device 0 (ignored without a GPU). Run the
//! CUDA ones with `cargo test -p tests --test gpu_memory -- --include-ignored`.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use gpu_pipeline::{
    AttachScope, Backend, CaptureMode, Context, DeviceAttribute, DeviceBuffer, Error, FlagCell,
    FreeMode, ManagedBuffer, MemoryPool, PinnedBuffer, Result, Stream, WaitCondition, sys,
};

/// The tests share the device's primary context (a context synchronize, which dropping a
/// buffer does, waits for every test's work, including a stream parked on a flag) and the
/// default pool (whose statistics one test reads): run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn setup_on(ctx: &Context) -> Result<(MutexGuard<'static, ()>, Context, Stream)> {
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let stream = Stream::non_blocking(ctx)?;
    Ok((guard, ctx.clone(), stream))
}

fn setup() -> Result<(MutexGuard<'static, ()>, Context, Stream)> {
    setup_on(&Context::cuda(0)?)
}

/// Runs each scenario `fn name(ctx: &Context) -> Result<()>` on both backends: the host in
/// checked mode (asserting no race was found, unless listed after `unchecked:`), and CUDA.
macro_rules! on_both_backends {
    (checked: [$($name:ident),* $(,)?], unchecked: [$($loose:ident),* $(,)?] $(,)?) => {
        mod host {
            $(
                #[test]
                fn $name() {
                    let ctx = gpu_pipeline::Context::host_checked();
                    super::$name(&ctx).unwrap();
                    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
                }
            )*
            $(
                #[test]
                fn $loose() {
                    super::$loose(&gpu_pipeline::Context::host()).unwrap();
                }
            )*
        }
        mod cuda {
            $(
                #[test]
                #[ignore = "needs a CUDA GPU"]
                fn $name() {
                    super::$name(&gpu_pipeline::Context::cuda(0).unwrap()).unwrap();
                }
            )*
            $(
                #[test]
                #[ignore = "needs a CUDA GPU"]
                fn $loose() {
                    super::$loose(&gpu_pipeline::Context::cuda(0).unwrap()).unwrap();
                }
            )*
        }
    };
}

on_both_backends!(
    checked: [
        htod_dtoh_round_trip_overwrites_poisoned_destinations,
        dtod_copies_whole_buffers_and_views,
        views_copy_sub_ranges_and_leave_the_rest_untouched,
        memsets_fill_exactly_their_range,
        memset_u32_rejects_elements_that_are_not_whole_words,
        length_mismatch_is_an_error_naming_both_lengths,
        bad_ranges_and_sizes_are_errors_not_panics,
        zero_length_operations_are_no_ops,
        pinned_fence_blocks_host_access_until_the_copy_completes,
        pinned_source_is_not_overwritten_while_a_copy_reads_it,
        dropping_buffers_with_copies_in_flight_waits_for_them,
        reading_the_first_of_two_pinned_outputs_waits_for_its_copy_only,
        a_pinned_fence_outlives_the_stream_that_made_it,
        free_async_after_use_on_another_stream_synchronizes,
        free_async_inside_a_capture_leaves_the_buffer_to_the_graph,
        managed_buffers_attach_and_round_trip_through_the_host,
        // The race detector tracks the bytes each operation touches: two streams filling
        // disjoint halves of one buffer share no byte, so nothing is reported.
        split_halves_are_filled_by_two_streams,
    ],
    unchecked: [],
);

/// A small xorshift generator: fresh, reproducible data without a `rand` dependency.
struct XorShift(u64);

impl XorShift {
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn u32s(&mut self, n: usize) -> Vec<u32> {
        (0..n).map(|_| self.next_u64() as u32).collect()
    }

    fn u64s(&mut self, n: usize) -> Vec<u64> {
        (0..n).map(|_| self.next_u64()).collect()
    }
}

/// What destinations hold before a copy, so a copy that did not happen shows.
const POISON: u32 = 0xDEAD_BEEF;

/// Releases a flag when dropped, so a failing test never leaves a stream parked on it (which
/// would hang the drops that synchronize).
struct ReleaseOnDrop<'a>(&'a FlagCell<u32>);

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(1);
    }
}

fn invalid_argument(e: &Error) -> (&'static str, &str) {
    match e {
        Error::InvalidArgument { call, message } => (call, message),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

fn htod_dtoh_round_trip_overwrites_poisoned_destinations(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let n = 1 << 16;
    let data = rng.u32s(n);

    let src = PinnedBuffer::from_slice(&ctx, &data)?;
    let mut dev = DeviceBuffer::<u32>::alloc(&ctx, n)?;
    s.memset_u32(&mut dev, POISON)?;
    let mut back = PinnedBuffer::from_slice(&ctx, &vec![POISON; n])?;
    s.copy_htod(&src, &mut dev)?;
    s.copy_dtoh(&dev, &mut back)?;
    assert_eq!(back.as_slice()?, &data[..]);
    assert!(!back.is_busy()?);
    assert_eq!(dev.len(), n);
    assert_eq!(dev.size_bytes(), n * 4);
    // A device address on CUDA; none on the CPU backend.
    assert_eq!(
        dev.device_ptr().is_some_and(|p| p != 0),
        ctx.backend() == gpu_pipeline::Backend::Cuda
    );

    // The blocking helpers, on 64-bit elements.
    let wide = rng.u64s(5000);
    let dev64 = DeviceBuffer::from_slice(&s, &wide)?;
    assert_eq!(dev64.to_vec(&s)?, wide);
    Ok(())
}

fn dtod_copies_whole_buffers_and_views(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let data = XorShift(0x1234_5678_9ABC_DEF1).u64s(4096);
    let a = DeviceBuffer::from_slice(&s, &data)?;

    let mut b = DeviceBuffer::<u64>::alloc(&ctx, 4096)?;
    s.memset_u8(&mut b, 0xA5)?;
    s.copy_dtod(&a, &mut b)?;
    assert_eq!(b.to_vec(&s)?, data);

    let mut c = DeviceBuffer::<u64>::zeros(&s, 4096)?;
    s.copy_dtod(&a.slice(100..200)?, &mut c.slice_mut(1000..1100)?)?;
    let got = c.to_vec(&s)?;
    assert!(got[..1000].iter().all(|&x| x == 0));
    assert_eq!(&got[1000..1100], &data[100..200]);
    assert!(got[1100..].iter().all(|&x| x == 0));

    // A second handle to the same primary context shares its memory (on the host backend,
    // a clone of the context).
    let again = match ctx.backend() {
        Backend::Cuda => Context::cuda(0)?,
        Backend::Host => ctx.clone(),
    };
    let s2 = Stream::non_blocking(&again)?;
    let mut d = DeviceBuffer::<u64>::zeros(&s2, 4096)?;
    s2.copy_dtod(&a, &mut d)?;
    assert_eq!(d.to_vec(&s2)?, data);
    Ok(())
}

fn views_copy_sub_ranges_and_leave_the_rest_untouched(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let n = 1000;
    let data = XorShift(0xDEAD_BEEF_CAFE_F00D).u32s(n);
    let host = PinnedBuffer::from_slice(&ctx, &data)?;
    let mut dev = DeviceBuffer::<u32>::alloc(&ctx, n)?;
    s.memset_u32(&mut dev, POISON)?;

    s.copy_htod(&host.slice(10..110)?, &mut dev.slice_mut(500..600)?)?;

    // A view of a view: elements 25..75 of dev[500..600] are data[35..85].
    let mut part = PinnedBuffer::from_slice(&ctx, &[POISON; 50])?;
    let window = dev.slice(500..600)?;
    assert_eq!(window.offset(), 500);
    s.copy_dtoh(&window.slice(25..75)?, &mut part)?;
    assert_eq!(part.as_slice()?, &data[35..85]);

    // Into part of a pinned buffer.
    let mut back = PinnedBuffer::from_slice(&ctx, &vec![0u32; n])?;
    s.copy_dtoh(&dev.slice(500..600)?, &mut back.slice_mut(200..300)?)?;
    let back = back.to_vec()?;
    assert!(back[..200].iter().all(|&x| x == 0));
    assert_eq!(&back[200..300], &data[10..110]);
    assert!(back[300..].iter().all(|&x| x == 0));

    let all = dev.to_vec(&s)?;
    assert!(all[..500].iter().all(|&x| x == POISON));
    assert_eq!(&all[500..600], &data[10..110]);
    assert!(all[600..].iter().all(|&x| x == POISON));
    Ok(())
}

fn split_halves_are_filled_by_two_streams(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let s2 = Stream::non_blocking(&ctx)?;
    let mut buf = DeviceBuffer::<u32>::alloc(&ctx, 2048)?;
    {
        let (mut lo, mut hi) = buf.split_at_mut(1000)?;
        assert_eq!((lo.len(), hi.len()), (1000, 1048));
        s.memset_u32(&mut lo, 1)?;
        s2.memset_u32(&mut hi, 2)?;
    }
    s.join(&s2)?;
    let got = buf.to_vec(&s)?;
    assert!(got[..1000].iter().all(|&x| x == 1));
    assert!(got[1000..].iter().all(|&x| x == 2));
    Ok(())
}

fn memsets_fill_exactly_their_range(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let mut buf = DeviceBuffer::<u32>::zeros(&s, 64)?;
    s.memset_u8(&mut buf.slice_mut(8..16)?, 0xAB)?;
    s.memset_u32(&mut buf.slice_mut(32..40)?, 0x1234_5678)?;
    let got = buf.to_vec(&s)?;
    for (i, &x) in got.iter().enumerate() {
        let expected = match i {
            8..16 => 0xABAB_ABAB,
            32..40 => 0x1234_5678,
            _ => 0,
        };
        assert_eq!(x, expected, "element {i}");
    }

    let mut ones = DeviceBuffer::<f32>::alloc(&ctx, 10)?;
    s.memset_u32(&mut ones, 1.0f32.to_bits())?;
    assert_eq!(ones.to_vec(&s)?, vec![1.0f32; 10]);

    // 8-byte elements are two words each.
    let mut wide = DeviceBuffer::<u64>::alloc(&ctx, 4)?;
    s.memset_u32(&mut wide, 0x0102_0304)?;
    assert_eq!(wide.to_vec(&s)?, vec![0x0102_0304_0102_0304u64; 4]);

    // Bytes of odd-sized elements.
    let mut triples = DeviceBuffer::<[u8; 3]>::alloc(&ctx, 5)?;
    s.memset_u8(&mut triples, 9)?;
    assert_eq!(triples.to_vec(&s)?, vec![[9u8; 3]; 5]);
    Ok(())
}

fn memset_u32_rejects_elements_that_are_not_whole_words(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let mut halves = DeviceBuffer::<u16>::zeros(&s, 8)?;
    let e = s.memset_u32(&mut halves, 1).unwrap_err();
    let (call, message) = invalid_argument(&e);
    assert_eq!(call, "Stream::memset_u32");
    assert!(message.contains("2 bytes"), "{message}");
    let mut triples = DeviceBuffer::<[u8; 3]>::alloc(&ctx, 4)?;
    assert!(s.memset_u32(&mut triples, 1).is_err());
    let mut empty = DeviceBuffer::<u16>::alloc(&ctx, 0)?;
    assert!(s.memset_u32(&mut empty, 1).is_err());
    // Nothing was enqueued.
    assert_eq!(halves.to_vec(&s)?, vec![0u16; 8]);
    Ok(())
}

fn length_mismatch_is_an_error_naming_both_lengths(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let host = PinnedBuffer::from_slice(&ctx, &[1u32; 10])?;
    let mut dev = DeviceBuffer::<u32>::zeros(&s, 8)?;

    let e = s.copy_htod(&host, &mut dev).unwrap_err();
    let (call, message) = invalid_argument(&e);
    assert_eq!(call, "Stream::copy_htod");
    assert!(
        message.contains("10 elements") && message.contains("has 8"),
        "{message}"
    );

    let mut small = PinnedBuffer::<u32>::zeros(&ctx, 3)?;
    let e = s.copy_dtoh(&dev, &mut small).unwrap_err();
    assert_eq!(invalid_argument(&e).0, "Stream::copy_dtoh");

    let mut other = DeviceBuffer::<u32>::alloc(&ctx, 9)?;
    let e = s.copy_dtod(&dev, &mut other).unwrap_err();
    assert_eq!(invalid_argument(&e).0, "Stream::copy_dtod");

    // Nothing was enqueued: the destination still holds zeros, the host buffers no fences.
    assert_eq!(dev.to_vec(&s)?, vec![0u32; 8]);
    assert!(!host.is_busy()? && !small.is_busy()?);
    Ok(())
}

fn bad_ranges_and_sizes_are_errors_not_panics(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let mut dev = DeviceBuffer::<u32>::alloc(&ctx, 8)?;
    assert!(dev.slice(3..9).is_err());
    assert!(dev.slice_mut(9..).is_err());
    assert!(dev.split_at_mut(9).is_err());
    assert!(dev.slice(2..8)?.slice(0..7).is_err());
    let e = dev.slice(..=8).unwrap_err();
    let (call, message) = invalid_argument(&e);
    assert_eq!(call, "DeviceBuffer::slice");
    assert_eq!(message, "range `..=8` is out of bounds for 8 elements");

    let mut host = PinnedBuffer::<u32>::zeros(&ctx, 4)?;
    assert!(host.slice(5..).is_err());
    assert!(host.slice_mut(0..5).is_err());
    assert!(host.copy_from_slice(&[1, 2, 3]).is_err());

    // Sizes whose byte count overflows are rejected before the driver is asked.
    let e = DeviceBuffer::<u64>::alloc(&ctx, usize::MAX).unwrap_err();
    assert_eq!(invalid_argument(&e).0, "DeviceBuffer::alloc");
    assert!(PinnedBuffer::<u32>::zeros(&ctx, usize::MAX / 2).is_err());
    assert!(s.alloc_async::<u32>(usize::MAX / 2).is_err());
    Ok(())
}

fn zero_length_operations_are_no_ops(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let empty_host = PinnedBuffer::<u32>::zeros(&ctx, 0)?;
    let mut empty_back = PinnedBuffer::<u32>::zeros(&ctx, 0)?;
    let mut empty_dev = DeviceBuffer::<u32>::alloc(&ctx, 0)?;
    let mut other = DeviceBuffer::<u32>::alloc(&ctx, 0)?;
    s.copy_htod(&empty_host, &mut empty_dev)?;
    s.copy_dtoh(&empty_dev, &mut empty_back)?;
    s.copy_dtod(&empty_dev, &mut other)?;
    s.memset_u8(&mut empty_dev, 1)?;
    s.memset_u32(&mut empty_dev, 1)?;
    assert!(!empty_host.is_busy()? && !empty_back.is_busy()?);
    assert!(empty_back.as_slice()?.is_empty());

    let mut dev = DeviceBuffer::<u32>::zeros(&s, 4)?;
    s.copy_htod(&empty_host, &mut dev.slice_mut(2..2)?)?;
    assert_eq!(dev.to_vec(&s)?, vec![0; 4]);
    assert!(empty_dev.to_vec(&s)?.is_empty());
    assert!(DeviceBuffer::<u32>::from_slice(&s, &[])?.is_empty());
    Ok(())
}

fn pinned_fence_blocks_host_access_until_the_copy_completes(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let flag = FlagCell::<u32>::new(&ctx, 0)?;
    let data = XorShift(0x0BAD_5EED_0000_0001).u32s(4096);
    let dev = DeviceBuffer::from_slice(&s, &data)?;
    let mut dst = PinnedBuffer::from_slice(&ctx, &vec![POISON; 4096])?;

    s.wait_value_32(&flag, WaitCondition::GreaterOrEqual, 1)?;
    s.copy_dtoh(&dev, &mut dst)?;
    let release = ReleaseOnDrop(&flag);

    // Parked behind the flag: the copy cannot have run, however long we wait.
    std::thread::sleep(Duration::from_millis(20));
    assert!(dst.is_busy()?);

    let started = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            release.0.store(1);
        });
        let seen = dst.as_slice()?; // blocks until the flag is released and the copy ends
        assert!(
            started.elapsed() >= Duration::from_millis(40),
            "as_slice returned after {:?}, before the flag was released",
            started.elapsed()
        );
        assert_eq!(seen, &data[..]);
        drop(seen);
        Ok(())
    })?;
    assert!(!dst.is_busy()?);
    Ok(())
}

fn pinned_source_is_not_overwritten_while_a_copy_reads_it(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let flag = FlagCell::<u32>::new(&ctx, 0)?;
    let first = XorShift(77).u32s(1024);
    let second = XorShift(78).u32s(1024);
    let mut src = PinnedBuffer::from_slice(&ctx, &first)?;
    let mut dev = DeviceBuffer::<u32>::alloc(&ctx, 1024)?;

    s.wait_value_32(&flag, WaitCondition::GreaterOrEqual, 1)?;
    s.copy_htod(&src, &mut dev)?;
    let release = ReleaseOnDrop(&flag);

    std::thread::scope(|scope| -> Result<()> {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(30));
            release.0.store(1);
        });
        // Waits for the parked copy to read `first` before writing `second`.
        src.copy_from_slice(&second)?;
        Ok(())
    })?;
    assert_eq!(dev.to_vec(&s)?, first);
    assert_eq!(src.as_slice()?, &second[..]);
    Ok(())
}

fn dropping_buffers_with_copies_in_flight_waits_for_them(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let flag = FlagCell::<u32>::new(&ctx, 0)?;
    let n = 1 << 20;
    let data = XorShift(0x5151_5151_5151_5151).u32s(n);
    let src = PinnedBuffer::from_slice(&ctx, &data)?;
    let mut dev = DeviceBuffer::<u32>::alloc(&ctx, n)?;
    let mut back = PinnedBuffer::from_slice(&ctx, &vec![POISON; n])?;

    s.wait_value_32(&flag, WaitCondition::GreaterOrEqual, 1)?;
    s.copy_htod(&src, &mut dev)?;
    s.copy_dtoh(&dev, &mut back)?;
    let release = ReleaseOnDrop(&flag);

    let started = Instant::now();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            release.0.store(1);
        });
        drop(src); // waits for its fence: the parked upload
        assert!(
            started.elapsed() >= Duration::from_millis(40),
            "dropping the pinned source returned after {:?}, with its copy still parked",
            started.elapsed()
        );
        drop(dev); // synchronizes the context, then frees
    });
    // Both copies ran on live memory.
    assert_eq!(back.as_slice()?, &data[..]);
    Ok(())
}

fn reading_the_first_of_two_pinned_outputs_waits_for_its_copy_only(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let flag = FlagCell::<u32>::new(&ctx, 0)?;
    let data = XorShift(0xD0B1_EB0F_0000_0002).u32s(4096);
    let dev = DeviceBuffer::from_slice(&s, &data)?;
    let mut first = PinnedBuffer::from_slice(&ctx, &vec![POISON; 4096])?;
    let mut second = PinnedBuffer::from_slice(&ctx, &vec![POISON; 4096])?;

    // Double buffering: the first output's copy, then work parked behind the flag, then the
    // second output's copy. The first's fence covers its copy, not what was enqueued after.
    s.copy_dtoh(&dev, &mut first)?;
    s.wait_value_32(&flag, WaitCondition::GreaterOrEqual, 1)?;
    s.copy_dtoh(&dev, &mut second)?;
    let release = ReleaseOnDrop(&flag);

    let started = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(1500));
            release.0.store(1);
        });
        let seen = first.as_slice()?;
        assert!(
            started.elapsed() < Duration::from_millis(1000),
            "reading the first output waited {:?}: for the parked work enqueued after its copy",
            started.elapsed()
        );
        assert_eq!(seen, &data[..]);
        drop(seen);
        // The second output's copy is still parked behind the flag.
        assert!(second.is_busy()?);
        assert_eq!(second.as_slice()?, &data[..]);
        Ok(())
    })?;
    Ok(())
}

fn a_pinned_fence_outlives_the_stream_that_made_it(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let flag = FlagCell::<u32>::new(&ctx, 0)?;
    let data = XorShift(0x0DD5_7EA3_0000_0003).u32s(4096);
    let dev = DeviceBuffer::from_slice(&s, &data)?;
    s.synchronize()?;
    let mut dst = PinnedBuffer::from_slice(&ctx, &vec![POISON; 4096])?;
    let parked = Stream::non_blocking(&ctx)?;
    parked.wait_value_32(&flag, WaitCondition::GreaterOrEqual, 1)?;
    parked.copy_dtoh(&dev, &mut dst)?;
    let release = ReleaseOnDrop(&flag);

    let started = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            release.0.store(1);
        });
        // The stream goes before the host reads: the copy's fence stays in the buffer.
        drop(parked);
        let seen = dst.as_slice()?;
        assert!(
            started.elapsed() >= Duration::from_millis(40),
            "as_slice returned after {:?}, before the flag was released",
            started.elapsed()
        );
        assert_eq!(seen, &data[..]);
        Ok(())
    })?;
    assert!(!dst.is_busy()?);
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn alloc_async_used_on_one_stream_is_freed_in_stream_order() -> Result<()> {
    let (_serial, ctx, s) = setup()?;
    let pool = MemoryPool::default_for(&ctx)?;
    s.synchronize()?;
    let used_before = pool.used_bytes()?;

    const BYTES: usize = 8 << 20;
    let mut buf = s.alloc_async::<u8>(BYTES)?;
    s.memset_u8(&mut buf, 7)?;
    s.synchronize()?;
    let used_during = pool.used_bytes()?;
    assert!(
        used_during >= used_before + BYTES as u64,
        "{used_during} < {used_before} + {BYTES}"
    );
    assert!(pool.reserved_bytes()? >= used_during);
    assert!(buf.to_vec(&s)?.iter().all(|&b| b == 7));

    assert_eq!(s.free_async(buf)?, FreeMode::StreamOrdered);
    s.synchronize()?;
    let used_after = pool.used_bytes()?;
    assert!(
        used_after + BYTES as u64 <= used_during,
        "{used_after} + {BYTES} > {used_during}"
    );

    // From an explicit pool, zeroed in stream order.
    let zeros = s.alloc_zeros_async::<u32>(1024)?;
    assert_eq!(zeros.to_vec(&s)?, vec![0u32; 1024]);
    assert_eq!(s.free_async(zeros)?, FreeMode::StreamOrdered);
    let mut pooled = s.alloc_from_pool::<u32>(&pool, 256)?;
    s.memset_u32(&mut pooled, 3)?;
    assert_eq!(pooled.to_vec(&s)?, vec![3u32; 256]);
    assert_eq!(s.free_async(pooled)?, FreeMode::StreamOrdered);

    // Pool knobs.
    let threshold = pool.release_threshold()?;
    pool.set_release_threshold(u64::MAX)?;
    assert_eq!(pool.release_threshold()?, u64::MAX);
    pool.set_release_threshold(threshold)?;
    s.synchronize()?;
    let reserved = pool.reserved_bytes()?;
    pool.trim_to(0)?;
    assert!(pool.reserved_bytes()? <= reserved);
    assert!(pool.used_high_water()? >= BYTES as u64);
    assert!(pool.reserved_high_water()? >= BYTES as u64);
    pool.reset_high_water()?;
    Ok(())
}

fn free_async_after_use_on_another_stream_synchronizes(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let s2 = Stream::non_blocking(&ctx)?;
    let mut buf = s.alloc_async::<u32>(1024)?;
    s.memset_u32(&mut buf, 5)?;
    s2.join(&s)?;
    let mut copy = DeviceBuffer::<u32>::alloc(&ctx, 1024)?;
    s2.copy_dtod(&buf, &mut copy)?;
    // The copy on `s2` may still read `buf`: no stream-ordered free on `s`.
    assert_eq!(s.free_async(buf)?, FreeMode::Synchronized);
    assert_eq!(copy.to_vec(&s2)?, vec![5u32; 1024]);

    // Freed on a stream other than its only one: synchronizes too.
    let lone = s.alloc_async::<u32>(16)?;
    assert_eq!(s2.free_async(lone)?, FreeMode::Synchronized);
    // Not stream-ordered memory: always synchronizes.
    let plain = DeviceBuffer::<u32>::zeros(&s, 16)?;
    assert_eq!(s.free_async(plain)?, FreeMode::Synchronized);
    Ok(())
}

fn free_async_inside_a_capture_leaves_the_buffer_to_the_graph(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    let a = s.alloc_async::<u32>(256)?;
    let mut b = DeviceBuffer::<u32>::alloc(&ctx, 256)?;
    s.synchronize()?;
    let mut mode = None;
    let graph = s.capture(CaptureMode::ThreadLocal, |st| {
        st.copy_dtod(&a, &mut b)?;
        mode = Some(st.free_async(a)?);
        Ok(())
    })?;
    assert_eq!(mode, Some(FreeMode::Deferred));
    assert!(graph.node_count()? >= 1);
    drop(graph); // the last holder: synchronizes and frees
    drop(b);
    s.synchronize()?;
    Ok(())
}

fn managed_buffers_attach_and_round_trip_through_the_host(ctx: &Context) -> Result<()> {
    let (_serial, ctx, s) = setup_on(ctx)?;
    if let Some(device) = ctx.device()
        && device.attribute(DeviceAttribute::CONCURRENT_MANAGED_ACCESS)? == 0
    {
        // Host access is refused where it could fault.
        let e = ManagedBuffer::<u32>::zeros(&ctx, 4).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
        return Ok(());
    }
    let n = 4096;
    let data = XorShift(0xABCD_EF01_2345_6789).u32s(n);
    let m = ManagedBuffer::from_slice(&ctx, &data)?;
    s.attach_mem_async(&m, AttachScope::Single)?;
    let mut dev = DeviceBuffer::<u32>::alloc(&ctx, n)?;
    s.copy_dtod(&m, &mut dev)?;

    let mut m2 = ManagedBuffer::<u32>::zeros(&ctx, n)?;
    s.attach_mem_async(&m2, AttachScope::Single)?;
    s.copy_dtod(&dev, &mut m2)?;
    s.attach_mem_async(&m2, AttachScope::Host)?;
    assert_eq!(m2.as_slice()?, &data[..]);

    // Host writes, device reads.
    for x in m2.as_mut_slice()?.iter_mut() {
        *x = !*x;
    }
    s.attach_mem_async(&m2, AttachScope::Global)?;
    s.copy_dtod(&m2, &mut dev)?;
    let flipped: Vec<u32> = data.iter().map(|x| !x).collect();
    assert_eq!(dev.to_vec(&s)?, flipped);

    // Device-side views of managed memory.
    let mut m3 = ManagedBuffer::<u32>::zeros(&ctx, 8)?;
    s.memset_u32(&mut m3.slice_mut(2..4)?, 9)?;
    assert_eq!(m3.to_vec()?, vec![0, 0, 9, 9, 0, 0, 0, 0]);
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn out_of_device_memory_is_a_driver_error() -> Result<()> {
    if tests::skip_under_compute_sanitizer("asks for more device memory than exists") {
        return Ok(());
    }

    let (_serial, ctx, s) = setup()?;
    let e = DeviceBuffer::<u8>::alloc(&ctx, 1 << 50).unwrap_err();
    assert_eq!(
        e.code(),
        Some(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY),
        "{e}"
    );
    assert!(
        matches!(&e, Error::Driver(d) if d.call == "cuMemAlloc"),
        "{e:?}"
    );
    // The context is still usable.
    let ok = DeviceBuffer::<u8>::zeros(&s, 16)?;
    assert_eq!(ok.to_vec(&s)?, vec![0u8; 16]);
    Ok(())
}

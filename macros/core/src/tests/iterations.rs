//! Rules inside and across the iterations of a `for` (issue 23, class 3): chunks written on
//! streams of their own are apart, `concurrent` claims and devices are checked in loops.

use super::*;

/// A pipeline with a stream array and a chunked loop `body`.
fn chunked(body: &str) -> String {
    format!(
        r#"pipeline P {{
            streams {{ main, work[4] }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn scale(n: u32, alpha: f32, src: &[f32; unbounded], dst: &mut [f32; unbounded]);
            }}
            params {{ n: u32, s: usize, chunks: usize, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }}
            {body}
        }}"#
    )
}

#[test]
fn chunks_on_streams_of_their_own_overlapping_by_one_element_are_an_error() {
    assert_error(
        &chunked(
            "for i in 0..chunks { stage c on work[i % 4] { launch k::scale(n, 2.0, y, x[i * s..(i + 1) * s + 1]) grid 1 block 1; } }",
        ),
        "`x[i * s..(i + 1) * s + 1]` is written by every iteration of stage `c`, each on a stream of its own (`work[i % 4]`), and iterations `i` and `i + 1` both write elements `i * s + s..i * s + s + 1` (1 element): the iterations are meant to split the buffer, but the overlap orders them one after the other and writes those elements twice (if the kernel only reads them, pass them as a `&[T]` argument of their own); make the ranges apart: `x[i * s..i * s + s]`",
        "[i * s..(i + 1) * s + 1]",
    );
    // Through `let`s, one of them not a polynomial but the same in every iteration.
    let through_lets = chunked(
        "for i in 0..chunks { let size = x.len() / chunks; let lo = i * size; let hi = lo + size + 2; stage c on work[i % 4] { fill x[lo..hi] = 0.0; } }",
    );
    let all = errors(&through_lets);
    assert_eq!(all.len(), 1, "{all:?}");
    assert!(
        all[0].contains("iterations `i` and `i + 1` both write elements `i * size + size..i * size + size + 2` (2 elements)"),
        "{all:?}"
    );
    // Constant bounds: every iteration is evaluated, and the message names two of them.
    assert_error(
        &chunked(
            "for i in 0..4 { stage c on work[i] { copy y[i * 10..i * 10 + 11] -> x[i * 10..i * 10 + 11]; } }",
        ),
        "`x[i * 10..i * 10 + 11]` is written by every iteration of stage `c`, each on a stream of its own (`work[i]`), and iterations `i = 0` and `i = 1` both write elements 10..11: the iterations are meant to split the buffer, but the overlap orders them one after the other and writes those elements twice (if the kernel only reads them, pass them as a `&[T]` argument of their own); make the ranges apart (each iteration's range ending where the next one's starts)",
        "[i * 10..i * 10 + 11]",
    );
}

#[test]
fn chunks_shared_by_iterations_on_different_lanes_are_an_error() {
    // `i = 0` (on `work[0]`) and `i = 5` (on `work[1]`) both write 0..4; the pairs on one
    // lane (`i = 0` and `i = 4`) are ordered by their stream.
    assert_error(
        &chunked(
            "for i in 0..8 { let lane = i % 4; stage c on work[lane] { fill x[(i % 5) * 4..(i % 5) * 4 + 4] = 0.0; } }",
        ),
        "`x[(i % 5) * 4..(i % 5) * 4 + 4]` is written by every iteration of stage `c`, each on a stream of its own (`work[lane]`), and iterations `i = 0` and `i = 5` both write elements 0..4: the iterations are meant to split the buffer, but the overlap orders them one after the other and writes those elements twice (if the kernel only reads them, pass them as a `&[T]` argument of their own); make the ranges apart (each iteration's range ending where the next one's starts)",
        "[(i % 5) * 4..(i % 5) * 4 + 4]",
    );
}

#[test]
fn chunks_that_are_apart_or_run_in_order_compile() {
    for body in [
        // Apart.
        "for i in 0..chunks { stage c on work[i % 4] { launch k::scale(n, 2.0, y, x[i * s..(i + 1) * s]) grid 1 block 1; } }",
        "for i in 0..4 { stage c on work[i] { copy y[i * 10..i * 10 + 10] -> x[i * 10..i * 10 + 10]; } }",
        // Reads may overlap (a halo).
        "for i in 0..chunks { stage c on work[i % 4] { launch k::scale(n, 2.0, y[i * s..(i + 1) * s + 1], x[i * s..(i + 1) * s]) grid 1 block 1; } }",
        // One stream: the iterations run in order, as written.
        "for i in 0..chunks { stage c on main { launch k::scale(n, 2.0, y, x[i * s..(i + 1) * s + 1]) grid 1 block 1; } }",
        // The same range every iteration, or one the compiler cannot compare.
        "for i in 0..chunks { stage c on work[i % 4] { fill x[0..4] = 0.0; } }",
        "for i in 0..chunks { let lo = (i * s).min(x.len()); stage c on work[i % 4] { fill x[lo..lo + s + 1] = 0.0; } }",
        // One iteration.
        "for i in 0..1 { stage c on work[i] { fill x[i * 10..i * 10 + 11] = 0.0; } }",
        // Iterations that share a lane run on one stream, in order: `i` and `i + 4` (or
        // `i + 2`) write the same chunk on the same stream.
        "for i in 0..8 { let lane = i % 4; stage c on work[lane] { launch k::scale(4, 1.0, y, x[lane * 4..lane * 4 + 4]) grid 1 block 1; } }",
        "for i in 0..4 { stage c on work[i % 2] { fill x[(i % 2) * 4..(i % 2) * 4 + 4] = 0.0; } }",
        "for i in 0..8 { let lane = i / 2; stage c on work[lane] { fill x[lane * 4..lane * 4 + 4] = 0.0; } }",
    ] {
        lower_ok(&chunked(body));
    }
}

/// Over params, a cast that may change the value (`as u8`) makes a bound unknown to the chunk
/// rule, which read it as if uncast: `((i * 2 + 258) as u8)` is `i * 2 + 2` for `i < 127`,
/// so the chunks below are apart, and were refused as overlapping by 256 elements.
#[test]
fn chunks_through_narrowing_casts_are_left_to_the_step() {
    lower_ok(&chunked(
        "for i in 0..chunks { stage c on work[i % 4] { fill x[((i * 2) as u8) as usize..((i * 2 + 258) as u8) as usize] = 0.0; } }",
    ));
    // A cast that keeps every bit is still read through.
    let messages = errors(&chunked(
        "for i in 0..chunks { stage c on work[i % 4] { fill x[(i * 2) as usize..(i * 2 + 3) as usize] = 0.0; } }",
    ));
    assert!(
        messages[0].contains("iterations `i` and `i + 1` both write elements"),
        "{messages:?}"
    );
}

/// With constant bounds, two iterations whose stream index does not evaluate but folds to one
/// text (`(i / 2) % chunks` is `(0 % chunks)` for `i = 0` and `i = 1`) run on one stream, in
/// the order written, and may write one chunk (two passes over it): that was refused as
/// iterations on streams of their own. Iterations whose folded indices differ are compared.
#[test]
fn iterations_on_one_stream_by_a_folded_index_may_write_one_chunk() {
    for body in [
        "for i in 0..8 { stage c on work[(i / 2) % chunks] { fill x[(i / 2) * 4..(i / 2) * 4 + 4] = 0.0; } }",
        "for i in 0..8 { let chunk = i / 2; stage c on work[chunk % chunks] { fill x[chunk * 4..chunk * 4 + 4] = 0.0; } }",
    ] {
        lower_ok(&chunked(body));
    }
    for body in [
        // `i = 1` and `i = 2` fold to `(0 % chunks)` and `(1 % chunks)`.
        "for i in 0..8 { stage c on work[(i / 2) % chunks] { fill x[i * 2..i * 2 + 3] = 0.0; } }",
        // A `let` that does not evaluate may differ from iteration to iteration.
        "for i in 0..8 { let c = i * s; stage c on work[c % 4] { fill x[(i / 2) * 4..(i / 2) * 4 + 4] = 0.0; } }",
    ] {
        let messages = errors(&chunked(body));
        assert!(
            messages
                .iter()
                .any(|m| m.contains("is written by every iteration of stage `c`")),
            "{body}: {messages:?}"
        );
    }
}

#[test]
fn claims_every_iteration_contradicts_are_errors_in_loops() {
    assert_error(
        &chunked(
            "for i in 0..chunks { stage a on work[i % 4] { fill x[i..i + 1] = 0.0; } stage b on work[i % 4] { fill y[i..i + 1] = 0.0; } concurrent(a, b); }",
        ),
        "`a` and `b` both run on stream `work[i % 4]`, which runs them one after the other; put one on another stream, or drop the claim",
        "a, b",
    );
    assert_error(
        &chunked(
            "for i in 0..chunks { stage a on main { fill x[i..i + 1] = 0.0; } stage b on main { fill y[i..i + 1] = 0.0; } concurrent(a, b); }",
        ),
        "`a` and `b` both run on stream `main`, which runs them one after the other; put one on another stream, or drop the claim",
        "a, b",
    );
    assert_error(
        &chunked(
            "for i in 0..chunks { stage a on work[i % 4] { fill x = 0.0; } stage b on work[(i + 1) % 4] { launch k::scale(n, 1.0, x, y[i..i + 1]) grid 1 block 1; } concurrent(a, b); }",
        ),
        "`a` and `b` cannot run concurrently: `b` reads `x` after `a` writes it; drop the claim, or remove that ordering",
        "a, b",
    );
    assert_error(
        &chunked(
            "for i in 0..chunks { stage a on work[i % 4] { fill x[i..i + 1] = 0.0; } stage b on work[(i + 1) % 4] after a { fill y[i..i + 1] = 0.0; } concurrent(a, b); }",
        ),
        "`a` and `b` cannot run concurrently: `b` is declared `after a`; drop the claim, or remove that ordering",
        "a, b",
    );
    // Apart in every iteration (the instances are checked when the step is planned).
    lower_ok(&chunked(
        "for i in 0..chunks { stage a on work[i % 4] { fill x[i..i + 1] = 0.0; } stage b on work[(i + 1) % 4] { fill y[i..i + 1] = 0.0; } concurrent(a, b); }",
    ));
}

/// In a step whose shape is known only when it is enqueued, a claim on two stages that name
/// a common element in every evaluation (constant ranges that overlap, one element of an
/// array, a whole buffer beside a range of it), or that run on one element of a stream array
/// however it is written, is contradicted in every instance: it compiled, and only the step's
/// plan refused it.
#[test]
fn claims_on_overlapping_ranges_in_every_instance_are_errors() {
    let cases = [
        (
            "stage a on main { fill x[0..4] = 0.0; } stage b on work[0] { fill x[2..8] = 0.0; } concurrent(a, b);",
            "`a` and `b` cannot run concurrently: `b` writes `x[2..8]` after `a` writes `x[0..4]`, which share elements; drop the claim, or remove that ordering",
        ),
        (
            "stage a on main { fill x = 0.0; } stage b on work[0] { copy x[0..4] -> y[0..4]; } concurrent(a, b);",
            "`a` and `b` cannot run concurrently: `b` reads `x[0..4]` after `a` writes `x`, which share elements; drop the claim, or remove that ordering",
        ),
        (
            "for i in 0..4 { stage a on work[i] { fill x[i * 4..i * 4 + 4] = 0.0; } stage b on work[(i + 1) % 4] { fill x[i * 4 + 2..i * 4 + 3] = 0.0; } concurrent(a, b); }",
            "`a` and `b` cannot run concurrently: `b` writes `x[i * 4 + 2..i * 4 + 3]` after `a` writes `x[i * 4..i * 4 + 4]`, which share elements; drop the claim, or remove that ordering",
        ),
        (
            "stage a on work[1] { fill x = 0.0; } stage b on work[2 - 1] { fill y = 0.0; } concurrent(a, b);",
            "`a` and `b` both run on stream `work[1]`, which runs them one after the other; put one on another stream, or drop the claim",
        ),
    ];
    for (body, message) in cases {
        assert_error(&chunked(body), message, "a, b");
    }
    for body in [
        "stage a on main { fill x[0..4] = 0.0; } stage b on work[0] { fill x[4..8] = 0.0; } concurrent(a, b);",
        "stage a on main { copy x[0..4] -> y[0..4]; } stage b on work[0] { copy x[2..3] -> y[8..9]; } concurrent(a, b);",
        // Empty, or empty when `x` holds 4 elements.
        "stage a on main { fill x = 0.0; } stage b on work[0] { fill x[0..0] = 0.0; } concurrent(a, b);",
        "stage a on main { fill x = 0.0; } stage b on work[0] { fill x[4..] = 0.0; } concurrent(a, b);",
        "for i in 0..4 { stage a on work[i] { fill x[i * 4..i * 4 + 4] = 0.0; } stage b on work[(i + 1) % 4] { fill x[i * 4 + 4..i * 4 + 8] = 0.0; } concurrent(a, b); }",
        "for i in 0..chunks { stage a on work[i % 4] { fill x[i..i + 1] = 0.0; } stage b on work[(i + 1) % 4] { fill x[s..s + 1] = 0.0; } concurrent(a, b); }",
    ] {
        lower_ok(&chunked(body));
    }
}

/// A ring over a device array, with `body` inside the pipeline.
fn ring(body: &str) -> String {
    format!(
        r#"pipeline R {{
            devices {{ gpu[4] }}
            streams {{ main on gpu[0], work[4] on gpu[..] }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; unbounded]);
            }}
            params {{ n: u32, chunks: usize, fields: &mut [DeviceBuffer<f32>] on gpu[..], halos: &mut [DeviceBuffer<f32>] on gpu[..] }}
            {body}
        }}"#
    )
}

#[test]
fn a_kernel_given_another_devices_buffer_in_a_loop_is_an_error() {
    assert_error(
        &ring(
            "for i in 0..4 { stage send on work[i] { launch k::saxpy(n, 1.0, fields[i][..4], halos[(i + 1) % 4][..4]) grid 1 block 32; } }",
        ),
        "`halos[(i + 1) % 4]` (`halos[1]` when `i = 0`) lives on device `gpu[1]`, but stage `send` runs on stream `work[i]`, on device `gpu[0]` when `i = 0`: kernel `saxpy` reaches only its own device's memory; copy it first, in a stage ordered before this one (`copy halos -> halos_gpu[0];` into a buffer declared `on gpu[0]`), run this stage on a stream `on gpu[1]`, or reach it through peer access: `peer(halos)` after the launch",
        "halos",
    );
    // The last iteration only: 3 + 1 is past the array.
    assert_error(
        &ring(
            "for i in 0..4 { stage send on work[i] { launch k::saxpy(n, 1.0, fields[i], halos[i + 1]) grid 1 block 32 peer(halos); } }",
        ),
        "`halos` has one buffer per device of gpu, 4 in all; `halos[4]` when `i = 3` is past them",
        "i + 1",
    );
    // Bounds that are not constants: compared as polynomials.
    assert_error(
        &ring(
            "for i in 0..chunks { stage send on work[i] { launch k::saxpy(n, 1.0, fields[i], halos[i + 1]) grid 1 block 32; } }",
        ),
        "`halos[i + 1]` lives on device `gpu[i + 1]`, but stage `send` runs on stream `work[i]`, on device `gpu[i]`, in every iteration: kernel `saxpy` reaches only its own device's memory; pass `halos[i]`, or reach it through peer access: `peer(halos)` after the launch",
        "halos",
    );
    for body in [
        "for i in 0..4 { stage send on work[i] { launch k::saxpy(n, 1.0, fields[i][..4], halos[(i + 1) % 4][..4]) grid 1 block 32 peer(halos); } }",
        "for i in 0..chunks { stage own on work[i] { launch k::saxpy(n, 1.0, fields[i], halos[i]) grid 1 block 32; } }",
        "for i in 0..4 { stage own on work[i] { launch k::saxpy(n, 1.0, fields[i], halos[i]) grid 1 block 32; } }",
        // Bounds the compiler cannot see: checked before each launch.
        "for i in 0..chunks { stage own on work[i % 4] { launch k::saxpy(n, 1.0, fields[(i + 1) % 4], halos[i % 4]) grid 1 block 32 peer(fields); } }",
        // A cast that may change the value: `(i + 256) as u8` is `i` for `i < 256` (it was
        // read as `i + 256`, another device in every iteration).
        "for i in 0..chunks { stage own on work[i] { launch k::saxpy(n, 1.0, fields[i], halos[((i + 256) as u8) as usize]) grid 1 block 32; } }",
    ] {
        lower_ok(&ring(body));
    }
}

/// A pipeline with `swap(u, v)` and `body`.
fn swapped(body: &str) -> String {
    format!(
        r#"pipeline S {{
            streams {{ main }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn step(n: u32, src: &[f32; n], dst: &mut [f32; n]);
            }}
            params {{ n: u32, sweeps: usize, u: &mut DeviceBuffer<f32>, v: &mut DeviceBuffer<f32> }}
            swap(u, v);
            {body}
        }}"#
    )
}

#[test]
fn a_swap_does_not_alternate_the_iterations_of_a_for() {
    assert_error(
        &swapped(
            "for it in 0..4 { stage sweep on main { launch k::step(n, u, v) grid 1 block 1; } }",
        ),
        "`swap(u, v)` exchanges the two between replays of the captured graph, not between the iterations of this `for`: every iteration of stage `sweep` reads the same `u` and writes the same `v`, so the step computes one half step again and again; to sweep several times in one step, alternate by hand (`launch ..(u, v)` then `launch ..(v, u)` in each iteration, over half as many iterations), or run one sweep per replay and `swap_u_v()` between them",
        "u",
    );
    for body in [
        // Alternating by hand.
        "for it in 0..2 { stage sweep on main { launch k::step(n, u, v) grid 1 block 1; launch k::step(n, v, u) grid 1 block 1; } }",
        // Chunks of a half step.
        "for it in 0..sweeps { stage sweep on main { launch k::step(n, u[it * 4..it * 4 + 4], v[it * 4..it * 4 + 4]) grid 1 block 1; } }",
        // One iteration, or none in a loop.
        "for it in 0..1 { stage sweep on main { launch k::step(n, u, v) grid 1 block 1; } }",
        "stage sweep on main { launch k::step(n, u, v) grid 1 block 1; }",
    ] {
        lower_ok(&swapped(body));
    }
}

//! Constant ranges the compiler decides (`check/ranges.rs`): one statement's references to
//! one buffer, one written, that surely overlap; copies between known lengths; ranges of a
//! scratch buffer of constant length that run past it. Each in every iteration of a `for`
//! with constant bounds.

use super::*;

/// A pipeline with a buffer array, a 16-element scratch buffer and `items`.
fn ranged(items: &str) -> String {
    format!(
        r#"pipeline P {{
            streams {{ main, work[4] }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
                fn add(n: u32, v: f32, y: &mut [f32; n]);
            }}
            params {{ n: u32, m: usize, x: &mut DeviceBuffer<f32>, xs: &mut [DeviceBuffer<f32>] }}
            scratch {{ t: DeviceBuffer<f32> = 16 }}
            {items}
        }}"#
    )
}

#[test]
fn references_of_one_statement_that_surely_alias_are_errors() {
    let overlap = "the ranges one statement names of a buffer must be apart where one is written; name elements that do not overlap, or a second buffer";
    let cases = [
        (
            "stage s on main { launch k::saxpy(n, 1.0, xs[0], xs[0]) grid 1 block 1; }",
            "`xs[0]` is passed to `saxpy` as both `x` and `y`, and `y` is written; pass a separate buffer, since a written parameter must not alias another".to_owned(),
        ),
        (
            "stage s on main { launch k::saxpy(4, 1.0, xs[1], xs[1][0..4]) grid 1 block 1; }",
            "`xs[1]` and `xs[1][0..4]` name one buffer, passed to `saxpy` as `x` and `y`, and `y` is written; pass a separate buffer, since a written parameter must not alias another".to_owned(),
        ),
        // A whole element beside any range of it, as a whole buffer beside a range of it.
        (
            "stage s on main { launch k::saxpy(4, 1.0, xs[1], xs[1][4..]) grid 1 block 1; }",
            "`xs[1]` and `xs[1][4..]` name one buffer, passed to `saxpy` as `x` and `y`, and `y` is written; pass a separate buffer, since a written parameter must not alias another".to_owned(),
        ),
        (
            "stage s on main { copy xs[0] -> xs[0]; }",
            "`copy xs[0] -> xs[0]` copies a buffer onto itself; name two different buffers, or ranges of one that are apart".to_owned(),
        ),
        (
            "stage s on main { launch k::saxpy(n, 1.0, x[0..], x[0..]) grid 1 block 1; }",
            format!("`x[0..]` and `x[0..]` overlap at every element, and `x[0..]` is written: {overlap}"),
        ),
        (
            "for i in 0..2 { stage s on main { launch k::saxpy(4, 1.0, x[i * 4..i * 4 + 4], x[i * 4 + 2..i * 4 + 6]) grid 1 block 1; } }",
            format!("`x[i * 4..i * 4 + 4]` and `x[i * 4 + 2..i * 4 + 6]` overlap at elements 2..4 when `i = 0`, and `x[i * 4 + 2..i * 4 + 6]` is written: {overlap}"),
        ),
        // Elements of an array that are one in some iteration.
        (
            "for i in 0..4 { stage s on work[i] { copy xs[i] -> xs[1]; } }",
            "`copy xs[i] -> xs[1]` copies a buffer onto itself when `i = 1`; name two different buffers, or ranges of one that are apart".to_owned(),
        ),
    ];
    for (items, message) in cases {
        assert_eq!(errors(&ranged(items)), [message], "{items}");
    }
}

#[test]
fn references_that_may_be_apart_compile() {
    for items in [
        // Apart, or apart in every iteration.
        "stage s on main { launch k::saxpy(4, 1.0, xs[0], xs[1]) grid 1 block 1; }",
        "stage s on main { copy xs[0][0..4] -> xs[0][4..8]; }",
        "for i in 0..2 { stage s on main { launch k::saxpy(4, 1.0, x[i * 8..i * 8 + 4], x[i * 8 + 4..i * 8 + 8]) grid 1 block 1; } }",
        // Only read.
        "stage s on main { launch k::saxpy(4, 1.0, xs[0], xs[2]) grid 1 block 1; }",
        // Two ranges that share elements only if the buffer is long enough: left to the step.
        "stage s on main { launch k::saxpy(4, 1.0, x[4..], x[4..]) grid 1 block 1; }",
        "stage s on main { launch k::saxpy(4, 1.0, x[0..4], x[4..]) grid 1 block 1; }",
        // Not evaluated: a param, a loop over params, an element chosen by a param.
        "stage s on main { launch k::saxpy(4, 1.0, x[m..m + 4], x[0..4]) grid 1 block 1; }",
        "for i in 0..m { stage s on main { launch k::saxpy(4, 1.0, x[i * 4..i * 4 + 4], x[i * 4 + 4..i * 4 + 8]) grid 1 block 1; } }",
        "stage s on main { launch k::saxpy(4, 1.0, x[m..m + 4], x[m + 4..m + 8]) grid 1 block 1; }",
        // A narrowing cast keeps only some bits: `(m as u8) as usize` may differ from `m`.
        "stage s on main { copy xs[(m as u8) as usize] -> xs[m]; }",
        "stage s on main { copy xs[m] -> xs[0]; }",
        // A loop that runs no iteration.
        "for i in 0..0 { stage s on main { copy xs[i] -> xs[0]; } }",
    ] {
        lower_ok(&ranged(items));
    }
}

/// An empty range names no element of the whole element of an array beside it (`xs[1]` and
/// `xs[1][0..0]` were refused as two names of one buffer); the step lends both from one
/// `Apart`. Beside a whole buffer, which the step cannot lend with a range of it, the error
/// says to write the whole buffer as a range.
#[test]
fn an_empty_range_beside_a_whole_buffer() {
    for items in [
        "stage s on main { launch k::saxpy(0, 1.0, xs[1][0..0], xs[1]) grid 1 block 1; }",
        "stage s on main { launch k::saxpy(0, 1.0, xs[1], xs[1][2..2]) grid 1 block 1; }",
        "stage s on main { launch k::saxpy(0, 1.0, x[..], x[0..0]) grid 1 block 1; }",
        "stage s on main { fill t = 0.0; launch k::saxpy(0, 1.0, t[16..], t[..]) grid 1 block 1; }",
    ] {
        lower_ok(&ranged(items));
    }
    assert_error(
        &ranged("stage s on main { launch k::saxpy(0, 1.0, x[0..0], x) grid 1 block 1; }"),
        "`x[0..0]` names no element, but `x` is passed whole beside it to `saxpy` (as `y`), and one statement cannot lend a buffer whole and a range of it together; write the whole buffer as a range, `x[..]` (ranges of one buffer that are apart may be passed together)",
        "x",
    );
    assert_error(
        &ranged(
            "stage s on main { fill t = 0.0; launch k::saxpy(0, 1.0, t, t[16..]) grid 1 block 1; }",
        ),
        "`t[16..]` names no element, but `t` is passed whole beside it to `saxpy` (as `x`), and one statement cannot lend a buffer whole and a range of it together; write the whole buffer as a range, `t[..]` (ranges of one buffer that are apart may be passed together)",
        "t",
    );
}

#[test]
fn ranges_past_a_scratch_buffer_of_constant_length_are_errors() {
    let fix = |end: i128| {
        format!(
            "past the end of scratch buffer `t`, which holds 16 elements: the statement would reach past it; name a range inside `t` (within `t[0..16]`), or declare `t` with at least {end} elements (`t: DeviceBuffer<f32> = {end}`)"
        )
    };
    let cases = [
        (
            "stage s on main { fill t[0..17] = 0.0; }",
            format!("`t[0..17]` ends at element 17, {}", fix(17)),
        ),
        (
            "stage s on main { fill t = 0.0; copy t[8..24] -> x[0..16]; }",
            format!("`t[8..24]` ends at element 24, {}", fix(24)),
        ),
        (
            "stage s on main { launch k::add(4, 1.0, t[14..18]) grid 1 block 1; }",
            format!("`t[14..18]` ends at element 18, {}", fix(18)),
        ),
        (
            "stage s on main { fill t[17..] = 0.0; }",
            format!("`t[17..]` starts at element 17, {}", fix(17)),
        ),
        (
            "for i in 0..5 { stage c on work[i % 4] { fill t[i * 4..i * 4 + 4] = 0.0; } }",
            format!(
                "`t[i * 4..i * 4 + 4]` (`t[16..20]` when `i = 4`) ends at element 20, {}",
                fix(20)
            ),
        ),
    ];
    for (items, message) in cases {
        assert_eq!(errors(&ranged(items)), [message], "{items}");
    }
    for items in [
        // Inside, empty at the end, or not evaluated.
        "stage s on main { fill t[0..16] = 0.0; fill t[16..] = 0.0; fill t[16..16] = 0.0; }",
        "stage s on main { fill t[0..m] = 0.0; fill t[m..] = 0.0; }",
        "for i in 0..4 { stage c on work[i] { fill t[i * 4..i * 4 + 4] = 0.0; } }",
        "for i in 0..m { stage c on work[i % 4] { fill t[i * 4..i * 4 + 4] = 0.0; } }",
    ] {
        lower_ok(&ranged(items));
    }
}

#[test]
fn copies_between_known_lengths_of_two_lengths_are_errors() {
    let cases = [
        (
            "stage s on main { fill t = 0.0; copy t -> x[0..32]; }",
            "`copy` from 16 elements into 32: a copy's source and destination have one length, and scratch buffer `t` holds 16; name 16 elements of `x` (`x[0..16]`)",
        ),
        (
            "stage s on main { copy x[4..8] -> t; }",
            "`copy` from 4 elements into 16: a copy's source and destination have one length, and scratch buffer `t` holds 16; name 16 elements of `x` (`x[4..20]`), or copy part of `t` (`t[..4]`)",
        ),
        (
            "stage s on main { fill t = 0.0; copy t[4..] -> x[0..4]; }",
            "`copy` from 12 elements into 4: a copy's source and destination ranges have one length; make both ranges 4 long",
        ),
        (
            "for i in 0..2 { stage s on main { fill t = 0.0; copy t[0..8] -> x[0..i * 8]; } }",
            "`copy` from 8 elements into 0 when `i = 0`: a copy's source and destination ranges have one length; make both ranges 0 long",
        ),
    ];
    for (items, message) in cases {
        assert_eq!(errors(&ranged(items)), [message], "{items}");
    }
    for items in [
        "stage s on main { fill t = 0.0; copy t -> x[0..16]; copy t[8..] -> x[0..8]; copy t -> x; }",
        "stage s on main { fill t = 0.0; copy t -> x[m..m + 16]; copy t[0..8] -> xs[0][..8]; }",
    ] {
        lower_ok(&ranged(items));
    }
}

/// Over params, two lengths whose difference is a constant other than 0 differ whatever the
/// params are (`x[0..m]` into `xs[0][0..m + 1]`): that compiled, and was refused only when the
/// step ran. Lengths that may be equal, or a narrowing cast, are left to the step.
#[test]
fn copies_between_lengths_that_differ_over_params_are_errors() {
    assert_error(
        &ranged("stage s on main { copy x[0..m] -> xs[0][0..m + 1]; }"),
        "`copy` from `m` elements into `m + 1`, whatever the params are: a copy's source and destination ranges have one length; make both ranges `m` long",
        "[0..m] -> xs[0][0..m + 1]",
    );
    assert_error(
        &ranged(
            "stage s on main { copy x[(m as u64) as usize..(m as u64) as usize + x.len()] -> xs[0][1..x.len()]; }",
        ),
        "`copy` from `x.len()` elements into `x.len() - 1`, whatever the params are: a copy's source and destination ranges have one length; make both ranges `x.len()` long",
        "[(m as u64) as usize..(m as u64) as usize + x.len()] -> xs[0][1..x.len()]",
    );
    assert_error(
        &ranged(
            "for i in 0..m { stage s on main { copy xs[0][i * 4..i * 4 + 4] -> x[i * 8..i * 8 + 8]; } }",
        ),
        "`copy` from 4 elements into 8, whatever the params are: a copy's source and destination ranges have one length; make both ranges 4 long",
        "[i * 4..i * 4 + 4] -> x[i * 8..i * 8 + 8]",
    );
    for items in [
        "stage s on main { copy x[m..2 * m] -> xs[0][0..m]; }",
        "stage s on main { copy x[0..m] -> xs[0][0..n as usize]; }",
        "stage s on main { copy x[0..m] -> xs[0][0..(m + 1) as u8 as usize]; }",
        "stage s on main { copy x[0..m] -> xs[0][0..x.len()]; }",
        // A `const` item: left to the assertion the compiler evaluates.
        "stage s on main { copy x[0..HALF] -> xs[0][0..HALF + 1]; }",
    ] {
        lower_ok(&ranged(items));
    }
}

/// A cast gives what Rust's `as` gives: `(256u32 as u8) as usize` is 0, so the range it
/// starts is `x[0..4]`, not an inverted `x[256..4]`, and the value a flag write leaves is 0.
#[test]
fn casts_truncate_as_rust_does() {
    for items in [
        "stage s on main { copy x[0..4] -> x[(260u32 as u8) as usize..8]; }",
        "stage s on main { fill t[0..(272u32 as u8) as usize] = 0.0; } stage r on main { copy t[0..16] -> x[0..16]; }",
    ] {
        lower_ok(&ranged(items));
    }
    assert_eq!(
        errors(&ranged(
            "stage s on main { copy x[0..4] -> x[(256u32 as u8) as usize..4]; }"
        )),
        [
            "`x[0..4]` and `x[(256u32 as u8) as usize..4]` overlap at elements 0..4, and `x[(256u32 as u8) as usize..4]` is written: the ranges one statement names of a buffer must be apart where one is written; name elements that do not overlap, or a second buffer"
        ]
    );
    let flags = |items: &str| {
        with(&format!(
            "scratch {{ f: FlagCell }} stage w on s1 {{ write f = (256u32 as u8) as u32; }} {items}"
        ))
    };
    lower_ok(&flags("stage r on s2 { wait f == 0u32; }"));
    assert_eq!(
        errors(&flags("stage r on s2 { wait f == 256u32; }")),
        [
            "`wait f == 256u32` in stage `r` sees the value of `write f = (256u32 as u8) as u32` in stage `w`, the last write before it, which never satisfies it: the stream would wait for ever; wait for the value written, or write the value waited for"
        ]
    );
}

/// Subscripts over params or a loop over params, written two ways, are compared as
/// polynomials: one polynomial is one value in the statement (`xs[m + 1]` and `xs[1 + m]`),
/// and ranges whose bounds differ by constants overlap by constants (`x[m..m + 4]` and
/// `x[m + 2..m + 6]`). They compiled, and the step's plan refused them.
#[test]
fn references_written_two_ways_that_alias_are_errors() {
    let overlap = "the ranges one statement names of a buffer must be apart where one is written; name elements that do not overlap, or a second buffer";
    let cases = [
        (
            "stage s on main { copy xs[m + 1] -> xs[1 + m]; }",
            "`copy xs[m + 1] -> xs[1 + m]` copies a buffer onto itself; name two different buffers, or ranges of one that are apart".to_owned(),
        ),
        (
            "for i in 0..m { stage s on work[i % 4] { launch k::saxpy(4, 1.0, xs[i], xs[i + 0]) grid 1 block 1; } }",
            "`xs[i]` and `xs[i + 0]` name one buffer, passed to `saxpy` as `x` and `y`, and `y` is written; pass a separate buffer, since a written parameter must not alias another".to_owned(),
        ),
        (
            "stage s on main { launch k::saxpy(4, 1.0, x[m..m + 4], x[m + 2..m + 6]) grid 1 block 1; }",
            format!("`x[m..m + 4]` and `x[m + 2..m + 6]` overlap at elements m + 2..m + 4, and `x[m + 2..m + 6]` is written: {overlap}"),
        ),
        (
            "for i in 0..m { stage s on main { launch k::saxpy(4, 1.0, x[i * 4..i * 4 + 4], x[i * 4 + 2..i * 4 + 6]) grid 1 block 1; } }",
            format!("`x[i * 4..i * 4 + 4]` and `x[i * 4 + 2..i * 4 + 6]` overlap at elements 4 * i + 2..4 * i + 4, and `x[i * 4 + 2..i * 4 + 6]` is written: {overlap}"),
        ),
    ];
    for (items, message) in cases {
        assert_eq!(errors(&ranged(items)), [message], "{items}");
    }
}

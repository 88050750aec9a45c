//! Rules on the derived order: flag waits a write before them satisfies, and scratch buffers
//! written before they are read (`check/ordering.rs`).

use super::*;

#[track_caller]
fn assert_cases(cases: &[(&str, &str, &str)]) {
    for &(items, message, token) in cases {
        assert_error(&with(items), message, token);
    }
}

#[test]
fn a_wait_needs_a_satisfying_write_before_it() {
    assert_cases(&[
        (
            "stage w on s2 { wait flag >= 1; } stage p on s1 { write flag = 1; }",
            "`wait flag >= 1` in stage `w` can only be satisfied by `write flag = 1` in stage `p`, which runs after it (`p` writes `flag` after `w` reads it): the stream would wait for ever; write the flag in a stage this one runs after, or wait in a later stage",
            "wait",
        ),
        (
            "stage w on s1 { wait flag == 2; write flag = 2; }",
            "`wait flag == 2` in stage `w` can only be satisfied by `write flag = 2` in stage `w`, which runs after it (it comes later in stage `w`): the stream would wait for ever; put the write before the wait",
            "wait",
        ),
        (
            "stage p on s1 { write flag = 1; } stage w on s2 { wait flag == 2; }",
            "`wait flag == 2` in stage `w` sees the value of `write flag = 1` in stage `p`, the last write before it, which never satisfies it: the stream would wait for ever; wait for the value written, or write the value waited for",
            "2",
        ),
        (
            "scratch { ready: FlagCell } stage w on s1 { wait ready & 1; }",
            "`wait ready & 1` in stage `w` waits on scratch flag `ready`, which nothing writes before it and nothing outside the pipeline can: it stays 0 and the stream would wait for ever; `write ready = VALUE` in a stage this one runs after",
            "wait",
        ),
    ]);
    lower_ok(&with(
        // Written before, by a value the macro cannot know, by a call, or set outside.
        "stage p on s1 { write flag = n; }
         stage w on s2 { wait flag >= n; wait shared_flag == 1; }
         stage q on s1 { call signal() writes(flag); }
         stage v on s2 { wait flag & 4; }",
    ));
    // A reset after the wait cannot satisfy it: the value comes from outside.
    lower_ok(&with("stage w on s1 { wait flag == 1; write flag = 0; }"));
    // The last write before the wait decides, and wrapping `>=` counts.
    lower_ok(&with(
        "stage p on s1 { write flag = 1; write flag = 3; } stage w on s2 { wait flag >= 2; }",
    ));
}

/// A write inside a `for` with constant bounds writes one value per iteration: a wait after
/// the loop sees the last iteration's value (the iterations write one flag, so they run in
/// order): one that value does not satisfy waits for ever; one after a loop that runs no
/// iteration, or over params, is left alone.
#[test]
fn a_wait_after_a_loop_needs_the_value_its_last_iteration_writes() {
    let streams = "streams { main, work[4] } params { n: usize, flag: &mut FlagCell }";
    let pipeline = |items: &str| format!("pipeline P {{ {streams} {items} }}");
    let seen = |wait: &str, write: &str, last: i128| {
        format!(
            "`{wait}` in stage `done` sees the value of `{write}` in stage `round` in its last iteration (it writes {last}), the last write before it, which never satisfies it: the stream would wait for ever; wait for the value written, or write the value waited for"
        )
    };
    assert_error(
        &pipeline(
            "for i in 0..4 { stage round on work[i] { write flag = i as u32; } }
             stage done on main { wait flag == 4u32; }",
        ),
        &seen("wait flag == 4u32", "write flag = i as u32", 3),
        "4u32",
    );
    // An earlier iteration's value is overwritten before the wait.
    assert_error(
        &pipeline(
            "for i in 0..4 { stage round on work[i] { write flag = i as u32; } }
             stage done on main { wait flag == 1u32; }",
        ),
        &seen("wait flag == 1u32", "write flag = i as u32", 3),
        "1u32",
    );
    // Through a `let`, and a `>=` the last value does not reach.
    assert_error(
        &pipeline(
            "for i in 0..2 { let v = i * 2 + 1; stage round on work[i] { write flag = v as u32; } }
             stage done on main { wait flag >= 8u32; }",
        ),
        &seen("wait flag >= 8u32", "write flag = v as u32", 3),
        "8u32",
    );
    for items in [
        "for i in 0..4 { stage round on work[i] { write flag = i as u32; } } stage done on main { wait flag == 3u32; }",
        "for i in 1..5 { stage round on work[i - 1] { write flag = i as u32; } } stage done on main { wait flag >= 4u32; }",
        // A loop that runs no iteration, or over a param: the value is not known.
        "stage first on main { write flag = 4u32; } for i in 0..0 { stage round on work[i] { write flag = i as u32; } } stage done on main { wait flag == 4u32; }",
        "for i in 0..n { stage round on work[i % 4] { write flag = i as u32; } } stage done on main { wait flag == 4u32; }",
    ] {
        lower_ok(&pipeline(items));
    }
}

/// A token passed from iteration to iteration through one flag: iteration `i` waits for what
/// iteration `i - 1` wrote later in the same stage (the iterations touch one flag, so they run
/// in order). It compiles; a wait no earlier iteration's write satisfies is still refused.
#[test]
fn a_token_passed_between_iterations_compiles() {
    let streams = "streams { main, work[4] } params { flag: &mut FlagCell }";
    let pipeline = |items: &str| format!("pipeline P {{ {streams} {items} }}");
    lower_ok(&pipeline(
        "for i in 0..4 { stage r on work[i] { wait flag == i as u32; write flag = (i + 1) as u32; } }",
    ));
    lower_ok(&pipeline(
        "for i in 0..4 { stage r on work[i] { wait flag >= i as u32; write flag = (i + 1) as u32; } }",
    ));
    let scratch = |items: &str| {
        format!("pipeline P {{ streams {{ main, work[4] }} scratch {{ flag: FlagCell }} {items} }}")
    };
    // A scratch flag keeps what a step leaves: reset at the end, the next step starts at 0.
    lower_ok(&scratch(
        "for i in 0..4 { stage r on work[i] { wait flag == i as u32; write flag = (i + 1) as u32; } } stage reset on main { write flag = 0; }",
    ));
    for refused in [
        // No earlier iteration writes what this one waits for.
        pipeline(
            "for i in 0..4 { stage r on work[i] { wait flag == (i + 5) as u32; write flag = (i + 1) as u32; } }",
        ),
        // Only some iterations get the token (iteration 2 waits for 4, the flag holds 2).
        pipeline(
            "for i in 0..4 { stage r on work[i] { wait flag == (i * i) as u32; write flag = (i + 1) as u32; } }",
        ),
        // The first iteration waits for 1 on a scratch flag that holds 0.
        scratch(
            "for i in 0..4 { stage r on work[i] { wait flag == (i + 1) as u32; write flag = (i + 2) as u32; } }",
        ),
        // `flag & 0` holds for no value.
        pipeline(
            "for i in 0..4 { stage r on work[i] { wait flag & i as u32; write flag = (i + 1) as u32; } }",
        ),
    ] {
        let messages = errors(&refused);
        assert!(
            messages
                .iter()
                .any(|m| m.contains("can only be satisfied by `write flag =")),
            "{refused}: {messages:?}"
        );
    }
}

/// The token may be written by a later stage of the same iteration (on the same stream or
/// another: the write of the flag runs after the wait that reads it, and the next iteration's
/// wait after the write), and a `for` over params passes it on too: the values are compared as
/// polynomials, iteration `i + 1` waiting for what iteration `i` wrote.
#[test]
fn a_token_passed_by_another_stage_or_over_params_compiles() {
    let pipeline = |items: &str| {
        format!(
            "pipeline P {{ streams {{ main, work[4] }} params {{ n: usize, flag: &mut FlagCell }} scratch {{ f: FlagCell }} {items} }}"
        )
    };
    for items in [
        "for i in 0..4 { stage a on main { wait flag == i as u32; } stage b on work[0] { write flag = (i + 1) as u32; } }",
        "for i in 0..4 { stage a on main { wait f == i as u32; } stage b on main { write f = (i + 1) as u32; } } stage reset on main { write f = 0; }",
        "for i in 0..n { stage a on main { wait f == i as u32; write f = (i + 1) as u32; } } stage reset on main { write f = 0; }",
        "for i in 0..n { stage a on main { wait flag == i as u32; write flag = (i + 1) as u32; } }",
        "for i in 0..n { stage a on main { wait f == i as u32; } stage b on work[1] { write f = (i + 1) as u32; } } stage reset on main { write f = 0; }",
        "for i in 0..n { stage a on work[i % 4] { wait f >= i as u32; write f = (i + 2) as u32; } }",
        // Tokens of 8 bits: `(i + 257) as u8` is `(i + 1) as u8`, the next iteration's (it was
        // read as `i + 257`, a token never passed on). A cast narrower than the flag's word
        // makes a value unknown.
        "for i in 0..n { stage a on main { wait flag == (i as u8) as u32; write flag = ((i + 257) as u8) as u32; } }",
    ] {
        lower_ok(&pipeline(items));
    }
    for refused in [
        // The next iteration waits for `i + 1`, but the flag holds `i + 2`.
        "for i in 0..n { stage a on main { wait f == i as u32; write f = (i + 2) as u32; } }",
        "for i in 0..4 { stage a on main { wait f == i as u32; } stage b on main { write f = (i + 2) as u32; } }",
        // The first iteration waits for 1 on a scratch flag that holds 0.
        "for i in 1..n { stage a on main { wait f == i as u32; write f = (i + 1) as u32; } }",
        // The flag never reaches what the next iteration waits for.
        "for i in 0..n { stage a on main { wait f >= (i + 3) as u32; write f = (i + 2) as u32; } }",
    ] {
        let messages = errors(&pipeline(refused));
        assert!(
            messages
                .iter()
                .any(|m| m.contains("can only be satisfied by `write f =")),
            "{refused}: {messages:?}"
        );
    }
}

/// Inside a `for`, iteration `i + 1` sees what the loop's last write left in iteration `i`:
/// `wait f == 0u32; write f = 1;` holds in the first iteration and waits for ever in the
/// second, in the first step. With a reset at the end of the step it compiled; without one it
/// was refused for the next step, with a fix (the reset) that did not help.
#[test]
fn a_wait_in_a_loop_sees_what_the_iteration_before_left() {
    let pipeline = |items: &str| {
        format!(
            "pipeline P {{ streams {{ main, work[4] }} params {{ n: usize }} scratch {{ f: FlagCell }} {items} }}"
        )
    };
    let fix = "wait for the value the iteration before leaves, or pass a token from iteration to iteration (`wait f == i as u32;` before `write f = (i + 1) as u32;`)";
    for reset in ["", " stage z on main { write f = 0; }"] {
        assert_error(
            &pipeline(&format!(
                "for i in 0..4 {{ stage a on work[i] {{ wait f == 0u32; write f = 1; }} }}{reset}"
            )),
            &format!(
                "`wait f == 0u32` in stage `a` sees, when `i = 1`, what `write f = 1` in stage `a` wrote in the iteration before (1), which never satisfies it: the stream would wait for ever there; {fix}"
            ),
            "wait",
        );
        assert_error(
            &pipeline(&format!(
                "for i in 0..n {{ stage a on work[i % 4] {{ wait f == 0u32; }} stage b on main {{ write f = 1; }} }}{reset}"
            )),
            &format!(
                "`wait f == 0u32` in stage `a` sees, from the second iteration of `for i in 0..n` on, what `write f = 1` in stage `b` wrote in the iteration before (`1`, where the next iteration waits for `0`), which never satisfies it: whenever the loop runs twice the stream would wait for ever; {fix}"
            ),
            "wait",
        );
    }
    for items in [
        // Reset in every iteration, or a loop of one iteration.
        "for i in 0..4 { stage a on work[i] { wait f == 0u32; write f = 1; } stage b on main { write f = 0; } }",
        "for i in 0..1 { stage a on work[i] { wait f == 0u32; write f = 1; } } stage z on main { write f = 0; }",
        // `>=` of a value the flag keeps.
        "for i in 0..n { stage a on work[i % 4] { wait f >= 0u32; write f = 1; } }",
    ] {
        lower_ok(&pipeline(items));
    }
}

/// A write of a flag in another kind of step runs in another step, before or after this one
/// as the application enqueues them: a consumer kind waiting for what a producer kind writes
/// (`step produce { .. write f = 1; } step consume { wait f == 1u32; .. }`) was refused as a
/// wait whose only satisfier runs after it. It compiles; a wait that no kind's value (nor the
/// 0 a scratch flag starts with) satisfies is still an error.
#[test]
fn a_flag_written_by_another_kind_of_step_may_satisfy_a_wait() {
    let pipeline = |items: &str| {
        format!(
            "pipeline P {{ streams {{ main, side }} params {{ ready: &mut FlagCell }} scratch {{ f: FlagCell }} {items} }}"
        )
    };
    for items in [
        "step produce { stage p on main { write f = 1; } } step consume { stage c on side { wait f == 1u32; write f = 0; } }",
        "step a { stage p on main { wait f == 0u32; write f = 1; } } step b { stage c on side { wait f == 1u32; write f = 0; } }",
        "step produce { stage p on main { write ready = 1; } } step consume { stage c on side { wait ready == 1u32; write ready = 0; } }",
    ] {
        lower_ok(&pipeline(items));
    }
    assert_error(
        &pipeline(
            "step a { stage p on main { write f = 2; } } step b { stage c on side { wait f == 1u32; } }",
        ),
        "`wait f == 1u32` in stage `c` waits on scratch flag `f`, which nothing in its kind of step writes before it, and which holds 0 or what the other kinds of step leave (`write f = 2` in stage `p`), none of which satisfies it: the stream would wait for ever; `write f = VALUE` in a stage this one runs after",
        "wait",
    );
}

/// A wait whose value changes with the iterations of its `for` (constant bounds), after a
/// write before it: each iteration sees what that write leaves (or wrote in the same
/// iteration, when it is in the loop too), and one whose value that never satisfies waits for
/// ever. It compiled, since only a constant value was compared.
#[test]
fn a_looped_wait_after_a_write_needs_its_value_in_every_iteration() {
    let pipeline = |items: &str| {
        format!(
            "pipeline P {{ streams {{ main, work[4] }} params {{ n: usize, f: &mut FlagCell }} {items} }}"
        )
    };
    assert_error(
        &pipeline(
            "stage w on main { write f = 1; } for i in 0..4 { stage a on work[i] { wait f == (i + 1) as u32; } }",
        ),
        "`wait f == (i + 1) as u32` in stage `a` sees the value of `write f = 1` in stage `w`, the last write before it, which never satisfies it when `i = 1` (it waits for 2): the stream would wait for ever; wait for the value written, or write the value waited for",
        "(i + 1) as u32",
    );
    assert_error(
        &pipeline(
            "for i in 0..4 { stage w on main { write f = (i + 1) as u32; } stage a on work[i] { wait f == (i + 2) as u32; } }",
        ),
        "`wait f == (i + 2) as u32` in stage `a` sees the value of `write f = (i + 1) as u32` in stage `w` in the same iteration (it writes 1), the last write before it, which never satisfies it when `i = 0` (it waits for 2): the stream would wait for ever; wait for the value written, or write the value waited for",
        "(i + 2) as u32",
    );
    for items in [
        "stage w on main { write f = 4; } for i in 0..4 { stage a on work[i] { wait f >= (i + 1) as u32; } }",
        "for i in 0..4 { stage w on main { write f = (i + 1) as u32; } stage a on work[i] { wait f == (i + 1) as u32; } }",
        // A token passed on from the value written before the loop.
        "stage w on main { write f = 1; } for i in 0..4 { stage a on work[0] { wait f == (i + 1) as u32; write f = (i + 2) as u32; } }",
        // Over a param: not evaluated.
        "stage w on main { write f = 1; } for i in 0..n { stage a on work[0] { wait f == (i + 1) as u32; } }",
    ] {
        lower_ok(&pipeline(items));
    }
}

/// A scratch flag is made once, at 0, and keeps what each step leaves: a wait that holds
/// only at 0 hangs the next step (a token chain over a scratch flag compiled and hung at its
/// second step). Reset at the end of the step, it compiles; a reset after a wait that 0 or a
/// token satisfies is not taken for the wait's only satisfier.
#[test]
fn a_scratch_flag_starts_the_next_step_with_what_the_last_one_left() {
    let pipeline = |items: &str| {
        format!("pipeline P {{ streams {{ main, work[4] }} scratch {{ f: FlagCell }} {items} }}")
    };
    let message = |wait: &str, stage: &str, write: &str, left: i128| {
        format!(
            "`{wait}` in stage `{stage}` holds in a first step, which finds scratch flag `f` at 0, but a scratch flag keeps what a step leaves, and {write} leaves {left}: the next step would wait for ever; reset the flag at the end of the step (`write f = 0;` in a stage after the last wait), or make it a param the host sets"
        )
    };
    assert_error(
        &pipeline(
            "for i in 0..4 { stage r on work[i] { wait f == i as u32; write f = (i + 1) as u32; } }",
        ),
        &message(
            "wait f == i as u32",
            "r",
            "`write f = (i + 1) as u32` in stage `r` in its last iteration (it writes 4)",
            4,
        ),
        "wait",
    );
    assert_error(
        &pipeline("stage a on main { wait f == 0u32; } stage b on work[0] { write f = 1; }"),
        &message("wait f == 0u32", "a", "`write f = 1` in stage `b`", 1),
        "wait",
    );
    for items in [
        "for i in 0..4 { stage r on work[i] { wait f == i as u32; write f = (i + 1) as u32; } } stage reset on main { write f = 0; }",
        "stage a on main { wait f == 0u32; } stage b on work[0] { write f = 1; } stage c on main { write f = 0; }",
        "stage a on main { write f = 1; } stage b on work[0] { wait f == 1u32; }",
    ] {
        lower_ok(&pipeline(items));
    }
}

/// Over params, a token chain on a scratch flag leaves the last iteration's token (that of
/// `i = n`) where the next step's first iteration waits for that of `i = 0`: it hangs the
/// second step whenever the loop runs, unless the step ends with a reset. A chain whose
/// tokens do not change (`i * 0`), or a param flag the host sets, is left alone.
#[test]
fn a_scratch_token_passed_over_params_is_reset_at_the_end_of_the_step() {
    let pipeline = |items: &str| {
        format!(
            "pipeline P {{ streams {{ main, work[4] }} params {{ n: usize, m: usize, flag: &mut FlagCell }} scratch {{ f: FlagCell }} {items} }}"
        )
    };
    let message = |wait: &str, stage: &str, write: &str, range: (&str, &str)| {
        format!(
            "`{wait}` in stage `{stage}` passes a token from iteration to iteration of `for i in {}..{}`, and a first step finds scratch flag `f` at 0, but a scratch flag keeps what a step leaves: {write} leaves the token of `i = {}`, and the next step's first iteration waits for that of `i = {}`, so whenever the loop runs the next step would wait for ever; reset the flag at the end of the step (`write f = 0;` in a stage after the loop), or make it a param the host sets",
            range.0, range.1, range.1, range.0,
        )
    };
    assert_error(
        &pipeline(
            "for i in 0..n { stage a on main { wait f == i as u32; write f = (i + 1) as u32; } }",
        ),
        &message(
            "wait f == i as u32",
            "a",
            "`write f = (i + 1) as u32` in stage `a`",
            ("0", "n"),
        ),
        "wait",
    );
    assert_error(
        &pipeline(
            "for i in m..n + m { stage a on work[i % 4] { wait f == (2 * i - 2 * m) as u32; } stage b on main { write f = (2 * i - 2 * m + 2) as u32; } }",
        ),
        &message(
            "wait f == (2 * i - 2 * m) as u32",
            "a",
            "`write f = (2 * i - 2 * m + 2) as u32` in stage `b`",
            ("m", "n + m"),
        ),
        "wait",
    );
    for items in [
        "for i in 0..n { stage a on main { wait f == i as u32; write f = (i + 1) as u32; } } stage reset on main { write f = 0; }",
        "for i in 0..n { stage a on main { wait f == (i * 0) as u32; write f = (i * 0) as u32; } }",
        "for i in 0..n { stage a on main { wait flag == i as u32; write flag = (i + 1) as u32; } }",
    ] {
        lower_ok(&pipeline(items));
    }
}

/// A `>=` token chain over a scratch flag leaves the last iteration's token, which satisfies
/// every wait of the next step at once: no hang, and no ordering lost, since a `wait` reads
/// its flag and a `write` writes it, so each wait's stage already waits (by an event, or
/// stream order) for the writes before it and the next step for this one. It compiles, with
/// a reset or without, over params or constants.
#[test]
fn an_at_least_token_chain_over_a_scratch_flag_needs_no_reset() {
    let pipeline = |items: &str| {
        format!(
            "pipeline P {{ streams {{ main, work[4] }} params {{ n: usize }} scratch {{ f: FlagCell }} {items} }}"
        )
    };
    for items in [
        "for i in 0..n { stage a on work[i % 4] { wait f >= i as u32; write f = (i + 1) as u32; } }",
        "for i in 0..4 { stage a on work[i] { wait f >= i as u32; write f = (i + 1) as u32; } }",
        "for i in 0..n { stage a on work[i % 4] { wait f >= i as u32; } stage b on main { write f = (i + 1) as u32; } }",
    ] {
        lower_ok(&pipeline(items));
    }
}

#[test]
fn scratch_buffers_are_written_before_they_are_read() {
    assert_cases(&[
        (
            "scratch { t: DeviceBuffer<f32> = 4 } stage s on s1 { launch k::scale(n, alpha, t, a) grid 1 block 1; fill t = 0.0; }",
            "scratch buffer `t` is read in stage `s` before anything writes it: its contents start undefined, and a later step finds what the last one left; write it first (`fill t = 0.0;`, or a kernel that writes it) in an earlier statement or in a stage `s` runs after, or make it a param if it keeps state from step to step",
            "t",
        ),
        (
            "scratch { t: DeviceBuffer<f32> = 4 } stage r on s2 { copy t -> h; } stage w on s1 { fill t = 0.0; }",
            "scratch buffer `t` is read in stage `r` before anything writes it: its contents start undefined, and a later step finds what the last one left; write it first (`fill t = 0.0;`, or a kernel that writes it) in an earlier statement or in a stage `r` runs after, or make it a param if it keeps state from step to step",
            "t",
        ),
    ]);
    lower_ok(&with(
        "scratch { t: DeviceBuffer<f32> = 4, p: PinnedBuffer<f32> = 4 }
         stage w on s1 { launch k::touch(t) grid 1 block 1; }
         stage r on s2 { copy t -> h; copy p -> b; call f(t) reads(t) writes(b); }",
    ));
}

/// A constant range that ends where it starts names no element: reading it reads nothing
/// undefined (it was refused as a read before any write), and writing it writes nothing a
/// later read could use (it counted as a write of the buffer, and the read compiled).
#[test]
fn empty_ranges_of_a_scratch_buffer_neither_read_nor_write() {
    let scratch = |items: &str| with(&format!("scratch {{ t: DeviceBuffer<f32> = 16 }} {items}"));
    lower_ok(&scratch("stage r on s1 { copy t[0..0] -> a[0..0]; }"));
    // Open at the end of a buffer of constant length, and starting there.
    lower_ok(&scratch("stage r on s1 { copy t[16..] -> a[0..0]; }"));
    assert_error(
        &scratch(
            "stage w on s1 { fill t[16..] = 0.0; } stage r on s1 { copy t[0..4] -> h[0..4]; }",
        ),
        "scratch buffer `t` is read in stage `r` before anything writes it: its contents start undefined, and a later step finds what the last one left; write it first (`fill t = 0.0;`, or a kernel that writes it) in an earlier statement or in a stage `r` runs after, or make it a param if it keeps state from step to step",
        "t",
    );
    assert_error(
        &scratch(
            "stage w on s1 { fill t[4..4] = 0.0; } stage r on s1 { copy t[0..4] -> h[0..4]; }",
        ),
        "scratch buffer `t` is read in stage `r` before anything writes it: its contents start undefined, and a later step finds what the last one left; write it first (`fill t = 0.0;`, or a kernel that writes it) in an earlier statement or in a stage `r` runs after, or make it a param if it keeps state from step to step",
        "t",
    );
}

/// Constant parts: a read of constant elements of a scratch buffer that every write before
/// it (all of constant elements) misses is an error on the read; an overlap, a whole write,
/// or a range the compiler cannot evaluate leaves it to the step's plan.
#[test]
fn scratch_parts_read_where_no_constant_write_reached_are_refused() {
    assert_error(
        &with(
            "scratch { t: DeviceBuffer<f32> = 16 }
             stage s on s1 { fill t[0..1] = 0.0; copy t[8..16] -> h[0..8]; }",
        ),
        "`t[8..16]` is read in stage `s`, but the writes of `t` before it (`t[0..1]`) cover none of elements 8..16, so the read finds undefined contents; write them first (`fill t[8..16] = 0.0;`, or a kernel that writes them)",
        "t[8..16]",
    );
    // A copy reads every element of its source: one that no write before it covers is read
    // undefined (it compiled, and the step's plan refused it).
    for (copy, read, gap) in [
        ("copy t[4..12] -> h[0..8];", "t[4..12]", "8..12"),
        ("copy t -> h;", "t", "8..16"),
        ("copy t[2..] -> h[0..14];", "t[2..]", "8..16"),
    ] {
        assert_error(
            &with(&format!(
                "scratch {{ t: DeviceBuffer<f32> = 16 }} stage s on s1 {{ fill t[0..8] = 0.0; }} stage r on s2 {{ {copy} }}"
            )),
            &format!(
                "`{read}` is read in stage `r`, but the writes of `t` before it (`t[0..8]`) cover only part of it, not elements {gap}, so the read finds undefined contents; write them first (`fill t[{gap}] = 0.0;`, or a kernel that writes them)"
            ),
            read,
        );
    }
    // A write that some run skips (an `if` without `else`, a `while`) covers nothing there:
    // it compiled, and the step's plan refused it.
    for (control, why) in [
        (
            "if a > 0.0 { fill t[8..16] = 1.0; }",
            "sits in an `if` without `else`",
        ),
        (
            "while a > 0.0 max 4 { fill t[8..16] = 1.0; launch k::touch(a) grid 1 block 1; }",
            "sits in a `while` body, which may run no time",
        ),
    ] {
        assert_error(
            &with(&format!(
                "scratch {{ t: DeviceBuffer<f32> = 16 }}
                 stage s on s1 {{ fill t[0..8] = 0.0; {control} copy t[8..12] -> h[0..4]; }}"
            )),
            &format!(
                "`t[8..12]` is read in stage `s`, but the writes of `t` before it (`t[0..8]`) cover none of elements 8..12 (a write of `t` in stage `s` {why}, so it counts for nothing), so the read finds undefined contents; write them first (`fill t[8..12] = 0.0;`, or a kernel that writes them)"
            ),
            "t[8..12]",
        );
    }
    for items in [
        // Both bodies write: left to the step's plan.
        "stage s on s1 { fill t[0..8] = 0.0; if a > 0.0 { fill t[8..16] = 1.0; } else { fill t[8..12] = 2.0; } copy t[8..12] -> h[0..4]; }",
        "stage s on s1 { fill t[0..8] = 0.0; do { fill t[8..12] = 1.0; launch k::touch(a) grid 1 block 1; } while a > 0.0 max 4; copy t[8..12] -> h[0..4]; }",
        "stage s on s1 { fill t[0..8] = 0.0; if a > 0.0 { fill t[8..16] = 1.0; } copy t[0..4] -> h[0..4]; }",
        "stage s on s1 { fill t = 0.0; copy t[8..16] -> h[0..8]; }",
        // Parts that together cover a copy's source, and a kernel, which may read only some
        // of what it is given.
        "stage s on s1 { fill t[0..8] = 0.0; fill t[8..] = 1.0; copy t -> h; }",
        "stage s on s1 { fill t[0..8] = 0.0; launch k::scale(4, 1.0, t[4..12], a) grid 1 block 1; }",
        "stage s on s1 { fill t[0..8] = 0.0; launch k::scale(4, 1.0, t, a) grid 1 block 1; }",
        "stage s on s1 { fill t[0..n as usize] = 0.0; copy t[8..16] -> h[0..8]; }",
        "stage s on s1 { fill t[8..] = 0.0; copy t[8..16] -> h[0..8]; }",
    ] {
        lower_ok(&with(&format!(
            "scratch {{ t: DeviceBuffer<f32> = 16 }} {items}"
        )));
    }
}

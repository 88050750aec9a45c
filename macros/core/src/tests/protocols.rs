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

/// A scratch read that only a `for` of unknown count writes before compiles, and is listed
/// for the step's check (which refuses the step when the loop runs no iteration); a loop of
/// constant count, a write outside the loop, or a read in the same iteration needs none.
#[test]
fn scratch_written_only_in_a_loop_of_unknown_count_is_checked_when_the_step_runs() {
    let needs = |items: &str| {
        let pipeline = lower_ok(&with(items));
        crate::check::scratch::loop_needs(&pipeline)
    };
    let found = needs(
        "scratch { t: DeviceBuffer<f32> = 4 }
         for i in 0..n as usize { stage w on s1 { fill t = 0.0; } }
         stage r on s1 { copy t -> h; }",
    );
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0]
            .message
            .contains("`for i in 0..n as usize` writes it before"),
        "{found:#?}"
    );
    assert_eq!(found[0].read_loop, None);
    for items in [
        "scratch { t: DeviceBuffer<f32> = 4 }
         for i in 0..2 { stage w on s1 { fill t = 0.0; } }
         stage r on s1 { copy t -> h; }",
        "scratch { t: DeviceBuffer<f32> = 4 }
         stage z on s1 { fill t = 1.0; }
         for i in 0..n as usize { stage w on s1 { fill t = 0.0; } }
         stage r on s1 { copy t -> h; }",
        "scratch { t: DeviceBuffer<f32> = 4 }
         for i in 0..n as usize { stage w on s1 { fill t = 0.0; copy t -> h; } }",
    ] {
        assert!(needs(items).is_empty(), "{items}: {:#?}", needs(items));
    }
}

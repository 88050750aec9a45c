//! Communication operands' ranges: the elements each statement reads and writes, as the
//! checks see them (scratch buffers written first, ordering, inverted ranges, one buffer on
//! both sides of a collective).

use super::multi::comm;
use super::{assert_error, errors, lower_ok};

/// A communication operand's range is the elements it touches: a `recv t[0..4]` writes those
/// four of a scratch `t` and no more (it counted as a write of all of `t`, so a read of the
/// rest compiled and found undefined contents), and a `send`, like a copy, reads every element
/// of its range.
#[test]
fn communication_ranges_write_and_read_only_their_elements() {
    let scratch = |items: &str| comm(&format!("scratch {{ t: DeviceBuffer<f32> = 8 }} {items}"));
    let uncovered = |read: &str, stage: &str, part: &str, gap: &str| {
        format!(
            "`{read}` is read in stage `{stage}`, but the writes of `t` before it (`t[0..4]`) cover {part} elements {gap}, so the read finds undefined contents; write them first (`fill t[{gap}] = 0.0;`, or a kernel that writes them)"
        )
    };
    for (items, read, stage, part, gap) in [
        (
            "stage x on s1 { recv t[0..4] from peer; copy t -> h[0..8]; }",
            "t",
            "x",
            "only part of it, not",
            "4..8",
        ),
        (
            "stage x on s1 { recv t[0..4] from peer; } stage y on s2 { copy t -> h[0..8]; }",
            "t",
            "y",
            "only part of it, not",
            "4..8",
        ),
        (
            "stage x on s1 { recv t[0..4] from peer; launch k::read(t[4..8]) grid 1 block 1; }",
            "t[4..8]",
            "x",
            "none of",
            "4..8",
        ),
        (
            "stage x on s1 { fill t[0..4] = 0.0; send t[0..8] to peer; }",
            "t[0..8]",
            "x",
            "only part of it, not",
            "4..8",
        ),
        (
            "stage x on s1 { fill t[0..4] = 0.0; all_reduce(sum) t[2..6] -> a[0..4]; }",
            "t[2..6]",
            "x",
            "only part of it, not",
            "4..6",
        ),
    ] {
        assert_error(&scratch(items), &uncovered(read, stage, part, gap), read);
    }
    // What the writes cover compiles: the four received and four filled, a kernel given a
    // window that starts in what was received, a send of what was received.
    for items in [
        "stage x on s1 { recv t[0..4] from peer; fill t[4..8] = 0.0; copy t -> h[0..8]; }",
        "stage x on s1 { recv t[0..4] from peer; launch k::read(t[2..8]) grid 1 block 1; }",
        "stage x on s1 { recv t[4..] from peer; send t[4..8] to peer; }",
        "stage x on s1 { recv t from peer; copy t -> h[0..8]; }",
    ] {
        lower_ok(&scratch(items));
    }
}

/// Two stages on two streams that touch disjoint constant ranges of one buffer, one of them a
/// communication statement, are not ordered (a `concurrent` claim holds); overlapping ones
/// are.
#[test]
fn communication_ranges_order_only_what_overlaps() {
    lower_ok(&comm(
        "stage x on s1 { send a[0..4] to peer; }
         stage y on s2 { launch k::touch(a[4..8]) grid 1 block 1; }
         concurrent(x, y);",
    ));
    let messages = errors(&comm(
        "stage x on s1 { recv a[0..4] from peer; }
         stage y on s2 { launch k::read(a[2..6]) grid 1 block 1; }
         concurrent(x, y);",
    ));
    assert!(
        messages.iter().any(|m| m.contains("concurrent")),
        "{messages:?}"
    );
}

/// An inverted range of a communication operand is one error, the range's, with what to write
/// (its length, negative, pairs with nothing and is not reported again).
#[test]
fn an_inverted_communication_range_is_reported_once() {
    assert_error(
        &comm("stage x on s1 { send a[4..2] to peer; recv b[0..2] from peer; }"),
        "`a[4..2]` ends before it starts; write `a[2..4]`",
        "a[4..2]",
    );
    // A `..=` range is shown as written.
    assert_error(
        &comm("stage x on s1 { send a[4..=1] to peer; recv b[0..2] from peer; }"),
        "`a[4..=1]` ends before it starts; write `a[1..=4]`",
        "[4..=1]",
    );
}

/// An in-place `all_reduce` or `broadcast` reads every element of its operand before it writes
/// them: one of a scratch buffer only partly written before it reads undefined elements.
#[test]
fn an_in_place_collective_of_a_partly_written_scratch_buffer_is_refused() {
    for (statement, read) in [
        ("all_reduce(sum) t;", "t"),
        ("all_reduce(max) t[2..8];", "t[2..8]"),
        ("broadcast t from 0;", "t"),
    ] {
        let gap = "4..8";
        assert_error(
            &comm(&format!(
                "scratch {{ t: DeviceBuffer<f32> = 8 }} stage x on s1 {{ copy c[0..4] -> t[0..4]; {statement} }}"
            )),
            &format!(
                "`{read}` is read in stage `x`, but the writes of `t` before it (`t[0..4]`) cover only part of it, not elements {gap}, so the read finds undefined contents; write them first (`fill t[{gap}] = 0.0;`, or a kernel that writes them)"
            ),
            read,
        );
    }
    lower_ok(&comm(
        "scratch { t: DeviceBuffer<f32> = 8 } stage x on s1 { copy c[0..4] -> t[0..4]; all_reduce(sum) t[0..4]; }",
    ));
}

/// A `..=` range of a communication operand is the elements it names, as a half-open one is:
/// `recv t[0..=3]` writes four elements of an 8-element scratch `t` (it counted as a write of
/// all of `t`, so a copy of all of it compiled and copied four undefined elements), and a
/// stage on another stream that touches other elements runs beside it.
#[test]
fn closed_communication_ranges_are_their_elements() {
    let scratch = |items: &str| comm(&format!("scratch {{ t: DeviceBuffer<f32> = 8 }} {items}"));
    assert_error(
        &scratch("stage x on s1 { recv t[0..=3] from peer; copy t -> h[0..8]; }"),
        "`t` is read in stage `x`, but the writes of `t` before it (`t[0..4]`) cover only part of it, not elements 4..8, so the read finds undefined contents; write them first (`fill t[4..8] = 0.0;`, or a kernel that writes them)",
        "t",
    );
    assert_error(
        &scratch("stage x on s1 { fill t[0..4] = 0.0; send t[1..=4] to peer; }"),
        "`t[1..5]` is read in stage `x`, but the writes of `t` before it (`t[0..4]`) cover only part of it, not elements 4..5, so the read finds undefined contents; write them first (`fill t[4..5] = 0.0;`, or a kernel that writes them)",
        "[1..=4]",
    );
    for items in [
        "stage x on s1 { recv t[0..=3] from peer; fill t[4..8] = 0.0; copy t -> h[0..8]; }",
        "stage x on s1 { recv t[..=7] from peer; copy t -> h[0..8]; }",
        "stage x on s1 { recv t[0..=nx - 1] from peer; fill t[nx..8] = 0.0; copy t -> h[0..8]; }",
    ] {
        lower_ok(&scratch(items));
    }
    lower_ok(&comm(
        "stage x on s1 { send a[0..=3] to peer; }
         stage y on s2 { launch k::touch(a[4..8]) grid 1 block 1; }
         concurrent(x, y);",
    ));
}

/// A range computed from the communicator counts as the whole buffer (the step's shape is
/// computed from scalar params): a communication write of such a range into a scratch buffer
/// counted as writing all of it, so `recv t[0..comm.size()]` then a copy of all of an
/// 8-element `t` compiled, passed the plan and copied six undefined elements on two ranks. It
/// is refused on the communicator, with the scalar param to use instead; reads of such a
/// range, and writes into params, keep counting as the whole buffer.
#[test]
fn a_communication_write_into_scratch_over_the_communicators_size_is_refused() {
    let scratch = |items: &str| comm(&format!("scratch {{ t: DeviceBuffer<f32> = 8 }} {items}"));
    let message = |word: &str, method: &str| {
        let param = if method == "rank" { "rank" } else { "ranks" };
        format!(
            "`comm` is the communicator, used in the range `{word}` writes of scratch buffer `t`: the step checks that each element of a scratch buffer is written before anything reads it, from ranges computed from scalar params, and this one would count as all of `t`; pass the communicator's {method} as a scalar param (`{param}: usize`, set from `comm.{method}()`) and use that"
        )
    };
    for (items, word, method) in [
        (
            "stage x on s1 { send a[0..comm.size()] to peer; recv t[0..comm.size()] from peer; copy t -> h[0..8]; }",
            "recv",
            "size",
        ),
        (
            "stage x on s1 { all_gather a[0..2] -> t[0..2 * comm.size()]; }",
            "all_gather",
            "size",
        ),
        (
            "stage x on s1 { fill t = 0.0; all_reduce(sum) t[comm.rank()..comm.rank() + 1]; }",
            "all_reduce",
            "rank",
        ),
    ] {
        assert_error(&scratch(items), &message(word, method), "comm");
    }
    for items in [
        "stage x on s1 { fill t = 0.0; send t[0..comm.size()] to peer; recv a[0..comm.size()] from peer; }",
        "stage x on s1 { all_gather c[0..2] -> a[0..2 * comm.size()]; }",
        "stage x on s1 { send c[0..nx] to peer; recv t[0..nx] from peer; }",
    ] {
        lower_ok(&scratch(items));
    }
}

/// One buffer on both sides of a collective: the in-place form where the two sides are one
/// range, otherwise a buffer of its own for one side (the collective takes two buffers).
#[test]
fn one_buffer_on_both_sides_of_a_collective_says_what_to_write() {
    for (statement, message) in [
        (
            "all_reduce(sum) a -> a;",
            "`all_reduce` reads and writes `a` at once; for the in-place form write one operand, e.g. `all_reduce(sum) a`",
        ),
        (
            "broadcast a[0..4] -> a[0..4] from 0;",
            "`broadcast` reads and writes `a` at once; for the in-place form write one operand, e.g. `broadcast a[0..4]`",
        ),
        (
            "all_reduce(sum) a[0..nx] -> a[nx..2 * nx];",
            "`all_reduce` reads and writes `a` at once; a collective takes its two sides as two buffers, so one buffer cannot be both, even in ranges that do not overlap; all_reduce into a buffer of its own (a scratch buffer) and `copy` that into `a[nx..2 * nx]`",
        ),
        (
            "all_gather a[0..4] -> a[4..12];",
            "`all_gather` reads and writes `a` at once; a collective takes its two sides as two buffers, so one buffer cannot be both, even in ranges that do not overlap; all_gather into a buffer of its own (a scratch buffer) and `copy` that into `a[4..12]`",
        ),
    ] {
        let messages = errors(&comm(&format!("stage x on s1 {{ {statement} }}")));
        assert!(
            messages.iter().any(|m| m == message),
            "{statement}: {messages:#?}"
        );
    }
}

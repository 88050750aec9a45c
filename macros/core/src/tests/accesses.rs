//! Every appearance of a buffer in a statement is an access the macro orders, or an error that
//! says how to declare it (`check/accesses.rs`).

use super::*;

#[track_caller]
fn assert_cases(cases: &[(&str, &str, &str)]) {
    for &(items, message, token) in cases {
        assert_error(&with(items), message, token);
    }
}

#[test]
fn expressions_use_buffers_only_through_their_length() {
    assert_cases(&[
        (
            "stage s on s1 { launch k::wide(a.device_ptr() as f64, d) grid 1 block 1; }",
            "`a` is a buffer, used in the argument for `x: f64` of `wide`: a kernel reaches a buffer only through a `&[T]` or `&mut [T]` parameter, which the macro orders against the other stages; declare such a parameter and pass `a` for it (its length is `a.len()`)",
            "a",
        ),
        (
            "stage s on s1 { launch k::touch(a) grid flag.load() block 1; }",
            "`flag` is a buffer, used in `grid`: launch dimensions are computed on the host when the step is enqueued, before the stages that write `flag` have run; use a scalar param, or `flag.len()` for its length",
            "flag",
        ),
        (
            "stage s on s1 { fill a = h.as_slice().map(|v| v[0]).unwrap_or(0.0); }",
            "`h` is a buffer, used in the value of `fill`: the value is computed on the host when the step is enqueued, before the stages that write `h` have run; use a scalar param, or a kernel that reads `h`",
            "h",
        ),
        (
            "stage s on s1 { write flag = shared_flag.load(); }",
            "`shared_flag` is a buffer, used in the value of `write`: the value is computed on the host when the step is enqueued, before the stages that write `shared_flag` have run; use a scalar param, or a kernel that reads `shared_flag`",
            "shared_flag",
        ),
    ]);
    lower_ok(&with(
        "stage s on s1 { launch k::scale(a.len() as u32, alpha, c, a) grid (a.len() as u32).div_ceil(256) block 256; }",
    ));
    // A name bound inside the expression is not the buffer.
    lower_ok(&with(
        "stage s on s1 { launch k::scale(n, [1.0f32].iter().map(|a| a * 2.0).sum(), c, a) grid 1 block 1; }",
    ));
}

#[test]
fn host_closures_borrow_no_buffer() {
    assert_cases(&[(
        "stage s on s1 { host move || { let _ = h.len(); } reads(h); }",
        "a host closure cannot use `h`: it runs at every replay of the captured step, outside the borrow of the step's params; list `h` in `reads(...)` or `writes(...)` to order the closure against the stages that use it, and read it on the host after the step (`run(...)?.wait()`, `graph.synchronize()`)",
        "h",
    )]);
    lower_ok(&with(
        r#"stage s on s1 { host move || println!("{n} {alpha}") reads(h); }"#,
    ));
}

#[test]
fn calls_pass_every_buffer_as_declared() {
    assert_cases(&[
        (
            "stage s on s1 { call f(b.as_view_mut()); }",
            "`b` is passed to `f` but not declared; add it to `writes(...)`",
            "b",
        ),
        (
            "stage s on s1 { call f((&*a, n)) reads(c); }",
            "`a` is passed to `f` but not declared; add it to `reads(...)` or `writes(...)`",
            "a",
        ),
        (
            "stage s on s1 { call f(&mut b) reads(b); }",
            "`b` is passed as `&mut b` but declared in `reads(...)`; declare it in `writes(...)` if `f` writes it, or pass `&b`",
            "b",
        ),
        (
            "stage s on s1 { call f(b.slice_mut(0..4)) reads(b); }",
            "`b.slice_mut()` borrows `b` mutably, but `b` is declared in `reads(...)`; declare it in `writes(...)`",
            "b",
        ),
        (
            "stage s on s1 { call f(b, b.as_view_mut()) writes(b); }",
            "`b` is passed to `f` twice, and `f` writes it: a function cannot hold a `&mut` borrow of a buffer next to another borrow of it; pass `b` once",
            "b",
        ),
    ]);
    lower_ok(&with(
        "stage s on s1 { call f(a, a.as_view(), b.len(), &c, &mut b) reads(a, c) writes(b); }",
    ));
}

#[test]
fn call_arguments_lower_to_borrows_as_declared() {
    use crate::lower::{CallArg, Mode, StatementKind};
    let p = lower_ok(&with(
        "stage s on s1 { call f(a, &b, &mut h, c.as_view(), n) reads(c) writes(a, b, h); }",
    ));
    let StatementKind::Call { args, .. } = &p.stages[0].statements[0].kind else {
        panic!("a call")
    };
    let passed: Vec<String> = args
        .iter()
        .map(|arg| match arg {
            CallArg::Buffer {
                name,
                mode,
                declared,
            } => format!("{name}: {mode:?} of {declared:?}"),
            CallArg::Expr { buffers, .. } => format!("expr naming {buffers:?}"),
        })
        .collect();
    assert_eq!(
        passed,
        [
            "a: Write of Write",
            "b: Read of Write",
            "h: Write of Write",
            "expr naming [(BufferId(2), Read)]",
            "expr naming []",
        ]
    );
    let _ = Mode::Read;
}

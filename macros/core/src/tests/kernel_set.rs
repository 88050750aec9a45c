//! Conditions kernels set (`scratch { go: Condition }`, a kernel parameter declared
//! `Condition`): parsing and lowering, and each rule's message on the token it points at. Also
//! `swap(a, b);` at the end of a loop's body (the other new form of device loops).

use super::*;
use crate::lower::{Arg, ControlCondition, Mode, StatementKind};

/// A pipeline with kernels that set conditions, `go` and `more` declared, and `items`.
fn set(items: &str) -> String {
    format!(
        r#"pipeline P {{
            streams {{ s1, s2 }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn check(r: &[f32], go: Condition);
                fn sweep(x: &mut [f32]);
            }}
            params {{ a: &mut DeviceBuffer<f32>, flag: &mut DeviceBuffer<u32> }}
            scratch {{ go: Condition, more: Condition }}
            {items}
        }}"#
    )
}

const SET: &str = "launch k::check(a, go) grid 1 block 1;";
const SWEEP: &str = "launch k::sweep(a) grid 1 block 1;";

#[test]
fn a_kernel_set_loop_lowers_to_its_condition_and_writes_it() {
    let pipeline = lower_ok(&set(&format!(
        "stage s on s1 {{ {SET} while go max 10 {{ {SWEEP} {SET} }} }}"
    )));
    let go = pipeline
        .buffers
        .iter()
        .position(|b| b.name == "go")
        .expect("go");
    let statements = &pipeline.stages[0].statements;
    let StatementKind::Launch { args, .. } = &statements[0].kind else {
        panic!("a launch");
    };
    assert!(matches!(args[1], Arg::Buffer { buffer, mode: Mode::Write } if buffer.0 == go));
    let StatementKind::Control(control) = &statements[1].kind else {
        panic!("a control");
    };
    assert_eq!(
        control.condition,
        ControlCondition::Kernel { value: buffer(go) }
    );
}

/// Each kind of step is a graph of its own, with a handle of its own for `go`: one
/// `Condition` tested once in each kind is not two tests of one handle (the checker refused
/// it), while two tests in one kind still are.
#[test]
fn one_condition_may_be_tested_once_in_each_kind_of_step() {
    lower_ok(&set(&format!(
        "step a {{ stage s on s1 {{ {SET} if go {{ {SWEEP} }} }} }} \
         step b {{ stage t on s2 {{ {SET} while go max 10 {{ {SWEEP} {SET} }} }} }}"
    )));
    let errors = errors(&set(&format!(
        "step a {{ stage s on s1 {{ {SET} if go {{ {SWEEP} }} }} }} \
         step b {{ stage t on s2 {{ {SET} if go {{ {SWEEP} }} {SET} if go {{ {SWEEP} }} }} }}"
    )));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("is tested by another `if` already"),
        "{errors:?}"
    );
}

#[test]
fn every_form_that_kernels_decide_compiles() {
    for items in [
        format!("stage s on s1 {{ {SET} while go max 10 {{ {SWEEP} {SET} }} }}"),
        format!("stage s on s1 {{ do {{ {SWEEP} {SET} }} while go max 10; }}"),
        format!("stage s on s1 {{ {SET} if go {{ {SWEEP} }} else {{ {SWEEP} }} }}"),
        format!("stage s on s1 {{ {SET} switch go {{ 0 => {{ {SWEEP} }} 1 => {{}} }} }}"),
        // Nested: the inner handle belongs to the outer loop's body.
        format!(
            "stage s on s1 {{ {SET} while go max 10 {{ launch k::check(a, more) grid 1 block 1; \
             if more {{ {SWEEP} }} {SET} }} }}"
        ),
    ] {
        lower_ok(&set(&items));
    }
}

#[test]
fn the_rules_on_where_a_condition_is_set() {
    let cases: &[(String, &str, &str)] = &[
        (
            format!("stage s on s1 {{ {SET} }}"),
            "`go` is set here but no `while`, `do ... while`, `if` or `switch` tests it, so the value goes nowhere; test it after this launch (`if go { ... }`, `while go max 100 { ... }`) or launch a kernel that sets no condition",
            "go",
        ),
        (
            format!("stage s on s1 {{ while go max 10 {{ {SET} }} }}"),
            "nothing sets `go` before this `while` first tests it; launch the kernel that sets it just before the loop, in the same stage, or write `do { ... } while go max N;`, whose body runs before its first test",
            "go",
        ),
        (
            format!("stage s on s1 {{ {SET} while go max 10 {{ {SWEEP} }} }}"),
            "nothing in the loop's body sets `go`, so its test never changes; launch the kernel that sets it in the body, at its top level",
            "go",
        ),
        (
            format!("stage s on s1 {{ {SET} do {{ {SET} }} while go max 10; }}"),
            "a `do ... while` runs its body before its first test, so setting `go` before it has no effect; set it inside the body, once",
            "go",
        ),
        (
            format!("stage s on s1 {{ {SET} while go max 10 {{ {SET} {SET} }} }}"),
            "`go` is set twice in the loop's body; set it once per iteration (the launch that sets it also counts the iteration against `max`)",
            "go",
        ),
        (
            format!("stage s on s1 {{ {SET} {SET} if go {{ {SWEEP} }} }}"),
            "`go` is set twice before the `if` tests it; set it once, by the last launch before the `if`",
            "go",
        ),
        (
            format!("stage s on s1 {{ {SET} if go {{ {SET} }} }}"),
            "setting `go` inside the `if` it decides has no effect on it (the `if` has decided by then); set it before the `if`",
            "go",
        ),
        (
            format!("stage s on s1 {{ {SET} }} stage t on s1 {{ {SET} if go {{ {SWEEP} }} }}"),
            "`go` is set outside the `if` that tests it: a kernel sets a condition by the last launch before its `if`, in the same stage and body",
            "go",
        ),
        (
            format!(
                "stage s on s1 {{ {SET} while go max 10 {{ if flag != 0u32 {{ {SET} }} {SET} }} }}"
            ),
            "`go` is set outside the `while` that tests it: a kernel sets a condition by the last launch before its `while`, in the same stage and body, or at the top level of the loop's body",
            "go",
        ),
        (
            format!("stage s on s1 {{ {SET} if go {{ {SWEEP} }} if go {{ {SWEEP} }} }}"),
            "`go` is tested by another `if` already, and a `Condition` decides one conditional; declare one per conditional (`scratch { go: Condition, go2: Condition }`)",
            "go",
        ),
        (
            "stage s on s1 { if flag { launch k::sweep(a) grid 1 block 1; } }".to_owned(),
            "`flag` is a `DeviceBuffer` (`&mut DeviceBuffer<u32>`); a bare name tests a `Condition` that kernels set; compare the buffer's first element instead: `if flag != 0 ...`",
            "flag",
        ),
        (
            "stage s on s1 { launch k::check(a, flag) grid 1 block 1; }".to_owned(),
            "`flag` is a `DeviceBuffer` (`&mut DeviceBuffer<u32>`); `check` sets a condition through `go: Condition`: pass a `Condition` declared in `scratch { go: Condition }` that a `while`, `do ... while`, `if` or `switch` tests (`while go max 100 { ... }`)",
            "flag",
        ),
        (
            "stage s on s1 { launch k::sweep(go) grid 1 block 1; }".to_owned(),
            "`go` is a kernel-set condition (`Condition`); `sweep` takes a `DeviceBuffer` for `x: &mut [f32]`, and a condition goes only to a kernel parameter declared `Condition`",
            "go",
        ),
        (
            "stage s on s1 { fill go = 0; }".to_owned(),
            "`go` is a kernel-set condition (`Condition`); a `Condition` is set by the kernels given it and read by the one `while`, `do ... while`, `if` or `switch` that names it; pass it to a kernel that sets it",
            "go",
        ),
        (
            format!("stage s on s1 {{ {SET} call replace(go) writes(go); if go {{ {SWEEP} }} }}"),
            "`go` is a kernel-set condition (`Condition`); a `Condition` is set by the kernels given it and read by the one `while`, `do ... while`, `if` or `switch` that names it, so `replace` cannot take it; pass it to a `launch` of a kernel that sets it",
            "go",
        ),
        (
            format!("stage s on s1 {{ {SET} call peek(&go) reads(go); if go {{ {SWEEP} }} }}"),
            "`go` is a kernel-set condition (`Condition`); a `Condition` is set by the kernels given it and read by the one `while`, `do ... while`, `if` or `switch` that names it, so `peek` cannot take it; pass it to a `launch` of a kernel that sets it",
            "go",
        ),
    ];
    for (items, message, token) in cases {
        assert_error(&set(items), message, token);
    }
}

#[test]
fn a_condition_is_scratch_without_a_length() {
    let source = r#"pipeline P {
        streams { s1 }
        params { go: &mut Condition, x: &mut DeviceBuffer<f32> }
        scratch { more: Condition = 4 }
        stage s on s1 { fill x = 0.0; }
    }"#;
    assert_eq!(
        errors(source),
        [
            "a `Condition` belongs to the pipeline, which makes one handle per conditional node it builds; declare it in `scratch { go: Condition }`",
            "condition `more` holds one value and takes no length; write `more: Condition`",
        ]
    );
}

/// A pipeline for loop swaps: `x`, `y` (f32), `u` (f64), `c` (shared), `r` (the residual),
/// `go` (a kernel-set condition).
fn swapping(items: &str) -> String {
    format!(
        r#"pipeline P {{
            streams {{ s1 }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn jacobi(src: &[f32], dst: &mut [f32], r: &mut [f32]);
                fn check(r: &[f32], go: Condition);
            }}
            params {{
                tol: f32,
                x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, u: &mut DeviceBuffer<f64>,
                c: &DeviceBuffer<f32>, r: &mut DeviceBuffer<f32>,
            }}
            scratch {{ go: Condition }}
            {items}
        }}"#
    )
}

const JACOBI: &str = "launch k::jacobi(x, y, r) grid 1 block 1;";

#[test]
fn a_loop_body_may_end_with_swaps_which_write_both_buffers() {
    let pipeline = lower_ok(&swapping(&format!(
        "stage s on s1 {{ while r > tol max 10 {{ {JACOBI} swap(x, y); }} \
         do {{ {JACOBI} swap(x, y); }} while r > tol max 10; }}"
    )));
    let StatementKind::Control(control) = &pipeline.stages[0].statements[0].kind else {
        panic!("a control");
    };
    let (x, y) = (buffer(0), buffer(1));
    assert_eq!(control.swaps, [(x, y)]);
    // The condition's read, the launch's three touches, then both swapped buffers written.
    let written: Vec<_> = pipeline.stages[0].statements[0]
        .accesses
        .iter()
        .skip(4)
        .map(|t| (t.buffer, t.mode))
        .collect();
    assert_eq!(written, [(x, Mode::Write), (y, Mode::Write)]);
}

#[test]
fn the_rules_on_swaps_in_a_loop_body() {
    let cases: &[(String, &str, &str)] = &[
        (
            format!("stage s on s1 {{ while r > tol max 10 {{ {JACOBI} swap(x, u); }} }}"),
            "`x` holds `f32` and `u` holds `f64`; `swap` exchanges buffers of one element type",
            "u",
        ),
        (
            format!("stage s on s1 {{ while r > tol max 10 {{ {JACOBI} swap(x, c); }} }}"),
            "`c` is declared `&` but the loop's body swaps it, so each half writes through it what the other writes through the other buffer; declare it `&mut DeviceBuffer<f32>`",
            "c",
        ),
        (
            format!("stage s on s1 {{ while r > tol max 10 {{ {JACOBI} swap(x, x); }} }}"),
            "`swap(x, x)` exchanges `x` with itself, which changes nothing; name the buffer it alternates with: `swap(x, next)`",
            "x",
        ),
        (
            format!("stage s on s1 {{ while r > tol max 10 {{ {JACOBI} swap(r, y); }} }}"),
            "the loop tests `r`, which its condition kernel reads at one address; swap other buffers, and have a kernel write the value the loop tests",
            "r",
        ),
        (
            format!("stage s on s1 {{ while r > tol max 10 {{ {JACOBI} swap(x, y); swap(y, r); }} }}"),
            "`y` is swapped twice at the end of this body; each buffer takes part in one `swap`",
            "y",
        ),
        (
            "stage s on s1 { while r > tol max 10 { launch k::jacobi(x[0..4], y, r) grid 1 block 1; swap(x, y); } }".to_owned(),
            "`x` is swapped at the end of the loop's body, so the body names it whole; pass the range through a kernel parameter instead (name `x` whole and give the kernel the range's bounds as scalars; a `fill` or `copy` of part of it becomes such a kernel)",
            "x",
        ),
    ];
    for (items, message, token) in cases {
        let all = errors(&swapping(items));
        assert!(all.iter().any(|m| m == message), "{items}: {all:#?}");
        if let Err(error) = compile(&swapping(items))
            && let Some(text) = error
                .into_iter()
                .find(|e| e.to_string() == *message)
                .and_then(|e| e.span().source_text())
        {
            assert_eq!(text, *token, "{message}");
        }
    }
    // A kernel-set loop cannot swap.
    let all = errors(&swapping(
        "stage s on s1 { launch k::check(r, go) grid 1 block 1; while go max 10 { launch k::check(r, go) grid 1 block 1; swap(x, y); } }",
    ));
    assert!(
        all.iter()
            .any(|m| m.starts_with("a loop whose body swaps buffers is unrolled by two")),
        "{all:#?}"
    );
    // A `do ... while` is told to compare in its own form.
    let all = errors(&swapping(
        "stage s on s1 { do { launch k::check(r, go) grid 1 block 1; swap(x, y); } while go max 10; }",
    ));
    assert!(
        all.iter()
            .any(|m| m
                .contains("so it tests a comparison (`do { ... } while residual > tol max N;`)")),
        "{all:#?}"
    );
}

/// A loop swap of two pinned buffers is one error, on the first, that says what to swap
/// instead (it was one error per buffer).
#[test]
fn a_loop_swap_of_two_pinned_buffers_is_one_error() {
    let source = r#"pipeline P {
        streams { s1 }
        unsafe kernels k = ptx(include_str!("k.ptx")) {
            fn jacobi(src: &[f32], dst: &mut [f32], r: &mut [f32]);
        }
        params {
            tol: f32,
            x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, r: &mut DeviceBuffer<f32>,
            h: &mut PinnedBuffer<f32>, g: &mut PinnedBuffer<f32>,
        }
        stage s on s1 {
            while r > tol max 10 { launch k::jacobi(x, y, r) grid 1 block 1; copy y -> h; swap(h, g); }
        }
    }"#;
    assert_error(
        source,
        "`h` is a `PinnedBuffer` (`&mut PinnedBuffer<f32>`); `swap` in a loop's body exchanges \
         two `DeviceBuffer`s (a whole buffer each): swap the `DeviceBuffer`s the body computes \
         in, and copy the one that holds the result into the pinned buffer after the loop",
        "h",
    );
}

#[test]
fn swaps_end_a_loop_body_and_only_a_loop_body() {
    let error = parse(&swapping(&format!(
        "stage s on s1 {{ while r > tol max 10 {{ swap(x, y); {JACOBI} }} }}"
    )))
    .expect_err("a statement after a swap");
    assert!(
        error
            .to_string()
            .starts_with("a loop body's `swap`s come last"),
        "{error}"
    );
    let error = parse(&swapping(&format!(
        "stage s on s1 {{ if r > tol {{ {JACOBI} swap(x, y); }} }}"
    )))
    .expect_err("a swap in an if");
    assert!(
        error.to_string().starts_with("`swap` ends a loop's body"),
        "{error}"
    );
}

/// One misplaced setter is one mistake: its error says where the launch belongs, and the
/// conditional that lacks it is not reported again.
#[test]
fn a_misplaced_setter_is_one_error_not_two() {
    const SET_MORE: &str = "launch k::check(a, more) grid 1 block 1;";
    // `more` set in the first loop's body, for the second loop.
    let another_loop = set(&format!(
        "stage s on s1 {{ {SET} while go max 10 {{ {SWEEP} {SET} {SET_MORE} }} \
         while more max 10 {{ {SWEEP} {SET_MORE} }} }}"
    ));
    // `go`, the outer loop's condition, set inside an inner loop of its body.
    let inner_loop = set(&format!(
        "stage s on s1 {{ {SET} while go max 10 {{ while flag > 0u32 max 10 {{ {SWEEP} {SET} }} }} }}"
    ));
    for (source, name) in [(another_loop, "more"), (inner_loop, "go")] {
        assert_eq!(
            errors(&source),
            [format!(
                "`{name}` is set outside the `while` that tests it: a kernel sets a condition by \
                 the last launch before its `while`, in the same stage and body, or at the top \
                 level of the loop's body"
            )],
        );
    }
}

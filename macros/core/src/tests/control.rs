//! `while` and `if`: parsing, the rules on conditions and bodies (each message and the token
//! it points at), lowering (accesses and scalars include the body's), and the stage graph a
//! built step gets.

use super::*;
use crate::ast::{Comparison, Condition, Control, Statement};
use crate::lower::{ControlCondition, StatementKind};

fn first_control(items: &str) -> (Comparison, bool) {
    let input = parse(&with(items)).expect("parses");
    let stage = input.stages().next().expect("a stage");
    let Statement::Control(control) = &stage.statements[0] else {
        panic!("not a control statement");
    };
    match control.test().expect("a test") {
        Condition::Device(device) => (
            device.comparison,
            matches!(**control, Control::While { max: Some(_), .. }),
        ),
        Condition::Step(_) => panic!("a step condition"),
        Condition::Kernel(_) => panic!("a kernel-set condition"),
    }
}

#[test]
fn conditions_parse_every_comparison_and_the_step_form() {
    for (op, comparison) in [
        (">", Comparison::Greater),
        (">=", Comparison::GreaterOrEqual),
        ("<", Comparison::Less),
        ("<=", Comparison::LessOrEqual),
        ("==", Comparison::Equal),
        ("!=", Comparison::NotEqual),
    ] {
        let items =
            format!("stage s on s1 {{ while a {op} alpha * 2.0 max 10 {{ fill b = 0; }} }}");
        assert_eq!(first_control(&items), (comparison, true), "{op}");
    }
    let input = parse(&with(
        "stage s on s1 { if step % (n + 1) == 2 { fill b = 0; } fill a = 0; }",
    ))
    .expect("parses");
    let stage = input.stages().next().expect("a stage");
    assert_eq!(stage.statements.len(), 2, "no `;` after a body");
    let Statement::Control(control) = &stage.statements[0] else {
        panic!("not a control statement");
    };
    let Some(Condition::Step(step)) = control.test() else {
        panic!("not a step condition");
    };
    assert_eq!(ast::tokens_string(&step.modulus), "(n + 1)");
    assert_eq!(ast::tokens_string(&step.remainder), "2");
}

#[test]
fn a_condition_of_another_shape_is_a_syntax_error() {
    for condition in ["a + 1", "f(a) > 0", "step % 2"] {
        let error = parse(&with(&format!(
            "stage s on s1 {{ if {condition} {{ fill b = 0; }} }}"
        )))
        .expect_err(condition);
        assert!(
            error
                .to_string()
                .starts_with("a condition compares a device buffer"),
            "{condition}: {error}"
        );
    }
}

#[test]
fn the_rules_on_conditions() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "stage s on s1 { while a > alpha { fill b = 0; } }",
            "a device `while` needs a maximum iteration count, so that a loop that never converges stops with an error instead of hanging the GPU: write `while a > alpha max 10_000 { ... }`",
            "while",
        ),
        (
            "stage s on s1 { while step % 2 == 0 max 4 { fill b = 0; } }",
            "`step` changes only between steps, so a `while` on it would never end; write `if step % k == 0 { ... }` to run a body on every k-th step",
            "step",
        ),
        (
            "stage s on s1 { if h > 0.0 { fill b = 0; } }",
            "`h` is a `PinnedBuffer` (`&mut PinnedBuffer<f32>`); an `if` condition reads the first element of a `DeviceBuffer<f32>`, `<f64>` or `<u32>` on the device (a kernel writes it, the `if` reads it)",
            "h",
        ),
        (
            "stage s on s1 { if alpha > 0.0 { fill b = 0; } }",
            "`alpha` is a scalar param; a condition reads a `DeviceBuffer` on the device; compare a scalar on the host, before the step",
            "alpha",
        ),
        (
            "stage s on s1 { while a > c.len() as f32 max b.len() as u32 { fill a = 0; } }",
            "",
            "",
        ),
    ];
    for &(items, message, token) in cases {
        if message.is_empty() {
            lower_ok(&with(items));
        } else {
            assert_error(&with(items), message, token);
        }
    }
}

#[test]
fn a_condition_reads_f32_f64_or_u32() {
    let source = r#"pipeline P {
        streams { s }
        params { i: &mut DeviceBuffer<i64>, f: &mut DeviceBuffer<f64>, u: &mut DeviceBuffer<u32> }
        stage x on s { if f > 0.5 { fill u = 0; } while u != 0 max 3 { fill u = 0; } }
        stage y on s { if i > 0 { fill u = 0; } }
    }"#;
    assert_error(
        source,
        "`i` holds `i64`; a device condition compares an `f32`, `f64` or `u32` (a residual, or a flag a kernel sets): declare `i` with one of those, or have a kernel write such a value",
        "i",
    );
}

#[test]
fn a_body_holds_only_what_a_conditional_node_may_hold() {
    let tail = "which holds only kernels, copies, fills and nested `while`, `do ... while`, `if` and `switch`";
    let cases = [
        (
            "host || {} reads(h);",
            "a host closure",
            "run it before or after the loop, or do the work in a kernel",
            "host",
        ),
        (
            "call f(a) reads(a);",
            "a `call` (its work is captured from a stream and may bring event or host nodes)",
            "call it before or after the loop",
            "call",
        ),
        (
            "wait flag == 1;",
            "a `wait` on a flag (a stream memory operation)",
            "wait before the loop",
            "wait",
        ),
        (
            "write flag = 1;",
            "a `write` of a flag (a stream memory operation)",
            "write it before or after the loop, or `fill` a device buffer inside it",
            "write",
        ),
    ];
    for (statement, what, instead, token) in cases {
        let items = format!("stage s on s1 {{ while a > alpha max 5 {{ {statement} }} }}");
        let message = format!(
            "{what} cannot run inside a device `while` body: a body runs on the GPU as a CUDA conditional graph node, {tail}; {instead}"
        );
        assert_error(&with(&items), &message, token);
    }
    // Nested: the rule holds at any depth, and names the innermost statement.
    assert_error(
        &with(
            "stage s on s1 { if step % 2 == 0 { while a > alpha max 5 { host || {} reads(h); } } }",
        ),
        &format!(
            "a host closure cannot run inside a device `while` body: a body runs on the GPU as a CUDA conditional graph node, {tail}; run it before or after the loop, or do the work in a kernel"
        ),
        "host",
    );
    // An `if` or `switch` body is not a loop: the advice names what holds the statement.
    assert_error(
        &with("stage s on s1 { if a > alpha { call f(a) reads(a); } }"),
        &format!(
            "a `call` (its work is captured from a stream and may bring event or host nodes) cannot run inside a device `if` body: a body runs on the GPU as a CUDA conditional graph node, {tail}; call it before or after the `if`"
        ),
        "call",
    );
    // Statements in a body get the usual rules too.
    assert_error(
        &with("stage s on s1 { if a > 0.0 { fill c = 0; } }"),
        "`c` is declared `&` but `fill` writes it; declare it `&mut DeviceBuffer<f32>`",
        "c",
    );
}

#[test]
fn a_control_statement_touches_its_condition_and_its_body() {
    let pipeline = lower_ok(&with(
        "stage s on s1 {
            while b > alpha max n {
                launch k::scale(n, alpha, c, b) grid 1 block 1;
                if step % 2 == 0 { copy b -> h; }
            }
        }
        stage t on s2 { fill b = 0; }",
    ));
    let solve = &pipeline.stages[0];
    let StatementKind::Control(control) = &solve.statements[0].kind else {
        panic!("not lowered as control");
    };
    assert!(matches!(control.source, Control::While { .. }));
    assert!(matches!(
        control.condition,
        ControlCondition::Device {
            value,
            comparison: Comparison::Greater
        } if value == buffer(1)
    ));
    assert_eq!(control.bodies.len(), 1);
    assert_eq!(control.bodies[0].len(), 2);
    let touched: Vec<_> = solve.accesses.iter().map(|a| (a.buffer, a.mode)).collect();
    use crate::lower::Mode;
    assert_eq!(
        touched,
        [
            (buffer(1), Mode::Write),
            (buffer(2), Mode::Read),
            (buffer(4), Mode::Write),
        ]
    );
    // `alpha` (threshold and argument) and `n` (max and argument) are read.
    let scalars: Vec<usize> = solve.statements[0].scalars.iter().map(|s| s.0).collect();
    assert_eq!(scalars, [0, 1]);
    // `t` writes `b`, which the loop writes: it waits for the loop.
    assert!(
        pipeline
            .edges
            .iter()
            .any(|e| e.from == stage(0) && e.to == stage(1))
    );
}

#[test]
fn built_graphs_get_the_reduced_stage_edges() {
    let pipeline = lower_ok(&with(
        "stage a on s1 { fill a = 0; }
         stage b on s2 { launch k::scale(n, alpha, a, b) grid 1 block 1; }
         stage c on s1 { launch k::scale(n, alpha, b, a) grid 1 block 1; }",
    ));
    // a -> b (RAW on a), b -> c (RAW on b); a -> c (stream order) is implied.
    assert_eq!(
        pipeline.graph_edges(0),
        [(stage(0), stage(1)), (stage(1), stage(2))]
    );
}

#[test]
fn constant_step_tests_that_cannot_hold_are_errors() {
    let source = |test: &str| {
        format!(
            "pub pipeline P {{ streams {{ main }} params {{ f: &DeviceBuffer<f32>, s: &mut PinnedBuffer<f32> }} stage save on main {{ if {test} {{ copy f -> s; }} }} }}"
        )
    };
    crate::tests::assert_error(
        &source("step % 0 == 0"),
        "`step % 0` has no value: the step counter is divided by `k`; write a `k` of 1 or more (`step % 2 == 0` for every other step)",
        "0",
    );
    crate::tests::assert_error(
        &source("step % 4 == 4"),
        "`step % 4 == 4` never holds: a remainder of `% 4` is 0 to 3; write one of those",
        "4",
    );
    assert!(crate::tests::compile(&source("step % 4 == 3")).is_ok());
}

#[test]
fn a_param_named_step_cannot_meet_the_step_counter() {
    crate::tests::assert_error(
        "pub pipeline P { streams { main } params { step: u32, f: &DeviceBuffer<f32>, s: &mut PinnedBuffer<f32> } stage save on main { if step % 2 == 0 { copy f -> s; } } }",
        "`step` in `step % k == r` is the pipeline's step counter, but a param is named `step` too; rename the param (e.g. `step_size`) so that each name means one thing",
        "step",
    );
}

#[test]
fn a_device_loop_writes_the_element_its_condition_reads() {
    let never = "the loop tests `a > alpha`, but nothing in the loop's body writes `a`: the test gives the same answer every time, so the loop runs its body `max` times and fails with `Error::IterationLimit` (or never runs it); have a statement in the body write `a[0]` (the kernel that computes it, e.g. `launch k::residual(.., a)`), or test a buffer the body writes";
    assert_error(
        &with("stage s on s1 { while a > alpha max 5 { fill b = 0; } }"),
        never,
        "a",
    );
    assert_error(
        &with("stage s on s1 { do { fill b = 0; } while a > alpha max 5; }"),
        never,
        "a",
    );
    // A nested body counts; so does a range the compiler cannot evaluate.
    for body in [
        "if step % 2 == 0 { fill a = 0; }",
        "launch k::scale(n, alpha, c, a) grid 1 block 1;",
        "fill a[..1] = 0;",
        "fill a[n as usize..] = 0;",
    ] {
        lower_ok(&with(&format!(
            "stage s on s1 {{ while a > alpha max 5 {{ {body} }} }}"
        )));
    }
    assert_error(
        &with("stage s on s1 { while a > alpha max 5 { fill a[1..4] = 0; fill a[2..] = 0; } }"),
        "the loop tests `a > alpha`, but the loop's body writes only `a[1..4]` and `a[2..]`, not element 0, which the test reads: the test gives the same answer every time, so the loop runs its body `max` times and fails with `Error::IterationLimit` (or never runs it); have a statement in the body write `a[0]` (the kernel that computes it, e.g. `launch k::residual(.., a)`), or test a buffer the body writes",
        "a",
    );
    // An `if` runs its body once: nothing to converge.
    lower_ok(&with("stage s on s1 { if a > alpha { fill b = 0; } }"));
}

#[test]
fn a_scratch_buffer_written_then_read_inside_a_body_is_written_first() {
    let source = |body: &str| {
        format!(
            r#"pipeline P {{
            streams {{ s }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn scale(n: u32, alpha: f32, src: &[f32; unbounded], dst: &mut [f32; unbounded]);
            }}
            params {{ n: u32, r: &mut DeviceBuffer<f32>, x: &mut DeviceBuffer<f32> }}
            scratch {{ tmp: DeviceBuffer<f32> = 16, t: DeviceBuffer<f32> = 1 }}
            stage solve on s {{ {body} }}
        }}"#
        )
    };
    lower_ok(&source(
        "while r > 0.5 max 10 { launch k::scale(n, 1.0, x, tmp) grid 1 block 1; launch k::scale(n, 0.5, tmp, r) grid 1 block 1; }",
    ));
    // A scratch condition written in a `do ... while` body before the test.
    lower_ok(&source(
        "do { launch k::scale(n, 1.0, x, t) grid 1 block 1; } while t > 0.5 max 10;",
    ));
    let unwritten = |name: &str, stage: &str| {
        format!(
            "scratch buffer `{name}` is read in stage `{stage}` before anything writes it: its contents start undefined, and a later step finds what the last one left; write it first (`fill {name} = 0.0;`, or a kernel that writes it) in an earlier statement or in a stage `{stage}` runs after, or make it a param if it keeps state from step to step"
        )
    };
    // Read before the write in the body; written in one branch, read in the other; a
    // `while` condition read before the body that writes it.
    for body in [
        "while r > 0.5 max 10 { launch k::scale(n, 0.5, tmp, r) grid 1 block 1; launch k::scale(n, 1.0, x, tmp) grid 1 block 1; }",
        "if r > 0.5 { launch k::scale(n, 1.0, x, tmp) grid 1 block 1; } else { launch k::scale(n, 0.5, tmp, r) grid 1 block 1; }",
    ] {
        assert_error(&source(body), &unwritten("tmp", "solve"), "tmp");
    }
    assert_error(
        &source("while t > 0.5 max 10 { launch k::scale(n, 1.0, x, t) grid 1 block 1; }"),
        &unwritten("t", "solve"),
        "t",
    );
}

#[test]
fn a_scratch_buffer_a_loop_swaps_in_is_written_before_the_other_half_reads_it() {
    let source = |before: &str, body: &str, after: &str| {
        format!(
            r#"pipeline P {{
            streams {{ s }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn scale(n: u32, alpha: f32, src: &[f32; unbounded], dst: &mut [f32; unbounded]);
            }}
            params {{ n: u32, r: &mut DeviceBuffer<f32>, out: &mut DeviceBuffer<f32> }}
            scratch {{ t: DeviceBuffer<f32> = 1, u: DeviceBuffer<f32> = 1 }}
            stage solve on s {{
                {before}
                while r > 0.5 max 10 {{ {body} launch k::scale(n, 0.5, out, r) grid 1 block 1; swap(t, u); }}
                {after}
            }}
        }}"#
        )
    };
    let through = |read: &str, buffer: &str| {
        format!(
            "scratch buffer `{buffer}` is read here, in stage `solve`, through `{read}`: the loop's body swaps the two at its end, so every other iteration reads `{buffer}` where it names `{read}`, and nothing writes `{buffer}` before that; write it before the loop (`fill {buffer} = 0.0;`), or have the body write `{buffer}` (a ping-pong reads one buffer and writes the other)"
        )
    };
    // A ping-pong: `t` written before, the body reads one and writes the other.
    lower_ok(&source(
        "fill t = 1.0;",
        "launch k::scale(n, 1.0, t, u) grid 1 block 1;",
        "",
    ));
    // Both written before the loop.
    lower_ok(&source(
        "fill t = 1.0; fill u = 0.0;",
        "launch k::scale(n, 1.0, t, out) grid 1 block 1;",
        "",
    ));
    // Only `t` is ever written: the second iteration reads `u` through `t`.
    assert_error(
        &source(
            "fill t = 1.0;",
            "launch k::scale(n, 1.0, t, out) grid 1 block 1;",
            "",
        ),
        &through("t", "u"),
        "t",
    );
    // The same in a `do ... while`, and the read of `t` after it (an odd count copies `u`
    // into `t`) is not covered either.
    let do_while = source(
        "fill t = 1.0;",
        "launch k::scale(n, 1.0, t, out) grid 1 block 1;",
        "",
    )
    .replace("while r > 0.5 max 10 {", "do {")
    .replace("swap(t, u); }", "swap(t, u); } while r > 0.5 max 10;");
    assert_eq!(errors(&do_while), [through("t", "u")]);
    // After a `do ... while` ping-pong that reads `t` and writes `u`, both are written: `u`
    // by the first iteration, `t` by the copy an odd count makes or by the second iteration
    // (reading `u` after the loop was refused, as if only a body writing both names wrote it).
    let ping_pong = |after: &str| {
        source(
            "fill t = 1.0;",
            "launch k::scale(n, 1.0, t, u) grid 1 block 1;",
            after,
        )
        .replace("while r > 0.5 max 10 {", "do {")
        .replace("swap(t, u); }", "swap(t, u); } while r > 0.5 max 10;")
    };
    lower_ok(&ping_pong(
        "launch k::scale(n, 1.0, u, out) grid 1 block 1; launch k::scale(n, 1.0, t, out) grid 1 block 1;",
    ));
    // A body that writes only the first name leaves the second unwritten after one iteration
    // (and the copy an odd count makes puts it into the first).
    let first_only = source(
        "",
        "launch k::scale(n, 1.0, out, t) grid 1 block 1;",
        "launch k::scale(n, 1.0, u, out) grid 1 block 1;",
    )
    .replace("while r > 0.5 max 10 {", "do {")
    .replace("swap(t, u); }", "swap(t, u); } while r > 0.5 max 10;");
    let messages = errors(&first_only);
    assert!(
        messages.len() == 1
            && messages[0].starts_with("scratch buffer `u` is read in stage `solve`")
            && messages[0].contains("is made there only through the other name of a `swap`"),
        "{messages:?}"
    );
}

#[test]
fn max_and_step_rules_run_in_each_iteration_of_a_constant_for() {
    let looped = |bounds: &str, statement: &str| {
        with(&format!(
            "for i in {bounds} {{ stage s on s1 {{ {statement} }} }}"
        ))
    };
    assert_error(
        &looped("0..4", "while a > alpha max 3 - i as u32 { fill a = 0; }"),
        "`max 0` allows no iteration when `i = 3`, so the `while` could only fail: write the most iterations the loop may take, 1 or more (`max 10_000`)",
        "3 - i as u32",
    );
    assert_error(
        &looped("0..4", "if step % (i as u32) == 0 { fill b = 0; }"),
        "`step % 0` has no value when `i = 0`: the step counter is divided by `k`; write a `k` of 1 or more (`step % 2 == 0` for every other step)",
        "(i as u32)",
    );
    assert_error(
        &looped("1..4", "if step % 2 == i as u32 { fill b = 0; }"),
        "`step % 2 == 2` never holds when `i = 2`: a remainder of `% 2` is 0 to 1; write one of those",
        "i as u32",
    );
    // Every iteration's values hold; bounds over params are left to the step.
    lower_ok(&looped(
        "0..4",
        "while a > alpha max 4 - i as u32 { fill a = 0; } if step % (i as u32 + 1) == i as u32 { fill b = 0; }",
    ));
    lower_ok(&looped(
        "0..n as usize",
        "while a > alpha max 3 - i as u32 { fill a = 0; }",
    ));
    // Outside a loop the messages are as before.
    assert_error(
        &with("stage s on s1 { while a > alpha max 0 { fill a = 0; } }"),
        "`max 0` allows no iteration, so the `while` could only fail: write the most iterations the loop may take, 1 or more (`max 10_000`)",
        "0",
    );
}

#[test]
fn a_max_after_a_while_body_says_where_it_goes() {
    assert_error(
        &with("stage s on s1 { while a > alpha { fill a = 0; } max 5 }"),
        "`max` comes between a `while`'s test and its body: write `while a > alpha max N { ... }`",
        "max",
    );
}

#[test]
fn a_loop_variable_or_let_named_step_does_not_meet_the_step_counter() {
    assert_error(
        &with("for step in 0..4 { stage s on s1 { if step % 2 == 0 { fill b = 0; } } }"),
        "`step` in `step % k == r` is the pipeline's step counter, but the `for` loop's variable is named `step` too; rename it (e.g. `for i in ..`, `let round = ..`) so that each name means one thing",
        "step",
    );
    assert_error(
        &with(
            "for i in 0..4 { let step = i * 2; stage s on s1 { if step % 2 == 0 { fill b = 0; } } }",
        ),
        "`step` in `step % k == r` is the pipeline's step counter, but a `let` of the `for` loop is named `step` too; rename it (e.g. `for i in ..`, `let round = ..`) so that each name means one thing",
        "step",
    );
    // The counter beside a loop whose names are others.
    lower_ok(&with(
        "for i in 0..4 { stage s on s1 { if step % 2 == i as u32 % 2 { fill b = 0; } } }",
    ));
}

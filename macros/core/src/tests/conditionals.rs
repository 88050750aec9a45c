//! `if`/`else`, `switch` and `do ... while`: parsing, the rules on switch labels and loop
//! maximums (each message and the token it points at), and lowering (bodies in label order,
//! the switch value read first).

use super::*;
use crate::ast::{Control, Statement};
use crate::lower::{ControlCondition, Mode, StatementKind};

/// `with`, plus `mode: &mut DeviceBuffer<u32>` (buffer 11).
fn with_mode(items: &str) -> String {
    with(items).replace(
        "handle: &mut BlasHandle,",
        "handle: &mut BlasHandle, mode: &mut DeviceBuffer<u32>,",
    )
}

fn control_of<'p>(pipeline: &'p Pipeline<'static>) -> &'p crate::lower::Control<'static> {
    let StatementKind::Control(control) = &pipeline.stages[0].statements[0].kind else {
        panic!("not lowered as control");
    };
    control
}

#[test]
fn else_do_while_and_switch_parse() {
    let input = parse(&with_mode(
        "stage s on s1 {
            if a > alpha { fill b = 0; } else { fill b = 1; fill a = 0; }
            do { fill a = 0; } while a > alpha max 4;
            switch mode { 1 => { fill b = 1; }, 0 => {} }
            fill a = 0;
        }",
    ))
    .expect("parses");
    let stage = input.stages().next().expect("a stage");
    assert_eq!(stage.statements.len(), 4);
    let Statement::Control(branch) = &stage.statements[0] else {
        panic!("not a control statement");
    };
    let sizes: Vec<usize> = branch.bodies().iter().map(|b| b.len()).collect();
    assert_eq!(sizes, [1, 2]);
    let Statement::Control(looped) = &stage.statements[1] else {
        panic!("not a control statement");
    };
    assert!(matches!(**looped, Control::DoWhile { max: Some(_), .. }));
    let Statement::Control(switch) = &stage.statements[2] else {
        panic!("not a control statement");
    };
    let Control::Switch { cases, .. } = &**switch else {
        panic!("not a switch");
    };
    let labels: Vec<String> = cases.iter().map(|c| c.label.to_string()).collect();
    assert_eq!(labels, ["1", "0"]);
}

#[test]
fn else_if_is_a_syntax_error_that_says_what_to_write() {
    let error = parse(&with(
        "stage s on s1 { if a > alpha { fill b = 0; } else if b > alpha { fill b = 1; } }",
    ))
    .expect_err("else if");
    assert!(error.to_string().contains("nest the test"), "{error}");
}

#[test]
fn switch_labels_are_0_to_n_each_once() {
    assert_error(
        &with_mode("stage s on s1 { switch mode { 0 => {} 1 => {} 1 => { fill b = 0; } } }"),
        "duplicate case `1`: each label names one case",
        "1",
    );
    assert_error(
        &with_mode("stage s on s1 { switch mode { 0 => {} 2 => { fill b = 0; } } }"),
        "case `2` is out of range: a `switch` with 2 cases takes the labels 0 to 1, and a value \
         of 2 or more runs no case (as CUDA's SWITCH node does); add the cases in between, \
         empty ones as `1 => {}`",
        "2",
    );
    assert_error(
        &with_mode("stage s on s1 { switch mode {} }"),
        "a `switch` needs at least one case: `switch mode { 0 => { ... } }`",
        "switch",
    );
}

/// A `fill` of a constant past the last label, the last write before a `switch`, makes it
/// run no case at every step: it compiled. A value the compiler cannot see (a kernel or a
/// conditional write after the fill, a param, a loop over params that may not run) is left
/// alone.
#[test]
fn a_switch_value_filled_past_its_cases_is_an_error() {
    let cases =
        |body0: &str| format!("switch mode {{ 0 => {{ {body0} }} 1 => {{ fill b = 1; }} }}");
    assert_error(
        &with_mode(&format!(
            "stage s on s1 {{ fill mode = 2; {} }}",
            cases("fill a = 0;")
        )),
        "`fill mode = 2` in stage `s` sets `mode` to 2 for `switch mode` in stage `s`, whose cases are labelled 0 to 1: a value of 2 or more runs no case (as CUDA's SWITCH node does), so the switch would never run any of them; fill a case's label (0 to 1), or add cases up to `2 => { ... }`",
        "2",
    );
    assert_error(
        &with_mode(&format!(
            "stage f on s2 {{ fill mode[0..1] = 7u32; }} stage s on s1 {{ {} }}",
            cases("")
        )),
        "`fill mode[0..1] = 7u32` in stage `f` sets `mode` to 7 for `switch mode` in stage `s`, whose cases are labelled 0 to 1: a value of 2 or more runs no case (as CUDA's SWITCH node does), so the switch would never run any of them; fill a case's label (0 to 1), or add cases up to `7 => { ... }`",
        "7u32",
    );
    for items in [
        "stage s on s1 { fill mode = 1; SWITCH }",
        "stage s on s1 { fill mode = 5; launch k::touch(a) grid 1 block 1; fill mode[1..] = 9; SWITCH }",
        "stage s on s1 { fill mode = 5; call set_mode(mode) writes(mode); SWITCH }",
        "stage s on s1 { fill mode = 5; if a > alpha { fill mode = 0; } SWITCH }",
        "stage s on s1 { fill mode = n; SWITCH }",
        "for i in 0..n { stage f on s1 { fill mode = 5; } } stage s on s1 { SWITCH }",
        "stage s on s1 { SWITCH } stage f on s1 { fill mode = 5; }",
        // In a body: the statements before the switch there.
        "stage s on s1 { fill mode = 2; while a > alpha max 4 { fill mode = 1; SWITCH fill a = 0; } }",
        "stage s on s1 { while a > alpha max 4 { SWITCH fill mode = 2; fill a = 0; } }",
    ] {
        lower_ok(&with_mode(&items.replace("SWITCH", &cases(""))));
    }
    // A switch in a loop's body, after a fill there.
    assert_error(
        &with_mode(&format!(
            "stage s on s1 {{ while a > alpha max 4 {{ fill mode = 3; {} fill a = 0; }} }}",
            cases("")
        )),
        "`fill mode = 3` in stage `s` sets `mode` to 3 for `switch mode` in stage `s`, whose cases are labelled 0 to 1: a value of 2 or more runs no case (as CUDA's SWITCH node does), so the switch would never run any of them; fill a case's label (0 to 1), or add cases up to `3 => { ... }`",
        "3",
    );
}

#[test]
fn a_switch_reads_a_u32_device_buffer() {
    let messages = errors(&with_mode("stage s on s1 { switch a { 0 => {} } }"));
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0].contains("`DeviceBuffer<u32>`"), "{messages:?}");
}

#[test]
fn a_do_while_needs_a_maximum() {
    assert_error(
        &with("stage s on s1 { do { fill a = 0; } while a > alpha; }"),
        "a device `do ... while` needs a maximum iteration count, so that a loop that never \
         converges stops with an error instead of hanging the GPU: write `do { ... } while a > \
         alpha max 10_000;`",
        "while",
    );
}

#[test]
fn switch_cases_lower_in_label_order_after_the_value() {
    let pipeline = lower_ok(&with_mode(
        "stage s on s1 { switch mode { 1 => { fill b = 1; } 0 => { fill a = 0; } } }",
    ));
    let control = control_of(&pipeline);
    assert!(matches!(control.condition, ControlCondition::Value { .. }));
    let touched: Vec<_> = pipeline.stages[0]
        .accesses
        .iter()
        .map(|a| (a.buffer, a.mode))
        .collect();
    // mode (read), then case 0 (`a`), then case 1 (`b`).
    assert_eq!(
        touched,
        [
            (buffer(11), Mode::Read),
            (buffer(0), Mode::Write),
            (buffer(1), Mode::Write)
        ]
    );
}

#[test]
fn if_else_lowers_two_bodies() {
    let pipeline = lower_ok(&with(
        "stage s on s1 { if a > alpha { fill b = 0; } else { fill a = 1; fill b = 2; } }",
    ));
    let sizes: Vec<usize> = control_of(&pipeline).bodies.iter().map(Vec::len).collect();
    assert_eq!(sizes, [1, 2]);
}

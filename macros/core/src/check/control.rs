//! Rules on `while` and `if` statements: the condition reads what the device can decide on,
//! a loop has a maximum, and a body holds only what a CUDA conditional body may hold
//! (kernels, copies, memsets and nested `while`/`if`), so that the step can become a graph
//! whose loops never leave the GPU. The statements inside a body are checked like any other
//! (`statements.rs`, `accesses.rs` and `limits.rs` walk bodies too).

use super::accesses::value_expression;
use super::iterations::Evaluation;
use super::statements::{resolve, what};
use crate::ast::{self, Condition, Control, Statement};
use crate::ctxt::Ctxt;
use crate::scope::{BufferDecl, Memory, Scope};
use crate::symbol::PRIMITIVE_SCALARS;

/// The element types a device condition reads (the condition kernels' types).
const CONDITION_TYPES: &[&str] = &["f32", "f64", "u32"];

/// Runs the rules on every `while` and `if`, at any depth (the statements in their bodies get
/// the usual rules from `statements.rs`, `accesses.rs` and `limits.rs`).
pub fn check(cx: &Ctxt, scope: &Scope<'_>) {
    for (id, stage) in scope.stages.iter().enumerate() {
        // `max` and `step % k == r` are judged in each iteration of a `for` with constant
        // bounds, where the loop variable and the `let`s have values.
        let evaluations = Evaluation::of_stage(scope, id);
        let looped = scope.stage_loops[id].map(|l| scope.loops[l]);
        for statement in ast::flatten(&stage.statements) {
            if let Statement::Control(control) = statement {
                self::statement(cx, scope, control);
                expressions(cx, scope, control, &evaluations);
                if let Some(Condition::Step(step)) = control.test() {
                    step_not_a_loop_name(cx, step, looped);
                }
            }
        }
    }
}

/// The rules on one `while`, `do ... while`, `if` or `switch`.
fn statement(cx: &Ctxt, scope: &Scope<'_>, control: &Control) {
    condition(cx, scope, control);
    super::switch::check(cx, scope, control);
    maximum(cx, control);
    loop_swaps(cx, scope, control);
    for body in control.bodies() {
        for statement in body {
            body_statement(cx, control, statement);
        }
    }
}

/// A device condition reads the first element of a `DeviceBuffer` of `f32`, `f64` or `u32`
/// (what the condition kernels compare); `step` changes only between steps, so only an `if`
/// may test it.
fn condition(cx: &Ctxt, scope: &Scope<'_>, control: &Control) {
    let Some(test) = control.test() else {
        return;
    };
    match test {
        Condition::Device(device) => {
            let name = &device.value;
            let role = "a condition reads a `DeviceBuffer` on the device; compare a scalar on the \
                        host, before the step";
            let Some(buffer) = resolve(cx, scope, name, role) else {
                return;
            };
            if buffer.array {
                let form = match control {
                    Control::If { .. } => "an `if`",
                    _ => "a loop",
                };
                cx.error_spanned_by(name, array_tested(name, form));
                return;
            }
            if buffer.memory != Memory::Device {
                // A kernel-set condition is tested by its bare name, not compared.
                let instead = if buffer.memory == Memory::Condition {
                    let bare = match control {
                        Control::While { .. } => format!("`while {name} max N {{ ... }}`"),
                        Control::DoWhile { .. } => format!("`do {{ ... }} while {name} max N;`"),
                        _ => format!("`if {name} {{ ... }}`, or `switch {name}` for a value"),
                    };
                    format!("; test a `Condition` by its bare name: {bare}")
                } else {
                    String::new()
                };
                cx.error_spanned_by(
                    name,
                    format!(
                        "{}; {} condition reads the first element of a `DeviceBuffer<f32>`, \
                         `<f64>` or `<u32>` on the device (a kernel writes it, {} reads \
                         it){instead}",
                        what(buffer),
                        match control {
                            Control::If { .. } => "an `if`",
                            _ => "a loop's",
                        },
                        match control {
                            Control::If { .. } => "the `if`",
                            _ => "the loop",
                        }
                    ),
                );
                return;
            }
            let elem = buffer.elem.map(ast::type_string);
            if let Some(elem) = elem.as_deref()
                && PRIMITIVE_SCALARS.contains(&elem)
                && !CONDITION_TYPES.contains(&elem)
            {
                cx.error_spanned_by(
                    name,
                    format!(
                        "`{name}` holds `{elem}`; a device condition compares an `f32`, `f64` or \
                         `u32` (a residual, or a flag a kernel sets): declare `{name}` with one of \
                         those, or have a kernel write such a value"
                    ),
                );
            }
        }
        Condition::Kernel(name) => {
            let role = "a bare name tests a `Condition` that kernels set (`scratch { go: \
                        Condition }`, passed to a kernel parameter declared `Condition`)";
            let Some(buffer) = resolve(cx, scope, name, role) else {
                return;
            };
            match buffer.memory {
                Memory::Condition => {}
                Memory::Device => cx.error_spanned_by(
                    name,
                    format!(
                        "{}; a bare name tests a `Condition` that kernels set; compare the \
                         buffer's first element instead: `{} {name} != 0 ...`",
                        what(buffer),
                        control.word()
                    ),
                ),
                _ => cx.error_spanned_by(
                    name,
                    format!(
                        "{}; a bare name tests a `Condition` that kernels set: declare \
                         `scratch {{ {name}: Condition }}` and pass it to the kernel that \
                         decides",
                        what(buffer)
                    ),
                ),
            }
        }
        Condition::Step(step) => {
            if control.is_loop() {
                cx.error_at(
                    step.step,
                    "`step` changes only between steps, so a `while` on it would never end; \
                     write `if step % k == 0 { ... }` to run a body on every k-th step",
                );
            }
        }
    }
}

/// `swap(a, b);` at the end of a loop's body: two whole `DeviceBuffer`s of one element type
/// that the pipeline may write (the other half of the unrolled body writes through each name
/// what the first writes through the other), each in one swap of the loop, not the buffer the
/// condition reads (the library's condition kernel reads one fixed buffer), and named whole in
/// the body (its subscripted references are resolved once per step, for one arrangement).
/// The condition is a comparison: a kernel-set one would need a handle per half.
fn loop_swaps(cx: &Ctxt, scope: &Scope<'_>, control: &Control) {
    let swaps = control.swaps();
    let Some(first) = swaps.first() else {
        return;
    };
    if let Some(Condition::Kernel(name)) = control.test() {
        let comparison = match control {
            Control::DoWhile { .. } => "`do { ... } while residual > tol max N;`",
            _ => "`while residual > tol max N`",
        };
        cx.error_at(
            first.keyword.span,
            format!(
                "a loop whose body swaps buffers is unrolled by two, each half tested by the \
                 library's condition kernel, so it tests a comparison ({comparison}); `{name}` \
                 is set by a kernel, which can set one handle only: write the value to a \
                 `DeviceBuffer` and compare it"
            ),
        );
    }
    let tested = match control.test() {
        Some(Condition::Device(device)) => Some(&device.value),
        _ => None,
    };
    let mut seen: Vec<&syn::Ident> = Vec::new();
    let body: Vec<&Statement> = control
        .bodies()
        .into_iter()
        .flat_map(|body| ast::flatten(body))
        .collect();
    for swap in swaps {
        if swap.a == swap.b {
            let name = &swap.b;
            cx.error_spanned_by(
                name,
                format!(
                    "`swap({name}, {name})` exchanges `{name}` with itself, which changes \
                     nothing; name the buffer it alternates with: `swap({name}, next)`"
                ),
            );
            continue;
        }
        let mut elems = Vec::new();
        // One error per swap for what its buffers are: `swap(h, g)` of two pinned buffers is
        // one mistake.
        let mut refused = false;
        for name in [&swap.a, &swap.b] {
            let role = "`swap` in a loop's body exchanges two `DeviceBuffer`s";
            let Some(buffer) = resolve(cx, scope, name, role) else {
                continue;
            };
            if buffer.memory != Memory::Device || buffer.array {
                if !refused {
                    cx.error_spanned_by(
                        name,
                        format!(
                            "{}; `swap` in a loop's body exchanges two `DeviceBuffer`s (a \
                             whole buffer each){}",
                            what(buffer),
                            loop_swap_instead(buffer)
                        ),
                    );
                }
                refused = true;
                continue;
            }
            super::statements::writable(
                cx,
                buffer,
                name,
                "the loop's body swaps it, so each half writes through it what the other \
                 writes through the other buffer",
            );
            if seen.contains(&name) {
                cx.error_spanned_by(
                    name,
                    format!("`{name}` is swapped twice at the end of this body; each buffer takes part in one `swap`"),
                );
            }
            seen.push(name);
            if tested == Some(name) {
                cx.error_spanned_by(
                    name,
                    format!(
                        "the loop tests `{name}`, which its condition kernel reads at one address; \
                         swap other buffers, and have a kernel write the value the loop tests"
                    ),
                );
            }
            for statement in &body {
                for reference in scope.statement_refs(statement) {
                    if reference.name == name && reference.is_subscripted() {
                        cx.error_spanned_by(
                            reference.name,
                            format!(
                                "`{name}` is swapped at the end of the loop's body, so the body \
                                 names it whole; pass the range through a kernel parameter \
                                 instead (name `{name}` whole and give the kernel the range's \
                                 bounds as scalars; a `fill` or `copy` of part of it becomes \
                                 such a kernel)"
                            ),
                        );
                    }
                }
            }
            elems.push(buffer.elem.map(ast::type_string));
        }
        if let [Some(a), Some(b)] = elems.as_slice()
            && a != b
        {
            cx.error_spanned_by(
                &swap.b,
                format!(
                    "`{}` holds `{a}` and `{}` holds `{b}`; `swap` exchanges buffers of one \
                     element type",
                    swap.a, swap.b
                ),
            );
        }
    }
}

/// What to write instead of a loop `swap` of `buffer`, which is not a whole `DeviceBuffer`.
fn loop_swap_instead(buffer: &BufferDecl<'_>) -> &'static str {
    match buffer.memory {
        // The body copies device results out: alternate what it copies from.
        Memory::Pinned => {
            ": swap the `DeviceBuffer`s the body computes in, and copy the one that holds \
             the result into the pinned buffer after the loop"
        }
        _ => "",
    }
}

/// A device loop that never converges must end, with an error rather than a hang: `while`
/// and `do ... while` need `max N`.
fn maximum(cx: &Ctxt, control: &Control) {
    match control {
        Control::While {
            keyword,
            condition,
            max: None,
            ..
        } => {
            let written = condition.written();
            cx.error_at(
                keyword.span,
                format!(
                    "a device `while` needs a maximum iteration count, so that a loop that never \
                     converges stops with an error instead of hanging the GPU: write \
                     `while {written} max 10_000 {{ ... }}`"
                ),
            );
        }
        Control::DoWhile {
            while_token,
            condition,
            max: None,
            ..
        } => {
            let written = condition.written();
            cx.error_at(
                while_token.span,
                format!(
                    "a device `do ... while` needs a maximum iteration count, so that a loop that \
                     never converges stops with an error instead of hanging the GPU: write \
                     `do {{ ... }} while {written} max 10_000;`"
                ),
            );
        }
        _ => {}
    }
}

/// A CUDA conditional body holds kernels, copies, memsets and nested conditionals only: no
/// host nodes, no event nodes, no stream memory operations, nothing captured from a library.
fn body_statement(cx: &Ctxt, control: &Control, statement: &Statement) {
    let word = control.word();
    let place = match control {
        Control::While { .. } | Control::DoWhile { .. } => "the loop",
        Control::If { .. } => "the `if`",
        Control::Switch { .. } => "the `switch`",
    };
    let (span, what, instead) = match statement {
        Statement::Launch(_)
        | Statement::Copy(_)
        | Statement::Fill(_)
        | Statement::Control(_)
        | Statement::NotCapturable(_) => return,
        Statement::Host(host) => (
            host.keyword.span,
            "a host closure",
            format!("run it before or after {place}, or do the work in a kernel"),
        ),
        Statement::Call(call) => (
            call.keyword.span,
            "a `call` (its work is captured from a stream and may bring event or host nodes)",
            format!("call it before or after {place}"),
        ),
        Statement::Wait(wait) => (
            wait.keyword.span,
            "a `wait` on a flag (a stream memory operation)",
            format!("wait before {place}"),
        ),
        Statement::Write(write) => (
            write.keyword.span,
            "a `write` of a flag (a stream memory operation)",
            format!("write it before or after {place}, or `fill` a device buffer inside it"),
        ),
        Statement::Comm(comm) => (
            comm.keyword,
            "a communication statement (NCCL work every rank must enqueue the same number of \
             times, which a conditional decided on the device cannot promise)",
            format!("communicate before or after {place}, or decide on the host"),
        ),
    };
    cx.error_at(
        span,
        format!(
            "{what} cannot run inside a device `{word}` body: a body runs on the GPU as a CUDA \
             conditional graph node, which holds only kernels, copies, fills and nested \
             `while`, `do ... while`, `if` and `switch`; {instead}"
        ),
    );
}

/// The error for a test that names an array of buffers: a conditional node reads one word.
pub(super) fn array_tested(name: &syn::Ident, form: &str) -> String {
    format!(
        "`{name}` is an array of buffers, and {form} reads the first element of one buffer: \
         copy the element it should test into a buffer of its own (`copy {name}[i] -> \
         selected;`) and test that"
    )
}

/// The host expressions of a `while` or `if`: the threshold, `max`, and `step`'s modulus and
/// remainder are computed when the step is enqueued (or built), so they may not read a buffer.
fn expressions(cx: &Ctxt, scope: &Scope<'_>, control: &Control, evaluations: &[Evaluation<'_>]) {
    let word = control.word();
    match control.test() {
        Some(Condition::Device(device)) => value_expression(cx, scope, &device.threshold, word),
        Some(Condition::Step(step)) => {
            value_expression(cx, scope, &step.modulus, word);
            value_expression(cx, scope, &step.remainder, word);
            step_constants(cx, step, evaluations);
            step_not_shadowed(cx, scope, step);
        }
        Some(Condition::Kernel(_)) | None => {}
    }
    if let Some((_, max)) = control.max() {
        value_expression(cx, scope, max, "while ... max");
        max_constant(cx, control, max, evaluations);
    }
}

/// Rule: a constant `max` is at least 1: a loop allowed no iteration could only fail (it was
/// refused only when the step ran). Inside a `for` with constant bounds it is judged in each
/// iteration (`max 4 - i`). A `max` computed from params is checked when the step runs.
fn max_constant(cx: &Ctxt, control: &Control, max: &syn::Expr, evaluations: &[Evaluation<'_>]) {
    let failing = evaluations.iter().find_map(|evaluation| {
        let n = evaluation.value(max)?;
        (n < 1).then(|| (n, evaluation.when([max])))
    });
    if let Some((n, when)) = failing {
        let word = control.word();
        cx.error_spanned_by(
            max,
            format!(
                "`max {n}` allows no iteration{when}, so the `{word}` could only fail: write the \
                 most iterations the loop may take, 1 or more (`max 10_000`)"
            ),
        );
    }
}

/// Rule: a constant `k` in `step % k == r` is at least 1, and a constant `r` is below it, so
/// that the test can hold: `step % 0` has no value (it was refused only when the step ran), and
/// `step % 4 == 4` never holds.
fn step_constants(cx: &Ctxt, step: &ast::StepCondition, evaluations: &[Evaluation<'_>]) {
    for evaluation in evaluations {
        let modulus = evaluation.value(&step.modulus);
        if let Some(k) = modulus
            && k < 1
        {
            let when = evaluation.when([&step.modulus]);
            cx.error_spanned_by(
                &step.modulus,
                format!(
                    "`step % {k}` has no value{when}: the step counter is divided by `k`; write a `k` of 1 or more (`step % 2 == 0` for every other step)"
                ),
            );
            return;
        }
        if let (Some(k), Some(r)) = (modulus, evaluation.value(&step.remainder))
            && !(0..k).contains(&r)
        {
            let when = evaluation.when([&step.modulus, &step.remainder]);
            cx.error_spanned_by(
                &step.remainder,
                format!(
                    "`step % {k} == {r}` never holds{when}: a remainder of `% {k}` is 0 to {}; write one of those",
                    k - 1
                ),
            );
            return;
        }
    }
}

/// Rule: in `step % k == r`, `step` is the step counter; a `for` variable or `let` named `step`
/// around it would silently lose to it (`for step in 0..4 { .. if step % 2 == 0 .. }` tested
/// the counter, not the iteration), as a param would: the error asks to rename it.
fn step_not_a_loop_name(cx: &Ctxt, step: &ast::StepCondition, looped: Option<&ast::ForLoop>) {
    let Some(looped) = looped else {
        return;
    };
    let what = if looped.var == "step" {
        "the `for` loop's variable"
    } else if looped.lets.iter().any(|binding| binding.name == "step") {
        "a `let` of the `for` loop"
    } else {
        return;
    };
    cx.error_at(
        step.step,
        format!(
            "`step` in `step % k == r` is the pipeline's step counter, but {what} is named `step` \
             too; rename it (e.g. `for i in ..`, `let round = ..`) so that each name means one \
             thing"
        ),
    );
}

/// Rule: in `step % k == r`, `step` is the step counter; a param named `step` would silently
/// lose to it (issue 23, class 5), so the two cannot meet: the error asks to rename the param.
fn step_not_shadowed(cx: &Ctxt, scope: &Scope<'_>, step: &ast::StepCondition) {
    let word = proc_macro2::Ident::new("step", step.step);
    if scope.value(&word).is_some() {
        cx.error_at(
            step.step,
            "`step` in `step % k == r` is the pipeline's step counter, but a param is named `step` too; rename the param (e.g. `step_size`) so that each name means one thing",
        );
    }
}

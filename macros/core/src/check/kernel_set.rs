//! Rules on conditions that kernels set (`scratch { go: Condition }`, a kernel parameter
//! declared `Condition`, and `while go`, `do { .. } while go`, `if go`, `switch go`).
//!
//! A `Condition` becomes the handle of one CUDA conditional node, and CUDA lets a kernel set a
//! handle only from the graph (or body) that holds its node, or from the node's own body. So
//! the rules say where the kernels that set it may run, in the user's words:
//!
//! - one `while`, `do ... while`, `if` or `switch` tests it (a handle belongs to one node);
//! - a `while`, `if` or `switch` is preceded by exactly one launch that sets it, in the same
//!   stage and the same body (its first test, or its value); a `do ... while` by none (its
//!   body runs first);
//! - a loop's body sets it exactly once at its top level (each later test; the setter also
//!   counts the iterations against `max`, so two would count one iteration twice, and one
//!   inside a nested `if` might not run at all);
//! - nothing else sets it: not a launch after the conditional, not one in another stage or
//!   another body, and not one inside an `if` or `switch` it decides.

use std::collections::HashMap;

use syn::Ident;

use crate::ast::{self, Control, KernelParamType, Statement, bare_ident};
use crate::ctxt::Ctxt;
use crate::scope::{Memory, Scope};

/// Where a launch sets a condition: its list and index there.
struct Setter<'a> {
    arg: &'a Ident,
    list: usize,
    index: usize,
}

/// A conditional that tests a condition: its list, index, the lists of its bodies and the
/// name as written there.
struct Reader<'a> {
    control: &'a Control,
    name: &'a Ident,
    list: usize,
    index: usize,
    bodies: Vec<usize>,
}

/// The setters and readers of each condition, by its name and the kind of step that holds
/// them.
#[derive(Default)]
struct Found<'a> {
    setters: HashMap<(String, usize), Vec<Setter<'a>>>,
    readers: HashMap<(String, usize), Vec<Reader<'a>>>,
    lists: usize,
    /// The kind of step being walked.
    kind: usize,
}

/// Runs the rules on every `Condition` of the pipeline, in each kind of step apart: each kind
/// is built as a graph of its own, with a handle of its own for every `Condition` it uses,
/// so `step a { .. if go { .. } } step b { .. while go max 9 { .. } }` is two conditionals of
/// two graphs, not two of one handle.
pub fn check(cx: &Ctxt, scope: &Scope<'_>) {
    let mut found = Found::default();
    for (id, stage) in scope.stages.iter().enumerate() {
        found.kind = scope.stage_kinds.get(id).copied().unwrap_or(0);
        walk(scope, &stage.statements, &mut found);
    }
    for buffer in &scope.buffers {
        if buffer.memory != Memory::Condition || buffer.problem.is_some() {
            continue;
        }
        for kind in 0..scope.kinds.len().max(1) {
            let key = (buffer.name.to_string(), kind);
            let setters = found.setters.remove(&key).unwrap_or_default();
            let readers = found.readers.remove(&key).unwrap_or_default();
            one_condition(cx, buffer.name, &setters, &readers);
        }
    }
}

/// The name of the `Condition` a conditional tests, if it tests one.
fn tested<'a>(scope: &Scope<'_>, control: &'a Control) -> Option<&'a Ident> {
    let name = match control {
        Control::Switch { value, .. } => value,
        _ => match control.test()? {
            ast::Condition::Kernel(name) => name,
            // `go == 1`: refused on the comparison already (test it bare); taken as the test
            // here, so its setter is not also reported as set for nothing.
            ast::Condition::Device(device) => &device.value,
            ast::Condition::Step(_) => return None,
        },
    };
    let buffer = &scope.buffers[scope.buffer(name)?];
    (buffer.memory == Memory::Condition).then_some(name)
}

/// Records the setters and readers of one statement list and the lists inside it.
fn walk<'a>(scope: &Scope<'_>, statements: &'a [Statement], found: &mut Found<'a>) -> usize {
    let list = found.lists;
    found.lists += 1;
    for (index, statement) in statements.iter().enumerate() {
        match statement {
            Statement::Launch(launch) => {
                for arg in condition_args(scope, launch) {
                    found
                        .setters
                        .entry((arg.to_string(), found.kind))
                        .or_default()
                        .push(Setter { arg, list, index });
                }
            }
            Statement::Control(control) => {
                // Recorded before the tests inside it, so readers stay in source order (a
                // second test of one name is the one reported).
                let reader = tested(scope, control).map(|name| {
                    let key = (name.to_string(), found.kind);
                    let readers = found.readers.entry(key.clone()).or_default();
                    readers.push(Reader {
                        control,
                        name,
                        list,
                        index,
                        bodies: Vec::new(),
                    });
                    (key, readers.len() - 1)
                });
                let bodies = control
                    .bodies()
                    .into_iter()
                    .map(|body| walk(scope, body, found))
                    .collect();
                if let Some((key, at)) = reader
                    && let Some(reader) = found.readers.get_mut(&key).and_then(|r| r.get_mut(at))
                {
                    reader.bodies = bodies;
                }
            }
            _ => {}
        }
    }
    list
}

/// The arguments a launch passes for parameters declared `Condition` (bare names).
fn condition_args<'a>(scope: &Scope<'_>, launch: &'a ast::Launch) -> Vec<&'a Ident> {
    let Some((module, kernel)) = launch.target() else {
        return Vec::new();
    };
    let Some(kernel) = scope
        .module(module)
        .and_then(|m| scope.kernel(m, kernel))
        .map(|k| scope.kernels[k].decl)
    else {
        return Vec::new();
    };
    kernel
        .params
        .iter()
        .zip(&launch.args)
        .filter(|(param, _)| matches!(param.kind(), KernelParamType::Condition))
        .filter_map(|(_, arg)| bare_ident(arg))
        .collect()
}

/// The rules on one condition `name`, set by `setters` and tested by `readers`.
fn one_condition(cx: &Ctxt, name: &Ident, setters: &[Setter<'_>], readers: &[Reader<'_>]) {
    let Some((reader, others)) = readers.split_first() else {
        for setter in setters {
            cx.error_spanned_by(
                setter.arg,
                format!(
                    "`{name}` is set here but no `while`, `do ... while`, `if` or `switch` tests \
                     it, so the value goes nowhere; test it after this launch (`if {name} {{ ... \
                     }}`, `while {name} max 100 {{ ... }}`) or launch a kernel that sets no \
                     condition"
                ),
            );
        }
        return;
    };
    for other in others {
        cx.error_spanned_by(
            other.name,
            format!(
                "`{name}` is tested by another `{}` already, and a `Condition` decides one \
                 conditional; declare one per conditional (`scratch {{ {name}: Condition, \
                 {name}2: Condition }}`)",
                reader.control.word()
            ),
        );
    }
    if !others.is_empty() {
        // Where each setter belongs depends on which conditional keeps the name: one mistake,
        // one error, until there is one conditional per `Condition`.
        return;
    }
    let word = reader.control.word();
    let is_loop = reader.control.is_loop();
    let do_while = matches!(reader.control, Control::DoWhile { .. });
    let mut before = 0;
    let mut inside = 0;
    // Setters reported as out of place: that error says where the launch belongs, so the
    // conditional is not reported again for missing it (one mistake, one error).
    let mut misplaced = 0;
    for setter in setters {
        let is_before = setter.list == reader.list && setter.index < reader.index;
        let is_inside = reader.bodies.contains(&setter.list);
        if is_before && do_while {
            cx.error_spanned_by(
                setter.arg,
                format!(
                    "a `do ... while` runs its body before its first test, so setting `{name}` \
                     before it has no effect; set it inside the body, once"
                ),
            );
        } else if is_before {
            before += 1;
            if before > 1 {
                cx.error_spanned_by(
                    setter.arg,
                    format!(
                        "`{name}` is set twice before the `{word}` tests it; set it once, by the \
                         last launch before the `{word}`"
                    ),
                );
            }
        } else if is_inside && is_loop {
            inside += 1;
            if inside > 1 {
                cx.error_spanned_by(
                    setter.arg,
                    format!(
                        "`{name}` is set twice in the loop's body; set it once per iteration (the \
                         launch that sets it also counts the iteration against `max`)"
                    ),
                );
            }
        } else if is_inside {
            cx.error_spanned_by(
                setter.arg,
                format!(
                    "setting `{name}` inside the `{word}` it decides has no effect on it (the \
                     `{word}` has decided by then); set it before the `{word}`"
                ),
            );
        } else {
            misplaced += 1;
            cx.error_spanned_by(
                setter.arg,
                format!(
                    "`{name}` is set outside the `{word}` that tests it: a kernel sets a \
                     condition by the last launch before its `{word}`, in the same stage and \
                     body{}",
                    if is_loop {
                        ", or at the top level of the loop's body"
                    } else {
                        ""
                    }
                ),
            );
        }
    }
    if before == 0 && !do_while && misplaced == 0 {
        cx.error_spanned_by(
            reader.name,
            match reader.control {
                Control::While { .. } => format!(
                    "nothing sets `{name}` before this `while` first tests it; launch the kernel \
                     that sets it just before the loop, in the same stage, or write `do {{ ... \
                     }} while {name} max N;`, whose body runs before its first test"
                ),
                _ => format!(
                    "nothing sets `{name}` before this `{word}` decides on it; launch a kernel \
                     that sets it (a parameter declared `Condition`) just before the `{word}`, \
                     in the same stage"
                ),
            },
        );
    }
    if is_loop && inside == 0 && misplaced == 0 {
        cx.error_spanned_by(
            reader.name,
            format!(
                "nothing in the loop's body sets `{name}`, so its test never changes; launch the \
                 kernel that sets it in the body, at its top level"
            ),
        );
    }
}

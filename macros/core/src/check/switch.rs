//! Rules on `switch`: it reads the first element of a `DeviceBuffer<u32>` (the value a CUDA
//! SWITCH node takes), and its case labels are the integers 0 to N - 1 for N cases, each
//! once, so that body `n` is the case labelled `n` and a value of N or more runs no body, as
//! CUDA's SWITCH node does.

use std::collections::HashMap;

use super::statements::{resolve, what};
use crate::ast::{self, Control};
use crate::ctxt::Ctxt;
use crate::scope::{Memory, Scope};

/// The rules on one `switch` (nothing for the other forms).
pub fn check(cx: &Ctxt, scope: &Scope<'_>, control: &Control) {
    let Control::Switch {
        keyword,
        value,
        cases,
        ..
    } = control
    else {
        return;
    };
    selector(cx, scope, value);
    if cases.is_empty() {
        cx.error_at(
            keyword.span,
            "a `switch` needs at least one case: `switch mode { 0 => { ... } }`",
        );
        return;
    }
    labels(cx, cases);
}

/// The value is the first element of a `DeviceBuffer<u32>`.
fn selector(cx: &Ctxt, scope: &Scope<'_>, name: &syn::Ident) {
    let role = "a `switch` reads a `DeviceBuffer<u32>` on the device; decide on the host, \
                before the step";
    let Some(buffer) = resolve(cx, scope, name, role) else {
        return;
    };
    if buffer.memory == Memory::Condition {
        // A kernel sets the case number itself.
        return;
    }
    if buffer.array {
        cx.error_spanned_by(name, super::control::array_tested(name, "a `switch`"));
        return;
    }
    let elem = buffer.elem.map(ast::type_string);
    if buffer.memory != Memory::Device || elem.as_deref().is_some_and(|e| e != "u32") {
        cx.error_spanned_by(
            name,
            format!(
                "{}; a `switch` reads the first element of a `DeviceBuffer<u32>` on the device \
                 (a kernel writes the case number, the switch runs that case)",
                what(buffer)
            ),
        );
    }
}

/// Labels are `0..N` for `N` cases, each once: a duplicate or one out of that range is an
/// error on the label, saying which labels the switch takes.
fn labels(cx: &Ctxt, cases: &[ast::Case]) {
    let count = cases.len();
    let mut seen: HashMap<u32, &syn::LitInt> = HashMap::new();
    for case in cases {
        let Ok(label) = case.label.base10_parse::<u32>() else {
            cx.error_spanned_by(
                &case.label,
                "a case label is a `u32` integer literal, counting from 0",
            );
            continue;
        };
        if label as usize >= count {
            cx.error_spanned_by(
                &case.label,
                format!(
                    "case `{label}` is out of range: a `switch` with {count} case{s} takes the \
                     labels 0 to {last}, and a value of {count} or more runs no case (as CUDA's \
                     SWITCH node does); add the cases in between, empty ones as `1 => {{}}`",
                    s = if count == 1 { "" } else { "s" },
                    last = count - 1,
                ),
            );
        } else if seen.insert(label, &case.label).is_some() {
            cx.error_spanned_by(
                &case.label,
                format!("duplicate case `{label}`: each label names one case"),
            );
        }
    }
}

//! Every appearance of a buffer in a statement is accounted for: either it is an access the
//! macro orders (a launch's buffer argument, a copy, a fill, a flag, a `call`'s declared
//! `reads(...)`/`writes(...)`), or it is rejected with a message that says how to declare it.
//! An access the macro cannot see is one it cannot order, so it would race.
//!
//! The one use allowed anywhere is a buffer's length (`x.len()`, `x.is_empty()`): host-side
//! metadata that no stage changes.

use std::collections::HashMap;

use syn::{Expr, Ident};

use crate::ast::{
    self, KernelParamType, Mention, Statement, Use, bare_ident, mentions, ungroup_expr,
};
use crate::ctxt::Ctxt;
use crate::scope::{Scope, Value};

/// Runs every access rule over every statement.
pub fn check(cx: &Ctxt, scope: &Scope<'_>) {
    for stage in &scope.stages {
        for statement in ast::flatten(&stage.statements) {
            match statement {
                Statement::Launch(launch) => launch_expressions(cx, scope, launch),
                Statement::Fill(fill) => value_expression(cx, scope, &fill.value, "fill"),
                Statement::Wait(wait) => value_expression(cx, scope, &wait.value, "wait"),
                Statement::Write(write) => value_expression(cx, scope, &write.value, "write"),
                Statement::Host(host) => host_closure(cx, scope, host),
                Statement::Call(call) => call_arguments(cx, scope, call),
                // `control.rs` checks the expressions of `while`/`if`; `collective` judges
                // communication.
                Statement::Comm(_)
                | Statement::Copy(_)
                | Statement::NotCapturable(_)
                | Statement::Control(_) => {}
            }
        }
    }
}

/// The buffers among `mentions`, with what each mention does. The communicator is not one
/// here: its rank and size are host-side values no stage changes.
pub(super) fn buffers<'m>(scope: &Scope<'_>, mentions: &'m [Mention]) -> Vec<&'m Mention> {
    mentions
        .iter()
        .filter(|m| match scope.value(&m.ident) {
            Some(Value::Buffer(id)) => !scope.buffers[id].is_communicator(),
            _ => false,
        })
        .collect()
}

/// A launch reaches buffers only through its kernel's slice parameters. Its scalar arguments
/// and its `grid`, `block` and `shared` are computed on the host when the step is enqueued:
/// a buffer there (its device pointer, a flag's value) is an access the macro cannot order.
fn launch_expressions(cx: &Ctxt, scope: &Scope<'_>, launch: &ast::Launch) {
    let params = launch
        .target()
        .and_then(|(module, kernel)| scope.kernel(scope.module(module)?, kernel))
        .map(|id| scope.kernels[id].decl);
    for (index, arg) in launch.args.iter().enumerate() {
        let param = params.and_then(|kernel| Some((kernel, kernel.params.get(index)?)));
        let scalar = match param {
            Some((_, param)) => matches!(param.kind(), KernelParamType::Scalar(_)),
            None => true,
        };
        // A bare name is the argument itself, judged against the parameter in `statements`.
        if !scalar || bare_ident(arg).is_some() {
            continue;
        }
        for mention in buffers(scope, &mentions(arg)) {
            if mention.use_ == Use::Length {
                continue;
            }
            let name = &mention.ident;
            let target = match param {
                Some((kernel, param)) => format!(
                    "the argument for `{}: {}` of `{}`",
                    param.name,
                    ast::type_string(&param.ty),
                    kernel.name
                ),
                None => "a scalar argument".to_owned(),
            };
            cx.error_spanned_by(
                name,
                format!(
                    "`{name}` is a buffer, used in {target}: a kernel reaches a buffer only through a `&[T]` or `&mut [T]` parameter, which the macro orders against the other stages; declare such a parameter and pass `{name}` for it (its length is `{name}.len()`)"
                ),
            );
        }
    }
    for (option, word) in [
        (&launch.grid, "grid"),
        (&launch.block, "block"),
        (&launch.shared, "shared"),
    ] {
        let Some(option) = option else { continue };
        for mention in buffers(scope, &mentions(&option.value)) {
            if mention.use_ == Use::Length {
                continue;
            }
            let name = &mention.ident;
            cx.error_spanned_by(
                name,
                format!(
                    "`{name}` is a buffer, used in `{word}`: launch dimensions are computed on the host when the step is enqueued, before the stages that write `{name}` have run; use a scalar param, or `{name}.len()` for its length"
                ),
            );
        }
    }
}

/// The value of a `fill`, `wait` or `write` is computed on the host when the step is
/// enqueued, before the stages that write any buffer it reads have run.
pub(super) fn value_expression(cx: &Ctxt, scope: &Scope<'_>, value: &Expr, keyword: &str) {
    for mention in buffers(scope, &mentions(value)) {
        if mention.use_ == Use::Length {
            continue;
        }
        let name = &mention.ident;
        cx.error_spanned_by(
            name,
            format!(
                "`{name}` is a buffer, used in the value of `{keyword}`: the value is computed on the host when the step is enqueued, before the stages that write `{name}` have run; use a scalar param, or a kernel that reads `{name}`"
            ),
        );
    }
}

/// A host closure runs at every run and every replay of the captured graph, after the
/// borrows of the step's params are checked, so it cannot borrow a buffer. The buffers it
/// declares order it against the stages; it reaches their data through something it owns.
fn host_closure(cx: &Ctxt, scope: &Scope<'_>, host: &ast::Host) {
    let body = Expr::Closure(host.closure.clone());
    let mut seen: Vec<String> = Vec::new();
    for mention in buffers(scope, &mentions(&body)) {
        let name = &mention.ident;
        if seen.contains(&name.to_string()) {
            continue;
        }
        seen.push(name.to_string());
        cx.error_spanned_by(
            name,
            format!(
                "a host closure cannot use `{name}`: it runs at every replay of the captured step, outside the borrow of the step's params; list `{name}` in `reads(...)` or `writes(...)` to order the closure against the stages that use it, and read it on the host after the step (`run(...)?.wait()`, `graph.synchronize()`)"
            ),
        );
    }
}

/// How one argument of a `call` names a buffer.
enum Passed<'a> {
    /// `x`, `&x` or `&mut x`: the buffer itself, passed as its declaration says.
    Whole { name: &'a Ident, mutable: bool },
    /// Inside a larger expression (`x.as_view()`, `&*x`, `(x, y)`).
    Inside(Mention),
}

/// The buffers an argument names, and how.
fn passed<'a>(scope: &Scope<'_>, arg: &'a Expr) -> Vec<Passed<'a>> {
    let whole = match ungroup_expr(arg) {
        Expr::Reference(reference) => {
            bare_ident(&reference.expr).map(|name| (name, reference.mutability.is_some()))
        }
        arg => bare_ident(arg).map(|name| (name, false)),
    };
    match whole {
        Some((name, mutable)) if scope.buffer(name).is_some() => {
            vec![Passed::Whole { name, mutable }]
        }
        Some(_) => Vec::new(),
        None => buffers(scope, &mentions(arg))
            .into_iter()
            .map(|m| Passed::Inside(m.clone()))
            .collect(),
    }
}

/// A `call` declares every buffer its arguments name, in `reads(...)` or `writes(...)`, and
/// passes each as declared: `&mut x` and a `_mut` method need `writes(...)`, and a buffer it
/// writes is passed once (a function cannot hold two `&mut` to one buffer).
fn call_arguments(cx: &Ctxt, scope: &Scope<'_>, call: &ast::Call) {
    let function = ast::function_name(&call.call);
    let reads: Vec<&Ident> = call.accesses.reads().collect();
    let writes: Vec<&Ident> = call.accesses.writes().collect();
    let declared = |name: &Ident| reads.contains(&name) || writes.contains(&name);
    let written = |name: &Ident| writes.contains(&name);
    for mention in buffers(scope, &mentions(&call.call.func)) {
        let name = &mention.ident;
        cx.error_spanned_by(
            name,
            format!(
                "`{name}` is a buffer, used to name the called function; call a function by its path and pass `{name}` as an argument"
            ),
        );
    }
    let mut uses: HashMap<String, usize> = HashMap::new();
    for arg in &call.call.args {
        for passed in passed(scope, arg) {
            let (name, mutable, inside) = match &passed {
                Passed::Whole { name, mutable } => (*name, *mutable, None),
                Passed::Inside(mention) => (&mention.ident, false, Some(mention)),
            };
            if inside.is_some_and(|m| m.use_ == Use::Length) {
                continue;
            }
            if !declared(name) {
                let hint = match inside.map(|m| &m.use_) {
                    Some(Use::MutMethod(_)) => "add it to `writes(...)`",
                    _ if mutable => "add it to `writes(...)`",
                    _ => "add it to `reads(...)` or `writes(...)`",
                };
                cx.error_spanned_by(
                    name,
                    format!("`{name}` is passed to `{function}` but not declared; {hint}"),
                );
                continue;
            }
            let count = uses.entry(name.to_string()).or_default();
            *count += 1;
            if *count == 2 && written(name) {
                cx.error_spanned_by(
                    name,
                    format!(
                        "`{name}` is passed to `{function}` twice, and `{function}` writes it: a function cannot hold a `&mut` borrow of a buffer next to another borrow of it; pass `{name}` once"
                    ),
                );
            }
            if written(name) {
                continue;
            }
            if mutable {
                cx.error_spanned_by(
                    name,
                    format!(
                        "`{name}` is passed as `&mut {name}` but declared in `reads(...)`; declare it in `writes(...)` if `{function}` writes it, or pass `&{name}`"
                    ),
                );
            } else if let Some(Use::MutMethod(method)) = inside.map(|m| &m.use_) {
                cx.error_spanned_by(
                    name,
                    format!(
                        "`{name}.{method}()` borrows `{name}` mutably, but `{name}` is declared in `reads(...)`; declare it in `writes(...)`"
                    ),
                );
            }
        }
    }
}

//! Rules on what goes beyond one straight-line step: stream arrays and the element a stage
//! runs on, `for` loops and their `let`s, kinds of step, `swap(a, b)`, buffer subscripts
//! (`xs[k]`, `x[lo..hi]`), and host closures that receive buffers.

use std::collections::HashMap;

use syn::{Expr, Ident, Pat};

use crate::ast::{self, BufRef, Statement, Use, mentions, type_string};
use crate::constant;
use crate::ctxt::Ctxt;
use crate::scope::{BufferDecl, Memory, Scope, Value};

/// The most `swap`s a pipeline declares: a captured graph keeps one instantiation per
/// arrangement of the swapped buffers, 2^n of them.
pub const MAX_SWAPS: usize = 4;

/// Runs every rule.
pub fn check(cx: &Ctxt, scope: &Scope<'_>) {
    stream_arrays(cx, scope);
    loops(cx, scope);
    steps(cx, scope);
    swaps(cx, scope);
    for stage in &scope.stages {
        // The statements of `while`/`if` bodies too: they take ranges and elements as well.
        for statement in ast::flatten(&stage.statements) {
            subscripts(cx, scope, statement);
            if let Statement::Host(host) = statement {
                host_params(cx, scope, host);
            }
        }
    }
}

/// An expression computed on the host when the step is enqueued may name a buffer only as its
/// length (`x.len()`): anything else would read memory the stages may be writing.
fn host_expression(cx: &Ctxt, scope: &Scope<'_>, expr: &Expr, what: &str) {
    for mention in mentions(expr) {
        if !matches!(scope.value(&mention.ident), Some(Value::Buffer(_)))
            || mention.use_ == Use::Length
        {
            continue;
        }
        let name = &mention.ident;
        let communicator = scope
            .buffer(name)
            .is_some_and(|id| scope.buffers[id].is_communicator());
        let message = if communicator {
            format!(
                "`{name}` is the communicator, used in {what}, which the step's shape is computed from before `{name}` is looked at; pass its rank or size as a scalar param (`rank: usize`, set from `{name}.rank()`) and use that"
            )
        } else {
            format!(
                "`{name}` is a buffer, used in {what}: it is computed on the host when the step is enqueued; use a scalar param, or `{name}.len()` for its length"
            )
        };
        cx.error_spanned_by(name, message);
    }
}

/// A stream array (`work[n]`) is not the origin, which starts and ends every step; a stage on
/// an array names its element (`on work[i % n]`), and a stage on one stream names none.
fn stream_arrays(cx: &Ctxt, scope: &Scope<'_>) {
    for (index, stream) in scope.streams.iter().enumerate() {
        let Some(count) = &stream.count else { continue };
        if index == 0 {
            let name = &stream.name;
            cx.error_spanned_by(
                count,
                format!(
                    "the first stream, `{name}`, is the origin every step starts and ends on, so it is one stream; declare a stream before the array `{name}[...]`"
                ),
            );
        }
        host_expression(cx, scope, count, "the size of a stream array");
    }
    for stage in &scope.stages {
        let Some(stream) = scope.stream(&stage.stream).map(|id| scope.streams[id]) else {
            continue;
        };
        let name = &stage.stream;
        match (&stream.count, &stage.lane) {
            (Some(_), None) => cx.error_spanned_by(
                name,
                format!(
                    "`{name}` is an array of streams; say which one stage `{}` runs on: `on {name}[INDEX]`",
                    stage.name
                ),
            ),
            (None, Some(lane)) => cx.error_spanned_by(
                lane,
                format!("`{name}` is one stream, not an array; write `on {name}`"),
            ),
            (Some(count), Some(lane)) => {
                host_expression(cx, scope, lane, "a stream index");
                // Both constants: the index is checked when the program compiles (issue 23,
                // class 2), not when the step is planned. An array placed on a device array
                // has that rule (`check::devices`).
                if stream.device.is_none()
                    && let (Some(count), Some(index)) =
                    (crate::constant::value(count), crate::constant::value(lane))
                    && !(0..count).contains(&index)
                {
                    cx.error_spanned_by(
                        lane,
                        format!(
                            "`{name}[{index}]` is past the stream array `{name}` of {count} streams (`{name}[0]` to `{name}[{}]`); name one of those, or `{name}[i % {count}]` in a loop",
                            count - 1
                        ),
                    );
                }
            }
            (None, None) => {}
        }
    }
}

/// Loops do not nest; the loop variable and the `let`s name nothing else; their expressions
/// read buffers only as lengths; a claim inside a loop names stages of that loop.
fn loops(cx: &Ctxt, scope: &Scope<'_>) {
    for place in &scope.places {
        if place.nested
            && let Some(body) = place.looped
        {
            cx.error_at(
                body.keyword.span,
                "pipeline loops do not nest; write one `for` over the product of the ranges (`for k in 0..a * b` with `let i = k / b; let j = k % b;`)",
            );
        }
    }
    for body in &scope.loops {
        let mut names: HashMap<String, &Ident> = HashMap::new();
        let bound = std::iter::once(&body.var).chain(body.lets.iter().map(|l| &l.name));
        for name in bound {
            if scope.value(name).is_some() {
                cx.error_spanned_by(
                    name,
                    format!("`{name}` is already a param or scratch buffer; give the loop's name another one"),
                );
            } else if names.insert(name.to_string(), name).is_some() {
                cx.error_spanned_by(name, format!("`{name}` is bound twice in this loop"));
            }
        }
        host_expression(cx, scope, &body.start, "a loop bound");
        host_expression(cx, scope, &body.end, "a loop bound");
        for binding in &body.lets {
            host_expression(cx, scope, &binding.value, "a `let` of a loop");
        }
    }
    for (claim, looped) in scope.input.claims_with_loops() {
        let Some(body) = looped else { continue };
        for name in &claim.stages {
            let Some(id) = scope.stage(name) else {
                continue;
            };
            let inside = scope.stage_loops[id].is_some_and(|l| std::ptr::eq(scope.loops[l], body));
            if !inside {
                cx.error_spanned_by(
                    name,
                    format!(
                        "a `concurrent` claim inside a `for` claims the stages of one iteration; `{name}` is not in this loop: move the claim out of the loop"
                    ),
                );
            }
        }
    }
}

/// With `step` blocks every stage belongs to one; step names are unique; a step has a stage;
/// `after` and `concurrent` relate stages of one step (steps are ordered as they are
/// enqueued).
fn steps(cx: &Ctxt, scope: &Scope<'_>) {
    let named: Vec<&ast::StepBlock> = scope.input.steps().collect();
    if named.is_empty() {
        return;
    }
    for item in &scope.input.items {
        let (span, what) = match item {
            ast::Item::Stage(stage) => (stage.name.span(), format!("stage `{}`", stage.name)),
            ast::Item::For(body) => (body.keyword.span, "this loop".to_owned()),
            _ => continue,
        };
        cx.error_at(
            span,
            format!(
                "this pipeline declares `step` blocks, so every stage belongs to one: move {what} into a `step NAME {{ ... }}`"
            ),
        );
    }
    let mut seen: HashMap<String, ()> = HashMap::new();
    for step in &named {
        let name = &step.name;
        if seen.insert(name.to_string(), ()).is_some() {
            cx.error_spanned_by(name, format!("duplicate step `{name}`"));
        }
        // `run_NAME_steps` and `run_NAME_ahead` are methods of step `NAME`: a step named
        // `NAME_steps` would define its `run_NAME_steps` a second time.
        for other in &named {
            for suffix in ["steps", "ahead"] {
                if *name == format!("{}_{suffix}", other.name) {
                    cx.error_spanned_by(
                        name,
                        format!(
                            "step `{name}`'s `run_{name}` is also step `{}`'s `run_{}_{suffix}`; \
                             rename one of the two steps",
                            other.name, other.name
                        ),
                    );
                }
            }
        }
        let empty = !scope
            .places
            .iter()
            .any(|p| p.step.is_some_and(|s| std::ptr::eq(s, *step)));
        if empty {
            cx.error_spanned_by(
                name,
                format!("step `{name}` has no stages; add one, or remove the step"),
            );
        }
    }
    for (id, stage) in scope.stages.iter().enumerate() {
        for other in &stage.after {
            if let Some(other_id) = scope.stage(other)
                && scope.stage_kinds[other_id] != scope.stage_kinds[id]
            {
                cx.error_spanned_by(
                    other,
                    format!(
                        "`{other}` belongs to another step than `{}`; steps run in the order they are enqueued, so `after` relates stages of one step",
                        stage.name
                    ),
                );
            }
        }
    }
    for claim in scope.input.claims() {
        let kinds: Vec<usize> = claim
            .stages
            .iter()
            .filter_map(|name| scope.stage(name))
            .map(|id| scope.stage_kinds[id])
            .collect();
        if kinds.windows(2).any(|w| w[0] != w[1]) {
            cx.error_at(
                claim.keyword.span,
                "`concurrent` names stages of different steps, which never run concurrently; claim stages of one step",
            );
        }
    }
}

/// `swap(a, b)` exchanges two buffer params of one type (and of one device: the stages that
/// use either run there), each swapped at most once, between replays of a captured graph.
fn swaps(cx: &Ctxt, scope: &Scope<'_>) {
    let swaps: Vec<&ast::Swap> = scope.input.swaps().collect();
    if swaps.len() > MAX_SWAPS {
        cx.error_at(
            swaps[MAX_SWAPS].keyword.span,
            format!(
                "at most {MAX_SWAPS} `swap`s: a captured graph keeps one instantiation for each arrangement of the swapped buffers"
            ),
        );
    }
    let mut swapped: HashMap<String, ()> = HashMap::new();
    for swap in &swaps {
        if swap.a == swap.b {
            let name = &swap.b;
            cx.error_spanned_by(
                name,
                format!(
                    "`swap({name}, {name})` exchanges `{name}` with itself, which changes nothing; name the buffer it alternates with: `swap({name}, next)`"
                ),
            );
            continue;
        }
        let mut decls = Vec::new();
        // One error per swap for what its buffers are: `swap(h1, h2)` of two windows is one
        // mistake.
        let mut refused = false;
        for name in [&swap.a, &swap.b] {
            let decl = match scope.value(name) {
                None => {
                    cx.error_spanned_by(
                        name,
                        format!("unknown buffer `{name}`; `swap` names two buffer params"),
                    );
                    None
                }
                Some(Value::Scalar(_)) => {
                    cx.error_spanned_by(
                        name,
                        format!("`{name}` is a scalar param; `swap` exchanges buffers (set scalars with `set_{name}`)"),
                    );
                    None
                }
                Some(Value::Buffer(id)) => Some(&scope.buffers[id]),
            };
            let Some(decl) = decl else { continue };
            let problem = if decl.scratch {
                Some(format!(
                    "`{name}` is a scratch buffer, owned by the pipeline; swap params"
                ))
            } else if decl.array {
                Some(format!(
                    "`{name}` is an array of buffers; swap two buffer params"
                ))
            } else if !matches!(decl.memory, Memory::Device | Memory::Pinned) {
                Some(swap_kind_problem(decl))
            } else {
                None
            };
            if let Some(problem) = problem {
                if !refused {
                    cx.error_spanned_by(name, problem);
                }
                refused = true;
                continue;
            }
            if swapped.insert(name.to_string(), ()).is_some() {
                cx.error_spanned_by(
                    name,
                    format!("`{name}` is already swapped with another buffer; each buffer takes part in one `swap`"),
                );
            }
            decls.push(decl);
        }
        if let (Some(a), Some(b)) = (scope.buffer(&swap.a), scope.buffer(&swap.b))
            && scope.buffer_device(a) != scope.buffer_device(b)
        {
            cx.error_spanned_by(
                &swap.b,
                format!(
                    "`{}` lives on device {} and `{}` on {}; `swap` gives each buffer's stages the other one, so both must be on one device: declare them `on` the same device",
                    swap.a,
                    scope.device_name(scope.buffer_device(a)),
                    swap.b,
                    scope.device_name(scope.buffer_device(b)),
                ),
            );
        }
        if swap.a == swap.b {
            cx.error_spanned_by(
                &swap.b,
                format!("`swap({0}, {0})` swaps a buffer with itself", swap.a),
            );
        } else if let [a, b] = decls[..]
            && type_string(a.ty) != type_string(b.ty)
        {
            cx.error_spanned_by(
                &swap.b,
                format!(
                    "`{}` is `{}` and `{}` is `{}`; `swap` exchanges buffers declared with one type",
                    swap.a,
                    type_string(a.ty),
                    swap.b,
                    type_string(b.ty)
                ),
            );
        }
    }
}

/// Why a pipeline-level `swap` cannot exchange `decl` (memory that is not a device or pinned
/// buffer), and what to swap instead.
fn swap_kind_problem(decl: &BufferDecl<'_>) -> String {
    let exchanges =
        "`swap` exchanges two `DeviceBuffer` or two `PinnedBuffer` params between replays";
    if decl.is_window() {
        let (name, ty) = (decl.name, type_string(decl.ty));
        return format!(
            "`{name}` is a window (`{ty}`), which the neighbours' launches write by rank \
             whatever this rank's arrangement; {exchanges}: swap the `DeviceBuffer`s the step \
             copies the window into or out of instead"
        );
    }
    format!("{}; {exchanges}", super::statements::what(decl))
}

/// An array is named with one element (`xs[k]`), a buffer without one; a range (`x[lo..hi]`)
/// is of device or pinned memory, and a constant one is not inverted; subscripts read buffers
/// only as lengths. `reads(...)`/`writes(...)` lists name whole buffers, not arrays.
fn subscripts(cx: &Ctxt, scope: &Scope<'_>, statement: &Statement) {
    for reference in scope.statement_refs(statement) {
        let Some(decl) = scope
            .buffer(reference.name)
            .map(|id| &scope.buffers[id])
            .filter(|d| d.problem.is_none())
        else {
            continue;
        };
        subscript(cx, decl, &reference);
        for expr in reference.subscript_exprs() {
            host_expression(cx, scope, expr, "a buffer subscript");
        }
    }
    let lists = match statement {
        Statement::Host(host) => Some(&host.accesses),
        Statement::Call(call) => Some(&call.accesses),
        _ => None,
    };
    for name in lists.into_iter().flat_map(|a| a.reads().chain(a.writes())) {
        if let Some(id) = scope.buffer(name)
            && scope.buffers[id].array
        {
            cx.error_spanned_by(
                name,
                format!("`{name}` is an array of buffers, which `reads(...)` and `writes(...)` cannot list; pass its elements to a `launch` or `copy`"),
            );
        }
    }
}

fn subscript(cx: &Ctxt, decl: &BufferDecl<'_>, reference: &BufRef<'_>) {
    let name = reference.name;
    match (decl.array, reference.index) {
        (true, None) => cx.error_spanned_by(
            name,
            format!("`{name}` is an array of buffers; name one: `{name}[k]`"),
        ),
        (false, Some(index)) => cx.error_spanned_by(
            index,
            format!(
                "`{name}` is one buffer, not an array; write `{name}[a..b]` for a range of its elements"
            ),
        ),
        _ => {}
    }
    let Some(range) = reference.range else { return };
    // A window's ranges are the runtime's to check, on this rank's part or a neighbour's.
    if !matches!(decl.memory, Memory::Device | Memory::Pinned) && !decl.is_window() {
        cx.error_at(
            range.span,
            format!(
                "`{name}` is not a `DeviceBuffer` or `PinnedBuffer`, so it has no range of elements"
            ),
        );
        return;
    }
    if let (Some(start), Some(end)) = (
        range.start.and_then(constant::value),
        range.end.and_then(constant::value),
    ) && start > end
    {
        let message = if range.closed {
            // `end` is the macro's `b + 1` of the `a..=b` written.
            let last = end - 1;
            format!(
                "`{name}[{start}..={last}]` ends before it starts; write `{name}[{last}..={start}]`"
            )
        } else {
            format!(
                "`{name}[{start}..{end}]` ends before it starts; write `{name}[{end}..{start}]`"
            )
        };
        cx.error_at(range.span, message);
    }
}

/// A host closure's parameters are the pinned buffers it declares, by name: `host |snap:
/// &[f32]| { .. } reads(snap)`; one it writes is `&mut [T]` (and declared in `writes`).
fn host_params(cx: &Ctxt, scope: &Scope<'_>, host: &ast::Host) {
    let reads: Vec<&Ident> = host.accesses.reads().collect();
    let writes: Vec<&Ident> = host.accesses.writes().collect();
    let mut seen: HashMap<String, ()> = HashMap::new();
    for input in &host.closure.inputs {
        let (pat, ty) = match input {
            Pat::Type(typed) => (&*typed.pat, Some(&*typed.ty)),
            pat => (pat, None),
        };
        let Pat::Ident(binding) = pat else {
            cx.error_spanned_by(
                input,
                "a host closure's parameters are the names of buffers it lists in `reads(...)` or `writes(...)`, e.g. `host |snapshot: &[f32]| { .. } reads(snapshot)`",
            );
            continue;
        };
        let name = &binding.ident;
        if seen.insert(name.to_string(), ()).is_some() {
            cx.error_spanned_by(name, format!("`{name}` is a parameter twice"));
            continue;
        }
        let listed_write = writes.contains(&name);
        if !listed_write && !reads.contains(&name) {
            cx.error_spanned_by(
                name,
                format!(
                    "the closure takes `{name}`, so list it in `reads({name})` or `writes({name})`"
                ),
            );
            continue;
        }
        let Some(decl) = scope.buffer(name).map(|id| &scope.buffers[id]) else {
            continue;
        };
        // Device memory and flags in a host closure's lists are reported with the lists.
        if matches!(decl.memory, Memory::Device | Memory::Flag) {
            continue;
        }
        if decl.memory != Memory::Pinned || decl.array {
            cx.error_spanned_by(
                name,
                format!(
                    "a host closure receives pinned memory (`PinnedBuffer`), which the host can read in stream order; `{name}` is `{}`: copy it into a `PinnedBuffer` first and pass that",
                    type_string(decl.ty)
                ),
            );
            continue;
        }
        if let Some(syn::Type::Reference(reference)) = ty.map(ast::ungroup_type)
            && reference.mutability.is_some()
            && !listed_write
        {
            cx.error_spanned_by(
                ty,
                format!("`{name}` is declared in `reads(...)`, so the closure gets `&[T]`; list it in `writes({name})` to change it"),
            );
        }
    }
}

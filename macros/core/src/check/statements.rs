//! Rules on the statements of each stage: names resolve to the right kind of memory, launches
//! match their kernel's signature, writes go to memory the pipeline may write, and nothing
//! appears that a captured CUDA graph cannot replay.

use syn::{Expr, Ident};

use super::hint::{suggestion, unknown};
use super::iterations::Evaluation;
use super::ranges::{self, Alias};
use crate::ast::{self, BufRef, KernelParamType, Statement, bare_ident, type_string};
use crate::ctxt::Ctxt;
use crate::scope::{BufferDecl, Memory, Scope, Value};
use crate::symbol::{self, PRIMITIVE_SCALARS};

/// Runs every statement rule over every stage.
pub fn check(cx: &Ctxt, scope: &Scope<'_>) {
    for (id, stage) in scope.stages.iter().enumerate() {
        // The rules on constant ranges run in each iteration of a `for` with constant bounds.
        let evaluations = Evaluation::of_stage(scope, id);
        for statement in ast::flatten(&stage.statements) {
            match statement {
                Statement::Launch(launch) => launch_statement(cx, scope, launch, &evaluations),
                Statement::Copy(copy) => copy_statement(cx, scope, copy, &evaluations),
                Statement::Fill(fill) => fill_statement(cx, scope, fill),
                Statement::Wait(wait) => flag_statement(cx, scope, &wait.flag, "wait"),
                Statement::Write(write) => flag_statement(cx, scope, &write.flag, "write"),
                Statement::Host(host) => host_statement(cx, scope, host),
                Statement::Call(call) => call_statement(cx, scope, call),
                // Judged in `collective`.
                Statement::Comm(_) => {}
                Statement::NotCapturable(statement) => not_capturable(cx, statement),
                // `control.rs` has the rules of `while`/`if` themselves.
                Statement::Control(_) => {}
            }
        }
    }
}

/// Resolves a name that must be a buffer. Reports unknown names and scalars (`role` says what
/// the statement takes instead); stays silent about buffers whose declaration is already
/// reported, so one mistake gives one error.
pub(super) fn resolve<'s>(
    cx: &Ctxt,
    scope: &'s Scope<'_>,
    name: &Ident,
    role: &str,
) -> Option<&'s BufferDecl<'s>> {
    match scope.value(name) {
        None => {
            let hint = "declare it in `params { ... }` or `scratch { ... }`";
            cx.error_spanned_by(name, unknown("buffer", name, &scope.buffer_names(), hint));
            None
        }
        Some(Value::Scalar(_)) => {
            cx.error_spanned_by(name, format!("`{name}` is a scalar param; {role}"));
            None
        }
        Some(Value::Buffer(id)) => scope
            .buffers
            .get(id)
            .filter(|buffer| buffer.problem.is_none()),
    }
}

/// "`v` is pageable host memory (`&mut Vec<f32>`)" and the like, for messages.
/// What a `Condition` is for, in the errors of the statements that cannot take one.
const CONDITION_ROLE: &str = "a `Condition` is set by the kernels given it and read by the one `while`, `do ... while`, `if` or `switch` that names it";

pub(super) fn what(buffer: &BufferDecl<'_>) -> String {
    let name = buffer.name;
    let ty = type_string(buffer.ty);
    match buffer.memory {
        Memory::Device => format!("`{name}` is a `DeviceBuffer` (`{ty}`)"),
        Memory::Pinned => format!("`{name}` is a `PinnedBuffer` (`{ty}`)"),
        Memory::Flag => format!("`{name}` is a flag cell (`{ty}`)"),
        Memory::Condition => format!("`{name}` is a kernel-set condition (`{ty}`)"),
        Memory::Pageable => format!("`{name}` is pageable host memory (`{ty}`)"),
        // A window is read and written only through launch arguments (LANGUAGE.md,
        // "Windows").
        Memory::Opaque if buffer.is_window() => format!(
            "`{name}` is a window (`{ty}`), which only a launch argument reads (`{name}` or `{name}[lo..hi]`: this rank's part) or writes (`{name} on rank r`: a neighbour's part)"
        ),
        // A `type` alias of a buffer type looks like any other type to the macro.
        Memory::Opaque => format!(
            "`{name}` is not a buffer (`{ty}`; the macro knows a buffer by its type as written, so if `{}` is a `type` alias of one, write the buffer type itself, e.g. `{name}: &mut DeviceBuffer<f32>`)",
            type_string(buffer.referent)
        ),
    }
}

/// A statement writes only memory declared `&mut` (or owned scratch): a `&` param is shared
/// with the caller, who may read it while the step runs.
pub(super) fn writable(cx: &Ctxt, buffer: &BufferDecl<'_>, at: &Ident, action: &str) {
    if !buffer.mutable {
        let name = buffer.name;
        let referent = type_string(buffer.referent);
        // An array of buffers is declared `&mut [T]`.
        let referent = if buffer.array {
            format!("[{referent}]")
        } else {
            referent
        };
        cx.error_spanned_by(
            at,
            format!("`{name}` is declared `&` but {action}; declare it `&mut {referent}`"),
        );
    }
}

fn launch_statement(
    cx: &Ctxt,
    scope: &Scope<'_>,
    launch: &ast::Launch,
    evaluations: &[Evaluation<'_>],
) {
    launch_dimensions(cx, launch);
    let Some(kernel) = launch_kernel(cx, scope, launch) else {
        return;
    };
    if !launch_arity(cx, launch, kernel) {
        return;
    }
    let uses: Vec<Use<'_>> = kernel
        .params
        .iter()
        .zip(&launch.args)
        .zip(&launch.ranks)
        .filter_map(|((param, arg), rank)| {
            if let Some(window) = window_argument(cx, scope, kernel, param, arg, rank.as_ref()) {
                return window;
            }
            launch_argument(cx, scope, kernel, param, arg)
        })
        .collect();
    launch_aliasing(cx, scope, kernel, &uses, evaluations);
    super::ranges::windows_hold_bounds(cx, scope, kernel, launch);
    super::window_parts::parts_apart(cx, scope, launch);
}

/// A window argument of a launch (or `on rank` after an argument): `Some(None)` when it is
/// one, checked here (the aliasing rule does not apply: this rank's part and the neighbours'
/// are different memory, and two parts of one neighbour are checked apart when the step runs);
/// `None` for any other argument.
///
/// A window is this rank's part of memory its neighbours write into: a launch reads it here
/// (`w`, `w[lo..hi]`) or writes a neighbour's part (`w on rank r`), never writes it here (a
/// neighbour may be writing it at that moment) nor reads a neighbour's (nothing orders that
/// read after the neighbour's own writes). The signals need `&mut`: they clear its words.
fn window_argument<'a>(
    cx: &Ctxt,
    scope: &Scope<'_>,
    kernel: &ast::Kernel,
    param: &'a ast::KernelParam,
    arg: &'a Expr,
    rank: Option<&ast::OnRank>,
) -> Option<Option<Use<'a>>> {
    let k = &kernel.name;
    let p = &param.name;
    let reference = BufRef::of_expr(arg);
    let window = reference
        .and_then(|r| scope.buffer(r.name))
        .map(|id| &scope.buffers[id])
        .filter(|b| b.is_window());
    let Some(window) = window else {
        let rank = rank?;
        let what = match reference.and_then(|r| scope.buffer(r.name)) {
            Some(id) => format!("; {}", what(&scope.buffers[id])),
            None => String::new(),
        };
        cx.error_between(
            rank.on.span,
            rank.rank.span,
            format!(
                "`on rank` names a neighbour's part of a window param (`w: &mut Window<T>`){what}; \
                 pass this rank's buffer without `on rank`"
            ),
        );
        return Some(None);
    };
    let name = window.name;
    let Some(reference) = reference else {
        return Some(None);
    };
    let KernelParamType::Slice { mutable, elem, .. } = param.kind() else {
        cx.error_spanned_by(
            name,
            format!(
                "`{name}` is a window but `{k}` takes a scalar for `{p}: {}`",
                type_string(&param.ty)
            ),
        );
        return Some(None);
    };
    // `w[k]` is refused where every subscript is (`repetition.rs`).
    if reference.index.is_some() {
        return Some(None);
    }
    if !window.mutable {
        cx.error_spanned_by(
            name,
            format!(
                "`{name}` is a window declared `&`, but the signals the step derives for it clear \
                 its words; declare it `&mut {}`",
                type_string(window.referent)
            ),
        );
    }
    if let Some(held) = crate::scope::window_elem(window.referent).map(type_string)
        && distinct_primitives(&held, &type_string(elem))
    {
        cx.error_spanned_by(
            name,
            format!(
                "`{name}` holds `{held}` but `{k}` takes `{p}: {}`",
                type_string(&param.ty)
            ),
        );
    }
    match (mutable, rank) {
        (true, None) => cx.error_spanned_by(
            arg,
            format!(
                "`{k}` writes its `{p}`, but `{name}` here is this rank's window, which its \
                 neighbours write into while the step runs; write a neighbour's part \
                 (`{} on rank EXPR`), or keep what this rank writes in a buffer of its own",
                crate::ast::tokens_string(arg)
            ),
        ),
        (false, Some(rank)) => cx.error_between(
            rank.on.span,
            rank.rank.span,
            format!(
                "`{k}` reads its `{p}` from another rank's `{name}`, which nothing orders after \
                 that rank's own writes; read `{name}` here (without `on rank`): the neighbours \
                 write into it, and the step waits for their signals"
            ),
        ),
        _ => {}
    }
    Some(None)
}

/// A buffer argument of a launch, for the aliasing rule.
struct Use<'a> {
    buffer: usize,
    writes: bool,
    param: &'a Ident,
    arg: &'a Ident,
    /// Whether it names a range (`x[lo..hi]`) or an element of an array (`xs[k]`): two of
    /// those may be disjoint, which the step checks before it is enqueued.
    subscripted: bool,
    /// The reference as written.
    reference: BufRef<'a>,
}

/// A launch says how many blocks and threads it runs: `grid` and `block` are required.
fn launch_dimensions(cx: &Ctxt, launch: &ast::Launch) {
    let message = match (&launch.grid, &launch.block) {
        (Some(_), Some(_)) => return,
        (None, None) => "`launch` needs `grid` and `block`, e.g. `grid n.div_ceil(256) block 256`",
        (None, Some(_)) => "`launch` needs `grid`, e.g. `grid n.div_ceil(256)`",
        (Some(_), None) => "`launch` needs `block`, e.g. `block 256`",
    };
    cx.error_at(launch.keyword.span, message);
}

/// A launch names a declared kernel as `module::kernel`.
fn launch_kernel<'s>(
    cx: &Ctxt,
    scope: &'s Scope<'_>,
    launch: &ast::Launch,
) -> Option<&'s ast::Kernel> {
    let Some((module, kernel)) = launch.target() else {
        // A bare kernel name that exactly one module declares gets its full path as the hint.
        let owners: Vec<String> = match launch.path.get_ident() {
            Some(name) => scope
                .kernels
                .iter()
                .filter(|kernel| kernel.decl.name == *name)
                .map(|kernel| format!("{}::{name}", scope.modules[kernel.module].name))
                .collect(),
            None => Vec::new(),
        };
        let hint = match owners.as_slice() {
            [path] => format!("write `{path}`"),
            _ => "e.g. `heat::stencil`".to_owned(),
        };
        cx.error_spanned_by(
            &launch.path,
            format!("`launch` names its kernel as `module::kernel`; {hint}"),
        );
        return None;
    };
    let Some(module_id) = scope.module(module) else {
        let names: Vec<String> = scope.modules.iter().map(|m| m.name.to_string()).collect();
        let hint = "declare it with `kernels NAME = ptx(IMAGE) { ... }`";
        cx.error_spanned_by(module, unknown("kernel module", module, &names, hint));
        return None;
    };
    let Some(kernel_id) = scope.kernel(module_id, kernel) else {
        let names: Vec<String> = scope.modules[module_id]
            .kernels
            .iter()
            .map(|k| k.name.to_string())
            .collect();
        let hint = suggestion(kernel, &names, "declare it with `fn NAME(...);`");
        cx.error_spanned_by(
            kernel,
            format!("module `{module}` has no kernel `{kernel}`; {hint}"),
        );
        return None;
    };
    Some(scope.kernels[kernel_id].decl)
}

/// A launch passes exactly one argument per kernel parameter. The error covers the whole call
/// and quotes the signature.
fn launch_arity(cx: &Ctxt, launch: &ast::Launch, kernel: &ast::Kernel) -> bool {
    let (expected, given) = (kernel.params.len(), launch.args.len());
    if expected == given {
        return true;
    }
    let plural = |n: usize| if n == 1 { "argument" } else { "arguments" };
    let first = launch
        .path
        .segments
        .first()
        .map_or(launch.keyword.span, |s| s.ident.span());
    cx.error_between(
        first,
        launch.paren.span.close(),
        format!(
            "`{}` takes {expected} {} but {given} {} given; its signature is `{}`",
            ast::tokens_string(&launch.path),
            plural(expected),
            if given == 1 { "was" } else { "were" },
            kernel.signature(),
        ),
    );
    false
}

/// Each argument fits its parameter: a slice parameter takes the bare name of a device
/// buffer with the same element type, declared `&mut` if the kernel writes it; a scalar
/// parameter takes no buffer, and a bare scalar param of a different primitive type is an error
/// here (other types may be aliases: code generation asserts them at the argument).
fn launch_argument<'a>(
    cx: &Ctxt,
    scope: &Scope<'_>,
    kernel: &ast::Kernel,
    param: &'a ast::KernelParam,
    arg: &'a Expr,
) -> Option<Use<'a>> {
    let k = &kernel.name;
    let p = &param.name;
    let wanted = format!("{p}: {}", type_string(&param.ty));
    match param.kind() {
        KernelParamType::Slice { mutable, elem, .. } => {
            let Some(reference) = BufRef::of_expr(arg) else {
                cx.error_spanned_by(
                    arg,
                    format!("`{k}` takes a buffer for `{wanted}`; pass the name of a buffer param or scratch buffer (or a range of one, `x[lo..hi]`)"),
                );
                return None;
            };
            let ident = reference.name;
            let role = format!("`{k}` takes a buffer for `{wanted}`");
            let buffer_id = scope.buffer(ident);
            let buffer = resolve(cx, scope, ident, &role)?;
            // Kernels take device memory: the runtime passes no host buffer to a kernel.
            match buffer.memory {
                Memory::Device => {}
                Memory::Pinned => {
                    cx.error_spanned_by(
                        ident,
                        format!("{}, which kernels do not take; `copy` it into a `DeviceBuffer` and pass that for `{wanted}`", what(buffer)),
                    );
                    return None;
                }
                Memory::Pageable => {
                    cx.error_spanned_by(
                        ident,
                        format!(
                            "{}, which kernels cannot access; pass a `DeviceBuffer`",
                            what(buffer)
                        ),
                    );
                    return None;
                }
                Memory::Flag | Memory::Opaque => {
                    cx.error_spanned_by(
                        ident,
                        format!(
                            "{}; `{k}` takes a `DeviceBuffer` for `{wanted}`",
                            what(buffer)
                        ),
                    );
                    return None;
                }
                Memory::Condition => {
                    cx.error_spanned_by(
                        ident,
                        format!(
                            "{}; `{k}` takes a `DeviceBuffer` for `{wanted}`, and a condition goes only to a kernel parameter declared `Condition`",
                            what(buffer)
                        ),
                    );
                    return None;
                }
            }
            // Element types spelled differently may still be one type (`type Real = f32`):
            // only two different primitives are known to differ here; code generation
            // asserts the others at the argument.
            if let Some(held) = buffer.elem.map(type_string)
                && distinct_primitives(&held, &type_string(elem))
            {
                cx.error_spanned_by(
                    ident,
                    format!("`{ident}` holds `{held}` but `{k}` takes `{wanted}`"),
                );
            }
            if mutable {
                writable(cx, buffer, ident, &format!("`{k}` writes its `{p}`"));
            }
            Some(Use {
                buffer: buffer_id?,
                writes: mutable,
                param: p,
                arg: ident,
                subscripted: reference.is_subscripted(),
                reference,
            })
        }
        KernelParamType::Scalar(ty) => {
            let ident = bare_ident(arg)?;
            match scope.value(ident)? {
                Value::Buffer(_) => cx.error_spanned_by(
                    ident,
                    format!("`{ident}` is a buffer but `{k}` takes a scalar for `{wanted}`"),
                ),
                Value::Scalar(id) => {
                    let declared = type_string(&scope.scalars[id].ty);
                    let ty = type_string(ty);
                    if distinct_primitives(&declared, &ty) {
                        cx.error_spanned_by(
                            ident,
                            format!("`{ident}` is declared `{declared}` but `{k}` takes `{wanted}`; declare `{ident}: {ty}` or pass `{ident} as {ty}`"),
                        );
                    }
                }
            }
            None
        }
        KernelParamType::Condition => {
            let what_to_write = format!(
                "`{k}` sets a condition through `{wanted}`: pass a `Condition` declared in \
                 `scratch {{ go: Condition }}` that a `while`, `do ... while`, `if` or `switch` \
                 tests (`while go max 100 {{ ... }}`)"
            );
            let Some(ident) = bare_ident(arg) else {
                cx.error_spanned_by(arg, what_to_write);
                return None;
            };
            let buffer = resolve(cx, scope, ident, &what_to_write)?;
            if buffer.memory != Memory::Condition {
                cx.error_spanned_by(ident, format!("{}; {what_to_write}", what(buffer)));
            }
            None
        }
        // Reported with the kernel's declaration.
        KernelParamType::Unsupported => None,
    }
}

/// Whether two types, as written, are two different primitive types: the only pair of
/// spellings known to be different types without asking the compiler.
pub(super) fn distinct_primitives(a: &str, b: &str) -> bool {
    a != b && PRIMITIVE_SCALARS.contains(&a) && PRIMITIVE_SCALARS.contains(&b)
}

/// One buffer is not passed twice to one launch where either use writes: kernels assume their
/// pointer parameters do not alias (`__restrict__`), so that would be a data race on the GPU.
/// Two subscripted uses alias where the compiler can tell (`xs[0]` twice, `xs[1]` beside
/// `xs[1][0..4]`, constant ranges that overlap in some iteration); the step checks the rest.
fn launch_aliasing(
    cx: &Ctxt,
    scope: &Scope<'_>,
    kernel: &ast::Kernel,
    uses: &[Use<'_>],
    evaluations: &[Evaluation<'_>],
) {
    for (j, second) in uses.iter().enumerate() {
        for first in &uses[..j] {
            if first.buffer != second.buffer
                || !(first.writes || second.writes)
                || !(first.subscripted && second.subscripted)
            {
                continue;
            }
            let written = if second.writes { second } else { first };
            let (a, b) = (&first.reference, &second.reference);
            match ranges::alias(a, b, evaluations) {
                Some(Alias::Elements { shared, when }) => {
                    ranges::overlapping_ranges(cx, a, b, &written.reference, shared, &when);
                }
                Some(Alias::Whole { when }) => {
                    let (text_a, text_b) = (ranges::reference_text(a), ranges::reference_text(b));
                    let named = if text_a == text_b {
                        format!("`{text_a}` is passed to `{}` as both", kernel.name)
                    } else {
                        format!(
                            "`{text_a}` and `{text_b}` name one buffer{when}, passed to `{}` as",
                            kernel.name
                        )
                    };
                    let when = if text_a == text_b {
                        when
                    } else {
                        String::new()
                    };
                    let (start, end) = ranges::reference_spans(b);
                    cx.error_between(
                        start,
                        end,
                        format!(
                            "{named} `{}` and `{}`{when}, and `{}` is written; pass a separate buffer, since a written parameter must not alias another",
                            first.param, second.param, written.param,
                        ),
                    );
                }
                None => {}
            }
        }
        let first = uses[..j].iter().find(|first| {
            first.buffer == second.buffer
                && (first.writes || second.writes)
                && !(first.subscripted && second.subscripted)
        });
        if let Some(first) = first {
            let written = if second.writes {
                second.param
            } else {
                first.param
            };
            // A range that names no element beside the whole buffer aliases nothing, but the
            // step cannot lend a buffer whole and a range of it together.
            let (whole, empty) = if first.subscripted {
                (second, first)
            } else {
                (first, second)
            };
            if empty.subscripted && ranges::names_no_element(scope, &empty.reference) {
                let name = whole.arg;
                cx.error_spanned_by(
                    whole.arg,
                    format!(
                        "`{}` names no element, but `{name}` is passed whole beside it to `{}` (as `{}`), and one statement cannot lend a buffer whole and a range of it together; write the whole buffer as a range, `{name}[..]` (ranges of one buffer that are apart may be passed together)",
                        ranges::reference_text(&empty.reference),
                        kernel.name,
                        whole.param,
                    ),
                );
                continue;
            }
            cx.error_spanned_by(
                second.arg,
                format!(
                    "`{}` is passed to `{}` as both `{}` and `{}`, and `{written}` is written; pass a separate buffer, since a written parameter must not alias another",
                    second.arg, kernel.name, first.param, second.param,
                ),
            );
        }
    }
}

/// A copy goes between two different device or pinned buffers of one element type, not both
/// pinned (a stream copies to, from or between device buffers), into one the pipeline may
/// write. Pageable memory cannot be copied asynchronously or captured.
fn copy_statement(cx: &Ctxt, scope: &Scope<'_>, copy: &ast::Copy, evaluations: &[Evaluation<'_>]) {
    let role = "`copy` takes buffers";
    let src = resolve(cx, scope, &copy.src, role);
    let dst = resolve(cx, scope, &copy.dst, role);
    let (Some(src), Some(dst)) = (src, dst) else {
        return;
    };
    let (src_ref, dst_ref) = (copy.src_ref.borrow(), copy.dst_ref.borrow());
    ranges::copy_lengths(cx, scope, &src_ref, &dst_ref, evaluations);
    if copy.src == copy.dst && src_ref.is_subscripted() && dst_ref.is_subscripted() {
        match ranges::alias(&src_ref, &dst_ref, evaluations) {
            Some(Alias::Elements { shared, when }) => {
                ranges::overlapping_ranges(cx, &src_ref, &dst_ref, &dst_ref, shared, &when);
            }
            // `copy xs[0] -> xs[0]`, `copy xs[1] -> xs[1][0..4]`: as `copy y -> y`.
            Some(Alias::Whole { when }) => {
                let (from, to) = (
                    ranges::reference_text(&src_ref),
                    ranges::reference_text(&dst_ref),
                );
                let what = if src_ref.range.is_none() && dst_ref.range.is_none() {
                    "a buffer onto itself"
                } else {
                    "between a buffer and part of itself"
                };
                let ((start, _), (_, end)) = (
                    ranges::reference_spans(&src_ref),
                    ranges::reference_spans(&dst_ref),
                );
                cx.error_between(
                    start,
                    end,
                    format!("`copy {from} -> {to}` copies {what}{when}; name two different buffers, or ranges of one that are apart"),
                );
                return;
            }
            None => {}
        }
    }
    if copy.src == copy.dst && !(src_ref.is_subscripted() && dst_ref.is_subscripted()) {
        let name = &copy.dst;
        cx.error_spanned_by(
            name,
            format!(
                "`copy {name} -> {name}` copies a buffer onto itself; name two different buffers"
            ),
        );
        return;
    }
    let mut both_memory = true;
    for (buffer, ident) in [(src, &copy.src), (dst, &copy.dst)] {
        let hint = match buffer.memory {
            Memory::Device | Memory::Pinned => continue,
            Memory::Pageable => {
                let reference = if buffer.mutable { "&mut " } else { "&" };
                let elem = buffer.elem.map_or("T".to_owned(), type_string);
                format!(
                    "only `PinnedBuffer` copies asynchronously or can be captured: declare it `{reference}PinnedBuffer<{elem}>`"
                )
            }
            Memory::Flag => {
                "`copy` does not take flag cells; use `write` and `wait` on them".to_owned()
            }
            Memory::Condition => {
                format!(
                    "{CONDITION_ROLE}; `copy` takes `DeviceBuffer` and `PinnedBuffer` buffers: to see the decision, have the kernel that sets it also write the value into a `DeviceBuffer` and copy that"
                )
            }
            Memory::Opaque if buffer.is_window() && ident == &copy.src => format!(
                "`copy` takes `DeviceBuffer` and `PinnedBuffer` buffers: to copy this rank's part, launch a kernel that reads it (`{ident}` for a `&[T]` parameter) and writes a buffer"
            ),
            Memory::Opaque if buffer.is_window() => format!(
                "`copy` takes `DeviceBuffer` and `PinnedBuffer` buffers: to write a neighbour's part, launch a kernel that writes it (`{ident} on rank r` for a `&mut [T]` parameter)"
            ),
            Memory::Opaque => "`copy` takes `DeviceBuffer` and `PinnedBuffer` buffers".to_owned(),
        };
        cx.error_spanned_by(ident, format!("{}; {hint}", what(buffer)));
        both_memory = false;
    }
    if !both_memory {
        return;
    }
    if src.memory == Memory::Pinned && dst.memory == Memory::Pinned {
        cx.error_between(
            copy.src.span(),
            copy.dst.span(),
            format!(
                "`copy {} -> {}` copies host memory to host memory (both are `PinnedBuffer`s), which a stream does not do; copy through a `DeviceBuffer`, or copy on the host outside the step",
                copy.src, copy.dst
            ),
        );
        return;
    }
    writable(cx, dst, &copy.dst, "`copy` writes it");
    if let (Some(from), Some(to)) = (src.elem.map(type_string), dst.elem.map(type_string))
        && distinct_primitives(&from, &to)
    {
        cx.error_between(
            copy.src.span(),
            copy.dst.span(),
            format!("`copy {} -> {}` copies `{from}` into `{to}`; both buffers must hold the same element type", copy.src, copy.dst),
        );
    }
}

/// A fill is a memset in stream order: it writes a device buffer the pipeline may write.
/// Pinned memory is host memory, set on the host before or after the step.
fn fill_statement(cx: &Ctxt, scope: &Scope<'_>, fill: &ast::Fill) {
    let Some(dst) = resolve(cx, scope, &fill.dst, "`fill` takes a buffer") else {
        return;
    };
    let name = &fill.dst;
    let hint = match dst.memory {
        Memory::Device => {
            writable(cx, dst, name, "`fill` writes it");
            memset_expresses(cx, dst, fill);
            return;
        }
        Memory::Pinned => "`fill` sets device memory; fill a `DeviceBuffer` and `copy` it here, or set the pinned buffer on the host outside the step".to_owned(),
        Memory::Pageable => {
            "it cannot be filled in stream order; use a `DeviceBuffer`".to_owned()
        }
        Memory::Flag => format!("set it with `write {name} = VALUE`"),
        Memory::Condition => format!("{CONDITION_ROLE}; pass it to a kernel that sets it"),
        Memory::Opaque => "`fill` takes a `DeviceBuffer`".to_owned(),
    };
    cx.error_spanned_by(name, format!("{}; {hint}", what(dst)));
}

/// A fill is a memset of 1 or 4 bytes: an element of another size takes a value whose bytes
/// are all equal. A literal value (`1.5f64`, `-1i64`, `300u16`) is judged here; any other
/// value when the step runs.
fn memset_expresses(cx: &Ctxt, dst: &BufferDecl<'_>, fill: &ast::Fill) {
    let Some(elem) = dst.elem.map(ast::type_string) else {
        return;
    };
    let (negative, literal) = match &fill.value {
        syn::Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => (true, &**expr),
        other => (false, other),
    };
    let syn::Expr::Lit(syn::ExprLit { lit, .. }) = literal else {
        return;
    };
    let bytes: Vec<u8> = match (elem.as_str(), lit) {
        ("f64", syn::Lit::Float(f)) => match f.base10_parse::<f64>() {
            Ok(v) => (if negative { -v } else { v }).to_le_bytes().to_vec(),
            Err(_) => return,
        },
        ("i64" | "u64", syn::Lit::Int(i)) => match i.base10_parse::<i128>() {
            Ok(v) => ((if negative { -v } else { v }) as i64)
                .to_le_bytes()
                .to_vec(),
            Err(_) => return,
        },
        ("i16" | "u16", syn::Lit::Int(i)) => match i.base10_parse::<i128>() {
            Ok(v) => ((if negative { -v } else { v }) as i16)
                .to_le_bytes()
                .to_vec(),
            Err(_) => return,
        },
        _ => return,
    };
    if bytes.iter().all(|&b| b == bytes[0]) {
        return;
    }
    let value = ast::tokens_string(&fill.value);
    cx.error_spanned_by(
        &fill.value,
        format!(
            "`fill {} = {value}` sets {}-byte `{elem}` elements, but a fill is a memset of 1 or 4 bytes, and the bytes of `{value}` differ; fill with a value whose bytes are all equal (such as 0, or -1 for an integer), or launch a kernel that writes it",
            fill.dst,
            bytes.len()
        ),
    );
}

/// `wait` and `write` operate on flag cells; `write` needs one the pipeline may write.
fn flag_statement(cx: &Ctxt, scope: &Scope<'_>, flag: &Ident, keyword: &str) {
    let role = format!("`{keyword}` takes a `FlagCell`");
    let Some(buffer) = resolve(cx, scope, flag, &role) else {
        return;
    };
    if buffer.memory != Memory::Flag {
        let hint = match (keyword, buffer.memory) {
            ("write", Memory::Device | Memory::Pinned) => {
                format!("; use `fill {flag} = VALUE` for buffers")
            }
            _ => String::new(),
        };
        cx.error_spanned_by(
            flag,
            format!("{}, but `{keyword}` takes a `FlagCell`{hint}", what(buffer)),
        );
    } else if keyword == "write" {
        writable(cx, buffer, flag, "`write` sets it");
    }
}

/// A host closure runs on the CPU in stream order: it may touch host memory only, and it
/// writes only what the pipeline may write.
fn host_statement(cx: &Ctxt, scope: &Scope<'_>, host: &ast::Host) {
    let role = "`reads(...)` and `writes(...)` list buffers; the closure captures scalars by value";
    let accesses = host.accesses.reads().map(|name| (name, false));
    for (name, writes) in accesses.chain(host.accesses.writes().map(|name| (name, true))) {
        let Some(buffer) = resolve(cx, scope, name, role) else {
            continue;
        };
        match buffer.memory {
            Memory::Device | Memory::Flag => cx.error_spanned_by(
                name,
                format!("{}, which a host closure cannot touch: it runs on the CPU; copy it into a `PinnedBuffer` first and list that", what(buffer)),
            ),
            Memory::Condition => cx.error_spanned_by(
                name,
                format!("{}, which a host closure cannot touch: {CONDITION_ROLE}, on the GPU; to see the decision on the host, have the kernel that sets it also write the value into a `DeviceBuffer`, copy that into a `PinnedBuffer` and list that", what(buffer)),
            ),
            Memory::Pinned | Memory::Pageable | Memory::Opaque => {
                if writes {
                    writable(cx, buffer, name, "the host closure writes it");
                }
            }
        }
    }
}

/// A called function declares every buffer it touches; each one it writes must be
/// writable. (That every buffer its arguments name is declared is checked in `accesses`.) A
/// `Condition` is not a buffer a function may take: only the kernels given it set it, and
/// between its setters and its test nothing else may (a function could replace the handle).
fn call_statement(cx: &Ctxt, scope: &Scope<'_>, call: &ast::Call) {
    let function = ast::function_name(&call.call);
    let role = "`reads(...)` and `writes(...)` list buffers; pass scalars as arguments";
    let listed = call.accesses.reads().map(|name| (name, false));
    for (name, writes) in listed.chain(call.accesses.writes().map(|name| (name, true))) {
        let Some(buffer) = resolve(cx, scope, name, role) else {
            continue;
        };
        if buffer.memory == Memory::Condition {
            cx.error_spanned_by(
                name,
                format!(
                    "{}; {CONDITION_ROLE}, so `{function}` cannot take it; pass it to a `launch` of a kernel that sets it",
                    what(buffer)
                ),
            );
        } else if writes {
            writable(cx, buffer, name, &format!("`{function}` writes it"));
        }
    }
}

/// A step is captured once into a CUDA graph and replayed, so nothing in it may block the
/// host, wait on the world outside the pipeline, or allocate.
fn not_capturable(cx: &Ctxt, statement: &ast::NotCapturable) {
    let word = &statement.word;
    let message = if *word == symbol::SYNCHRONIZE || *word == symbol::SYNC {
        format!(
            "`{word}` blocks the host and cannot be captured in a CUDA graph; stages are ordered by their accesses and `after`, and the host waits for a whole step outside the pipeline"
        )
    } else if *word == symbol::COPY_BLOCKING || *word == symbol::COPY_SYNC {
        format!(
            "`{word}` blocks the host and cannot be captured in a CUDA graph; write `copy src -> dst` with a `PinnedBuffer` on the host side"
        )
    } else if *word == symbol::WAIT_EVENT {
        format!(
            "`{word}` waits on an event from outside the pipeline, which a captured graph cannot do; order stages with `after`, or wait on a `FlagCell` param with `wait flag == VALUE`"
        )
    } else if *word == symbol::RECORD_EVENT {
        format!(
            "`{word}` wires an event by hand; the macro derives every event from the stages' accesses, and `after` adds an ordering no access implies"
        )
    } else if *word == symbol::ALLOC || *word == symbol::MALLOC {
        format!(
            "`{word}` cannot appear in a stage: a step is captured once and replayed, so memory is allocated with the pipeline; declare the buffer in `scratch {{ ... }}`"
        )
    } else {
        format!(
            "`{word}` cannot appear in a stage: a replayed graph would free memory it still uses; scratch buffers are freed with the pipeline and params by their owner"
        )
    };
    cx.error_spanned_by(word, message);
}

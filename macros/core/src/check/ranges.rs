//! Constant ranges. Two references of one statement to one buffer, one written: apart, they
//! compile (a copy from `f[0..4]` to `f[8..12]`, a launch given two halves); surely
//! overlapping (ranges that share elements, one element of an array named whole twice or
//! beside a range of it), they are an error on the references. A copy between known lengths
//! copies as many elements as it writes; a range of a scratch buffer of constant length lies
//! inside it. Each rule runs in every iteration of a `for` with constant bounds; what the
//! compiler cannot evaluate is checked before the step is enqueued, with the same message.

use proc_macro2::Span;
use quote::ToTokens;

use super::iterations::Evaluation;
use crate::ast::{self, BufRef, KernelParamType, tokens_string, type_string};
use crate::constant;
use crate::ctxt::Ctxt;
use crate::lower::bound;
use crate::scope::Scope;

/// The elements a range covers when its bounds are constants: `lo` (0 when left out) and
/// `hi`, `None` when it runs to the buffer's end.
pub(super) fn constant_bounds(reference: &BufRef<'_>) -> Option<(i128, Option<i128>)> {
    let range = reference.range?;
    let start = match range.start {
        Some(expr) => constant::value(expr)?,
        None => 0,
    };
    let end = match range.end {
        Some(expr) => Some(constant::value(expr)?),
        None => None,
    };
    Some((start, end))
}

/// Whether `reference` surely names no element: a constant range that ends where it starts
/// (`x[0..0]`), or one of a scratch buffer of constant length that starts at its end
/// (`t[16..]` of a 16-element `t`).
pub(super) fn names_no_element(scope: &Scope<'_>, reference: &BufRef<'_>) -> bool {
    let Some((start, end)) = constant_bounds(reference) else {
        return false;
    };
    let end = match end {
        Some(end) => Some(end),
        None if reference.index.is_none() => scratch_length(scope, reference.name),
        None => None,
    };
    end.is_some_and(|end| start >= end)
}

/// What a reference covers in one evaluation, when the compiler can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cover {
    /// Every element: `x[..]`, `x[0..]`.
    Whole,
    /// `lo..hi`, `hi` `None` when it runs to the buffer's end.
    Elements(i128, Option<i128>),
}

/// What range `reference` covers in evaluation `at` (it must have a range).
fn cover(reference: &BufRef<'_>, at: &Evaluation<'_>) -> Option<Cover> {
    let range = reference.range?;
    let start = match range.start {
        Some(expr) => at.value(expr)?,
        None => 0,
    };
    match range.end {
        None if start == 0 => Some(Cover::Whole),
        None => Some(Cover::Elements(start, None)),
        Some(expr) => Some(Cover::Elements(start, Some(at.value(expr)?))),
    }
}

/// Whether two references name the same buffer in evaluation `at`, and the same element when
/// it is an array: indices of one value, or written alike (a statement evaluates both at
/// once).
fn same_buffer(a: &BufRef<'_>, b: &BufRef<'_>, at: &Evaluation<'_>) -> bool {
    a.name == b.name
        && match (a.index, b.index) {
            (None, None) => true,
            (Some(x), Some(y)) => match (at.value(x), at.value(y)) {
                (Some(x), Some(y)) => x == y,
                _ => {
                    x.to_token_stream().to_string() == y.to_token_stream().to_string()
                        || exact_polynomial(x).is_some_and(|p| exact_polynomial(y) == Some(p))
                }
            },
            _ => false,
        }
}

/// `expr` as a polynomial whose every name is an unknown, where it has the same value as
/// `expr` in any evaluation: two expressions of one statement (or of two stages of one
/// iteration) with one polynomial have one value (`xs[m + 1]` and `xs[1 + m]`, `x[i]` and
/// `x[i + 0]`). A cast to a type narrower than 64 bits (or an alias) keeps only some bits,
/// so an expression with one is none.
fn exact_polynomial(expr: &syn::Expr) -> Option<constant::Poly> {
    if !constant::keeps_every_bit(expr) {
        return None;
    }
    constant::polynomial(expr, &|name| {
        Some(constant::Poly::unknown(&name.to_string()))
    })
}

/// The elements two ranges with both ends share in every evaluation, where their bounds are
/// polynomials that differ by constants (`x[m..m + 4]` and `x[m + 2..m + 6]` share `m +
/// 2..m + 4`), as text.
fn symbolic_shared(first: &BufRef<'_>, second: &BufRef<'_>) -> Option<(String, String)> {
    let (a, b) = (first.range?, second.range?);
    let bound = |e: Option<&syn::Expr>| match e {
        Some(e) => exact_polynomial(e),
        None => Some(constant::Poly::constant(0)),
    };
    let (a0, a1, b0, b1) = (
        bound(a.start)?,
        exact_polynomial(a.end?)?,
        bound(b.start)?,
        exact_polynomial(b.end?)?,
    );
    let offset = |p: &constant::Poly| p.sub(&a0)?.as_constant();
    let (start, end) =
        shared_elements((0, Some(offset(&a1)?)), (offset(&b0)?, Some(offset(&b1)?)))?;
    let at = |k: i128| a0.add(&constant::Poly::constant(k)).map(|p| p.render());
    Some((at(start)?, at(end)?))
}

/// How two references of one statement to one buffer surely alias, in the first evaluation
/// where they do; with the iteration (` when `i = 1``) when it depends on one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Alias {
    /// One of them names a whole buffer (`xs[1]`) that the other names too (`xs[1]`,
    /// `xs[1][0..4]`).
    Whole { when: String },
    /// Two ranges that share these elements (`None`: every one, `x[0..]` twice).
    Elements {
        shared: Option<(String, String)>,
        when: String,
    },
}

/// How `first` and `second`, both subscripted, of one statement alias, where the compiler
/// can tell that they do in some evaluation of the statement (`evaluations`: one per
/// iteration of a `for` with constant bounds, the loop variable at its value). Ranges it
/// cannot evaluate, and an open range beside the whole buffer (`x[4..]`, which shares
/// elements only when `x` holds more than 4), are left to the step.
pub(super) fn alias(
    first: &BufRef<'_>,
    second: &BufRef<'_>,
    evaluations: &[Evaluation<'_>],
) -> Option<Alias> {
    for at in evaluations {
        if !same_buffer(first, second, at) {
            continue;
        }
        let when = at.when(
            first
                .subscript_exprs()
                .into_iter()
                .chain(second.subscript_exprs()),
        );
        if first.range.is_none() || second.range.is_none() {
            // An empty range (`xs[1][0..0]`) beside the whole element names none of its
            // elements: the step lends both from one `Apart`, which hands them out.
            let empty = [first, second].into_iter().any(|r| {
                r.range.is_some()
                    && matches!(cover(r, at), Some(Cover::Elements(lo, Some(hi))) if lo >= hi)
            });
            if empty {
                continue;
            }
            return Some(Alias::Whole { when });
        }
        let (Some(a), Some(b)) = (cover(first, at), cover(second, at)) else {
            if let Some(shared) = symbolic_shared(first, second) {
                return Some(Alias::Elements {
                    shared: Some(shared),
                    when,
                });
            }
            continue;
        };
        let shared = match (a, b) {
            (Cover::Whole, Cover::Whole) => Some(None),
            (Cover::Whole, Cover::Elements(lo, Some(hi)))
            | (Cover::Elements(lo, Some(hi)), Cover::Whole) => (lo < hi).then_some(Some((lo, hi))),
            (Cover::Whole, Cover::Elements(_, None)) | (Cover::Elements(_, None), Cover::Whole) => {
                None
            }
            (Cover::Elements(a0, a1), Cover::Elements(b0, b1)) => {
                shared_elements((a0, a1), (b0, b1)).map(Some)
            }
        };
        if let Some(shared) = shared {
            let shared = shared.map(|(start, end)| (start.to_string(), end.to_string()));
            return Some(Alias::Elements { shared, when });
        }
    }
    None
}

/// Whether `a` and `b`, references of two statements (a reference without subscripts is the
/// whole buffer), surely name a common element in evaluation `at`: one buffer (an array's
/// element of one value, or written alike), and ranges that share elements. A range that may
/// be empty (`x[4..]`, bounds that do not evaluate) shares none that the compiler knows of.
pub(super) fn surely_overlap(a: &BufRef<'_>, b: &BufRef<'_>, at: &Evaluation<'_>) -> bool {
    if !same_buffer(a, b, at) {
        return false;
    }
    let covered = |r: &BufRef<'_>| match r.range {
        None => Some(Cover::Whole),
        Some(_) => cover(r, at),
    };
    match (covered(a), covered(b)) {
        (Some(Cover::Whole), Some(Cover::Whole)) => true,
        (Some(Cover::Whole), Some(Cover::Elements(lo, Some(hi))))
        | (Some(Cover::Elements(lo, Some(hi))), Some(Cover::Whole)) => lo < hi,
        (Some(Cover::Elements(a0, a1)), Some(Cover::Elements(b0, b1))) => {
            shared_elements((a0, a1), (b0, b1)).is_some()
        }
        _ => false,
    }
}

/// The first and last span of a reference as written, for an error on all of it: `x[0..4]`,
/// `xs[1]`.
pub(super) fn reference_spans(r: &BufRef<'_>) -> (Span, Span) {
    (r.name.span(), r.last)
}

/// The elements two constant ranges of one buffer share, if they surely share some: a range
/// left open at its end runs to the buffer's length, which is at least the other's end.
fn shared_elements(a: (i128, Option<i128>), b: (i128, Option<i128>)) -> Option<(i128, i128)> {
    let start = a.0.max(b.0);
    let end = match (a.1, b.1) {
        (Some(x), Some(y)) => x.min(y),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => return None,
    };
    (start < end).then_some((start, end))
}

/// A reference as written: `f[0..4]`, `xs[1][2..]`.
pub(super) fn reference_text(r: &BufRef<'_>) -> String {
    let index = r
        .index
        .map_or(String::new(), |i| format!("[{}]", tokens_string(i)));
    let range = r.range.map_or(String::new(), |b| {
        let bound = |e: Option<&syn::Expr>| e.map_or(String::new(), tokens_string);
        format!("[{}..{}]", bound(b.start), bound(b.end))
    });
    format!("{}{index}{range}", r.name)
}

/// Rule: one statement's ranges of one buffer, one of them written, do not overlap when the
/// compiler can tell: a kernel's pointer parameters are `__restrict__` and a copy's ends must
/// be apart. Reports an [`Alias::Elements`] of `first` and `second` (`written` is the one
/// written).
pub(super) fn overlapping_ranges(
    cx: &Ctxt,
    first: &BufRef<'_>,
    second: &BufRef<'_>,
    written: &BufRef<'_>,
    shared: Option<(String, String)>,
    when: &str,
) {
    let (Some(ra), Some(rb)) = (first.range, second.range) else {
        return;
    };
    let text = reference_text;
    let elements = match shared {
        Some((start, end)) => format!("elements {start}..{end}"),
        None => "every element".to_owned(),
    };
    cx.error_between(
        ra.span,
        rb.span,
        format!(
            "`{}` and `{}` overlap at {elements}{when}, and `{}` is written: the ranges one statement names of a buffer must be apart where one is written; name elements that do not overlap, or a second buffer",
            text(first),
            text(second),
            text(written)
        ),
    );
}

/// The number of elements `reference` names in evaluation `at`, when the compiler can tell:
/// a range whose bounds evaluate (`x[0..128]`, `x[..128]`), a range of a scratch buffer of
/// constant length open at its end (`t[4..]`), or a whole scratch buffer of constant length.
/// A range of a param open at its end, or a whole param, runs to a length known only when the
/// step runs.
fn extent_length(scope: &Scope<'_>, reference: &BufRef<'_>, at: &Evaluation<'_>) -> Option<i128> {
    match reference.range {
        Some(range) => {
            let start = range.start.map_or(Some(0), |expr| at.value(expr))?;
            let end = match range.end {
                Some(expr) => at.value(expr)?,
                None => scratch_length(scope, reference.name)?,
            };
            Some(end - start)
        }
        None if reference.index.is_none() => scratch_length(scope, reference.name),
        None => None,
    }
}

/// Rule: a copy copies as many elements as its destination holds: where both lengths are
/// known (constant ranges, in each iteration of a `for` with constant bounds; a whole scratch
/// buffer of constant length) they must be equal (a copy of `f[0..4]` into `g[0..8]`, or of a
/// 16-element scratch `t` into `x[0..32]`, was refused only when the step ran).
pub(super) fn copy_lengths(
    cx: &Ctxt,
    scope: &Scope<'_>,
    src: &BufRef<'_>,
    dst: &BufRef<'_>,
    evaluations: &[Evaluation<'_>],
) {
    for at in evaluations {
        let (Some(from), Some(to)) = (extent_length(scope, src, at), extent_length(scope, dst, at))
        else {
            continue;
        };
        if from == to || from < 0 || to < 0 {
            continue;
        }
        let when = at.when(
            src.subscript_exprs()
                .into_iter()
                .chain(dst.subscript_exprs()),
        );
        let short = from.min(to);
        let fix = match (src.range, dst.range) {
            (Some(_), Some(_)) => format!(
                "a copy's source and destination ranges have one length; make both ranges {short} long"
            ),
            // One side is a whole scratch buffer: the other range takes its length, or a
            // range of the buffer takes the other's.
            (None, Some(_)) | (Some(_), None) => {
                let (whole, part, whole_len, range) = match (src.range, dst.range) {
                    (None, Some(range)) => (src, dst, from, range),
                    (Some(range), _) => (dst, src, to, range),
                    (None, None) => return,
                };
                let lo = range.start.and_then(|e| at.value(e));
                let longer = match lo {
                    Some(lo) => format!(
                        "name {whole_len} elements of `{}` (`{}[{}..{}]`)",
                        part.name,
                        part.name,
                        range.start.map_or(String::new(), tokens_string),
                        lo + whole_len
                    ),
                    None => format!("name {whole_len} elements of `{}`", part.name),
                };
                let shorter = if whole_len > short {
                    format!(", or copy part of `{0}` (`{0}[..{short}]`)", whole.name)
                } else {
                    String::new()
                };
                format!(
                    "a copy's source and destination have one length, and scratch buffer `{}` holds {whole_len}; {longer}{shorter}",
                    whole.name
                )
            }
            (None, None) => format!(
                "a copy's source and destination have one length; declare scratch buffers `{}` and `{}` with one length, or copy part of the longer one (`{}[..{short}]`)",
                src.name,
                dst.name,
                if from > to { src.name } else { dst.name },
            ),
        };
        // From the source's range (its name when whole) to the destination's end.
        let first = src.range.map_or(src.name.span(), |range| range.span);
        let last = dst.last;
        cx.error_between(
            first,
            last,
            format!("`copy` from {from} elements into {to}{when}: {fix}"),
        );
        return;
    }
    // Lengths over params whose difference is a constant other than 0 (`u[0..n]` into
    // `v[0..n + 1]`) differ whatever the params are.
    let (Some(from), Some(to)) = (symbolic_length(scope, src), symbolic_length(scope, dst)) else {
        return;
    };
    if from
        .sub(&to)
        .and_then(|d| d.as_constant())
        .is_none_or(|d| d == 0)
    {
        return;
    }
    let text = |p: &constant::Poly| match p.as_constant() {
        Some(n) => n.to_string(),
        None => format!("`{}`", p.render()),
    };
    let first = src.range.map_or(src.name.span(), |range| range.span);
    cx.error_between(
        first,
        dst.last,
        format!(
            "`copy` from {} elements into {}, whatever the params are: a copy's source and destination ranges have one length; make both ranges {} long",
            text(&from),
            text(&to),
            text(&from),
        ),
    );
}

/// The length of a range with both ends, as a polynomial of the names in it, where it has
/// one ([`exact_polynomial`]) and every name is a scalar param, a loop's name or a length
/// (`x.len()`). A `const` item is left to the assertion the macro emits for it, which the
/// compiler evaluates with its value.
fn symbolic_length(scope: &Scope<'_>, reference: &BufRef<'_>) -> Option<constant::Poly> {
    let range = reference.range?;
    let known = |expr: &syn::Expr| {
        crate::ast::mentions(expr).iter().all(|m| {
            matches!(scope.value(&m.ident), Some(crate::scope::Value::Scalar(_)))
                || super::iterations::is_loop_name(scope, &m.ident)
                || scope.buffer(&m.ident).is_some()
        })
    };
    let start = match range.start {
        Some(start) if known(start) => exact_polynomial(start)?,
        Some(_) => return None,
        None => constant::Poly::constant(0),
    };
    let end = range.end?;
    if !known(end) {
        return None;
    }
    exact_polynomial(end)?.sub(&start)
}

/// Rule: a range of a scratch buffer whose length is a constant lies inside it where its
/// bounds are constants (in each iteration of a `for` with constant bounds): `fill t[0..17]`
/// of a 16-element `t` would write past its end, and was refused only when the step ran. An
/// empty range at the end (`t[16..]`) is inside; an inverted one is reported on its own.
pub(super) fn scratch_ranges_inside(cx: &Ctxt, scope: &Scope<'_>) {
    for (id, stage) in scope.stages.iter().enumerate() {
        let evaluations = Evaluation::of_stage(scope, id);
        for statement in ast::flatten(&stage.statements) {
            for reference in scope.statement_refs(statement) {
                let (Some(range), Some(len)) =
                    (reference.range, scratch_length(scope, reference.name))
                else {
                    continue;
                };
                for at in &evaluations {
                    let start = range.start.map_or(Some(0), |expr| at.value(expr));
                    let end = range.end.and_then(|expr| at.value(expr));
                    let past = match (start, end) {
                        // Past the end whatever the start (an inverted range is an error too).
                        (_, Some(end)) if end > len => format!("ends at element {end}"),
                        (Some(start), _) if start > len => format!("starts at element {start}"),
                        _ => continue,
                    };
                    let when = at.when(reference.subscript_exprs());
                    let evaluated = match (when.is_empty(), start, end) {
                        (true, ..) => String::new(),
                        (false, Some(start), Some(end)) => {
                            format!(" (`{}[{start}..{end}]`{when})", reference.name)
                        }
                        (false, Some(start), None) => {
                            format!(" (`{}[{start}..]`{when})", reference.name)
                        }
                        (false, None, _) => when,
                    };
                    let needed = end.unwrap_or(0).max(start.unwrap_or(0));
                    scratch_range_past_end(cx, scope, &reference, len, &past, &evaluated, needed);
                    break;
                }
            }
        }
    }
}

/// The error of [`scratch_ranges_inside`]: `past` says where `reference` goes past `len`
/// (` (`t[16..20]` when `i = 4`)` in `evaluated` inside a loop), `needed` the length that
/// would hold it.
fn scratch_range_past_end(
    cx: &Ctxt,
    scope: &Scope<'_>,
    reference: &BufRef<'_>,
    len: i128,
    past: &str,
    evaluated: &str,
    needed: i128,
) {
    let Some(range) = reference.range else { return };
    let name = reference.name;
    let declared = scope
        .buffer(name)
        .map(|id| &scope.buffers[id])
        .map_or(String::new(), |buffer| {
            format!(" (`{name}: {} = {needed}`)", type_string(buffer.ty))
        });
    cx.error_at(
        range.span,
        format!(
            "`{}`{evaluated} {past}, past the end of scratch buffer `{name}`, which holds {len} elements: the statement would reach past it; name a range inside `{name}` (within `{name}[0..{len}]`), or declare `{name}` with at least {needed} elements{declared}",
            reference_text(reference),
        ),
    );
}

/// The number of elements a buffer argument names, when the compiler can tell: a range whose
/// bounds are constants (`x[0..128]`, `x[..128]`), or a whole scratch buffer of constant
/// length or a range of one open at its end. A param's range open at its end, or a whole
/// param, runs to a length known only when the step runs.
fn window_length(scope: &Scope<'_>, reference: &BufRef<'_>) -> Option<i128> {
    extent_length(scope, reference, &Evaluation::default())
}

/// The length of scratch buffer `name`, when its declaration gives a constant.
fn scratch_length(scope: &Scope<'_>, name: &syn::Ident) -> Option<i128> {
    let buffer = &scope.buffers[scope.buffer(name)?];
    if !buffer.scratch || buffer.array {
        return None;
    }
    constant::value(buffer.len?)
}

/// The value of a kernel's bound for one launch, when every scalar argument it multiplies is
/// a constant: `scale × p₁ × … × pₖ + offset`.
fn bound_value(bound: &bound::Bound<'_>, args: &[&syn::Expr]) -> Option<i128> {
    let mut value = i128::from(bound.scale);
    for &(position, _) in &bound.factors {
        let factor = constant::value(args.get(position)?)?;
        if factor < 0 {
            return None;
        }
        value = value.checked_mul(factor)?;
    }
    value.checked_add(i128::from(bound.offset))
}

/// Rule: a window given to a kernel parameter with a bound (`y: &mut [f32; n]`) holds at
/// least the bound's value, when both are constants: the kernel indexes it below the bound,
/// so a shorter window is an access past its end. The runtime refuses the same launch before
/// the step when either depends on a param or a `const` item; here it is a compile error on
/// the argument.
pub(super) fn windows_hold_bounds(
    cx: &Ctxt,
    scope: &Scope<'_>,
    kernel: &ast::Kernel,
    launch: &ast::Launch,
) {
    let args: Vec<&syn::Expr> = launch.args.iter().collect();
    for (param, arg) in kernel.params.iter().zip(&launch.args) {
        let KernelParamType::Slice {
            bound: Some(expr), ..
        } = param.kind()
        else {
            continue;
        };
        let Ok(resolved) = bound::resolve(kernel, expr) else {
            continue;
        };
        let (Some(reference), Some(needed)) = (BufRef::of_expr(arg), bound_value(&resolved, &args))
        else {
            continue;
        };
        let Some(length) = window_length(scope, &reference) else {
            continue;
        };
        if length >= needed || length < 0 {
            continue;
        }
        let bound_text = tokens_string(expr);
        let (with_args, smaller) = if resolved.factors.is_empty() {
            (String::new(), String::new())
        } else {
            (
                format!(" = {needed}"),
                format!(", or pass a smaller `{bound_text}`"),
            )
        };
        let name = reference.name;
        let fix = match reference.range {
            Some(range) => {
                let start = range.start.map_or(String::new(), tokens_string);
                let from = range.start.and_then(constant::value).unwrap_or(0);
                match scratch_length(scope, name) {
                    // The window the fix would name runs past the scratch buffer itself.
                    Some(len) if from + needed > len => {
                        let inside = if needed <= len {
                            format!(
                                ", or pass a window of {needed} elements inside its {len} (`{name}[{}..{len}]`)",
                                len - needed
                            )
                        } else {
                            String::new()
                        };
                        format!(
                            "declare scratch buffer `{name}` with at least {} elements{inside}",
                            from + needed
                        )
                    }
                    _ => format!(
                        "pass a window of {needed} elements (`{name}[{start}..{}]`)",
                        from + needed
                    ),
                }
            }
            None => format!("declare `{name}` with at least {needed} elements"),
        };
        cx.error_spanned_by(
            arg,
            format!(
                "`{}` holds {length} elements, but `{}` indexes its `{}` below `{bound_text}`{with_args}: the kernel would reach past the end; {fix}{smaller}",
                reference_text(&reference),
                kernel.name,
                param.name,
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::shared_elements;

    #[test]
    fn constant_ranges_share_elements_only_where_both_cover_them() {
        assert_eq!(shared_elements((0, Some(4)), (8, Some(12))), None);
        assert_eq!(shared_elements((0, Some(4)), (4, Some(8))), None);
        assert_eq!(shared_elements((0, Some(6)), (4, Some(8))), Some((4, 6)));
        // `f[4..]` runs to the length, which is at least 6.
        assert_eq!(shared_elements((4, None), (0, Some(6))), Some((4, 6)));
        assert_eq!(shared_elements((6, None), (0, Some(6))), None);
        // Two open ends: the length decides, which the compiler does not know.
        assert_eq!(shared_elements((0, None), (4, None)), None);
    }
}

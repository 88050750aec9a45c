//! Two ranges of one buffer in one statement: apart, they compile (a copy from `f[0..4]` to
//! `f[8..12]`, a launch given two halves); overlapping where one is written, they are an error
//! on the ranges when their bounds are constants. Ranges the compiler cannot evaluate are
//! checked before the step is enqueued, with the same message.

use quote::ToTokens;

use crate::ast::{self, BufRef, KernelParamType, tokens_string};
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

/// Whether two references name the same buffer, and the same element when it is an array
/// (indices written alike name one element: a statement evaluates both at once).
fn same_buffer(a: &BufRef<'_>, b: &BufRef<'_>) -> bool {
    a.name == b.name
        && match (a.index, b.index) {
            (None, None) => true,
            (Some(x), Some(y)) => match (constant::value(x), constant::value(y)) {
                (Some(x), Some(y)) => x == y,
                _ => x.to_token_stream().to_string() == y.to_token_stream().to_string(),
            },
            _ => false,
        }
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

/// Rule: one statement's ranges of one buffer, one of them written (`written` says which of
/// the two), do not overlap when the compiler can tell: a kernel's pointer parameters are
/// `__restrict__` and a copy's ends must be apart.
pub(super) fn apart_in_one_statement(
    cx: &Ctxt,
    first: &BufRef<'_>,
    second: &BufRef<'_>,
    written: &BufRef<'_>,
) {
    if !same_buffer(first, second) {
        return;
    }
    let (Some(a), Some(b)) = (constant_bounds(first), constant_bounds(second)) else {
        return;
    };
    let Some((start, end)) = shared_elements(a, b) else {
        return;
    };
    let (Some(ra), Some(rb)) = (first.range, second.range) else {
        return;
    };
    let text = reference_text;
    cx.error_between(
        ra.span,
        rb.span,
        format!(
            "`{}` and `{}` overlap at elements {start}..{end}, and `{}` is written: the ranges one statement names of a buffer must be apart where one is written; name elements that do not overlap, or a second buffer",
            text(first),
            text(second),
            text(written)
        ),
    );
}

/// Rule: a copy between two ranges whose bounds are constants copies as many elements as the
/// destination holds: the lengths must be equal (a copy of `f[0..4]` into `g[0..8]` was refused
/// only when the step ran).
pub(super) fn copy_lengths(cx: &Ctxt, src: &BufRef<'_>, dst: &BufRef<'_>) {
    let length = |r: &BufRef<'_>| match constant_bounds(r)? {
        (start, Some(end)) => Some(end - start),
        _ => None,
    };
    let (Some(from), Some(to)) = (length(src), length(dst)) else {
        return;
    };
    let (Some(rs), Some(rd)) = (src.range, dst.range) else {
        return;
    };
    if from != to && from >= 0 && to >= 0 {
        cx.error_between(
            rs.span,
            rd.span,
            format!(
                "`copy` from {from} elements into {to}: a copy's source and destination ranges have one length; make both ranges {} long",
                from.min(to)
            ),
        );
    }
}

/// The number of elements a buffer argument names, when the compiler can tell: a range whose
/// bounds are constants (`x[0..128]`, `x[..128]`), or a whole scratch buffer of constant
/// length. A range open at its end, or a param, runs to a length known only when the step
/// runs.
fn window_length(scope: &Scope<'_>, reference: &BufRef<'_>) -> Option<i128> {
    match reference.range {
        Some(range) => {
            let start = range.start.map_or(Some(0), constant::value)?;
            let end = constant::value(range.end?)?;
            Some(end - start)
        }
        None if reference.index.is_none() => scratch_length(scope, reference.name),
        None => None,
    }
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

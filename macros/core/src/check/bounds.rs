//! Rules on kernel bounds (`y: &mut [f32; n]`): a bound names the kernel's own integer
//! parameters in the one shape the runtime checks, only buffers have one, and a buffer
//! beside an integer parameter is bound or declared `unbounded` on purpose.
//!
//! What a bound means, and why it is what `unsafe kernels` promises, is in the crate
//! documentation; the grammar is in [`crate::lower::bound`].

use syn::{Expr, Type};

use super::hint::suggestion;
use crate::ast::{self, KernelParamType, mentions, tokens_string, ungroup_type};
use crate::ctxt::Ctxt;
use crate::lower::bound::{BoundError, MAX_FACTORS, integer_parameters, resolve};
use crate::scope::Scope;
use crate::symbol::{INDEX_SCALARS, UNBOUNDED};

/// Runs the bound rules over every kernel declaration.
pub fn check(cx: &Ctxt, scope: &Scope<'_>) {
    for kernel in &scope.kernels {
        for param in &kernel.decl.params {
            match param.kind() {
                KernelParamType::Slice {
                    bound: Some(bound), ..
                } => bound_expression(cx, kernel.decl, param, bound),
                KernelParamType::Slice {
                    bound: None,
                    unbounded: false,
                    mutable,
                    elem,
                } => unbounded_beside_a_length(cx, kernel.decl, param, mutable, elem),
                KernelParamType::Scalar(ty) => by_value_array(cx, kernel.decl, param, ty),
                _ => {}
            }
        }
    }
}

/// A slice with no bound in a kernel that takes an integer is most likely indexed below that
/// integer, and then a launch with the integer past the buffer writes outside it, from a
/// program with no `unsafe` of its own beyond the declaration (issue 21). So the unbounded
/// form must be written on purpose: `&mut [f32; n]` binds it, `&mut [f32; unbounded]` says
/// the kernel checks its own indices. Reported on the slice's own type.
fn unbounded_beside_a_length(
    cx: &Ctxt,
    kernel: &ast::Kernel,
    param: &ast::KernelParam,
    mutable: bool,
    elem: &Type,
) {
    let Some(length) = kernel.params.iter().find(|p| {
        matches!(p.kind(), KernelParamType::Scalar(ty)
            if INDEX_SCALARS.contains(&tokens_string(ty).as_str()))
    }) else {
        return;
    };
    let (p, n, k) = (&param.name, &length.name, &kernel.name);
    let reference = if mutable { "&mut " } else { "&" };
    let elem = tokens_string(elem);
    cx.error_spanned_by(
        &param.ty,
        format!(
            "`{p}` has no bound, but `{k}` takes the integer `{n}`: a launch with `{n}` past \
             `{p}`'s length would index outside it; if `{k}` indexes `{p}` below `{n}`, write \
             `{p}: {reference}[{elem}; {n}]`; if it checks its own indices, write \
             `{p}: {reference}[{elem}; {UNBOUNDED}]`"
        ),
    );
}

/// A buffer's bound is a product of the kernel's integer parameters and integer literals,
/// optionally plus a literal: what the runtime can evaluate, without loss, at every launch.
fn bound_expression(cx: &Ctxt, kernel: &ast::Kernel, param: &ast::KernelParam, bound: &Expr) {
    let Err(errors) = resolve(kernel, bound) else {
        return;
    };
    let k = &kernel.name;
    let p = &param.name;
    let integers = integer_parameters(kernel);
    let example = match integers.first() {
        Some(n) => format!("such as `{n}`"),
        None => "such as `n: u32`, declared in the signature".to_owned(),
    };
    for error in errors {
        match error {
            BoundError::Unsupported(expr) => cx.error_spanned_by(
                expr,
                format!(
                    "unsupported bound `{}`; a bound is a product of `{k}`'s integer parameters \
                     and integer literals, optionally plus a literal: `n`, `nx * ny`, `3 * n`, \
                     `n + 1`; for any other extent, pass it as a parameter of its own and \
                     bound `{p}` by that",
                    bound_text(expr)
                ),
            ),
            BoundError::Unknown(ident) => {
                let hint = suggestion(
                    ident,
                    &integers,
                    &format!("a bound names integer parameters of `{k}`, {example}"),
                );
                cx.error_spanned_by(
                    ident,
                    format!("the bound of `{p}` names `{ident}`, which is not a parameter of `{k}`; {hint}"),
                );
            }
            BoundError::Buffer(ident) => cx.error_spanned_by(
                ident,
                format!(
                    "the bound of `{p}` names `{ident}`, a buffer; a bound counts elements, so it \
                     names integer parameters of `{k}`, {example}"
                ),
            ),
            BoundError::NotInteger { ident, ty } => cx.error_spanned_by(
                ident,
                format!(
                    "the bound of `{p}` names `{ident}`, which is `{ty}`; a bound counts \
                     elements, so it names integer parameters (`u32`, `u64`, `usize`, `i32`, \
                     ...) of `{k}`, {example}"
                ),
            ),
            BoundError::TooManyFactors(expr) => cx.error_spanned_by(
                expr,
                format!(
                    "the bound of `{p}` multiplies more than {MAX_FACTORS} parameters; pass \
                     the product as a parameter of its own and bound `{p}` by that"
                ),
            ),
            BoundError::Overflow(expr) => cx.error_spanned_by(
                expr,
                format!(
                    "the constants in the bound `{}` of `{p}` do not fit in a `u64`",
                    bound_text(expr)
                ),
            ),
        }
    }
}

/// A bound as the user writes it: `tokens_string` joins `(` to what precedes it (for calls),
/// which after an operator reads `n *(m + 1)`.
fn bound_text(expr: &Expr) -> String {
    let mut text = tokens_string(expr);
    for op in ['*', '+', '-', '/', '%'] {
        text = text.replace(&format!("{op}("), &format!("{op} ("));
    }
    text
}

/// Only buffers have indices to bound: an array passed by value whose length names one of
/// the kernel's parameters (`coeffs: [f32; n]`) is a bound written on a scalar. (An array of
/// constant length, `[f32; 4]`, is an ordinary by-value parameter.)
fn by_value_array(cx: &Ctxt, kernel: &ast::Kernel, param: &ast::KernelParam, ty: &Type) {
    let Type::Array(array) = ungroup_type(ty) else {
        return;
    };
    let names_a_parameter = mentions(&array.len)
        .iter()
        .any(|mention| kernel.params.iter().any(|p| p.name == mention.ident));
    if !names_a_parameter {
        return;
    }
    let p = &param.name;
    let elem = tokens_string(&array.elem);
    let len = tokens_string(&array.len);
    cx.error_spanned_by(
        &param.ty,
        format!(
            "`{p}` is passed by value, so it has no indices to bound; for a buffer `{}` reads \
             write `{p}: &[{elem}; {len}]`, or `{p}: &mut [{elem}; {len}]` if it writes it",
            kernel.name
        ),
    );
}

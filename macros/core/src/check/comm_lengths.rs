//! Communication operands whose ranges are not constants but polynomials of the names in them
//! (`a[nx..nx + 4]`, `b[0..nx + 1]`): every name has one value while a group runs, so two
//! lengths whose difference is a constant other than 0 differ whatever the params are, and two
//! ranges whose bounds differ by constants share the same elements in every step. A cast that
//! may change a value (`as u32`) makes a bound unknown ([`constant::keeps_every_bit`]). The
//! rules of `collective.rs` on lengths and overlaps use these where a length is not a
//! constant.

use syn::Expr;

use crate::ast::{self, Comm, ungroup_expr};
use crate::constant::{self, Poly};
use crate::ctxt::Ctxt;
use crate::scope::Scope;

/// `expr` as a polynomial whose every name is an unknown, where it has that value.
fn exact(expr: &Expr) -> Option<Poly> {
    if !constant::keeps_every_bit(expr) {
        return None;
    }
    constant::polynomial(expr, &|name| Some(Poly::unknown(&name.to_string())))
}

/// The range of `operand` as `start..end` polynomials, where it has both ends.
fn bounds(operand: &ast::Operand) -> Option<(Poly, Poly)> {
    let Expr::Range(range) = ungroup_expr(operand.range.as_ref()?) else {
        return None;
    };
    let start = match &range.start {
        Some(start) => exact(start)?,
        None => Poly::constant(0),
    };
    let end = exact(range.end.as_ref()?)?;
    let end = match range.limits {
        syn::RangeLimits::HalfOpen(_) => end,
        syn::RangeLimits::Closed(_) => end.add(&Poly::constant(1))?,
    };
    Some((start, end))
}

/// The number of elements `operand` names, as a polynomial, where its range has both ends.
pub(super) fn length(operand: &ast::Operand) -> Option<Poly> {
    let (start, end) = bounds(operand)?;
    let length = end.sub(&start)?;
    // An inverted range (`a[4..2]`) is reported as such by the range checks; it has no length
    // to pair.
    match length.as_constant() {
        Some(n) if n < 0 => None,
        _ => Some(length),
    }
}

/// Whether two lengths differ in every step: their difference is a constant other than 0.
pub(super) fn surely_differ(a: &Poly, b: &Poly) -> bool {
    a.sub(b)
        .and_then(|difference| difference.as_constant())
        .is_some_and(|difference| difference != 0)
}

/// The elements the ranges of `a` and `b` share in every step, as text (`nx + 2..nx + 4`),
/// where their bounds differ by constants and they share some.
pub(super) fn shared(a: &ast::Operand, b: &ast::Operand) -> Option<(String, String)> {
    let ((a0, a1), (b0, b1)) = (bounds(a)?, bounds(b)?);
    let offset = |p: &Poly| p.sub(&a0)?.as_constant();
    let (a_end, b_start, b_end) = (offset(&a1)?, offset(&b0)?, offset(&b1)?);
    let (start, end) = (b_start.max(0), a_end.min(b_end));
    if start >= end {
        return None;
    }
    let at = |k: i128| a0.add(&Poly::constant(k)).map(|p| p.render());
    Some((at(start)?, at(end)?))
}

/// `sends_fit_receives` (`collective.rs`) where some length is not a constant: each length
/// as a polynomial (`b[0..nx + 1]` takes `nx + 1`); once the sends and receives of equal
/// lengths are paired, a receive whose length differs from every send left by a constant
/// other than 0 pairs with none, whatever the params are.
pub(super) fn lengths_differ(
    cx: &Ctxt,
    scope: &Scope<'_>,
    sends: &[&ast::Operand],
    recvs: &[&ast::Operand],
) {
    let polynomials = |operands: &[&ast::Operand]| -> Option<Vec<Poly>> {
        operands
            .iter()
            .map(|o| match super::collective::operand_length(scope, o) {
                Some(n) => Some(Poly::constant(n)),
                None => length(o),
            })
            .collect()
    };
    let (Some(mut left), Some(taken)) = (polynomials(sends), polynomials(recvs)) else {
        return;
    };
    let mut unpaired = Vec::new();
    for (k, length) in taken.iter().enumerate() {
        match left.iter().position(|sent| sent == length) {
            Some(at) => {
                left.remove(at);
            }
            None => unpaired.push(k),
        }
    }
    let Some(&k) = unpaired
        .iter()
        .find(|&&k| left.iter().all(|sent| surely_differ(sent, &taken[k])))
    else {
        return;
    };
    let text = |p: &Poly| match p.as_constant() {
        Some(n) => n.to_string(),
        None => format!("`{}`", p.render()),
    };
    let carried: Vec<String> = left.iter().map(text).collect();
    super::collective::recv_unpaired(
        cx,
        recvs[k],
        &text(&taken[k]),
        &carried,
        ", whatever the params are",
    );
}

/// `both_sides_one_length` (`collective.rs`) where a length is not a constant: lengths whose
/// difference is a constant other than 0 (`a[nx..nx + 4] -> b[nx..nx + 8]`) differ whatever
/// the params are.
pub(super) fn one_length(
    cx: &Ctxt,
    scope: &Scope<'_>,
    comm: &Comm,
    src: &ast::Operand,
    dst: &ast::Operand,
) {
    let length = |o: &ast::Operand| match super::collective::operand_length(scope, o) {
        Some(n) => Some(Poly::constant(n)),
        None => length(o),
    };
    let (Some(from), Some(to)) = (length(src), length(dst)) else {
        return;
    };
    if !surely_differ(&from, &to) {
        return;
    }
    let text = |p: &Poly| match p.as_constant() {
        Some(n) => n.to_string(),
        None => format!("`{}`", p.render()),
    };
    cx.error_between(
        src.name.span(),
        dst.name.span(),
        format!(
            "`{}{} {} -> {}` moves {} elements into {}, whatever the params are: both sides of `{}` have one length; name as many elements on both sides",
            comm.word(),
            comm.reduce_op().map_or(String::new(), |op| format!("({op})")),
            super::collective::operand_text(src),
            super::collective::operand_text(dst),
            text(&from),
            text(&to),
            comm.word(),
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operand(source: &str) -> ast::Operand {
        syn::parse_str(source).expect("operand")
    }

    #[test]
    fn lengths_and_shared_elements_follow_the_names() {
        let length = |s: &str| length(&operand(s)).map(|p| p.render());
        assert_eq!(length("a[nx..nx + 4]").as_deref(), Some("4"));
        assert_eq!(length("a[..=n]").as_deref(), Some("n + 1"));
        assert_eq!(length("a[(n as u32) as usize..n]"), None);
        assert_eq!(length("a[n..]"), None);
        let (four, five) = (Poly::constant(4), Poly::constant(5));
        assert!(surely_differ(&four, &five));
        assert!(!surely_differ(&Poly::unknown("n"), &four));
        assert_eq!(
            shared(&operand("a[nx..nx + 4]"), &operand("a[nx + 2..nx + 6]")),
            Some(("nx + 2".to_owned(), "nx + 4".to_owned()))
        );
        assert_eq!(
            shared(&operand("a[nx..nx + 4]"), &operand("a[nx + 4..nx + 8]")),
            None
        );
        assert_eq!(shared(&operand("a[0..4]"), &operand("a[n..n + 4]")), None);
    }
}

//! Rule: one launch's `on rank` parts of a window are apart. Every rank runs the same launch,
//! so a launch writing `halos[..n] on rank up` and `halos[..n] on rank down` has each rank's
//! `[..n]` written by two neighbours at once: the one whose `up` it is and the one whose
//! `down` it is. On two ranks (both neighbours one rank) the step refuses it when it runs; on
//! three or more it would race, so it is an error here whenever the two ranges surely share
//! elements. Ranges the compiler cannot compare are checked before the step is enqueued
//! (`window/pipeline_ops.rs`, `apart`).

use syn::spanned::Spanned;

use crate::ast::{self, BufRef, tokens_string};
use crate::constant;
use crate::ctxt::Ctxt;
use crate::scope::Scope;

/// One bound of a range as the compiler sees it: a constant, or the expression's text.
#[derive(PartialEq, Eq)]
enum Bound {
    Constant(i128),
    Text(String),
    /// A range open at its end: the window's length.
    Length,
}

impl Bound {
    fn of(expr: Option<&syn::Expr>, missing: Bound) -> Bound {
        match expr {
            None => missing,
            Some(e) => {
                constant::value(e).map_or_else(|| Bound::Text(tokens_string(e)), Bound::Constant)
            }
        }
    }
}

/// A written part: where the user wrote it, its bounds, and the rank it goes to.
struct Part<'a> {
    arg: &'a syn::Expr,
    reference: BufRef<'a>,
    start: Bound,
    end: Bound,
    rank: String,
}

/// Whether two parts of one window surely share elements: written alike, starting at one
/// element, or constant ranges that overlap (an empty range is taken to be a mistake too).
fn overlap(a: &Part<'_>, b: &Part<'_>) -> bool {
    if a.start == b.start {
        return true;
    }
    match (&a.start, &a.end, &b.start, &b.end) {
        (Bound::Constant(s1), e1, Bound::Constant(s2), e2) => {
            let end = |e: &Bound| match e {
                Bound::Constant(v) => Some(*v),
                _ => None,
            };
            match (end(e1), end(e2)) {
                (Some(e1), Some(e2)) => s1.max(s2) < &e1.min(e2),
                // Open at the end (the length, at least the other's end): from the later start.
                (None, Some(e)) if matches!(e1, Bound::Length) => s1 < &e,
                (Some(e), None) if matches!(e2, Bound::Length) => s2 < &e,
                (None, None) => matches!((e1, e2), (Bound::Length, Bound::Length)),
                _ => false,
            }
        }
        _ => false,
    }
}

/// Checks the `on rank` parts of each window `launch` writes.
pub(super) fn parts_apart(cx: &Ctxt, scope: &Scope<'_>, launch: &ast::Launch) {
    let parts: Vec<Part<'_>> = launch
        .args
        .iter()
        .zip(&launch.ranks)
        .filter_map(|(arg, rank)| {
            let rank = rank.as_ref()?;
            let reference = BufRef::of_expr(arg)?;
            let id = scope.buffer(reference.name)?;
            if !scope.buffers[id].is_window() || reference.index.is_some() {
                return None;
            }
            let (start, end) = match reference.range {
                Some(r) => (
                    Bound::of(r.start, Bound::Constant(0)),
                    Bound::of(r.end, Bound::Length),
                ),
                None => (Bound::Constant(0), Bound::Length),
            };
            Some(Part {
                arg,
                reference,
                start,
                end,
                rank: tokens_string(&rank.expr),
            })
        })
        .collect();
    for (i, b) in parts.iter().enumerate() {
        let clash = parts[..i]
            .iter()
            .find(|a| a.reference.name == b.reference.name && overlap(a, b));
        let Some(a) = clash else { continue };
        let name = a.reference.name;
        let text = super::ranges::reference_text;
        let (ta, tb) = (text(&a.reference), text(&b.reference));
        let message = if a.rank == b.rank {
            format!(
                "`{ta}` and `{tb}` both write rank `{}`'s `{name}` and overlap; give each \
                 part its own elements (`{name}[lo..mid] on rank {}, {name}[mid..hi] on rank {}`)",
                a.rank, a.rank, a.rank
            )
        } else {
            format!(
                "`{ta} on rank {}` and `{tb} on rank {}` overlap: every rank runs this launch, \
                 so where the ranges are alike on every rank, each rank's part is written at \
                 once by the neighbour whose `{}` it is and by the one whose `{}` it is (the \
                 step refuses overlapping parts either way); give each neighbour a part of its \
                 own (`{name}[lo..mid] on rank {}, {name}[mid..hi] on rank {}`), or use one \
                 window per neighbour",
                a.rank, b.rank, a.rank, b.rank, a.rank, b.rank
            )
        };
        cx.error_between(a.arg.span(), b.arg.span(), message);
    }
}

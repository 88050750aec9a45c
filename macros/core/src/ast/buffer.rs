//! Buffer references as statements write them (`x`, `xs[k]`, `x[lo..hi]`, `xs[k][lo..hi]`),
//! and their parsing.

use super::*;

/// A buffer as a statement names it: `x`, `xs[k]` (an element of a buffer array), `x[lo..hi]`
/// (a range of elements) or `xs[k][lo..hi]`.
#[derive(Debug, Clone)]
pub struct BufferRef {
    /// The buffer's name.
    pub name: Ident,
    /// `[k]`: the element of a buffer array.
    pub index: Option<Expr>,
    /// `[lo..hi]`: the range of elements.
    pub range: Option<Bounds>,
    /// Its last brackets' span (the name's without subscripts): an error from `name` to here
    /// covers the whole reference.
    pub last: Span,
}

/// The bounds of `x[lo..hi]`; either may be left out (`x[..hi]`, `x[lo..]`, `x[..]`).
#[derive(Debug, Clone)]
pub struct Bounds {
    /// The first element, 0 when left out.
    pub start: Option<Expr>,
    /// One past the last element, the length when left out.
    pub end: Option<Expr>,
    /// The brackets' span, for messages.
    pub span: Span,
}

impl BufferRef {
    /// A bare name.
    pub fn bare(name: Ident) -> BufferRef {
        BufferRef {
            last: name.span(),
            name,
            index: None,
            range: None,
        }
    }

    /// The reference, borrowed.
    pub fn borrow(&self) -> BufRef<'_> {
        BufRef {
            name: &self.name,
            index: self.index.as_ref(),
            range: self.range.as_ref().map(|b| BoundsRef {
                start: b.start.as_ref(),
                end: b.end.as_ref(),
                span: b.span,
                closed: false,
            }),
            last: self.last,
        }
    }
}

/// A buffer reference borrowed from the syntax tree: a `copy`'s or `fill`'s buffer, or a
/// `launch` argument for a slice parameter.
#[derive(Debug, Clone, Copy)]
pub struct BufRef<'a> {
    /// The buffer's name.
    pub name: &'a Ident,
    /// `[k]`: the element of a buffer array.
    pub index: Option<&'a Expr>,
    /// `[lo..hi]`: the range of elements.
    pub range: Option<BoundsRef<'a>>,
    /// Its last brackets' span (the name's without subscripts), as in [`BufferRef`].
    pub last: Span,
}

/// [`Bounds`], borrowed.
#[derive(Debug, Clone, Copy)]
pub struct BoundsRef<'a> {
    /// The first element, 0 when left out.
    pub start: Option<&'a Expr>,
    /// One past the last element, the length when left out.
    pub end: Option<&'a Expr>,
    /// The brackets' span.
    pub span: Span,
    /// Written `a..=b` (a communication operand's range): `end` is `b + 1`, made by the
    /// macro, and messages show the range as written.
    pub closed: bool,
}

impl<'a> BufRef<'a> {
    /// Whether it has a subscript.
    pub fn is_subscripted(&self) -> bool {
        self.index.is_some() || self.range.is_some()
    }

    /// The expressions of its subscripts.
    pub fn subscript_exprs(&self) -> Vec<&'a Expr> {
        let mut exprs: Vec<&Expr> = self.index.into_iter().collect();
        if let Some(range) = self.range {
            exprs.extend(range.start);
            exprs.extend(range.end);
        }
        exprs
    }

    /// The buffer reference an expression is: `x`, `x[k]`, `x[a..b]` or `x[k][a..b]`. A `..=`
    /// range, a range before an element, or a third subscript give `None`.
    pub fn of_expr(expr: &'a Expr) -> Option<BufRef<'a>> {
        match ungroup_expr(expr) {
            Expr::Index(outer) => {
                let (inner, last) = (&*outer.expr, &*outer.index);
                let span = outer.bracket_token.span.join();
                match (ungroup_expr(inner), bounds_ref(last, span)) {
                    (Expr::Index(first), Some(range)) => {
                        if matches!(ungroup_expr(&first.index), Expr::Range(_)) {
                            return None;
                        }
                        Some(BufRef {
                            name: bare_ident(&first.expr)?,
                            index: Some(&first.index),
                            range: Some(range),
                            last: span,
                        })
                    }
                    (_, Some(range)) => Some(BufRef {
                        name: bare_ident(inner)?,
                        index: None,
                        range: Some(range),
                        last: span,
                    }),
                    (_, None) => {
                        if matches!(ungroup_expr(last), Expr::Range(_)) {
                            return None;
                        }
                        Some(BufRef {
                            name: bare_ident(inner)?,
                            index: Some(last),
                            range: None,
                            last: span,
                        })
                    }
                }
            }
            _ => {
                let name = bare_ident(expr)?;
                Some(BufRef {
                    name,
                    index: None,
                    range: None,
                    last: name.span(),
                })
            }
        }
    }
}

/// The bounds of a half-open range expression `a..b` (`..=` is not one).
pub(super) fn bounds(expr: &Expr, span: Span) -> Option<Bounds> {
    bounds_ref(expr, span).map(|b| Bounds {
        start: b.start.cloned(),
        end: b.end.cloned(),
        span,
    })
}

pub(super) fn bounds_ref(expr: &Expr, span: Span) -> Option<BoundsRef<'_>> {
    match ungroup_expr(expr) {
        Expr::Range(range) if matches!(range.limits, syn::RangeLimits::HalfOpen(_)) => {
            Some(BoundsRef {
                start: range.start.as_deref(),
                end: range.end.as_deref(),
                span,
                closed: false,
            })
        }
        _ => None,
    }
}

/// `name` followed by up to two bracketed subscripts, as `copy` and `fill` name buffers.
pub(super) fn parse_buffer_ref(input: ParseStream<'_>) -> syn::Result<BufferRef> {
    let name: Ident = input.parse()?;
    let mut reference = BufferRef::bare(name);
    while input.peek(token::Bracket) {
        let content;
        let bracket = bracketed!(content in input);
        let expr: Expr = content.parse()?;
        let span = bracket.span.join();
        reference.last = span;
        if let Expr::Range(range) = ungroup_expr(&expr)
            && matches!(range.limits, syn::RangeLimits::Closed(_))
        {
            return Err(syn::Error::new(
                span,
                "a buffer range is half-open: write `x[a..b]` for elements a to b - 1",
            ));
        }
        match bounds(&expr, span) {
            Some(range) if reference.range.is_none() => reference.range = Some(range),
            None if reference.index.is_none() && reference.range.is_none() => {
                reference.index = Some(expr)
            }
            _ => {
                return Err(syn::Error::new(
                    span,
                    "a buffer takes at most an element and a range: `xs[k]`, `x[a..b]` or \
                     `xs[k][a..b]`",
                ));
            }
        }
    }
    Ok(reference)
}

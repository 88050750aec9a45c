//! The syntax of communication statements: what one rank sends and receives, and the
//! collectives every rank takes part in, through the pipeline's communicator.
//!
//! ```text
//! send BUF[RANGE] to PEER;                 reads BUF
//! recv BUF[RANGE] from PEER;               writes BUF
//! all_reduce(OP) SRC[RANGE] -> DST[RANGE]; OP: sum, prod, max, min, avg
//! all_reduce(OP) BUF[RANGE];               in place
//! broadcast SRC[RANGE] -> DST[RANGE] from ROOT;
//! broadcast BUF[RANGE] from ROOT;          in place
//! all_gather SRC[RANGE] -> DST[RANGE];     DST holds size x SRC, in rank order
//! reduce_scatter(OP) SRC[RANGE] -> DST[RANGE];
//! ```
//!
//! `[RANGE]` is optional (the whole buffer): an element range such as `[0..nx]` or
//! `[(rows - 1) * nx..]`, computed on the host when the step is enqueued, like `PEER` and
//! `ROOT`.

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::{Expr, Ident, Token, bracketed, parenthesized, token};

use super::BufRef;
use crate::symbol::kw;

/// One communication statement.
#[derive(Debug)]
pub struct Comm {
    /// The statement's keyword span (`send`, `all_reduce`, ...).
    pub keyword: Span,
    /// What it does.
    pub op: CommOp,
}

/// What a communication statement does.
#[derive(Debug)]
pub enum CommOp {
    /// `send BUF to PEER`.
    Send {
        /// Read.
        data: Operand,
        /// The receiving rank.
        peer: Expr,
    },
    /// `recv BUF from PEER`.
    Recv {
        /// Written.
        data: Operand,
        /// The sending rank.
        peer: Expr,
    },
    /// `all_reduce(OP) SRC [-> DST]`.
    AllReduce {
        /// The operator as written.
        op: Ident,
        /// Read (and written, in place).
        src: Operand,
        /// Written; `None` in place.
        dst: Option<Operand>,
    },
    /// `broadcast SRC [-> DST] from ROOT`.
    Broadcast {
        /// Read on the root (and written, in place).
        src: Operand,
        /// Written; `None` in place.
        dst: Option<Operand>,
        /// The sending rank.
        root: Expr,
    },
    /// `all_gather SRC -> DST`.
    AllGather {
        /// Read.
        src: Operand,
        /// Written.
        dst: Operand,
    },
    /// `reduce_scatter(OP) SRC -> DST`.
    ReduceScatter {
        /// The operator as written.
        op: Ident,
        /// Read.
        src: Operand,
        /// Written.
        dst: Operand,
    },
}

/// A buffer, or an element range of one: `field` or `field[0..nx]`.
#[derive(Debug)]
pub struct Operand {
    /// The buffer.
    pub name: Ident,
    /// `[RANGE]`, if given.
    pub range: Option<Expr>,
    /// The brackets' span (the name's without a range).
    pub last: Span,
    /// For a `..=` range, its end as a half-open one's (`a[0..=3]` is `a[0..4]`, and
    /// `a[0..=nx - 1]` ends at `nx - 1 + 1`, saturating), which a reference holds.
    pub closed_end: Option<Expr>,
}

impl Operand {
    /// The operand as a buffer reference with its range, for the checks and the step's plan
    /// (the elements it reads or writes; a `..=` range as the half-open one of the same
    /// elements); `None` for the whole buffer.
    pub fn reference(&self) -> Option<BufRef<'_>> {
        let range = self.range.as_ref()?;
        let range = match (super::ungroup_expr(range), &self.closed_end) {
            (Expr::Range(closed), Some(end)) => super::buffer::BoundsRef {
                start: closed.start.as_deref(),
                end: Some(end),
                span: self.last,
                closed: true,
            },
            _ => super::buffer::bounds_ref(range, self.last)?,
        };
        Some(BufRef {
            name: &self.name,
            index: None,
            range: Some(range),
            last: self.last,
        })
    }
}

/// The end of the half-open range of the elements `a..=end` names: `end + 1` (saturating), a
/// literal where `end` is a constant, spanned on `end`.
fn closed_end(range: &Expr) -> Option<Expr> {
    let Expr::Range(range) = super::ungroup_expr(range) else {
        return None;
    };
    if !matches!(range.limits, syn::RangeLimits::Closed(_)) {
        return None;
    }
    let end = range.end.as_deref()?;
    let span = syn::spanned::Spanned::span(end);
    Some(
        match crate::constant::value(end).and_then(|v| v.checked_add(1)) {
            Some(value) if value >= 0 => {
                let literal = syn::LitInt::new(&value.to_string(), span);
                syn::parse_quote_spanned!(span=> #literal)
            }
            // Saturating: an end of `usize::MAX` is then past any buffer's length, which the
            // step refuses with its range error, instead of overflowing.
            _ => {
                syn::parse_quote_spanned!(span=> ::core::primitive::usize::saturating_add(#end, 1))
            }
        },
    )
}

impl Parse for Operand {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        let mut last = name.span();
        let range = if input.peek(token::Bracket) {
            let content;
            last = bracketed!(content in input).span.join();
            Some(content.parse()?)
        } else {
            None
        };
        let closed_end = range.as_ref().and_then(closed_end);
        Ok(Operand {
            name,
            range,
            last,
            closed_end,
        })
    }
}

impl Comm {
    /// The statement's keyword, for messages: `send`, `all_reduce`, ...
    pub fn word(&self) -> &'static str {
        match self.op {
            CommOp::Send { .. } => "send",
            CommOp::Recv { .. } => "recv",
            CommOp::AllReduce { .. } => "all_reduce",
            CommOp::Broadcast { .. } => "broadcast",
            CommOp::AllGather { .. } => "all_gather",
            CommOp::ReduceScatter { .. } => "reduce_scatter",
        }
    }

    /// Every operand, with whether the statement writes it.
    pub fn operands(&self) -> Vec<(&Operand, bool)> {
        match &self.op {
            CommOp::Send { data, .. } => vec![(data, false)],
            CommOp::Recv { data, .. } => vec![(data, true)],
            CommOp::AllReduce { src, dst, .. } | CommOp::Broadcast { src, dst, .. } => match dst {
                Some(dst) => vec![(src, false), (dst, true)],
                None => vec![(src, true)],
            },
            CommOp::AllGather { src, dst } | CommOp::ReduceScatter { src, dst, .. } => {
                vec![(src, false), (dst, true)]
            }
        }
    }

    /// The host-side expressions: ranges, the peer or root.
    pub fn expressions(&self) -> Vec<&Expr> {
        let mut exprs: Vec<&Expr> = self
            .operands()
            .into_iter()
            .filter_map(|(operand, _)| operand.range.as_ref())
            .collect();
        match &self.op {
            CommOp::Send { peer, .. } | CommOp::Recv { peer, .. } => exprs.push(peer),
            CommOp::Broadcast { root, .. } => exprs.push(root),
            _ => {}
        }
        exprs
    }

    /// The reduction operator as written, for the statements that reduce.
    pub fn reduce_op(&self) -> Option<&Ident> {
        match &self.op {
            CommOp::AllReduce { op, .. } | CommOp::ReduceScatter { op, .. } => Some(op),
            _ => None,
        }
    }
}

/// Whether the input starts a communication statement; each keyword is offered to
/// `lookahead`, so "expected one of ..." lists them.
pub fn peek(lookahead: &syn::parse::Lookahead1<'_>) -> bool {
    // Every peek runs, so the error lists each keyword.
    [
        lookahead.peek(kw::send),
        lookahead.peek(kw::recv),
        lookahead.peek(kw::all_reduce),
        lookahead.peek(kw::broadcast),
        lookahead.peek(kw::all_gather),
        lookahead.peek(kw::reduce_scatter),
    ]
    .contains(&true)
}

/// `(OP)` after `all_reduce` and `reduce_scatter`.
fn reduce_op(input: ParseStream<'_>) -> syn::Result<Ident> {
    let content;
    parenthesized!(content in input);
    let op = content.parse()?;
    if !content.is_empty() {
        return Err(content.error("expected `)` after the operator, e.g. `all_reduce(sum)`"));
    }
    Ok(op)
}

/// An expression up to the statement's `;` (a peer or a root).
fn until_semicolon(input: ParseStream<'_>) -> syn::Result<Expr> {
    input.call(Expr::parse_without_eager_brace)
}

impl Parse for Comm {
    /// Parses a statement the caller has seen start with one of the keywords (the `;` is
    /// left to it).
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let keyword = input.span();
        let op = if input.peek(kw::send) {
            input.parse::<kw::send>()?;
            let data = input.parse()?;
            input.parse::<kw::to>()?;
            CommOp::Send {
                data,
                peer: until_semicolon(input)?,
            }
        } else if input.peek(kw::recv) {
            input.parse::<kw::recv>()?;
            let data = input.parse()?;
            input.parse::<kw::from>()?;
            CommOp::Recv {
                data,
                peer: until_semicolon(input)?,
            }
        } else if input.peek(kw::all_reduce) {
            input.parse::<kw::all_reduce>()?;
            let op = input.call(reduce_op)?;
            let src = input.parse()?;
            let dst = arrow_operand(input)?;
            CommOp::AllReduce { op, src, dst }
        } else if input.peek(kw::broadcast) {
            input.parse::<kw::broadcast>()?;
            let src = input.parse()?;
            let dst = arrow_operand(input)?;
            input.parse::<kw::from>()?;
            CommOp::Broadcast {
                src,
                dst,
                root: until_semicolon(input)?,
            }
        } else if input.peek(kw::all_gather) {
            input.parse::<kw::all_gather>()?;
            let src = input.parse()?;
            input.parse::<Token![->]>()?;
            CommOp::AllGather {
                src,
                dst: input.parse()?,
            }
        } else {
            input.parse::<kw::reduce_scatter>()?;
            let op = input.call(reduce_op)?;
            let src = input.parse()?;
            input.parse::<Token![->]>()?;
            CommOp::ReduceScatter {
                op,
                src,
                dst: input.parse()?,
            }
        };
        Ok(Comm { keyword, op })
    }
}

/// `-> DST`, if given.
fn arrow_operand(input: ParseStream<'_>) -> syn::Result<Option<Operand>> {
    if input.peek(Token![->]) {
        input.parse::<Token![->]>()?;
        Ok(Some(input.parse()?))
    } else {
        Ok(None)
    }
}

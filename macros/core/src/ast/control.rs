//! `while` and `if` statements: control flow inside a stage whose condition the device
//! decides.
//!
//! ```text
//! while residual > tol max 10_000 { launch ...; launch ...; }
//! if flag != 0 { copy field -> snapshot; }
//! if step % k == 0 { copy field -> snapshot; }
//! ```
//!
//! A device condition compares the first element of a device buffer with a value; `step` is
//! the pipeline's step counter. The condition is parsed as one expression (so `%` binds
//! before `==` as in Rust) and then taken apart; a shape that is neither form is a syntax
//! error that says which forms there are.

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{BinOp, Expr, Ident, Token, braced, token};

use super::{Statement, bare_ident, tokens_string, ungroup_expr};
use crate::symbol::{STEP, kw};

/// `while ...` or `if ...`.
#[derive(Debug)]
pub enum Control {
    /// `while COND max N { ... }`: the body runs while the condition holds, at most `N`
    /// times.
    While {
        /// The `while` keyword.
        keyword: Token![while],
        /// What is tested before each iteration.
        condition: Condition,
        /// `max N`: the most iterations; required (checked, so a missing one is reported
        /// with what to write).
        max: Option<(kw::max, Expr)>,
        /// The body's braces.
        brace: token::Brace,
        /// The body.
        body: Vec<Statement>,
    },
    /// `if COND { ... }`: the body runs once when the condition holds.
    If {
        /// The `if` keyword.
        keyword: Token![if],
        /// What is tested.
        condition: Condition,
        /// The body's braces.
        brace: token::Brace,
        /// The body.
        body: Vec<Statement>,
    },
}

/// What a `while` or `if` tests.
#[derive(Debug)]
pub enum Condition {
    /// `buffer OP value`, on the device.
    Device(DeviceCondition),
    /// `step % K == R`, on the pipeline's step counter.
    Step(StepCondition),
}

/// `residual > tol`: the first element of a device buffer compared with a value.
#[derive(Debug)]
pub struct DeviceCondition {
    /// The condition as written.
    pub expr: Expr,
    /// The buffer read.
    pub value: Ident,
    /// The comparison.
    pub comparison: Comparison,
    /// The value compared with (a host expression over the params).
    pub threshold: Expr,
}

/// `step % k == r`.
#[derive(Debug)]
pub struct StepCondition {
    /// The condition as written.
    pub expr: Expr,
    /// The `step` word.
    pub step: Span,
    /// `k`.
    pub modulus: Expr,
    /// `r`.
    pub remainder: Expr,
}

/// A comparison operator of a device condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `>`.
    Greater,
    /// `>=`.
    GreaterOrEqual,
    /// `<`.
    Less,
    /// `<=`.
    LessOrEqual,
    /// `==`.
    Equal,
    /// `!=`.
    NotEqual,
}

impl Comparison {
    fn of(op: &BinOp) -> Option<Comparison> {
        Some(match op {
            BinOp::Gt(_) => Comparison::Greater,
            BinOp::Ge(_) => Comparison::GreaterOrEqual,
            BinOp::Lt(_) => Comparison::Less,
            BinOp::Le(_) => Comparison::LessOrEqual,
            BinOp::Eq(_) => Comparison::Equal,
            BinOp::Ne(_) => Comparison::NotEqual,
            _ => return None,
        })
    }

    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::Greater => ">",
            Comparison::GreaterOrEqual => ">=",
            Comparison::Less => "<",
            Comparison::LessOrEqual => "<=",
            Comparison::Equal => "==",
            Comparison::NotEqual => "!=",
        }
    }
}

impl Control {
    /// The `while` or `if` keyword's span.
    pub fn keyword_span(&self) -> Span {
        match self {
            Control::While { keyword, .. } => keyword.span,
            Control::If { keyword, .. } => keyword.span,
        }
    }

    /// `while` or `if`.
    pub fn word(&self) -> &'static str {
        match self {
            Control::While { .. } => "while",
            Control::If { .. } => "if",
        }
    }

    /// The condition.
    pub fn condition(&self) -> &Condition {
        match self {
            Control::While { condition, .. } | Control::If { condition, .. } => condition,
        }
    }

    /// The body's statements.
    pub fn body(&self) -> &[Statement] {
        match self {
            Control::While { body, .. } | Control::If { body, .. } => body,
        }
    }
}

impl Condition {
    /// The condition the way a person writes it (`residual > tol`, `step % k == 0`), for
    /// messages and the labels of run-time errors.
    pub fn written(&self) -> String {
        match self {
            Condition::Device(device) => format!(
                "{} {} {}",
                device.value,
                device.comparison.symbol(),
                tokens_string(&device.threshold)
            ),
            Condition::Step(step) => format!(
                "step % {} == {}",
                tokens_string(&step.modulus),
                tokens_string(&step.remainder)
            ),
        }
    }

    /// The condition as written.
    pub fn expr(&self) -> &Expr {
        match self {
            Condition::Device(c) => &c.expr,
            Condition::Step(c) => &c.expr,
        }
    }
}

/// Every statement of `statements`, bodies included, in program order (a `while` or `if`
/// before its body).
pub fn flatten(statements: &[Statement]) -> Vec<&Statement> {
    let mut all = Vec::new();
    for statement in statements {
        all.push(statement);
        if let Statement::Control(control) = statement {
            all.extend(flatten(control.body()));
        }
    }
    all
}

impl Parse for Control {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(Token![while]) {
            let keyword = input.parse()?;
            let condition = input.parse()?;
            let max = if input.peek(kw::max) {
                let word = input.parse()?;
                Some((word, input.call(Expr::parse_without_eager_brace)?))
            } else {
                None
            };
            let (brace, body) = parse_body(input)?;
            Ok(Control::While {
                keyword,
                condition,
                max,
                brace,
                body,
            })
        } else {
            let keyword = input.parse()?;
            let condition = input.parse()?;
            let (brace, body) = parse_body(input)?;
            Ok(Control::If {
                keyword,
                condition,
                brace,
                body,
            })
        }
    }
}

fn parse_body(input: ParseStream<'_>) -> syn::Result<(token::Brace, Vec<Statement>)> {
    let content;
    let brace = braced!(content in input);
    let mut body = Vec::new();
    while !content.is_empty() {
        body.push(content.parse()?);
    }
    Ok((brace, body))
}

impl Parse for Condition {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let expr = input.call(Expr::parse_without_eager_brace)?;
        let shape = || {
            syn::Error::new(
                expr.span(),
                "a condition compares a device buffer with a value (`residual > tol`, \
                 `flag != 0`) or tests the step counter (`step % k == 0`)",
            )
        };
        let Expr::Binary(binary) = ungroup_expr(&expr) else {
            return Err(shape());
        };
        let comparison = Comparison::of(&binary.op).ok_or_else(shape)?;
        // `step % k == r`.
        if let (Expr::Binary(rem), Comparison::Equal) = (ungroup_expr(&binary.left), comparison)
            && let BinOp::Rem(_) = rem.op
            && let Some(word) = bare_ident(&rem.left)
            && *word == STEP
        {
            return Ok(Condition::Step(StepCondition {
                step: word.span(),
                modulus: (*rem.right).clone(),
                remainder: (*binary.right).clone(),
                expr,
            }));
        }
        let value = bare_ident(&binary.left).ok_or_else(shape)?.clone();
        Ok(Condition::Device(DeviceCondition {
            value,
            comparison,
            threshold: (*binary.right).clone(),
            expr,
        }))
    }
}

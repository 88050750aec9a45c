//! `while` and `if` statements: control flow inside a stage whose condition the device
//! decides.
//!
//! ```text
//! while residual > tol max 10_000 { launch ...; launch ...; }
//! do { launch ...; } while residual > tol max 10_000;
//! if flag != 0 { copy field -> snapshot; }
//! if flag != 0 { launch ...; } else { launch ...; }
//! if step % k == 0 { copy field -> snapshot; }
//! switch mode { 0 => { launch ...; } 1 => { launch ...; } }
//! ```
//!
//! A device condition compares the first element of a device buffer with a value; `step` is
//! the pipeline's step counter. The condition is parsed as one expression (so `%` binds
//! before `==` as in Rust) and then taken apart; a shape that is neither form is a syntax
//! error that says which forms there are.

use proc_macro2::{Span, TokenStream};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{BinOp, Expr, Ident, LitInt, Token, braced, token};

use super::{Statement, Swap, bare_ident, tokens_string, ungroup_expr};
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
        /// `swap(a, b);` at the end of the body: the next iteration runs with the two
        /// exchanged (a ping-pong, unrolled by two in a graph).
        swaps: Vec<Swap>,
    },
    /// `if COND { ... } [else { ... }]`: the body runs once when the condition holds, the
    /// `else` body when it does not.
    If {
        /// The `if` keyword.
        keyword: Token![if],
        /// What is tested.
        condition: Condition,
        /// The body's braces.
        brace: token::Brace,
        /// The body.
        body: Vec<Statement>,
        /// `else { ... }`.
        otherwise: Option<Otherwise>,
    },
    /// `do { ... } while COND max N;`: the body runs, then again while the condition holds,
    /// at most `N` times in all.
    DoWhile {
        /// The `do` keyword.
        keyword: Token![do],
        /// The body's braces.
        brace: token::Brace,
        /// The body.
        body: Vec<Statement>,
        /// `swap(a, b);` at the end of the body, as for `while`.
        swaps: Vec<Swap>,
        /// The `while` keyword after the body.
        while_token: Token![while],
        /// What is tested after each iteration.
        condition: Condition,
        /// `max N`, required as for `while`.
        max: Option<(kw::max, Expr)>,
    },
    /// `switch NAME { 0 => { ... } 1 => { ... } }`: the body whose label is the first element
    /// of a `DeviceBuffer<u32>`; none when no label is.
    Switch {
        /// The `switch` keyword.
        keyword: kw::switch,
        /// The buffer whose first element selects.
        value: Ident,
        /// The braces around the cases.
        brace: token::Brace,
        /// The cases, as written.
        cases: Vec<Case>,
    },
}

/// `else { ... }`.
#[derive(Debug)]
pub struct Otherwise {
    /// The `else` keyword.
    pub keyword: Token![else],
    /// The body's braces.
    pub brace: token::Brace,
    /// The body.
    pub body: Vec<Statement>,
}

/// `N => { ... }`, one case of a `switch`.
#[derive(Debug)]
pub struct Case {
    /// The label as written.
    pub label: LitInt,
    /// The body's braces.
    pub brace: token::Brace,
    /// The body.
    pub body: Vec<Statement>,
}

/// What a `while` or `if` tests.
#[derive(Debug)]
pub enum Condition {
    /// `buffer OP value`, on the device.
    Device(DeviceCondition),
    /// `go`: a `Condition` that kernels set themselves (non-zero holds).
    Kernel(Ident),
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

    /// The same test with its sides exchanged (`0 < x` is `x > 0`).
    fn reversed(self) -> Comparison {
        match self {
            Comparison::Greater => Comparison::Less,
            Comparison::GreaterOrEqual => Comparison::LessOrEqual,
            Comparison::Less => Comparison::Greater,
            Comparison::LessOrEqual => Comparison::GreaterOrEqual,
            same => same,
        }
    }
}

impl Control {
    /// The keyword's span (`while`, `if`, `do`, `switch`).
    pub fn keyword_span(&self) -> Span {
        match self {
            Control::While { keyword, .. } => keyword.span,
            Control::If { keyword, .. } => keyword.span,
            Control::DoWhile { keyword, .. } => keyword.span,
            Control::Switch { keyword, .. } => keyword.span,
        }
    }

    /// `while`, `if`, `do ... while` or `switch`, for messages.
    pub fn word(&self) -> &'static str {
        match self {
            Control::While { .. } => "while",
            Control::If { .. } => "if",
            Control::DoWhile { .. } => "do ... while",
            Control::Switch { .. } => "switch",
        }
    }

    /// The condition a `while`, `if` or `do ... while` tests (a `switch` has none: it reads
    /// its value).
    pub fn test(&self) -> Option<&Condition> {
        match self {
            Control::While { condition, .. }
            | Control::If { condition, .. }
            | Control::DoWhile { condition, .. } => Some(condition),
            Control::Switch { .. } => None,
        }
    }

    /// `max N`, for the loops.
    pub fn max(&self) -> Option<&(kw::max, Expr)> {
        match self {
            Control::While { max, .. } | Control::DoWhile { max, .. } => max.as_ref(),
            _ => None,
        }
    }

    /// The `swap`s that end a loop's body (none for the other forms).
    pub fn swaps(&self) -> &[Swap] {
        match self {
            Control::While { swaps, .. } | Control::DoWhile { swaps, .. } => swaps,
            _ => &[],
        }
    }

    /// Whether it is a loop (`while` or `do ... while`).
    pub fn is_loop(&self) -> bool {
        matches!(self, Control::While { .. } | Control::DoWhile { .. })
    }

    /// The bodies, in order: the body, the `else` body, or the cases.
    pub fn bodies(&self) -> Vec<&[Statement]> {
        match self {
            Control::While { body, .. } | Control::DoWhile { body, .. } => vec![body],
            Control::If {
                body, otherwise, ..
            } => {
                let mut bodies = vec![body.as_slice()];
                bodies.extend(otherwise.as_ref().map(|o| o.body.as_slice()));
                bodies
            }
            Control::Switch { cases, .. } => cases.iter().map(|c| c.body.as_slice()).collect(),
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
            Condition::Kernel(name) => name.to_string(),
        }
    }

    /// The condition as written.
    pub fn expr(&self) -> Option<&Expr> {
        match self {
            Condition::Device(c) => Some(&c.expr),
            Condition::Step(c) => Some(&c.expr),
            Condition::Kernel(_) => None,
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
            for body in control.bodies() {
                all.extend(flatten(body));
            }
        }
    }
    all
}

impl Parse for Control {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(Token![while]) {
            let keyword = input.parse()?;
            let condition: Condition = input.parse()?;
            let max = parse_max(input)?;
            let (brace, body, swaps) = parse_loop_body(input)?;
            if max.is_none() && input.peek(kw::max) {
                // `while r > tol { .. } max 5`: the maximum is part of the test.
                let written = condition.written();
                return Err(input.error(format!(
                    "`max` comes between a `while`'s test and its body: write `while {written} \
                     max N {{ ... }}`"
                )));
            }
            Ok(Control::While {
                keyword,
                condition,
                max,
                brace,
                body,
                swaps,
            })
        } else if input.peek(Token![do]) {
            let keyword = input.parse()?;
            let (brace, body, swaps) = parse_loop_body(input)?;
            let while_token = input.parse().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    "a `do` body is followed by its test: `do { ... } while residual > tol max \
                     10_000;`",
                )
            })?;
            let condition = input.parse()?;
            let max = parse_max(input)?;
            input.parse::<Token![;]>()?;
            Ok(Control::DoWhile {
                keyword,
                brace,
                body,
                swaps,
                while_token,
                condition,
                max,
            })
        } else if input.peek(kw::switch) {
            let keyword = input.parse()?;
            let value = input.parse().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    "a `switch` reads the first element of a `DeviceBuffer<u32>`: `switch mode \
                     { 0 => { ... } 1 => { ... } }`",
                )
            })?;
            if input.peek(token::Bracket) {
                let at = input.span();
                let content;
                syn::bracketed!(content in input);
                let index: TokenStream = content.parse()?;
                let value: &Ident = &value;
                return Err(syn::Error::new(
                    at,
                    one_element(&value.to_string(), &tokens_string(&index)),
                ));
            }
            if !input.peek(token::Brace) {
                let value: &Ident = &value;
                return Err(input.error(if *value == STEP {
                    "a `switch` reads a buffer; the step counter is tested by `if`: `if step \
                     % k == 0 { ... }`, one `if` per remainder (or a kernel writes `step % k` \
                     into a `DeviceBuffer<u32>` to switch on)"
                } else {
                    "a `switch` names the `DeviceBuffer<u32>` (or `Condition`) it reads, alone: \
                     have a kernel write the value to switch on into a buffer of its own, \
                     then `switch selected { 0 => { ... } }`"
                }));
            }
            let content;
            let brace = braced!(content in input);
            let mut cases = Vec::new();
            while !content.is_empty() {
                let label = content.parse::<LitInt>().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "a case label is an integer literal, `0 => { ... }`, counting from 0; \
                         there is no default arm: a value past the last case runs none",
                    )
                })?;
                content.parse::<Token![=>]>()?;
                let (brace, body) = parse_body(&content)?;
                content.parse::<Option<Token![,]>>()?;
                cases.push(Case { label, brace, body });
            }
            Ok(Control::Switch {
                keyword,
                value,
                brace,
                cases,
            })
        } else {
            let keyword = input.parse()?;
            let condition = input.parse()?;
            let (brace, body) = parse_body(input)?;
            let otherwise = if input.peek(Token![else]) {
                let keyword = input.parse()?;
                if input.peek(Token![if]) {
                    return Err(input.error(
                        "`else if` is not part of the pipeline language: nest the test, \
                         `else { if flag != 0 { ... } }`, or use a `switch`",
                    ));
                }
                let (brace, body) = parse_body(input)?;
                Some(Otherwise {
                    keyword,
                    brace,
                    body,
                })
            } else {
                None
            };
            Ok(Control::If {
                keyword,
                condition,
                brace,
                body,
                otherwise,
            })
        }
    }
}

fn parse_max(input: ParseStream<'_>) -> syn::Result<Option<(kw::max, Expr)>> {
    if input.peek(kw::max) {
        let word = input.parse()?;
        Ok(Some((word, input.call(Expr::parse_without_eager_brace)?)))
    } else {
        Ok(None)
    }
}

fn parse_body(input: ParseStream<'_>) -> syn::Result<(token::Brace, Vec<Statement>)> {
    let content;
    let brace = braced!(content in input);
    let mut body = Vec::new();
    while !content.is_empty() {
        if content.peek(kw::swap) {
            return Err(content.error(
                "`swap` ends a loop's body (`while` or `do ... while`), whose next iteration \
                 runs with the buffers exchanged; an `if` or `switch` body runs once: pass the \
                 other buffer to its launches instead",
            ));
        }
        body.push(content.parse()?);
    }
    Ok((brace, body))
}

/// A loop's body: statements, then the `swap`s that end it.
fn parse_loop_body(
    input: ParseStream<'_>,
) -> syn::Result<(token::Brace, Vec<Statement>, Vec<Swap>)> {
    let content;
    let brace = braced!(content in input);
    let mut body = Vec::new();
    let mut swaps = Vec::new();
    while !content.is_empty() {
        if content.peek(kw::swap) {
            swaps.push(content.parse()?);
        } else if !swaps.is_empty() {
            return Err(content.error(
                "a loop body's `swap`s come last: the body runs, then the next iteration runs \
                 with the buffers exchanged; move this statement before the `swap`",
            ));
        } else {
            body.push(content.parse()?);
        }
    }
    Ok((brace, body, swaps))
}

/// The error for a test of one element, `name[index]` as written: a conditional node reads a
/// buffer's first word.
fn one_element(name: &str, index: &str) -> String {
    let range = match index.parse::<u64>() {
        Ok(n) => format!("{n}..{}", n + 1),
        Err(_) => format!("{index}..{index} + 1"),
    };
    let in_a_loop = if index.parse::<u64>().is_ok() {
        String::new()
    } else {
        "; inside a `for`, a `Condition` that the iteration's kernel sets (`scratch { go: \
         Condition }`) keeps the iterations apart"
            .to_owned()
    };
    format!(
        "a test reads the first element of a whole buffer, not an element or a range of one: \
         copy the element it should read into a buffer of its own first (`copy \
         {name}[{range}] -> chosen;`, or `copy {name}[{index}] -> chosen;` when `{name}` is an \
         array of buffers) and test that{in_a_loop}"
    )
}

impl Parse for Condition {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let expr = input.call(Expr::parse_without_eager_brace)?;
        let shape = || {
            syn::Error::new(
                expr.span(),
                "a condition compares a device buffer with a value (`residual > tol`, \
                 `flag != 0`), tests the step counter (`step % k == 0`), or names a \
                 `Condition` that kernels set (`while go max 100 { ... }`)",
            )
        };
        // `go`: a condition a kernel sets.
        if let Some(name) = bare_ident(&expr) {
            return Ok(Condition::Kernel(name.clone()));
        }
        if let Expr::Unary(unary) = ungroup_expr(&expr)
            && let syn::UnOp::Not(not) = unary.op
        {
            return Err(syn::Error::new(
                not.span,
                "a condition is not negated: swap the bodies (`if go { } else { ... }`), compare \
                 (`flag == 0`), or have the kernel set the opposite value",
            ));
        }
        let Expr::Binary(binary) = ungroup_expr(&expr) else {
            return Err(shape());
        };
        if let BinOp::And(_) | BinOp::Or(_) = binary.op {
            return Err(syn::Error::new_spanned(
                binary.op,
                "a condition is one test: nest the tests (`if a > x { if b > y { ... } }`), or \
                 have a kernel combine them into one buffer and test that",
            ));
        }
        let comparison = Comparison::of(&binary.op).ok_or_else(shape)?;
        // `step % k != r`, `step % k > r`: only `==` selects steps.
        if let (Expr::Binary(rem), false) =
            (ungroup_expr(&binary.left), comparison == Comparison::Equal)
            && let BinOp::Rem(_) = rem.op
            && bare_ident(&rem.left).is_some_and(|word| *word == STEP)
        {
            return Err(syn::Error::new_spanned(
                binary.op,
                "the step counter is tested with `==` only (`if step % k == r`): for the other \
                 steps, put the body in the `else` of `if step % k == r { } else { ... }`",
            ));
        }
        // `0 < flag`: the buffer goes on the left.
        if let (Expr::Lit(_), Some(name)) = (ungroup_expr(&binary.left), bare_ident(&binary.right))
        {
            return Err(syn::Error::new(
                expr.span(),
                format!(
                    "the buffer a condition reads goes on the left: `{name} {} {}`",
                    comparison.reversed().symbol(),
                    tokens_string(&binary.left),
                ),
            ));
        }
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
        if let Expr::Index(index) = ungroup_expr(&binary.left) {
            return Err(syn::Error::new(
                index.bracket_token.span.join(),
                one_element(&tokens_string(&index.expr), &tokens_string(&index.index)),
            ));
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

//! The checker's constant rules on values the macro cannot see but the compiler can: `const`
//! items. A proc macro sees tokens, not items, so `x[0..N]` against a bound of 256 cannot be
//! decided in `check`; the same rule is emitted as a `const _: () = ...;` item that the
//! compiler evaluates, and a breach is an error on the user's tokens (`evaluation panicked:`
//! and the rule's message). Only expressions made of integer literals, paths that name no
//! param, loop variable or `let`, and arithmetic are emitted: they are constants wherever the
//! program compiles, so no correct program is refused. The runtime checks the same rules
//! again when the step is enqueued.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote_spanned};
use syn::{BinOp, Expr, UnOp};

use crate::ast::{self, BufRef, ungroup_expr};
use crate::constant;
use crate::lower::{KernelParamKind, Pipeline, Statement, StatementKind};

/// The `const` items that check the rules on `const` items.
pub fn assertions(p: &Pipeline<'_>) -> TokenStream {
    let locals = locals(p);
    let mut out = TokenStream::new();
    let mut rules = Rules {
        locals: &locals,
        out: &mut out,
    };
    for stage in &p.stages {
        rules.stream_index(p, stage);
        rules.statements(p, &stage.statements);
    }
    out
}

/// The names that are not items: params, scratch buffers, loop variables and `let`s.
fn locals(p: &Pipeline<'_>) -> Vec<String> {
    let mut names: Vec<String> = p.scalars.iter().map(|s| s.decl.name.to_string()).collect();
    names.extend(p.buffers.iter().map(|b| b.ident.to_string()));
    for body in &p.loops {
        names.push(body.var.to_string());
        names.extend(body.lets.iter().map(|l| l.name.to_string()));
    }
    names.push("step".to_owned());
    names
}

struct Rules<'l, 'o> {
    locals: &'l [String],
    out: &'o mut TokenStream,
}

impl Rules<'_, '_> {
    /// `(EXPR) as i128` when `expr` is a constant the compiler evaluates and the macro does
    /// not: arithmetic over integer literals and at least one path naming no local.
    fn value(&self, expr: &Expr) -> Option<TokenStream> {
        if constant::value(expr).is_some() || !self.item_constant(expr) {
            return None;
        }
        Some(quote_spanned!(Span::call_site()=> ((#expr) as i128)))
    }

    /// `(EXPR) as i128` for any constant, literal or item.
    fn any_value(&self, expr: &Expr) -> Option<TokenStream> {
        if constant::value(expr).is_some() || self.item_constant(expr) {
            Some(quote_spanned!(Span::call_site()=> ((#expr) as i128)))
        } else {
            None
        }
    }

    /// Whether `expr` is integer literals, paths naming no local and arithmetic, with at
    /// least one path.
    fn item_constant(&self, expr: &Expr) -> bool {
        let mut paths = 0;
        self.shape(expr, &mut paths) && paths > 0
    }

    fn shape(&self, expr: &Expr, paths: &mut usize) -> bool {
        match ungroup_expr(expr) {
            Expr::Lit(lit) => matches!(lit.lit, syn::Lit::Int(_)),
            Expr::Path(path) => {
                let local = path.qself.is_some()
                    || path
                        .path
                        .get_ident()
                        .is_some_and(|ident| self.locals.iter().any(|l| ident == l));
                *paths += 1;
                !local
            }
            Expr::Paren(paren) => self.shape(&paren.expr, paths),
            Expr::Unary(unary) => {
                matches!(unary.op, UnOp::Neg(_)) && self.shape(&unary.expr, paths)
            }
            Expr::Cast(cast) => self.shape(&cast.expr, paths),
            Expr::Binary(binary) => {
                matches!(
                    binary.op,
                    BinOp::Add(_)
                        | BinOp::Sub(_)
                        | BinOp::Mul(_)
                        | BinOp::Div(_)
                        | BinOp::Rem(_)
                        | BinOp::Shl(_)
                        | BinOp::Shr(_)
                        | BinOp::BitAnd(_)
                        | BinOp::BitOr(_)
                        | BinOp::BitXor(_)
                ) && self.shape(&binary.left, paths)
                    && self.shape(&binary.right, paths)
            }
            _ => false,
        }
    }

    /// One `const _` item: `holds` must be true, else `message` at `span`.
    fn assert(&mut self, span: Span, holds: TokenStream, message: &str) {
        let message = message.replace('{', "{{").replace('}', "}}");
        self.out.extend(quote_spanned! {span=>
            const _: () = {
                if !(#holds) {
                    ::core::panic!(#message);
                }
            };
        });
    }

    fn statements(&mut self, p: &Pipeline<'_>, statements: &[Statement<'_>]) {
        for statement in statements {
            match &statement.kind {
                StatementKind::Launch { source, kernel, .. } => {
                    self.windows(p, source, &p.kernels[kernel.0]);
                }
                StatementKind::Copy { source, .. } => self.copy(source),
                StatementKind::Control(control) => {
                    if let Some(ast::Condition::Step(step)) = control.source.test() {
                        self.step(step);
                    }
                    for body in &control.bodies {
                        self.statements(p, body);
                    }
                }
                _ => {}
            }
        }
    }

    /// The number of elements `reference` names, as a constant expression, when the macro
    /// cannot compute it but the compiler can.
    fn window(&self, p: &Pipeline<'_>, reference: &BufRef<'_>) -> Option<TokenStream> {
        match reference.range {
            Some(range) => {
                let end = self.any_value(range.end?)?;
                let start = match range.start {
                    Some(start) => self.any_value(start)?,
                    None => quote_spanned!(Span::call_site()=> 0i128),
                };
                Some(quote_spanned!(Span::call_site()=> (#end - #start)))
            }
            None if reference.index.is_none() => {
                let buffer = p.buffers.iter().find(|b| b.ident == reference.name)?;
                if !buffer.scratch || buffer.array {
                    return None;
                }
                self.any_value(buffer.len?)
            }
            None => None,
        }
    }

    /// A window given to a bounded parameter holds the bound's elements.
    fn windows(
        &mut self,
        p: &Pipeline<'_>,
        launch: &ast::Launch,
        kernel: &crate::lower::Kernel<'_>,
    ) {
        let args: Vec<&Expr> = launch.args.iter().collect();
        for (param, arg) in kernel.params.iter().zip(&args) {
            let KernelParamKind::Slice {
                bound: Some(bound), ..
            } = &param.kind
            else {
                continue;
            };
            let Some(reference) = BufRef::of_expr(arg) else {
                continue;
            };
            let mut factors = Vec::new();
            let mut any_item = false;
            for &(position, _) in &bound.factors {
                let Some(factor) = args.get(position) else {
                    return;
                };
                if self.value(factor).is_some() {
                    any_item = true;
                }
                let Some(value) = self.any_value(factor) else {
                    factors.clear();
                    any_item = false;
                    break;
                };
                factors.push(value);
            }
            if factors.len() != bound.factors.len() {
                continue;
            }
            let Some(window) = self.window(p, &reference) else {
                continue;
            };
            let window_has_item = reference
                .range
                .map(|r| {
                    r.start
                        .into_iter()
                        .chain(r.end)
                        .any(|e| self.value(e).is_some())
                })
                .unwrap_or_else(|| {
                    p.buffers
                        .iter()
                        .find(|b| b.ident == reference.name)
                        .and_then(|b| b.len)
                        .is_some_and(|len| self.value(len).is_some())
                });
            if !any_item && !window_has_item {
                // Literals only: `check` decided it.
                continue;
            }
            let (scale, offset) = (bound.scale as i128, bound.offset as i128);
            let bound_text = kernel
                .decl
                .params
                .iter()
                .find(|kp| kp.name == param.name)
                .and_then(|kp| match kp.kind() {
                    ast::KernelParamType::Slice { bound: Some(b), .. } => {
                        Some(ast::tokens_string(b))
                    }
                    _ => None,
                })
                .unwrap_or_default();
            let holds = quote_spanned! {Span::call_site()=>
                {
                    let __gp_window: i128 = #window;
                    let mut __gp_bound: i128 = #scale;
                    let mut __gp_negative = false;
                    #(
                        let __gp_factor: i128 = #factors;
                        __gp_negative |= __gp_factor < 0;
                        __gp_bound = __gp_bound.saturating_mul(__gp_factor);
                    )*
                    __gp_negative || __gp_window < 0 || __gp_window >= __gp_bound.saturating_add(#offset)
                }
            };
            let message = format!(
                "`{}` is shorter than `{}` indexes its `{}` (below `{bound_text}`): the kernel would reach past the end; pass a longer window, or smaller arguments for `{bound_text}`",
                range_text(&reference),
                kernel.name,
                param.name,
            );
            self.assert(span_of(arg), holds, &message);
        }
    }

    /// A copy between two constant ranges copies as many elements as it writes.
    fn copy(&mut self, copy: &ast::Copy) {
        let (src, dst) = (copy.src_ref.borrow(), copy.dst_ref.borrow());
        let (Some(rs), Some(rd)) = (src.range, dst.range) else {
            return;
        };
        let exprs = [rs.start, rs.end, rd.start, rd.end];
        if !exprs.iter().flatten().any(|e| self.value(e).is_some()) {
            return;
        }
        let length = |r: ast::BoundsRef<'_>| -> Option<TokenStream> {
            let end = self.any_value(r.end?)?;
            let start = match r.start {
                Some(start) => self.any_value(start)?,
                None => quote_spanned!(Span::call_site()=> 0i128),
            };
            Some(quote_spanned!(Span::call_site()=> (#end - #start)))
        };
        let (Some(from), Some(to)) = (length(rs), length(rd)) else {
            return;
        };
        let message = format!(
            "`copy {} -> {}` copies between ranges of different lengths: a copy's source and destination ranges have one length; make both ranges as long",
            range_text(&src),
            range_text(&dst)
        );
        let holds = quote_spanned!(Span::call_site()=> #from < 0 || #to < 0 || #from == #to);
        self.assert(rs.span, holds, &message);
    }

    /// `step % k == r` can hold: `k` at least 1 and `r` below it.
    fn step(&mut self, step: &ast::StepCondition) {
        let modulus = &step.modulus;
        let remainder = &step.remainder;
        if self.value(modulus).is_none() && self.value(remainder).is_none() {
            return;
        }
        let (Some(k), Some(r)) = (self.any_value(modulus), self.any_value(remainder)) else {
            return;
        };
        let text = format!(
            "`step % {} == {}` never holds: the modulus must be at least 1 and the remainder below it",
            ast::tokens_string(modulus),
            ast::tokens_string(remainder)
        );
        let holds = quote_spanned!(Span::call_site()=> #k >= 1 && #r >= 0 && #r < #k);
        self.assert(span_of(modulus), holds, &text);
    }

    /// A stream index is below its array's count.
    fn stream_index(&mut self, p: &Pipeline<'_>, stage: &crate::lower::Stage<'_>) {
        let (Some(lane), Some(count)) = (stage.lane, p.streams[stage.stream.0].count) else {
            return;
        };
        if p.streams[stage.stream.0].per_device {
            return;
        }
        if self.value(lane).is_none() && self.value(count).is_none() {
            return;
        }
        let (Some(index), Some(n)) = (self.any_value(lane), self.any_value(count)) else {
            return;
        };
        let name = &p.streams[stage.stream.0].name;
        let message = format!(
            "`{name}[{}]` is past the stream array `{name}` of `{}` streams: name an index below `{}`, or `{name}[i % {}]` in a loop",
            ast::tokens_string(lane),
            ast::tokens_string(count),
            ast::tokens_string(count),
            ast::tokens_string(count)
        );
        let holds = quote_spanned!(Span::call_site()=> #index >= 0 && #index < #n);
        self.assert(span_of(lane), holds, &message);
    }
}

/// The span of an expression's first token.
fn span_of(expr: &Expr) -> Span {
    expr.to_token_stream()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |t| t.span())
}

/// A reference as written: `x[0..N]`.
fn range_text(r: &BufRef<'_>) -> String {
    let index = r
        .index
        .map_or(String::new(), |i| format!("[{}]", ast::tokens_string(i)));
    let range = r.range.map_or(String::new(), |b| {
        let bound = |e: Option<&Expr>| e.map_or(String::new(), ast::tokens_string);
        format!("[{}..{}]", bound(b.start), bound(b.end))
    });
    format!("{}{index}{range}", r.name)
}

#[cfg(test)]
mod tests {
    use super::assertions;
    use crate::tests::{lower_ok, with};

    #[test]
    fn rules_on_const_items_become_const_assertions_and_literals_do_not() {
        let pipeline = lower_ok(&with(
            "stage a on s1 { launch k::scale(N, 1.0, c[0..HALF], b) grid 1 block 1; copy a[0..M] -> b[0..M]; if step % EVERY == 0 { fill a = 0; } }",
        ));
        let emitted = assertions(&pipeline).to_string();
        assert_eq!(emitted.matches("const _").count(), 2, "{emitted}");
        assert!(
            emitted.contains("step % EVERY == 0` never holds"),
            "{emitted}"
        );
        assert!(
            emitted.contains("copies between ranges of different lengths"),
            "{emitted}"
        );
        // `scale`'s bounds are `unbounded`: no window rule. Literals are `check`'s; params and
        // loop names are the step's.
        let pipeline = lower_ok(&with(
            "stage a on s1 { copy a[0..4] -> b[0..4]; copy a[0..n as usize] -> b[0..N]; if step % 2 == 0 { fill a = 0; } }",
        ));
        assert!(assertions(&pipeline).is_empty());
    }

    #[test]
    fn a_window_against_a_bound_over_const_items() {
        let pipeline = lower_ok(
            r#"pipeline P {
                streams { s }
                unsafe kernels k = ptx(include_str!("k.ptx")) { fn scale(n: u32, x: &mut [f32; n]); }
                params { x: &mut DeviceBuffer<f32> }
                stage a on s { launch k::scale(N, x[0..HALF]) grid 1 block 1; }
            }"#,
        );
        let emitted = assertions(&pipeline).to_string();
        assert!(
            emitted.contains("`x[0..HALF]` is shorter than `scale` indexes its `x` (below `n`)"),
            "{emitted}"
        );
    }
}

//! Rules across the iterations of a `for` (issue 23, class 3), and what the other rules need
//! to see inside one: the values of the loop variable and the `let`s in one iteration
//! ([`Iterations`]), or their polynomials over the params when the bounds are not constants
//! ([`symbols`]).
//!
//! The rule here: the iterations of a stage that runs each iteration on a stream of its own
//! (`on work[i]`) are meant to split the buffers they write (chunks); ranges written by two
//! iterations that overlap are an error on the range, naming the elements. With constant
//! bounds every iteration is evaluated, and two iterations that run on one element of the
//! stream array (`work[i % 4]` with `i = 0` and `i = 4`) are ordered by it; otherwise ranges affine in the loop variable
//! (`i * s .. (i + 1) * s + 1`) are compared between iteration `i` and `i + 1` as
//! polynomials, whatever the params are.

use std::collections::HashMap;

use syn::{Expr, Ident};

use crate::ast::{self, BufRef, ForLoop, KernelParamType, Statement, token_mentions};
use crate::constant::{self, Poly};
use crate::ctxt::Ctxt;
use crate::scope::{Scope, Value};

/// The most iterations a rule evaluates one by one; a longer loop is compared as
/// polynomials.
pub const MAX_UNROLLED: i128 = 4096;

/// The iterations of a loop whose bounds are constants.
pub struct Iterations<'a> {
    body: &'a ForLoop,
    /// `start..end`.
    pub range: std::ops::Range<i128>,
}

impl<'a> Iterations<'a> {
    /// The iterations of `body`, when its bounds are constants and it runs at most
    /// [`MAX_UNROLLED`] of them.
    pub fn of(body: &'a ForLoop) -> Option<Iterations<'a>> {
        let (start, end) = (constant::value(&body.start)?, constant::value(&body.end)?);
        (end - start <= MAX_UNROLLED).then_some(Iterations {
            body,
            range: start..end.max(start),
        })
    }

    /// The values of the loop variable and of the `let`s that evaluate, in iteration `i`.
    pub fn values(&self, i: i128) -> HashMap<String, i128> {
        let mut values = HashMap::from([(self.body.var.to_string(), i)]);
        for binding in &self.body.lets {
            let value = constant::value_in(&binding.value, &|name| {
                values.get(&name.to_string()).copied()
            });
            match value {
                Some(value) => values.insert(binding.name.to_string(), value),
                None => values.remove(&binding.name.to_string()),
            };
        }
        values
    }
}

/// One evaluation of a stage's statements: in a `for` with constant bounds, one iteration,
/// with the values of the loop variable and the `let`s; anywhere else, one in which the names
/// of a loop have no value (so what mentions them does not evaluate).
#[derive(Default)]
pub struct Evaluation<'a> {
    body: Option<&'a ForLoop>,
    i: i128,
    values: HashMap<String, i128>,
}

impl Evaluation<'_> {
    /// Every evaluation of stage `id`: one per iteration of its `for` when the bounds are
    /// constants (none when it runs no iteration), else one.
    pub fn of_stage<'a>(scope: &Scope<'a>, id: usize) -> Vec<Evaluation<'a>> {
        Evaluation::of_loop(scope.stage_loops[id].map(|l| scope.loops[l]))
    }

    /// Every evaluation of a stage in `body` (`None`: outside loops), as [`Self::of_stage`].
    pub fn of_loop(body: Option<&ForLoop>) -> Vec<Evaluation<'_>> {
        match body.and_then(Iterations::of) {
            Some(iterations) => iterations
                .range
                .clone()
                .map(|i| Evaluation {
                    body,
                    i,
                    values: iterations.values(i),
                })
                .collect(),
            None => vec![Evaluation::default()],
        }
    }

    /// The value of `expr` in this evaluation, when the macro can compute it.
    pub fn value(&self, expr: &Expr) -> Option<i128> {
        constant::value_in(expr, &|name| self.values.get(&name.to_string()).copied())
    }

    /// ` when `i = 3``, for a message on `exprs` inside a loop when one of them changes with
    /// the iteration; empty otherwise.
    pub fn when<'e>(&self, exprs: impl IntoIterator<Item = &'e Expr>) -> String {
        match self.body {
            Some(body) if exprs.into_iter().any(|expr| varies(body, expr)) => {
                format!(" when `{} = {}`", body.var, self.i)
            }
            _ => String::new(),
        }
    }
}

/// The polynomials of the loop variable (an unknown of its own) and of the `let`s that are
/// polynomials, over the params (unknowns too).
pub fn symbols(scope: &Scope<'_>, body: &ForLoop) -> HashMap<String, Poly> {
    let var = body.var.to_string();
    let mut symbols = HashMap::from([(var.clone(), Poly::unknown(&var))]);
    let mut varying = vec![var];
    for binding in &body.lets {
        let name = binding.name.to_string();
        let mentions = token_mentions(quote::ToTokens::to_token_stream(&binding.value));
        if mentions
            .iter()
            .any(|m| varying.contains(&m.ident.to_string()))
        {
            varying.push(name.clone());
        }
        let poly = polynomial(scope, &binding.value, &symbols).or_else(|| {
            // A `let` the iteration does not change is one unknown of its own.
            (!varying.contains(&name)).then(|| Poly::unknown(&name))
        });
        match poly {
            Some(poly) => symbols.insert(name, poly),
            None => symbols.remove(&name),
        };
    }
    symbols
}

/// `expr` as a polynomial inside a loop: the loop's names as `symbols` gives them (a `let`
/// that is not a polynomial makes `expr` none), scalar params and `const` items as unknowns.
/// A cast that may change the value (`as u8`, [`constant::keeps_every_bit`]) makes it none:
/// `(i + 256) as u8` is `i` for `i < 256`, not `i + 256`.
pub fn polynomial(scope: &Scope<'_>, expr: &Expr, symbols: &HashMap<String, Poly>) -> Option<Poly> {
    if !constant::keeps_every_bit(expr) {
        return None;
    }
    constant::polynomial(expr, &|name: &Ident| {
        let key = name.to_string();
        if let Some(poly) = symbols.get(&key) {
            return Some(poly.clone());
        }
        match scope.value(name) {
            Some(Value::Scalar(_)) => Some(Poly::unknown(&key)),
            Some(Value::Buffer(_)) => None,
            // The loop's other names (a `let` that is not a polynomial) are unknown here.
            None if is_loop_name(scope, name) => None,
            // A `const` item: one value throughout.
            None => Some(Poly::unknown(&key)),
        }
    })
}

/// Whether `name` is a loop variable or a `let` of some loop.
pub(super) fn is_loop_name(scope: &Scope<'_>, name: &Ident) -> bool {
    scope
        .loops
        .iter()
        .any(|body| body.var == *name || body.lets.iter().any(|l| l.name == *name))
}

/// Whether `expr` changes from one iteration of `body` to the next: it names the loop
/// variable, or a `let` (which may).
pub fn varies(body: &ForLoop, expr: &Expr) -> bool {
    token_mentions(quote::ToTokens::to_token_stream(expr))
        .iter()
        .any(|m| m.ident == body.var || body.lets.iter().any(|l| l.name == m.ident))
}

/// Runs the rules on every stage inside a loop.
pub fn check(cx: &Ctxt, scope: &Scope<'_>) {
    swapped_sweeps(cx, scope);
    for (id, stage) in scope.stages.iter().enumerate() {
        let Some(body) = scope.stage_loops[id].map(|l| scope.loops[l]) else {
            continue;
        };
        // Iterations on one stream run one after the other, as the user wrote them.
        let Some(lane) = &stage.lane else { continue };
        if !varies(body, lane) {
            continue;
        }
        for statement in ast::flatten(&stage.statements) {
            for reference in written(scope, statement) {
                chunks_apart(cx, scope, body, stage, &reference);
            }
        }
    }
}

/// Rule: `swap(a, b)` exchanges two buffers between replays, not between the iterations of a
/// `for`. A statement in a loop that reads the whole of one and writes the whole of the other,
/// with nothing in the loop writing the one it reads and nothing in it changing with the
/// iteration, computes the same half step in every iteration (four sweeps gave the result of
/// one).
pub fn swapped_sweeps(cx: &Ctxt, scope: &Scope<'_>) {
    for swap in scope.input.swaps() {
        let (Some(a), Some(b)) = (scope.buffer(&swap.a), scope.buffer(&swap.b)) else {
            continue;
        };
        for (l, body) in scope.loops.iter().enumerate() {
            if Iterations::of(body).is_some_and(|it| it.range.end - it.range.start < 2) {
                continue;
            }
            let stages: Vec<&ast::Stage> = (0..scope.stages.len())
                .filter(|&id| scope.stage_loops[id] == Some(l))
                .map(|id| scope.stages[id])
                .collect();
            let loop_writes = |buffer: usize| {
                stages.iter().any(|stage| {
                    ast::flatten(&stage.statements)
                        .into_iter()
                        .any(|statement| {
                            written(scope, statement)
                                .iter()
                                .any(|r| scope.buffer(r.name) == Some(buffer))
                        })
                })
            };
            for stage in &stages {
                for statement in ast::flatten(&stage.statements) {
                    let whole = |r: &BufRef<'_>| !r.is_subscripted();
                    let writes: Vec<usize> = written(scope, statement)
                        .iter()
                        .filter(|r| whole(r))
                        .filter_map(|r| scope.buffer(r.name))
                        .collect();
                    let reads: Vec<&Ident> = read(scope, statement)
                        .into_iter()
                        .filter(|r| whole(r))
                        .map(|r| r.name)
                        .collect();
                    if statement_varies(scope, body, statement) {
                        continue;
                    }
                    for name in reads {
                        let Some(from) = scope.buffer(name) else {
                            continue;
                        };
                        let to = if from == a {
                            b
                        } else if from == b {
                            a
                        } else {
                            continue;
                        };
                        if !writes.contains(&to) || loop_writes(from) {
                            continue;
                        }
                        let other = if from == a { &swap.b } else { &swap.a };
                        cx.error_spanned_by(
                            name,
                            format!(
                                "`swap({}, {})` exchanges the two between replays of the captured graph, not between the iterations of this `for`: every iteration of stage `{}` reads the same `{name}` and writes the same `{other}`, so the step computes one half step again and again; to sweep several times in one step, alternate by hand (`launch ..({name}, {other})` then `launch ..({other}, {name})` in each iteration, over half as many iterations), or run one sweep per replay and `swap_{}_{}()` between them",
                                swap.a, swap.b, stage.name, swap.a, swap.b,
                            ),
                        );
                    }
                }
            }
        }
    }
}

/// Whether a statement does something else in each iteration: an argument, a launch
/// dimension or a subscript names the loop variable or a `let`.
fn statement_varies(scope: &Scope<'_>, body: &ForLoop, statement: &Statement) -> bool {
    let mut exprs: Vec<&Expr> = scope
        .statement_refs(statement)
        .iter()
        .flat_map(|r| r.subscript_exprs())
        .collect();
    if let Statement::Launch(launch) = statement {
        exprs.extend(launch.args.iter());
        exprs.extend(
            [&launch.grid, &launch.block, &launch.shared]
                .into_iter()
                .flatten()
                .map(|option| &option.value),
        );
    }
    exprs.into_iter().any(|expr| varies(body, expr))
}

/// The references a statement reads through: a launch's `&` arguments, a copy's source.
fn read<'a>(scope: &Scope<'_>, statement: &'a Statement) -> Vec<BufRef<'a>> {
    match statement {
        Statement::Launch(launch) => {
            let Some(kernel) = launch
                .target()
                .and_then(|(module, kernel)| scope.kernel(scope.module(module)?, kernel))
                .map(|id| scope.kernels[id].decl)
            else {
                return Vec::new();
            };
            kernel
                .params
                .iter()
                .zip(&launch.args)
                .filter(|(param, _)| {
                    matches!(param.kind(), KernelParamType::Slice { mutable: false, .. })
                })
                .filter_map(|(_, arg)| BufRef::of_expr(arg))
                .collect()
        }
        Statement::Copy(copy) => vec![copy.src_ref.borrow()],
        _ => Vec::new(),
    }
}

/// The references a statement writes through: a launch's `&mut` arguments, a copy's
/// destination, a fill's.
fn written<'a>(scope: &Scope<'_>, statement: &'a Statement) -> Vec<BufRef<'a>> {
    match statement {
        Statement::Launch(launch) => {
            let Some(kernel) = launch
                .target()
                .and_then(|(module, kernel)| scope.kernel(scope.module(module)?, kernel))
                .map(|id| scope.kernels[id].decl)
            else {
                return Vec::new();
            };
            kernel
                .params
                .iter()
                .zip(&launch.args)
                .filter(|(param, _)| {
                    matches!(param.kind(), KernelParamType::Slice { mutable: true, .. })
                })
                .filter_map(|(_, arg)| BufRef::of_expr(arg))
                .collect()
        }
        Statement::Copy(copy) => vec![copy.dst_ref.borrow()],
        Statement::Fill(fill) => vec![fill.dst_ref.borrow()],
        _ => Vec::new(),
    }
}

/// Rule: two iterations of one stage, each on a stream of its own, write no element of one
/// range in common. With constant bounds only iterations whose stream indices differ (or do
/// not evaluate) are compared: two on one element of the stream array (`work[i % 4]`, `i = 0`
/// and `i = 4`) run in the order written.
fn chunks_apart(
    cx: &Ctxt,
    scope: &Scope<'_>,
    body: &ForLoop,
    stage: &ast::Stage,
    reference: &BufRef<'_>,
) {
    let Some(range) = reference.range else { return };
    let (Some(end), Some(_)) = (range.end, scope.buffer(reference.name)) else {
        return;
    };
    // An element of an array that changes with the iteration is another buffer.
    if reference.index.is_some_and(|index| varies(body, index)) {
        return;
    }
    let zero: Expr = syn::parse_quote!(0);
    let start = range.start.unwrap_or(&zero);
    if !varies(body, start) && !varies(body, end) {
        return;
    }
    let written = reference_text(reference);
    let what = format!(
        "`{written}` is written by every iteration of stage `{}`, each on a stream of its own (`{}[{}]`)",
        stage.name,
        stage.stream,
        stage
            .lane
            .as_ref()
            .map_or(String::new(), ast::tokens_string),
    );
    let consequence = "the iterations are meant to split the buffer, but the overlap orders them one after the other and writes those elements twice (if the kernel only reads them, pass them as a `&[T]` argument of their own)";
    let iterations = Iterations::of(body);
    if let Some(iterations) = &iterations
        && let Some(chunks) = evaluated_chunks(iterations, start, end, stage.lane.as_ref())
    {
        let var = &body.var;
        if let Some((a, b)) = overlapping_chunks(&chunks) {
            let (first, second) = (a.iteration.min(b.iteration), a.iteration.max(b.iteration));
            cx.error_at(
                range.span,
                format!(
                    "{what}, and iterations `{var} = {first}` and `{var} = {second}` both write elements {}..{}: {consequence}; make the ranges apart (each iteration's range ending where the next one's starts)",
                    b.start,
                    a.end.min(b.end),
                ),
            );
        }
        return;
    }
    // Constant bounds of fewer than two iterations: nothing to overlap.
    if iterations.is_some_and(|it| it.range.end - it.range.start < 2) {
        return;
    }
    let symbols = symbols(scope, body);
    let var = body.var.to_string();
    let (Some(lo), Some(hi)) = (
        polynomial(scope, start, &symbols),
        polynomial(scope, end, &symbols),
    ) else {
        return;
    };
    let next = Poly::unknown(&var).add(&Poly::constant(1));
    let Some(next_lo) = next.and_then(|next| lo.substitute(&var, &next)) else {
        return;
    };
    // Iteration `i + 1` starts `step` after iteration `i`, and the range of `i` runs
    // `overlap` elements past that start, whatever the params are.
    let (Some(step), Some(overlap)) = (next_lo.sub(&lo), hi.sub(&next_lo)) else {
        return;
    };
    let Some(overlap) = overlap.as_constant() else {
        return;
    };
    if overlap <= 0 || step.as_constant() == Some(0) || !step.nonnegative() {
        return;
    }
    let plural = if overlap == 1 { "element" } else { "elements" };
    cx.error_at(
        range.span,
        format!(
            "{what}, and iterations `{var}` and `{var} + 1` both write elements `{}..{}` ({overlap} {plural}): {consequence}; make the ranges apart: `{}[{}..{}]`",
            next_lo.render(),
            hi.render(),
            reference.name,
            lo.render(),
            next_lo.render(),
        ),
    );
}

/// The range one iteration writes, and the stream index it runs on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Chunk {
    start: i128,
    end: i128,
    iteration: i128,
    /// The stream index in this iteration: its value, or, when it does not evaluate, its
    /// text with what evaluates folded (`(0 % lanes)` for `(i / 2) % lanes` when `i = 1`);
    /// `None` when it names a `let` of the loop that does not evaluate.
    lane: Option<LaneKey>,
}

/// Which element of a stream array an iteration runs on, as far as the compiler can tell.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum LaneKey {
    Value(i128),
    /// The index with every part that evaluates folded: two iterations with one text run on
    /// one stream (the names left in it are params, one value in the step).
    Folded(String),
}

/// The nonempty range `start..end` of each iteration, sorted, with the iteration and its
/// stream index: `None` when some bound does not evaluate.
fn evaluated_chunks(
    iterations: &Iterations<'_>,
    start: &Expr,
    end: &Expr,
    lane: Option<&Expr>,
) -> Option<Vec<Chunk>> {
    let mut chunks = Vec::new();
    for i in iterations.range.clone() {
        let values = iterations.values(i);
        let names = |name: &Ident| values.get(&name.to_string()).copied();
        let (lo, hi) = (
            constant::value_in(start, &names)?,
            constant::value_in(end, &names)?,
        );
        if lo < hi {
            chunks.push(Chunk {
                start: lo,
                end: hi,
                iteration: i,
                lane: lane.and_then(|lane| lane_key(iterations, lane, &values)),
            });
        }
    }
    chunks.sort();
    Some(chunks)
}

/// The stream index `lane` in the iteration whose names have `values`, as a [`LaneKey`].
fn lane_key(
    iterations: &Iterations<'_>,
    lane: &Expr,
    values: &HashMap<String, i128>,
) -> Option<LaneKey> {
    let names = |name: &Ident| values.get(&name.to_string()).copied();
    if let Some(value) = constant::value_in(lane, &names) {
        return Some(LaneKey::Value(value));
    }
    // A `let` that does not evaluate may differ from iteration to iteration.
    let mentions = token_mentions(quote::ToTokens::to_token_stream(lane));
    let unknown_let = mentions.iter().any(|m| {
        iterations.body.lets.iter().any(|l| l.name == m.ident)
            && !values.contains_key(&m.ident.to_string())
    });
    (!unknown_let).then(|| LaneKey::Folded(constant::folded(lane, &names)))
}

/// Two chunks that share an element and may run on different streams (their stream indices
/// differ, or one does not evaluate): iterations on one stream run in the order written, so
/// an overlap there is no race (`on work[i % 4]` over `0..8`: `i = 0` and `i = 4` share
/// `work[0]`). `chunks` is sorted by start.
fn overlapping_chunks(chunks: &[Chunk]) -> Option<(Chunk, Chunk)> {
    for (k, first) in chunks.iter().enumerate() {
        // Sorted by start: the chunks after `first` that start before its end are the ones
        // it overlaps.
        let overlapping = chunks[k + 1..]
            .iter()
            .take_while(|later| later.start < first.end);
        for later in overlapping {
            let one_stream = matches!((&first.lane, &later.lane), (Some(a), Some(b)) if a == b);
            if !one_stream {
                return Some((first.clone(), later.clone()));
            }
        }
    }
    None
}

/// A reference as written: `x[i * s..(i + 1) * s]`.
fn reference_text(r: &BufRef<'_>) -> String {
    let index = r
        .index
        .map_or(String::new(), |i| format!("[{}]", ast::tokens_string(i)));
    let range = r.range.map_or(String::new(), |b| {
        let bound = |e: Option<&Expr>| e.map_or(String::new(), ast::tokens_string);
        format!("[{}..{}]", bound(b.start), bound(b.end))
    });
    format!("{}{index}{range}", r.name)
}

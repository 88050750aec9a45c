//! Rule: inside a `for`, a wait that no write before it in its iteration feeds sees, from the
//! second iteration on, what the last write of the flag later in the loop wrote in the
//! iteration before (the iterations touch one flag, so they run in order). Where that value
//! never satisfies the wait (`wait f == 0u32; write f = 1;` in one iteration), the stream
//! waits for ever at the second iteration: in the first step, whatever the step leaves in
//! the flag afterwards (a reset at its end does not help).

use super::iterations::Iterations;
use super::ordering::{in_loop_terms, in_next_iteration, satisfies};
use crate::ast::{self, tokens_string};
use crate::constant::{self, Poly};
use crate::lower::WaitCondition;

/// Where a wait inside a `for` first sees an unsatisfying value from the iteration before.
pub(super) enum Hang {
    /// With constant bounds: the iteration, as the loop counts it, and the value it sees.
    At { iteration: i128, seen: i128 },
    /// Over params: from the second iteration on, whenever the loop runs it; what the write
    /// leaves and what the next iteration waits for, as polynomials of the loop variable.
    FromSecond { written: Poly, wanted: Poly },
}

/// A wait of `wanted` (its value in each iteration in `waits`, with constant bounds) that
/// sees what `written` (`by_iteration`) left in the iteration before, after a first
/// iteration that holds on `initial`.
pub(super) struct LoopedWait<'e> {
    pub(super) body: &'e ast::ForLoop,
    pub(super) wanted: &'e syn::Expr,
    pub(super) waits: &'e [Option<i128>],
    pub(super) written: Option<&'e syn::Expr>,
    pub(super) by_iteration: &'e [Option<i128>],
    pub(super) initial: Option<i128>,
    pub(super) condition: WaitCondition,
    pub(super) bits: Option<u32>,
}

impl LoopedWait<'_> {
    /// The first iteration after the first whose wait never holds, when the compiler can tell
    /// and the first iteration's does.
    pub(super) fn hang(&self) -> Option<Hang> {
        let never =
            |wanted: Option<i128>| self.condition == WaitCondition::AnyBit && wanted == Some(0);
        match Iterations::of(self.body) {
            Some(iterations) => {
                let first = *self.waits.first()?;
                if never(first) || !satisfies(self.initial, self.condition, first, self.bits) {
                    return None;
                }
                let k = (1..self.waits.len()).find(|&k| {
                    let (wanted, seen) = (
                        self.waits[k],
                        self.by_iteration.get(k - 1).copied().flatten(),
                    );
                    wanted.is_some()
                        && seen.is_some()
                        && (never(wanted) || !satisfies(seen, self.condition, wanted, self.bits))
                })?;
                Some(Hang::At {
                    iteration: iterations.range.start + i128::try_from(k).ok()?,
                    seen: self.by_iteration.get(k - 1).copied().flatten()?,
                })
            }
            None => self.hang_over_params(),
        }
    }

    /// [`hang`](Self::hang) for a `for` whose bounds are not constants: `written` minus what
    /// the next iteration waits for is a constant that never satisfies the comparison.
    fn hang_over_params(&self) -> Option<Hang> {
        if self.condition == WaitCondition::AnyBit {
            return None;
        }
        let first = constant::value(&self.body.start).and_then(|start| {
            constant::value_in(self.wanted, &|name| {
                (*name == self.body.var).then_some(start)
            })
        });
        if !satisfies(self.initial, self.condition, first, self.bits) {
            return None;
        }
        let bits = self.bits.unwrap_or(64);
        let wanted = in_loop_terms(self.body, self.wanted, bits)?;
        let written = in_loop_terms(self.body, self.written?, bits)?;
        let next = in_next_iteration(self.body, &wanted)?;
        let difference = written.sub(&next)?.as_constant()?;
        if satisfies(Some(difference), self.condition, Some(0), self.bits) {
            return None;
        }
        Some(Hang::FromSecond {
            written,
            wanted: next,
        })
    }
}

/// The error of a [`Hang`]: `wait` and `write` as written, in their stages, on `flag`.
pub(super) fn message(
    body: &ast::ForLoop,
    wait: &str,
    stage: &str,
    flag: &syn::Ident,
    write: &str,
    hang: &Hang,
) -> String {
    let var = &body.var;
    let fix = format!(
        "wait for the value the iteration before leaves, or pass a token from iteration to iteration (`wait {flag} == {var} as u32;` before `write {flag} = ({var} + 1) as u32;`)"
    );
    match hang {
        Hang::At { iteration, seen } => format!(
            "{wait} in stage `{stage}` sees, when `{var} = {iteration}`, what {write} wrote in the iteration before ({seen}), which never satisfies it: the stream would wait for ever there; {fix}"
        ),
        Hang::FromSecond { written, wanted } => format!(
            "{wait} in stage `{stage}` sees, from the second iteration of `for {var} in {}..{}` on, what {write} wrote in the iteration before (`{}`, where the next iteration waits for `{}`), which never satisfies it: whenever the loop runs twice the stream would wait for ever; {fix}",
            tokens_string(&body.start),
            tokens_string(&body.end),
            written.render(),
            wanted.render(),
        ),
    }
}

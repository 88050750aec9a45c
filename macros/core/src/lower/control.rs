//! Lowering `while` and `if`: the condition resolved, the body lowered like a stage's
//! statements. A control statement touches what its condition reads and everything its body
//! touches, so the stage graph orders it like the statements it holds.

use proc_macro2::TokenStream;
use quote::ToTokens;

use super::{BufferId, Mode, Statement, StatementKind, Touch, Unresolved};
use super::{buffer, lower_statement, scalars_with_lets};
use crate::ast::{self, Comparison};
use crate::scope::Scope;

/// A lowered `while`, `do ... while`, `if` (with or without `else`) or `switch`.
#[derive(Debug, Clone)]
pub struct Control<'a> {
    /// As written: keyword, condition, `max`, bodies.
    pub source: &'a ast::Control,
    /// What it tests.
    pub condition: ControlCondition,
    /// The bodies, lowered: the body, the `else` body, or the cases in label order.
    pub bodies: Vec<Vec<Statement<'a>>>,
    /// The buffers a loop's body swaps at its end (`swap(a, b);`): the next iteration runs
    /// with each pair exchanged.
    pub swaps: Vec<(BufferId, BufferId)>,
}

/// What a lowered `while` or `if` tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlCondition {
    /// The first element of `value`, compared on the device.
    Device {
        /// The buffer read.
        value: BufferId,
        /// How.
        comparison: Comparison,
    },
    /// The pipeline's step counter.
    Step,
    /// The first element of `value` itself (a `switch`).
    Value {
        /// The buffer read.
        value: BufferId,
    },
    /// A `Condition` kernels set (`while go`, `switch go`): the node's handle, or eagerly
    /// its word.
    Kernel {
        /// The `Condition` scratch entry.
        value: BufferId,
    },
}

impl<'a> Control<'a> {
    /// What the condition reads, then what the body touches, in order.
    pub fn accesses(&self) -> Vec<Touch<'a>> {
        let mut touches = Vec::new();
        let read = match (self.condition, self.source) {
            (ControlCondition::Device { value, .. }, _) => match self.source.test() {
                Some(ast::Condition::Device(written)) => Some((value, &written.value)),
                _ => None,
            },
            (ControlCondition::Value { value }, ast::Control::Switch { value: name, .. }) => {
                Some((value, name))
            }
            (ControlCondition::Kernel { value }, ast::Control::Switch { value: name, .. }) => {
                Some((value, name))
            }
            (ControlCondition::Kernel { value }, _) => match self.source.test() {
                Some(ast::Condition::Kernel(name)) => Some((value, name)),
                _ => None,
            },
            _ => None,
        };
        if let Some((buffer, name)) = read {
            touches.push(Touch {
                buffer,
                mode: Mode::Read,
                name,
                subscript: None,
            });
        }
        touches.extend(self.statements().flat_map(|s| s.accesses.iter().copied()));
        // A swap writes both: the other half of the unrolled body writes through each name
        // what the first writes through the other, and after an odd count the second is copied
        // into the first.
        for (swap, &(a, b)) in self.source.swaps().iter().zip(&self.swaps) {
            for (buffer, name) in [(a, &swap.a), (b, &swap.b)] {
                touches.push(Touch {
                    buffer,
                    mode: Mode::Write,
                    name,
                    subscript: None,
                });
            }
        }
        touches
    }

    /// Every statement of its bodies, in order.
    pub fn statements(&self) -> impl Iterator<Item = &Statement<'a>> {
        self.bodies.iter().flatten()
    }
}

/// Lowers one `while` or `if` whose names passed the checks.
pub(super) fn lower<'a>(
    scope: &Scope<'a>,
    looped: Option<&'a ast::ForLoop>,
    source: &'a ast::Control,
) -> Result<Statement<'a>, Unresolved> {
    let mut expressions = TokenStream::new();
    let condition = match (source, source.test()) {
        (ast::Control::Switch { value, .. }, _) => {
            let id = buffer(scope, value)?;
            if scope.buffers[id.0].memory == crate::scope::Memory::Condition {
                ControlCondition::Kernel { value: id }
            } else {
                ControlCondition::Value { value: id }
            }
        }
        (_, Some(ast::Condition::Kernel(name))) => ControlCondition::Kernel {
            value: buffer(scope, name)?,
        },
        (_, None) => ControlCondition::Step,
        (_, Some(ast::Condition::Device(device))) => {
            device.threshold.to_tokens(&mut expressions);
            ControlCondition::Device {
                value: buffer(scope, &device.value)?,
                comparison: device.comparison,
            }
        }
        (_, Some(ast::Condition::Step(step))) => {
            step.modulus.to_tokens(&mut expressions);
            step.remainder.to_tokens(&mut expressions);
            ControlCondition::Step
        }
    };
    if let Some((_, max)) = source.max() {
        max.to_tokens(&mut expressions);
    }
    let mut bodies: Vec<Vec<Statement<'a>>> = Vec::new();
    for body in source.bodies() {
        bodies.push(
            body.iter()
                .map(|statement| lower_statement(scope, looped, statement))
                .collect::<Result<_, _>>()?,
        );
    }
    // A switch's cases in label order (`check` made them 0..N, each once).
    if let ast::Control::Switch { cases, .. } = source {
        let mut labelled: Vec<(u32, Vec<Statement<'a>>)> = cases
            .iter()
            .map(|c| c.label.base10_parse::<u32>().unwrap_or(u32::MAX))
            .zip(bodies)
            .collect();
        labelled.sort_by_key(|(label, _)| *label);
        bodies = labelled.into_iter().map(|(_, body)| body).collect();
    }
    let mut scalars = scalars_with_lets(scope, looped, expressions);
    for statement in bodies.iter().flatten() {
        scalars.extend(statement.scalars.iter().copied());
    }
    let swaps = source
        .swaps()
        .iter()
        .map(|swap| Ok((buffer(scope, &swap.a)?, buffer(scope, &swap.b)?)))
        .collect::<Result<_, Unresolved>>()?;
    let control = Control {
        source,
        condition,
        bodies,
        swaps,
    };
    Ok(Statement {
        accesses: control.accesses(),
        scalars,
        kind: StatementKind::Control(Box::new(control)),
    })
}

//! Lowering `while` and `if`: the condition resolved, the body lowered like a stage's
//! statements. A control statement touches what its condition reads and everything its body
//! touches, so the stage graph orders it like the statements it holds.

use proc_macro2::TokenStream;
use quote::ToTokens;

use super::{BufferId, Mode, Statement, StatementKind, Touch, Unresolved};
use super::{buffer, lower_statement, scalars_with_lets};
use crate::ast::{self, Comparison};
use crate::scope::Scope;

/// A lowered `while` or `if`.
#[derive(Debug, Clone)]
pub struct Control<'a> {
    /// As written: keyword, condition, `max`, body.
    pub source: &'a ast::Control,
    /// What it tests.
    pub condition: ControlCondition,
    /// The body, lowered.
    pub body: Vec<Statement<'a>>,
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
}

impl<'a> Control<'a> {
    /// What the condition reads, then what the body touches, in order.
    pub fn accesses(&self) -> Vec<Touch<'a>> {
        let mut touches = Vec::new();
        if let (ControlCondition::Device { value, .. }, ast::Condition::Device(written)) =
            (self.condition, self.source.condition())
        {
            touches.push(Touch {
                buffer: value,
                mode: Mode::Read,
                name: &written.value,
                subscript: None,
            });
        }
        touches.extend(self.body.iter().flat_map(|s| s.accesses.iter().copied()));
        touches
    }

    /// Whether it is a `while`.
    pub fn is_while(&self) -> bool {
        matches!(self.source, ast::Control::While { .. })
    }
}

/// Lowers one `while` or `if` whose names passed the checks.
pub(super) fn lower<'a>(
    scope: &Scope<'a>,
    looped: Option<&'a ast::ForLoop>,
    source: &'a ast::Control,
) -> Result<Statement<'a>, Unresolved> {
    let mut expressions = TokenStream::new();
    let condition = match source.condition() {
        ast::Condition::Device(device) => {
            device.threshold.to_tokens(&mut expressions);
            ControlCondition::Device {
                value: buffer(scope, &device.value)?,
                comparison: device.comparison,
            }
        }
        ast::Condition::Step(step) => {
            step.modulus.to_tokens(&mut expressions);
            step.remainder.to_tokens(&mut expressions);
            ControlCondition::Step
        }
    };
    if let ast::Control::While {
        max: Some((_, max)),
        ..
    } = source
    {
        max.to_tokens(&mut expressions);
    }
    let body: Vec<Statement<'a>> = source
        .body()
        .iter()
        .map(|statement| lower_statement(scope, looped, statement))
        .collect::<Result<_, _>>()?;
    let mut scalars = scalars_with_lets(scope, looped, expressions);
    for statement in &body {
        scalars.extend(statement.scalars.iter().copied());
    }
    let control = Control {
        source,
        condition,
        body,
    };
    Ok(Statement {
        accesses: control.accesses(),
        scalars,
        kind: StatementKind::Control(Box::new(control)),
    })
}

//! What the code for one stage instance binds and reads: the loop variable and `let`s of a
//! stage inside `for` (its header), and which resolved reference (`__refs[slot]`) each
//! subscripted buffer reference of its statements uses. Shared by the eager step, the graph
//! built from the plan, the bound checks and the setters, which all walk a plan's instances.

use proc_macro2::TokenStream;
use quote::quote;

use crate::lower::{Control, ControlCondition, Pipeline, Stage};

/// For each statement of `stage`, for each of its accesses: the index of the resolved
/// reference it uses among the stage instance's `refs` (subscripted references only, in the
/// order `__describe` resolves them). A `while`/`if` lists its condition's access, then its
/// body's, statement by statement (see [`body_slots`]).
pub fn ref_slots(stage: &Stage<'_>) -> Vec<Vec<Option<usize>>> {
    let mut next = 0;
    stage
        .statements
        .iter()
        .map(|statement| {
            statement
                .accesses
                .iter()
                .map(|touch| {
                    touch.subscript.map(|_| {
                        next += 1;
                        next - 1
                    })
                })
                .collect()
        })
        .collect()
}

/// The slots of a `while`/`if`/`switch`'s accesses (`slots`, as [`ref_slots`] gives them)
/// split per statement of its bodies, in order: the condition's access comes first and is
/// skipped.
pub fn body_slots<'s>(
    control: &Control<'_>,
    slots: &'s [Option<usize>],
) -> Vec<&'s [Option<usize>]> {
    let mut rest = match control.condition {
        ControlCondition::Device { .. }
        | ControlCondition::Value { .. }
        | ControlCondition::Kernel { .. } => slots.get(1..).unwrap_or(&[]),
        ControlCondition::Step => slots,
    };
    control
        .statements()
        .map(|statement| {
            let (own, after) = rest.split_at(statement.accesses.len().min(rest.len()));
            rest = after;
            own
        })
        .collect()
}

/// What a stage's arm binds before its statements: the loop variable and the loop's `let`s.
pub fn stage_header(pipeline: &Pipeline<'_>, stage: &Stage<'_>) -> TokenStream {
    let Some(l) = stage.looped else {
        return quote!();
    };
    let looped = pipeline.loops[l];
    let var = &looped.var;
    let lets = looped.lets.iter().map(|binding| {
        let (name, value) = (&binding.name, &binding.value);
        quote!(let #name = #value;)
    });
    quote! {
        let #var: usize = __instance.i();
        #(#lets)*
    }
}

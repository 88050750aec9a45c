//! `while` and `if` in generated code. An eager step decides each condition on the host
//! (the value is copied back and the stream waited for, once per test); a built graph decides
//! on the device with conditional nodes (`build.rs`). Both count a loop's iterations the same
//! way and fail with the same named error when a loop reaches its maximum.
//!
//! Also the pipeline state `while`/`if` need: the step counter that `step % k == r` tests
//! (advanced by every eager step and every replay; a replay writes it to a flag word first)
//! and the pinned words an eager step reads conditions back into.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::names::rt;
use crate::ast::{self, Comparison};
use crate::lower::{Control, ControlCondition, Pipeline, Statement, StatementKind};

/// Every `while`/`if` of the pipeline, bodies included.
fn controls<'p, 'a>(pipeline: &'p Pipeline<'a>) -> Vec<&'p Control<'a>> {
    fn walk<'p, 'a>(statements: &'p [Statement<'a>], found: &mut Vec<&'p Control<'a>>) {
        for statement in statements {
            if let StatementKind::Control(control) = &statement.kind {
                found.push(control);
                for body in &control.bodies {
                    walk(body, found);
                }
            }
        }
    }
    let mut found = Vec::new();
    for stage in &pipeline.stages {
        walk(&stage.statements, &mut found);
    }
    found
}

/// The keyword of the first `while`/`if`/`switch` of the pipeline, if any.
pub fn first_keyword(pipeline: &Pipeline<'_>) -> Option<proc_macro2::Span> {
    controls(pipeline)
        .first()
        .map(|control| control.source.keyword_span())
}

/// Whether some `if` tests `step`.
pub fn uses_step(pipeline: &Pipeline<'_>) -> bool {
    controls(pipeline)
        .iter()
        .any(|c| c.condition == ControlCondition::Step)
}

/// Whether some `while`/`if` reads a device buffer (an eager step then needs staging words).
pub fn uses_device_condition(pipeline: &Pipeline<'_>) -> bool {
    controls(pipeline).iter().any(|c| {
        matches!(
            c.condition,
            ControlCondition::Device { .. }
                | ControlCondition::Value { .. }
                | ControlCondition::Kernel { .. }
        )
    })
}

/// Whether a built graph of the step may use the library's condition kernels: a condition
/// the library decides (a comparison, `step`, a switch on a buffer), or a `do ... while`
/// (one in another loop's body restarts with one of them). Kernel-set conditions alone need
/// none on a 12.8+ driver, so such a pipeline loads nothing ahead.
fn uses_condition_kernels(pipeline: &Pipeline<'_>) -> bool {
    controls(pipeline).iter().any(|c| {
        !matches!(c.condition, ControlCondition::Kernel { .. })
            || matches!(c.source, crate::ast::Control::DoWhile { .. })
    })
}

/// The pipeline struct's fields for control flow.
pub fn struct_fields(pipeline: &Pipeline<'_>) -> TokenStream {
    let rt = rt();
    let mut fields = TokenStream::new();
    if uses_step(pipeline) {
        fields.extend(quote! {
            __steps: u64,
            __step_word: #rt::FlagCell<u32>,
        });
    }
    if uses_device_condition(pipeline) {
        fields.extend(quote!(__staging: #rt::ConditionStaging,));
    }
    if uses_condition_kernels(pipeline) {
        fields.extend(quote! {
            /// Keeps the library's condition kernels loaded from one capture to the next.
            __condition_kernels: #rt::ConditionKernels,
        });
    }
    fields
}

/// Their initial values in `new` (`ctx` names the origin's context there).
pub fn field_inits(pipeline: &Pipeline<'_>, ctx: &syn::Ident) -> TokenStream {
    let rt = rt();
    let mut inits = TokenStream::new();
    if uses_step(pipeline) {
        inits.extend(quote! {
            __steps: 0,
            __step_word: #rt::FlagCell::new(#ctx, 0u32)?,
        });
    }
    if uses_device_condition(pipeline) {
        inits.extend(quote!(__staging: ::core::default::Default::default(),));
    }
    if uses_condition_kernels(pipeline) {
        inits.extend(quote!(__condition_kernels: #rt::ConditionKernels::keep(#ctx),));
    }
    inits
}

/// The fields a step's code destructures, as `name,` items.
pub fn destructured(pipeline: &Pipeline<'_>) -> TokenStream {
    let mut names = TokenStream::new();
    if uses_step(pipeline) {
        names.extend(quote!(__steps, __step_word,));
    }
    if uses_device_condition(pipeline) {
        names.extend(quote!(__staging,));
    }
    names
}

/// Where an eager step starts its stages: `__step`, the number of steps before this one, and
/// the counter advances at once, so a step that fails after this point still counts (as a
/// replay does, whose loop limit or fault is found later): `step % k` stays in phase.
pub fn eager_step_start(pipeline: &Pipeline<'_>) -> TokenStream {
    if uses_step(pipeline) {
        quote! {
            let __step: u32 = *__steps as u32;
            *__steps = __steps.wrapping_add(1);
        }
    } else {
        TokenStream::new()
    }
}

/// Before a replay (in `PGraph::launch`, with `pipeline` the pipeline): the counter goes to
/// the flag word the `if` nodes read, in the origin stream's order.
pub fn before_replay(pipeline: &Pipeline<'_>) -> TokenStream {
    if uses_step(pipeline) {
        quote! {
            let __origin = self.pipeline.__origin()?;
            __origin.write_value_32(&self.pipeline.__step_word, self.pipeline.__steps as u32)?;
        }
    } else {
        TokenStream::new()
    }
}

/// After a replay was enqueued: the counter advances.
pub fn after_replay(pipeline: &Pipeline<'_>) -> TokenStream {
    if uses_step(pipeline) {
        quote!(self.pipeline.__steps = self.pipeline.__steps.wrapping_add(1);)
    } else {
        TokenStream::new()
    }
}

/// `Comparison::...` for the runtime.
pub fn comparison(comparison: Comparison) -> TokenStream {
    let rt = rt();
    match comparison {
        Comparison::Greater => quote!(#rt::Comparison::Greater),
        Comparison::GreaterOrEqual => quote!(#rt::Comparison::GreaterOrEqual),
        Comparison::Less => quote!(#rt::Comparison::Less),
        Comparison::LessOrEqual => quote!(#rt::Comparison::LessOrEqual),
        Comparison::Equal => quote!(#rt::Comparison::Equal),
        Comparison::NotEqual => quote!(#rt::Comparison::NotEqual),
    }
}

/// The condition as written, the label of its errors: `residual > tol`, `step % k == 0`,
/// `switch mode`.
pub fn label(control: &Control<'_>) -> String {
    match (control.source.test(), control.source) {
        (Some(test), _) => test.written(),
        (None, ast::Control::Switch { value, .. }) => format!("switch {value}"),
        (None, _) => String::new(),
    }
}

/// The threshold of a device condition, typed as the buffer's element so that a mismatch is
/// reported on the user's expression.
pub fn threshold(pipeline: &Pipeline<'_>, control: &Control<'_>) -> TokenStream {
    let Some(ast::Condition::Device(device)) = control.source.test() else {
        return quote!(());
    };
    let value = &device.threshold;
    let elem = match control.condition {
        ControlCondition::Device { value, .. } => pipeline.buffers[value.0].elem,
        ControlCondition::Step
        | ControlCondition::Value { .. }
        | ControlCondition::Kernel { .. } => None,
    };
    match elem {
        Some(elem) => {
            quote_spanned!(value.span()=> { let __threshold: #elem = #value; __threshold })
        }
        None => quote!(#value),
    }
}

/// `max N` as a `u32`, spanned on the user's expression.
pub fn maximum(control: &Control<'_>) -> TokenStream {
    let rt = rt();
    let written = format!("{} {}", control.source.word(), label(control));
    match control.source.max() {
        // Checked where it is used, eagerly and when built alike, with the loop named.
        Some((_, max)) => quote_spanned!(max.span()=> {
            let __max: u32 = #max;
            #rt::loop_maximum(#written, __max)?
        }),
        None => quote!(u32::MAX),
    }
}

/// `step % k == r`'s modulus and remainder as `u32`s.
pub fn step_parts(control: &Control<'_>) -> (TokenStream, TokenStream) {
    match control.source.test() {
        Some(ast::Condition::Step(step)) => {
            let (m, r) = (&step.modulus, &step.remainder);
            (
                quote_spanned!(m.span()=> { let __modulus: u32 = #m; __modulus }),
                quote_spanned!(r.span()=> { let __remainder: u32 = #r; __remainder }),
            )
        }
        _ => (quote!(1u32), quote!(0u32)),
    }
}

/// The `let` that exchanges the names of each pair a loop's body swaps, for the other half of
/// its iterations: `let (a, b) = (&mut *b, &mut *a);`.
pub fn swapped_lets(pipeline: &Pipeline<'_>, control: &Control<'_>) -> TokenStream {
    let mut names = Vec::new();
    let mut values = Vec::new();
    for &(a, b) in &control.swaps {
        let (a, b) = (pipeline.buffers[a.0].ident, pipeline.buffers[b.0].ident);
        names.extend([a, b]);
        values.extend([quote!(&mut *#b), quote!(&mut *#a)]);
    }
    quote!(let (#(#names,)*) = (#(#values,)*);)
}

/// What a step checks of its `while`/`if`/`switch` statements before it enqueues or builds
/// anything, anywhere in the step, so that a refusal leaves nothing half done: each condition
/// buffer has an element to test (a `do ... while` would otherwise run its body first), and
/// each pair a loop body swaps has one length (the body runs on both, and an odd count copies
/// one into the other). In scope, the bindings; a refusal returns the error, naming the stage.
pub fn prestep_checks(pipeline: &Pipeline<'_>) -> TokenStream {
    fn walk(
        pipeline: &Pipeline<'_>,
        stage: &str,
        statements: &[crate::lower::Statement<'_>],
        out: &mut Vec<TokenStream>,
    ) {
        let rt = rt();
        let name = pipeline.name.as_str();
        for statement in statements {
            let StatementKind::Control(control) = &statement.kind else {
                continue;
            };
            if let ControlCondition::Device { value, .. } | ControlCondition::Value { value } =
                control.condition
            {
                let buffer = pipeline.buffers[value.0].ident;
                let test = label(control);
                out.push(quote! {
                    #rt::condition_buffer(#test, &*#buffer)
                        .map_err(|e| #rt::stage_error(#name, #stage, e))?;
                });
            }
            for &(a, b) in &control.swaps {
                let (a, b) = (pipeline.buffers[a.0].ident, pipeline.buffers[b.0].ident);
                let swap = format!("swap({a}, {b})");
                out.push(quote! {
                    #rt::swap_lengths(#swap, &*#a, &*#b)
                        .map_err(|e| #rt::stage_error(#name, #stage, e))?;
                });
            }
            for body in &control.bodies {
                walk(pipeline, stage, body, out);
            }
        }
    }
    let mut out = Vec::new();
    for stage in &pipeline.stages {
        walk(
            pipeline,
            &stage.decl.name.to_string(),
            &stage.statements,
            &mut out,
        );
    }
    quote!(#(#out)*)
}

/// What a step checks of the host values of its `while`/`if` statements before it enqueues
/// anything, over every instance `schedule` enqueues (with the loop variable and `let`s of its
/// iteration bound): each loop's `max` is at least 1, and each `step % k == r` has `k` at
/// least 1 and `r` below it. Eagerly these were checked where the statement ran, after the
/// stages before it had started (a refused step half done, and counted as a step). In scope,
/// the bindings; a refusal runs `refused`, in which `__refusal` is the error naming the stage.
pub fn value_checks(
    pipeline: &Pipeline<'_>,
    plan: &TokenStream,
    schedule: &TokenStream,
    refused: &TokenStream,
) -> TokenStream {
    fn walk(statements: &[crate::lower::Statement<'_>], out: &mut Vec<TokenStream>) {
        let rt = rt();
        for statement in statements {
            let StatementKind::Control(control) = &statement.kind else {
                continue;
            };
            if control.source.max().is_some() {
                let max = maximum(control);
                out.push(quote!(let _ = #max;));
            }
            if control.condition == ControlCondition::Step {
                let (modulus, remainder) = step_parts(control);
                out.push(quote!(let _ = #rt::step_selects(0, #modulus, #remainder)?;));
            }
            for body in &control.bodies {
                walk(body, out);
            }
        }
    }
    let rt = rt();
    let name = pipeline.name.as_str();
    let arms: Vec<TokenStream> = pipeline
        .stages
        .iter()
        .enumerate()
        .filter_map(|(t, stage)| {
            let mut checks = Vec::new();
            walk(&stage.statements, &mut checks);
            if checks.is_empty() {
                return None;
            }
            let header = super::instance::stage_header(pipeline, stage);
            Some(quote! {
                #t => {
                    #header
                    let __checked = (|| -> #rt::Result<()> {
                        #(#checks)*
                        ::core::result::Result::Ok(())
                    })();
                    if let ::core::result::Result::Err(__refusal) = __checked {
                        let __refusal = #rt::stage_error(#name, __instance.name, __refusal);
                        #refused
                    }
                }
            })
        })
        .collect();
    if arms.is_empty() {
        return TokenStream::new();
    }
    quote! {
        for __planned in (#schedule).stages.iter() {
            let __instance = (#plan)
                .instances
                .get(__planned.stage.0)
                .ok_or_else(|| #rt::internal(#name, "a planned stage is not described"))?;
            match __instance.template {
                #(#arms)*
                _ => {}
            }
        }
    }
}

/// An eager `while`, `do ... while`, `if`, `if`/`else` or `switch` inside a stage's closure
/// (`__stream` is its stream), around `body`, the tokens of its bodies' statements in order.
pub fn eager(
    pipeline: &Pipeline<'_>,
    control: &Control<'_>,
    body: Vec<TokenStream>,
) -> TokenStream {
    let rt = rt();
    // The statements' tokens, split per body.
    let mut rest = body.into_iter();
    let bodies: Vec<Vec<TokenStream>> = control
        .bodies
        .iter()
        .map(|b| rest.by_ref().take(b.len()).collect())
        .collect();
    let test = match control.condition {
        ControlCondition::Device { value, comparison } => {
            let name = pipeline.buffers[value.0].ident;
            let comparison = self::comparison(comparison);
            let threshold = threshold(pipeline, control);
            quote!(#rt::host_condition(__staging, __stream, &*#name, #comparison, #threshold)?)
        }
        ControlCondition::Step => {
            let (modulus, remainder) = step_parts(control);
            quote!(#rt::step_selects(__step, #modulus, #remainder)?)
        }
        // An eager step gives the kernel the condition's word: read back, it decides.
        ControlCondition::Kernel { value } if control.source.test().is_some() => {
            let name = pipeline.buffers[value.0].ident;
            quote!((#rt::host_value(__staging, __stream, #name.word())? != 0))
        }
        ControlCondition::Value { value } | ControlCondition::Kernel { value } => {
            let name = pipeline.buffers[value.0].ident;
            let word = match control.condition {
                ControlCondition::Kernel { .. } => quote!(#name.word()),
                _ => quote!(&*#name),
            };
            let cases = bodies.iter().enumerate().map(|(n, body)| {
                let n = n as u32;
                quote!(#n => { #(#body)* })
            });
            // A value with no case runs none, as CUDA's SWITCH node does.
            return quote! {
                match #rt::host_value(__staging, __stream, #word)? {
                    #(#cases)*
                    _ => {}
                }
            };
        }
    };
    let label = label(control);
    let max = maximum(control);
    let first = bodies.first().cloned().unwrap_or_default();
    // A body that swaps buffers runs with them exchanged every other iteration, and after an
    // odd count the second is copied into the first (what the last iteration left under the
    // first name).
    let (first, odd, fix_up) = if control.swaps.is_empty() {
        (quote!(#(#first)*), quote!(), quote!())
    } else {
        let swapped = swapped_lets(pipeline, control);
        let copies = control.swaps.iter().map(|&(a, b)| {
            let (a, b) = (pipeline.buffers[a.0].ident, pipeline.buffers[b.0].ident);
            quote!(#rt::copy(__stream, &*#b, &mut *#a)?;)
        });
        (
            quote! {
                if __odd {
                    #swapped
                    #(#first)*
                } else {
                    #(#first)*
                }
                __odd = !__odd;
            },
            quote!(let mut __odd = false;),
            quote! {
                if __odd {
                    #(#copies)*
                }
            },
        )
    };
    match control.source {
        ast::Control::If { .. } => {
            let otherwise = bodies.get(1).map(|b| quote!(else { #(#b)* }));
            quote! {
                if #test {
                    #first
                } #otherwise
            }
        }
        // The body first; after `n` iterations a test that still holds with `n >= max`
        // stops the loop with the error, as the device's loop does.
        ast::Control::DoWhile { .. } => quote! {
            {
                let __max: u32 = #max;
                let mut __done: u32 = 0;
                #odd
                loop {
                    #first
                    __done += 1;
                    if !#test {
                        break;
                    }
                    if __done >= __max {
                        return ::core::result::Result::Err(#rt::iteration_limit(#label, __max));
                    }
                }
                #fix_up
            }
        },
        _ => quote! {
            {
                let __max: u32 = #max;
                let mut __done: u32 = 0;
                #odd
                loop {
                    if !#test {
                        break;
                    }
                    if __done >= __max {
                        return ::core::result::Result::Err(#rt::iteration_limit(#label, __max));
                    }
                    #first
                    __done += 1;
                }
                #fix_up
            }
        },
    }
}

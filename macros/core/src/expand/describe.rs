//! `__describe`: every stage instance of one kind of step, in program order, with its stream
//! and each buffer reference resolved, for the runtime's plan (`runtime/src/pipeline/plan.rs`).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::Expr;
use syn::spanned::Spanned;

use super::names::{Names, rt};
use super::step::scalar_binding;
use crate::lower::{Memory, Mode, Pipeline, ScalarId, Statement, StatementKind, Touch};

/// `fn __describe(&self, kind, params)`: every stage instance of one kind of step, in program
/// order, with its stream and each buffer reference resolved (see `runtime/src/pipeline/plan.rs`).
pub fn describe_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let params_ty = names.params_ty(quote!('_));
    let name = pipeline.name.as_str();
    let scalars = pipeline
        .scalars
        .iter()
        .enumerate()
        .filter(|(id, _)| pipeline.structural.contains(&ScalarId(*id)))
        .map(|(_, scalar)| scalar_binding(scalar.decl));
    let buffers = pipeline.buffers.iter().map(|b| {
        let name = b.ident;
        if b.scratch {
            let field = names.scratch_field(name);
            let label = name.to_string();
            quote!(let #name = #rt::scratch_ref(self.#field.as_ref(), #label)?;)
        } else {
            quote!(let #name = &*__p.#name;)
        }
    });
    // The scratch device buffers, whose reads the plan checks element by element
    // (`runtime/src/pipeline/plan/coverage.rs`).
    let scratch = pipeline
        .buffers
        .iter()
        .enumerate()
        .filter_map(|(index, b)| {
            if !b.scratch || b.array || b.memory != Memory::Device {
                return None;
            }
            let name = b.ident;
            let label = name.to_string();
            let zero = crate::check::scratch::zero_literal(b.elem);
            Some(quote!(__d.scratch(#index, #label, #name.len(), #zero);))
        });
    // Each declared stream's name, its count's expression (as written) and its count.
    let counts = pipeline.streams.iter().map(|stream| {
        let name = &stream.name;
        match stream.count {
            Some(count) => {
                let text = quote!(#count).to_string();
                quote_spanned!(count.span()=> (#name, #text, { let __n: usize = #count; __n }))
            }
            None => quote!((#name, "", 1usize)),
        }
    });
    let kinds = pipeline.kinds.iter().enumerate().map(|(k, kind)| {
        let mut items = Vec::new();
        let mut stages = kind.stages.iter().peekable();
        while let Some(&id) = stages.next() {
            let stage = &pipeline.stages[id.0];
            match stage.looped {
                None => items.push(describe_stage(pipeline, id.0, None)),
                Some(l) => {
                    // The loop's stages are consecutive in program order.
                    let mut body = vec![describe_stage(pipeline, id.0, Some(l))];
                    while let Some(&&next) = stages.peek() {
                        if pipeline.stages[next.0].looped != Some(l) {
                            break;
                        }
                        stages.next();
                        body.push(describe_stage(pipeline, next.0, Some(l)));
                    }
                    let looped = pipeline.loops[l];
                    let var = &looped.var;
                    let (start, end) = (&looped.start, &looped.end);
                    let lets = looped.lets.iter().map(|binding| {
                        let (name, value) = (&binding.name, &binding.value);
                        quote!(let #name = #value;)
                    });
                    items.push(quote! {
                        {
                            let __start: usize = #start;
                            let __end: usize = #end;
                            for #var in __start..__end {
                                #(#lets)*
                                #(#body)*
                            }
                        }
                    });
                }
            }
        }
        quote!(#k => { #(#items)* })
    });
    quote! {
        #[allow(unused_variables, unused_braces, clippy::all)]
        fn __describe(&self, __kind: usize, __p: &#params_ty) -> #rt::Result<#rt::Description> {
            #(#scalars)*
            #(#buffers)*
            let mut __d = #rt::Describe::new(#name, &[#(#counts),*])?;
            #(#scratch)*
            match __kind {
                #(#kinds)*
                _ => return ::core::result::Result::Err(#rt::internal(#name, "an unknown kind of step")),
            }
            ::core::result::Result::Ok(__d.finish())
        }
    }
}

/// One stage instance of the description.
fn describe_stage(pipeline: &Pipeline<'_>, id: usize, looped: Option<usize>) -> TokenStream {
    let stage = &pipeline.stages[id];
    let stage_name = stage.name.as_str();
    let decl = stage.stream.0;
    let stream_name = pipeline.streams[decl].name.as_str();
    let index = match looped {
        Some(l) => {
            let var = &pipeline.loops[l].var;
            quote!(::core::option::Option::Some(#var))
        }
        None => quote!(::core::option::Option::None),
    };
    let lane = match stage.lane {
        Some(lane) => quote_spanned!(lane.span()=> { let __lane: usize = #lane; __lane }),
        None => quote!(0usize),
    };
    let touches = stage
        .statements
        .iter()
        .map(|statement| describe_statement(pipeline, statement));
    let afters = stage.after.iter().map(|after| {
        let other = &pipeline.stages[after.0];
        let same = looped.is_some() && other.looped == looped;
        let t = after.0;
        quote!(__d.after(#t, #same)?;)
    });
    quote! {
        __d.stage(#id, #stage_name, #index, #decl, #stream_name, #lane)?;
        #(#touches)*
        #(#afters)*
    }
}

/// One statement of the description: its accesses, resolved in the order
/// `instance::ref_slots` numbers them. A `while`/`if` describes its condition's access, then
/// each statement of its body as a statement of its own (references of one statement must not
/// overlap where one is written; two statements of a body may).
fn describe_statement(pipeline: &Pipeline<'_>, statement: &Statement<'_>) -> TokenStream {
    match &statement.kind {
        StatementKind::Control(control) => {
            let condition = match control.condition {
                crate::lower::ControlCondition::Device { .. }
                | crate::lower::ControlCondition::Value { .. }
                | crate::lower::ControlCondition::Kernel { .. } => statement.accesses.first(),
                crate::lower::ControlCondition::Step => None,
            };
            let condition = condition.map(|touch| describe_touch(pipeline, touch));
            // A condition reads the first element of its buffer; a `do ... while`'s, after
            // the body (the plan judges the read after the body's writes).
            let condition = condition.map(|touch| {
                let rt = rt();
                let kind = match control.source {
                    crate::ast::Control::DoWhile { .. } => quote!(FirstAfterBody),
                    _ => quote!(First),
                };
                quote! {
                    __d.read_kind(#rt::ReadKind::#kind);
                    #touch
                    __d.read_kind(#rt::ReadKind::Within);
                }
            });
            // Each body marked, so the plan knows which writes every run makes.
            let bodies = control.bodies.iter().map(|body| {
                let statements = body
                    .iter()
                    .map(|statement| describe_statement(pipeline, statement));
                quote!(__d.body()?; #(#statements)*)
            });
            let runs = match &control.source {
                crate::ast::Control::If {
                    otherwise: Some(_), ..
                } => quote!(OneOf),
                crate::ast::Control::DoWhile { .. } => quote!(Always),
                crate::ast::Control::While { .. }
                | crate::ast::Control::If { .. }
                | crate::ast::Control::Switch { .. } => quote!(MaybeNone),
            };
            let rt = rt();
            // A swap's writes, as a statement of their own at the end of the (last) body: they
            // count after the statement only where the body surely ran.
            let swaps = (!control.swaps.is_empty()).then(|| {
                let touches = control.swaps.iter().flat_map(|&(a, b)| [a.0, b.0]);
                quote!(__d.statement()?; #(__d.touch_whole(#touches, true)?;)*)
            });
            quote! {
                __d.statement()?;
                __d.control(#rt::BodiesRun::#runs)?;
                #condition
                #(#bodies)*
                #swaps
                __d.end_control()?;
            }
        }
        StatementKind::Copy { src, dst, .. } if matches!(statement.accesses.as_slice(), [from, to] if from.buffer == *src && to.buffer == *dst) =>
        {
            // Both sides' lengths, once their ranges are known: a mismatch is refused with the
            // step's other range errors, before anything runs.
            let (from, to) = (&statement.accesses[0], &statement.accesses[1]);
            let (src_len, dst_len) = (touch_len(pipeline, from), touch_len(pipeline, to));
            let (src_label, dst_label) = (
                reference_label(pipeline, from),
                reference_label(pipeline, to),
            );
            let rt = rt();
            // A copy reads every element of its source.
            quote! {
                __d.statement()?;
                __d.read_kind(#rt::ReadKind::Every);
                let __src_len: usize = #src_len;
                __d.read_kind(#rt::ReadKind::Within);
                let __dst_len: usize = #dst_len;
                __d.copy_lengths(#src_label, __src_len, #dst_label, __dst_len)?;
            }
        }
        StatementKind::Comm { .. } => {
            let touches = statement.accesses.iter().map(|touch| {
                let described = describe_touch(pipeline, touch);
                // An in-place collective reads what it then writes: one reference, two
                // accesses.
                if touch.mode == Mode::Write && statement.reads_in_place(touch.name) {
                    quote!(__d.reads_what_it_writes(); #described)
                } else {
                    described
                }
            });
            let rt = rt();
            // A communication operand is read whole: every element of its range is sent,
            // reduced or gathered.
            quote! {
                __d.statement()?;
                __d.read_kind(#rt::ReadKind::Every);
                #(#touches)*
                __d.read_kind(#rt::ReadKind::Within);
            }
        }
        _ => {
            let touches = statement
                .accesses
                .iter()
                .map(|touch| describe_touch(pipeline, touch));
            quote!(__d.statement()?; #(#touches)*)
        }
    }
}

/// A copy side's buffer as written, without its range (`x`, `xs[i]`): what its length
/// error names.
fn reference_label(pipeline: &Pipeline<'_>, touch: &Touch<'_>) -> String {
    let name = pipeline.buffers[touch.buffer.0].name.as_str();
    match touch.subscript.and_then(|reference| reference.index) {
        Some(index) => format!("{name}[{}]", crate::ast::tokens_string(index)),
        None => name.to_owned(),
    }
}

/// `describe_touch` as an expression of the number of elements the access names.
fn touch_len(pipeline: &Pipeline<'_>, touch: &Touch<'_>) -> TokenStream {
    if let Some(resolved) = subscripted_touch(pipeline, touch) {
        return resolved;
    }
    let (id, write) = (touch.buffer.0, touch.mode == Mode::Write);
    let name = pipeline.buffers[touch.buffer.0].ident;
    quote!({ __d.touch_whole(#id, #write)?; #name.len() })
}

/// One buffer access of the description: resolved when subscripted, whole otherwise.
fn describe_touch(pipeline: &Pipeline<'_>, touch: &Touch<'_>) -> TokenStream {
    match subscripted_touch(pipeline, touch) {
        Some(resolved) => quote!(#resolved;),
        None => {
            let (id, write) = (touch.buffer.0, touch.mode == Mode::Write);
            quote!(__d.touch_whole(#id, #write)?;)
        }
    }
}

/// A subscripted access resolved: an expression of the number of elements it names (`None`
/// for a whole buffer).
fn subscripted_touch(pipeline: &Pipeline<'_>, touch: &Touch<'_>) -> Option<TokenStream> {
    let buffer = &pipeline.buffers[touch.buffer.0];
    let id = touch.buffer.0;
    let write = touch.mode == Mode::Write;
    let reference = touch.subscript?;
    let name = buffer.ident;
    let label = buffer.name.as_str();
    let bound = |expr: Option<&Expr>| match expr {
        Some(expr) => {
            quote_spanned!(expr.span()=> ::core::option::Option::Some({ let __b: usize = #expr; __b }))
        }
        None => quote!(::core::option::Option::None),
    };
    let (start, end) = match reference.range {
        Some(range) => (bound(range.start), bound(range.end)),
        None => (
            quote!(::core::option::Option::None),
            quote!(::core::option::Option::None),
        ),
    };
    Some(match reference.index {
        Some(index) => quote! {
            {
                let __k: usize = #index;
                let __len = #name.get(__k).map_or(0, |__b| __b.len());
                __d.touch(#id, #label, ::core::option::Option::Some((__k, #name.len())), #start, #end, __len, #write)?
            }
        },
        None => quote! {
            __d.touch(#id, #label, ::core::option::Option::None, #start, #end, #name.len(), #write)?
        },
    })
}

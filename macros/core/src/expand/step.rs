//! One step: binding the params, describing the step's stage instances for the runtime's plan
//! (`__describe`), and enqueueing a plan (`__enqueue`): each stage instance in the plan's
//! order with exactly the plan's waits and records, its statements generated once per stage.
//!
//! Every pipeline goes through a plan. For a pipeline whose shape the macro knows (no loop,
//! stream array, buffer array or non-constant range) the plan is the order the macro computed
//! and checked at compile time, described once; otherwise the description is evaluated before
//! each step and the runtime orders the instances with the same analysis (and checks what
//! depends on run-time values there, before anything is enqueued).
//!
//! Before the enqueue walks the plan, the bound checks walk it (`bounds.rs`): a refused launch
//! anywhere leaves the whole step unenqueued. `while`/`if` statements are decided on the host
//! in an eager step (`control.rs`), and each run of communication statements of a stage is
//! one group (`collective.rs`). On several devices, each event lives on the device of the
//! stream that records it, so a wait names its recorder's device.

use std::collections::BTreeSet;

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, Ident, Pat};

use super::bounds::{self, Keep, LaunchSite, bounded_site, launch_sites};
use super::instance::{body_slots, ref_slots, stage_header};
use super::launch::{Retype, launch_parts, reborrow, subscripted};
use super::names::{Names, rt, rt_fn};
use crate::ast::{self, type_string};
use crate::lower::{
    BufferId, CallArg, Memory, Mode, Pipeline, ScalarId, Stage, StatementKind, WaitCondition,
};

/// `let name = rt::scalar::<Ty>(&__p.name);`: one step's copy of a scalar param. Every
/// binding of a param is spelled alike, at its declaration, so a type that is not `Clone` is
/// one error there.
pub(super) fn scalar_binding(decl: &ast::Param) -> TokenStream {
    let name = &decl.name;
    let ty = &decl.ty;
    let scalar = rt_fn(name.span(), "scalar");
    let params = Ident::new("__p", name.span());
    quote_spanned!(name.span()=> let #name = #scalar::<#ty>(&#params.#name);)
}

/// The scalar params a function needs bound: those the statements read (only launches' when
/// `launches`) and those that shape the step (a stage's header evaluates the loop's `let`s).
/// Binding only these keeps a param that is not `Clone` to one error, where it is used.
pub fn used_scalars(pipeline: &Pipeline<'_>, launches: bool) -> BTreeSet<ScalarId> {
    let mut used = pipeline.structural.clone();
    for statement in pipeline.stages.iter().flat_map(|s| &s.statements) {
        // A `while`/`if` counts for its body's launches (its scalars include its body's).
        if !launches
            || matches!(
                statement.kind,
                StatementKind::Launch { .. } | StatementKind::Control(_)
            )
        {
            used.extend(statement.scalars.iter().copied());
        }
    }
    used
}

/// `let` bindings that give the `used` scalar params and every buffer its declared name
/// inside generated code: scalars cloned (a copy for `Copy` types), buffers reborrowed
/// (`&mut *` for `&mut`).
pub fn bindings(
    pipeline: &Pipeline<'_>,
    names: &Names,
    params: &TokenStream,
    used: &BTreeSet<ScalarId>,
) -> TokenStream {
    let rt = rt();
    let scalars = pipeline
        .scalars
        .iter()
        .enumerate()
        .filter(|(id, _)| used.contains(&ScalarId(*id)))
        .map(|(_, scalar)| scalar_binding(scalar.decl));
    let buffers = pipeline.buffers.iter().map(|b| {
        let name = b.ident;
        if b.scratch {
            // `field` is the destructured `&mut Option<buffer>` of the pipeline.
            let field = names.scratch_field(name);
            let label = name.to_string();
            quote!(let #name = #rt::scratch(#field.as_mut(), #label)?;)
        } else if b.mutable {
            quote!(let #name = &mut *#params.#name;)
        } else {
            quote!(let #name = &*#params.#name;)
        }
    });
    quote!(#(#scalars)* #(#buffers)*)
}

/// `fn __prepare(&mut self, params)`: allocates scratch buffers whose size changed and the
/// streams of stream arrays (each on its declaration's device). It runs before a capture
/// begins, since allocation cannot be captured.
pub fn prepare_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let params_ty = names.params_ty(quote!('_));
    let mut used: BTreeSet<ScalarId> = pipeline.structural.clone();
    for buffer in &pipeline.buffers {
        used.extend(buffer.len_scalars.iter().copied());
    }
    let scalars = pipeline
        .scalars
        .iter()
        .enumerate()
        .filter(|(id, _)| used.contains(&ScalarId(*id)))
        .map(|(_, scalar)| scalar_binding(scalar.decl));
    let params = pipeline.buffers.iter().filter(|b| !b.scratch).map(|b| {
        let name = b.ident;
        quote!(let #name = &*__p.#name;)
    });
    // The scratch buffers likewise, once allocated.
    let scratch_names = pipeline
        .buffers
        .iter()
        .filter(|b| b.scratch)
        .filter(|b| matches!(b.memory, Memory::Device | Memory::Pinned))
        .map(|b| {
            let field = names.scratch_field(b.ident);
            let label = &b.name;
            quote! {
                if let ::core::option::Option::Some(__b) = self.#field.as_ref() {
                    (&#rt::NameParam(__b)).name_as(#label);
                }
            }
        });
    // In checked mode, each buffer param's memory is named after the param in race reports.
    let param_names = pipeline
        .buffers
        .iter()
        .filter(|b| !b.scratch && !b.window)
        .filter(|b| matches!(b.memory, Memory::Device | Memory::Pinned))
        .map(|b| {
            let name = b.ident;
            let label = &b.name;
            quote!((&#rt::NameParam(#name)).name_as(#label);)
        });
    let sized = pipeline
        .buffers
        .iter()
        .filter(|b| b.scratch)
        .filter_map(|b| {
            let len = b.len?;
            let field = names.scratch_field(b.ident);
            let referent = b.referent;
            let ctx = super::device::scratch_context(pipeline, b.device);
            Some(quote! {
                let __len: usize = #len;
                #rt::ensure_scratch::<#referent>(&mut self.#field, #ctx, __len, &mut self.__scratch_epoch)?;
            })
        });
    let lanes = pipeline
        .streams
        .iter()
        .enumerate()
        .filter_map(|(d, stream)| {
            let count = stream.count?;
            let decl = stream_decl(pipeline, stream);
            let ctx = super::device::scratch_context(pipeline, stream.device);
            Some(quote_spanned! {count.span()=>
                let __count: usize = #count;
                #rt::ensure_streams(#ctx, &mut self.__lanes[#d], #decl, __count)?;
            })
        });
    quote! {
        #[allow(unused_variables, clippy::all)]
        fn __prepare(&mut self, __p: &#params_ty) -> #rt::Result<()> {
            #(#scalars)*
            #(#params)*
            if self.__ctx.is_checked() {
                #[allow(unused_imports)]
                use #rt::{NameAsParam as _, NameAsParamFallback as _};
                #(#param_names)*
            }
            #(#sized)*
            if self.__ctx.is_checked() {
                #[allow(unused_imports)]
                use #rt::{NameAsParam as _, NameAsParamFallback as _};
                #(#scratch_names)*
            }
            #(#lanes)*
            ::core::result::Result::Ok(())
        }
    }
}

/// The runtime's description of a stream declaration of `pipeline`.
pub fn stream_decl(pipeline: &Pipeline<'_>, stream: &crate::lower::Stream<'_>) -> TokenStream {
    let rt = rt();
    let priority = match stream.priority {
        crate::lower::Priority::High => quote!(#rt::StreamPriority::High),
        crate::lower::Priority::Low => quote!(#rt::StreamPriority::Low),
        crate::lower::Priority::Default => quote!(#rt::StreamPriority::Default),
        crate::lower::Priority::Value(v) => quote!(#rt::StreamPriority::Value(#v)),
    };
    let non_blocking = stream.non_blocking;
    // Named as race reports and traces name it: `Pipeline.stream`, `Pipeline.lanes[i]`.
    let name = format!("{}.{}", pipeline.input.name, stream.name);
    let array = stream.count.is_some() || stream.per_device;
    quote!(#rt::StreamDecl { priority: #priority, non_blocking: #non_blocking, name: #name, array: #array })
}

/// Whether the pipeline's description never changes: no subscripts, no loops, no arrays. Its
/// plan is then described once.
pub fn fixed(pipeline: &Pipeline<'_>) -> bool {
    !pipeline.dynamic
        && !pipeline.stages.iter().any(|stage| {
            stage
                .statements
                .iter()
                .any(|s| s.accesses.iter().any(|t| t.subscript.is_some()))
        })
}

/// `fn __plan(&mut self, kind, params)`: the plan of one kind of step, described and
/// scheduled (or taken from the cache), with enough events and progress words for it.
pub fn plan_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let params_ty = names.params_ty(quote!('_));
    let fixed = fixed(pipeline);
    let (events, progress) = if super::device::is_multi(pipeline) {
        (
            quote! {
                for (__device, __events) in self.__events.iter_mut().enumerate() {
                    let __ctx = self
                        .__devices
                        .get(__device)
                        .ok_or_else(|| #rt::internal(Self::NAME, "an event set has no device"))?;
                    #rt::ensure_events(__ctx, __events, 2 * __plan.events())?;
                }
            },
            // Each stream slot's word is tracked only where the slot's stream is on the
            // origin's device.
            quote! {
                let mut __slots: ::std::vec::Vec<&#rt::Context> = ::std::vec![&self.__ctx; __plan.streams];
                for __instance in &__plan.instances {
                    if let ::core::option::Option::Some(__stream) =
                        self.__lanes.get(__instance.decl).and_then(|lanes| lanes.get(__instance.lane))
                    {
                        __slots[__instance.stream] = __stream.context();
                    }
                }
                self.__progress.ensure_on(&self.__ctx, &__slots)?;
            },
        )
    } else {
        (
            quote!(#rt::ensure_events(&self.__ctx, &mut self.__events, 2 * __plan.events())?;),
            quote!(self.__progress.ensure(&self.__ctx, __plan.streams)?;),
        )
    };
    let claims = pipeline.kinds.iter().enumerate().map(|(k, kind)| {
        // A pipeline whose order the macro computed checked its claims when it compiled.
        let list = if pipeline.dynamic {
            pipeline
                .input
                .claims_with_loops()
                .into_iter()
                .filter_map(|(claim, looped)| {
                    let ids: Vec<usize> = claim
                        .stages
                        .iter()
                        .filter_map(|name| {
                            pipeline.stages.iter().position(|s| s.decl.name == *name)
                        })
                        .collect();
                    if !ids.iter().all(|id| kind.stages.iter().any(|s| s.0 == *id)) {
                        return None;
                    }
                    let per_iteration = looped.is_some();
                    Some(quote!(#rt::Claim { stages: &[#(#ids),*], per_iteration: #per_iteration }))
                })
                .collect()
        } else {
            Vec::new()
        };
        quote!(#k => &[#(#list),*])
    });
    quote! {
        fn __plan(
            &mut self,
            __kind: usize,
            __p: &#params_ty,
        ) -> #rt::Result<::std::sync::Arc<#rt::StepPlan>> {
            let __cached = if #fixed {
                self.__plans.get(__kind).cloned().flatten()
            } else {
                ::core::option::Option::None
            };
            let __plan = match __cached {
                ::core::option::Option::Some(plan) => plan,
                ::core::option::Option::None => {
                    let __description = self.__describe(__kind, __p)?;
                    let __claims: &[#rt::Claim] = match __kind {
                        #(#claims,)*
                        _ => &[],
                    };
                    let __slot = self
                        .__plans
                        .get_mut(__kind)
                        .ok_or_else(|| #rt::internal(Self::NAME, "an unknown kind of step"))?;
                    #rt::plan_for(__slot, __description, __claims)?
                }
            };
            #events
            #progress
            ::core::result::Result::Ok(__plan)
        }
    }
}

/// `fn __enqueue(&mut self, params, plan, mode, profile)`: the whole step, as the plan says:
/// the bound checks of every instance first, then each instance with its waits, statements,
/// progress mark and record.
pub fn enqueue_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let params_ty = names.params_ty(quote!('_));
    let name = pipeline.name.as_str();
    let multi = super::device::is_multi(pipeline);
    let scratch_fields = names.scratch_fields(pipeline);
    let control_fields = super::control::destructured(pipeline);
    let step_start = super::control::eager_step_start(pipeline);
    let bind = bindings(
        pipeline,
        names,
        &quote!(__p),
        &used_scalars(pipeline, false),
    );
    let sites = launch_sites(pipeline);
    let bounded = bounds::bounded_sites(pipeline, &sites);
    let checks = bounds::check_walk(
        pipeline,
        &bounded,
        &quote!(__plan),
        &quote!(__schedule),
        &quote!(return ::core::result::Result::Err(__refusal);),
        Keep::ForLaunch,
    );
    let body_checks = bounds::body_check_walk(
        pipeline,
        &quote!(__plan),
        &quote!(__schedule),
        &quote!(return ::core::result::Result::Err(__refusal);),
    );
    let window_checks = super::window::prechecks(pipeline);
    let prestep = super::control::prestep_checks(pipeline);
    let control_values = super::control::value_checks(
        pipeline,
        &quote!(__plan),
        &quote!(__schedule),
        &quote!(return ::core::result::Result::Err(__refusal);),
    );
    let arms = pipeline.stages.iter().enumerate().map(|(t, stage)| {
        let slots = ref_slots(stage);
        let header = stage_header(pipeline, stage);
        let statements: Vec<TokenStream> = super::collective::stage_statements(
            pipeline,
            stage,
            |index, kind| {
                let kept = bounded_site(pipeline, &sites, crate::lower::StageId(t), index);
                statement_tokens(pipeline, stage, kind, &slots[index], kept)
            },
            |group| group,
        );
        quote!(#t => { #header #(#statements)* })
    });
    // An event of a pipeline over several devices lives on its recorder's device.
    let (event, recorders, record_event) = if multi {
        (
            quote!(
                __events[{
                    let (__decl, __lane) = __recorders[__e];
                    Self::__lane_device(__decl, __lane)
                }]
            ),
            quote!(let __recorders: &[(usize, usize)] = __plan.recorder_lanes(__mode);),
            quote!(__events[Self::__lane_device(__instance.decl, __instance.lane)]),
        )
    } else {
        (quote!(__events), quote!(), quote!(__events))
    };
    quote! {
        #[allow(unused_variables, unused_mut, unused_braces, clippy::all)]
        fn __enqueue(
            &mut self,
            __p: &mut #params_ty,
            __plan: &#rt::StepPlan,
            __mode: #rt::StepMode,
            __profile: ::core::option::Option<&#rt::Profiler>,
        ) -> #rt::Result<()> {
            let Self { __fork, __events, __kernels, __progress, __lanes, #(#scratch_fields,)* #control_fields .. } = self;
            let __origin: &#rt::Stream = __lanes
                .first()
                .and_then(|lanes| lanes.first())
                .ok_or_else(|| #rt::internal(#name, "no origin stream"))?;
            let __schedule = __mode.schedule(__plan);
            #bind
            // Every bounded launch of every instance, `while`/`if` bodies included, is
            // checked before anything is enqueued.
            #checks
            #body_checks
            #prestep
            #control_values
            #window_checks
            #recorders
            // A new tag for the progress marks (recorded into a graph: the words zeroed, tag 0);
            // the later steps of a run ahead mark with the first one's.
            let __tag = if __mode.forks() {
                __progress.begin_step(__origin, &__plan.sites)?
            } else {
                __progress.current_tag()
            };
            if let ::core::option::Option::Some(profiler) = __profile {
                profiler.step_start(__origin)?;
            }
            #step_start
            if __mode.forks() && __schedule.fork {
                #rt::Stream::record_into(__origin, __fork)?;
            }
            let (__set, __previous) = __mode.event_sets(__schedule.events);
            for (__position, __planned) in __schedule.stages.iter().enumerate() {
                let __instance = __plan
                    .instances
                    .get(__planned.stage.0)
                    .ok_or_else(|| #rt::internal(#name, "a planned stage is not described"))?;
                let __stream: &#rt::Stream = __lanes
                    .get(__instance.decl)
                    .and_then(|lanes| lanes.get(__instance.lane))
                    .ok_or_else(|| #rt::internal(#name, "a stage's stream was not created"))?;
                let __refs: &[#rt::Ref] = &__instance.refs;
                // `Pipeline/stage` in a profiler's timeline (NVTX), while one listens.
                let __range = #rt::stage_range(__stream, #name, __instance.name);
                // On the CPU backend, what the stage enqueues names it when it fails.
                let __scope = #rt::stage_scope(__stream, __instance.name);
                let __result: #rt::Result<()> = (|| {
                    if __planned.fork && __mode.forks() {
                        #rt::Stream::wait_event(__stream, __fork)?;
                    }
                    for &__e in &__planned.waits {
                        #rt::Stream::wait_event(__stream, &#event[__set + __e])?;
                    }
                    if __mode.waits_on_previous() {
                        for &__e in &__planned.ahead_waits {
                            #rt::Stream::wait_event(__stream, &#event[__previous + __e])?;
                        }
                    }
                    if let ::core::option::Option::Some(profiler) = __profile {
                        profiler.stage_start(__stream, __position)?;
                    }
                    match __instance.template {
                        #(#arms)*
                        _ => return ::core::result::Result::Err(#rt::internal(#name, "an unknown stage")),
                    }
                    if let ::core::option::Option::Some(profiler) = __profile {
                        profiler.stage_end(__stream, __position)?;
                    }
                    ::core::result::Result::Ok(())
                })();
                ::core::mem::drop(__scope);
                ::core::mem::drop(__range);
                __result.map_err(|e| #rt::stage_error(#name, __instance.name, e))?;
                __progress.mark(__stream, __instance.stream, __tag, __position as u32 + 1)?;
                if let ::core::option::Option::Some(__e) = __planned.record {
                    #rt::Stream::record_into(__stream, &#record_event[__set + __e])?;
                }
            }
            if __mode.joins() {
                for &__e in &__schedule.join {
                    #rt::Stream::wait_event(__origin, &#event[__set + __e])?;
                }
            }
            ::core::result::Result::Ok(())
        }
    }
}

/// The tokens of one statement of `stage`, inside the stage's closure where `__stream` is its
/// stream and `__refs` its instance's resolved references; `slots` gives each access its
/// reference. A launch the bound checks checked (`kept`, its site) takes its scalar arguments
/// from the values they kept.
pub(super) fn statement_tokens(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    kind: &StatementKind<'_>,
    slots: &[Option<usize>],
    kept: Option<&LaunchSite<'_>>,
) -> TokenStream {
    let rt = rt();
    let buffer = |id: &BufferId| pipeline.buffers[id.0].ident;
    match kind {
        StatementKind::Launch {
            source,
            kernel,
            args,
        } => {
            let stream = &pipeline.streams[stage.stream.0];
            let device = stream.device;
            let field = format_ident!("{}", super::names::kernel_field_name(*kernel, device));
            let apart =
                super::launch::apart_lets(pipeline, &super::launch::launch_uses(args, slots));
            // A stage on a stream array `on gpu[..]` launches the kernel loaded on its lane's
            // device.
            let kernel_ref = if stream.per_device {
                let len = super::device::array_len(pipeline, device);
                let arms = (device..device + len).map(|d| {
                    let field = format_ident!("{}", super::names::kernel_field_name(*kernel, d));
                    quote!(#d => &__kernels.#field,)
                });
                let name = pipeline.name.as_str();
                quote!(match Self::__lane_device(__instance.decl, __instance.lane) {
                    #(#arms)*
                    _ => return ::core::result::Result::Err(#rt::internal(#name, "a lane has no device")),
                })
            } else {
                quote!(&__kernels.#field)
            };
            if crate::lower::names_window(&pipeline.buffers, args) {
                return super::window::launch(
                    pipeline,
                    stage,
                    source,
                    *kernel,
                    args,
                    slots,
                    &kernel_ref,
                );
            }
            let checked_args = super::device::is_multi(pipeline).then(|| {
                let (peers, names) = super::device::launch_arg_devices(pipeline, source, args);
                quote!(#rt::check_launch_devices(__stream, &__args, &[#(#peers),*], &[#(#names),*])?;)
            });
            let (config, args) = launch_parts(
                pipeline,
                source,
                *kernel,
                args,
                Retype::Assert,
                slots,
                kept.is_some(),
            );
            let take = kept.map(|site| bounds::take_kept(pipeline, site));
            match checked_args {
                Some(checked_args) => quote!({
                    #take
                    #apart
                    match #args {
                        __args => {
                            #checked_args
                            (#kernel_ref).launch(__stream, #config, __args)?;
                        }
                    }
                }),
                None => quote!({
                    #take
                    #apart
                    (#kernel_ref).launch(__stream, #config, #args)?;
                }),
            }
        }
        StatementKind::Copy { source, src, dst } => {
            let (src_slot, dst_slot) = (
                slots.first().copied().flatten(),
                slots.get(1).copied().flatten(),
            );
            if src_slot.is_none() && dst_slot.is_none() {
                let dst_tokens =
                    retyped_mut(pipeline, *dst, pipeline.buffers[src.0].elem, &source.dst);
                let src = buffer(src);
                return quote!(#rt::copy(__stream, &*#src, #dst_tokens)?;);
            }
            let apart = super::launch::apart_lets(
                pipeline,
                &[(*src, Mode::Read, src_slot), (*dst, Mode::Write, dst_slot)],
            );
            let (src, dst) = copy_ends(pipeline, *src, src_slot, *dst, dst_slot);
            let copy = rt_fn(source.keyword.span, "copy");
            quote!({
                #apart
                #copy(__stream, #src, #dst)?;
            })
        }
        StatementKind::Fill { source, dst } => {
            let value = &source.value;
            match slots.first().copied().flatten() {
                None => {
                    let dst = buffer(dst);
                    // A value of the wrong type is reported on it, with the call on `fill`
                    // (the same check as the built graph's, so that rustc reports it once).
                    let fill_value = rt_fn(source.keyword.span, "fill_value");
                    quote!({
                        let __value = #fill_value(&*#dst, #value);
                        #rt::fill_checked(__stream, &mut *#dst, __value)?;
                    })
                }
                Some(slot) => {
                    let dst = subscripted(pipeline, *dst, Mode::Write, Some(slot));
                    let fill_value = rt_fn(source.keyword.span, "fill_view_value");
                    quote!({
                        let mut __dst = #dst;
                        let __value = #fill_value(&__dst, #value);
                        #rt::fill_view_checked(__stream, &mut __dst, __value)?;
                    })
                }
            }
        }
        StatementKind::Wait {
            source,
            flag,
            condition,
        } => {
            let flag = buffer(flag);
            let value = &source.value;
            let condition = match condition {
                WaitCondition::Equal => quote!(#rt::WaitCondition::Equal),
                WaitCondition::AtLeast => quote!(#rt::WaitCondition::GreaterOrEqual),
                WaitCondition::AnyBit => quote!(#rt::WaitCondition::And),
            };
            let flag_value = rt_fn(source.keyword.span, "flag_value");
            quote!({
                let __value = #flag_value(&*#flag, #value);
                #rt::wait_flag_checked(__stream, &*#flag, #condition, __value)?;
            })
        }
        StatementKind::Write { source, flag } => {
            let flag = buffer(flag);
            let value = &source.value;
            let flag_value = rt_fn(source.keyword.span, "flag_value");
            quote!({
                let __value = #flag_value(&*#flag, #value);
                #rt::write_flag_checked(__stream, &*#flag, __value)?;
            })
        }
        StatementKind::Host { source, .. } => host_tokens(pipeline, stage, source),
        StatementKind::Call { source, args, .. } => call_tokens(pipeline, stage, source, args),
        StatementKind::Control(control) => {
            let body = control
                .statements()
                .zip(body_slots(control, slots))
                .map(|(statement, slots)| {
                    statement_tokens(pipeline, stage, &statement.kind, slots, None)
                })
                .collect();
            super::control::eager(pipeline, control, body)
        }
        // Grouped with their neighbours by `collective::stage_statements`.
        StatementKind::Comm { .. } => quote!(),
    }
}

/// A copy's source and destination when either is subscripted: `&view` and `&mut view` (or
/// the whole buffer reborrowed).
pub(super) fn copy_ends(
    pipeline: &Pipeline<'_>,
    src: BufferId,
    src_slot: Option<usize>,
    dst: BufferId,
    dst_slot: Option<usize>,
) -> (TokenStream, TokenStream) {
    let src = match src_slot {
        Some(_) => {
            let view = subscripted(pipeline, src, Mode::Read, src_slot);
            quote!(&#view)
        }
        None => reborrow(pipeline.buffers[src.0].ident, Mode::Read),
    };
    let dst = match dst_slot {
        Some(_) => {
            let view = subscripted(pipeline, dst, Mode::Write, dst_slot);
            quote!(&mut #view)
        }
        None => reborrow(pipeline.buffers[dst.0].ident, Mode::Write),
    };
    (src, dst)
}

/// The `let`s that clone into a host closure the scalar params, loop variable and `let`s it
/// names (a non-`Copy` param, an `Arc<Mutex<..>>` log, is cloned, not moved out of the params).
pub(super) fn host_clones(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    source: &ast::Host,
) -> Vec<TokenStream> {
    let scalar_decl = |name: &Ident| {
        pipeline
            .scalars
            .iter()
            .find(|s| s.decl.name == *name)
            .map(|s| s.decl)
    };
    let mentioned: Vec<&Ident> = {
        let body = Expr::Closure(source.closure.clone());
        let named: Vec<String> = ast::mentions(&body)
            .iter()
            .map(|m| m.ident.to_string())
            .collect();
        let mut names: Vec<&Ident> = pipeline.scalars.iter().map(|s| &s.decl.name).collect();
        if let Some(l) = stage.looped {
            let looped = pipeline.loops[l];
            names.push(&looped.var);
            names.extend(looped.lets.iter().map(|binding| &binding.name));
        }
        names.retain(|name| named.iter().any(|n| *name == n));
        names
    };
    mentioned
        .iter()
        .map(|name| match scalar_decl(name) {
            // A scalar param: cloned as the bindings are, so a type that is not `Clone` is one
            // error, at its declaration.
            Some(decl) => scalar_binding(decl),
            None => quote!(let #name = ::core::clone::Clone::clone(&#name);),
        })
        .collect()
}

/// A host closure. One without parameters runs as written; one with parameters receives the
/// pinned buffers they name (in `reads(...)` or `writes(...)`) as slices of a copy taken in
/// stream order (see `runtime/src/pipeline/host_data.rs`). Scalar params the closure names are
/// cloned into it, so a non-`Copy` param (an `Arc<Mutex<..>>` log) can be used.
pub(super) fn host_tokens(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    source: &ast::Host,
) -> TokenStream {
    let rt = rt();
    let mut closure = source.closure.clone();
    closure.capture = Some(<syn::Token![move]>::default());
    let clones = host_clones(pipeline, stage, source);
    if closure.inputs.is_empty() {
        return quote_spanned! {source.closure.span()=>
            {
                #(#clones)*
                #rt::host_closure(__stream, #closure)?;
            }
        };
    }
    let writes: Vec<&Ident> = source.accesses.writes().collect();
    let mut regions = Vec::new();
    let mut takes = Vec::new();
    let mut puts = Vec::new();
    let mut args = Vec::new();
    for (k, input) in closure.inputs.iter_mut().enumerate() {
        let (ident, typed) = match input {
            Pat::Ident(binding) => (binding.ident.clone(), false),
            Pat::Type(typed) => match &*typed.pat {
                Pat::Ident(binding) => (binding.ident.clone(), true),
                _ => continue,
            },
            _ => continue,
        };
        let Some(buffer) = pipeline.buffers.iter().find(|b| *b.ident == ident) else {
            continue;
        };
        let elem = buffer.elem.map_or_else(|| quote!(_), |elem| quote!(#elem));
        let name = buffer.ident;
        let write = writes.contains(&name);
        let slot = format_ident!("__slot_{}", k);
        if write {
            regions.push(quote!(#rt::HostRegion::write(&mut *#name)));
            args.push(quote!(&mut #slot[..]));
        } else {
            regions.push(quote!(#rt::HostRegion::read(&*#name)));
            args.push(quote!(&#slot[..]));
        }
        takes.push(quote!(let mut #slot = __frame.take::<#elem>(#k);));
        puts.push(quote!(__frame.put(#k, #slot);));
        if !typed {
            let ty: syn::Type = if write {
                syn::parse_quote!(&mut [#elem])
            } else {
                syn::parse_quote!(&[#elem])
            };
            let pat = input.clone();
            *input = Pat::Type(syn::PatType {
                attrs: Vec::new(),
                pat: Box::new(pat),
                colon_token: Default::default(),
                ty: Box::new(ty),
            });
        }
    }
    quote! {
        {
            #(#clones)*
            let __regions = ::std::vec![#(#regions),*];
            let __user = #closure;
            #rt::host_closure_with(__stream, __regions, move |__frame: &mut #rt::HostFrame| {
                #(#takes)*
                let (): () = __user(#(#args),*);
                #(#puts)*
            })?;
        }
    }
}

/// A `call`: the function gets the stage's stream as a `TypedStream` of the stream's marker,
/// then each buffer as its `reads(...)`/`writes(...)` clause declares it.
pub(super) fn call_tokens(
    pipeline: &Pipeline<'_>,
    stage: &Stage<'_>,
    source: &ast::Call,
    args: &[CallArg<'_>],
) -> TokenStream {
    let rt = rt();
    let stream = &pipeline.streams[stage.stream.0];
    let marker = format_ident!("{}", stream.marker, span = pipeline.input.name.span());
    let label = format!("{}.{}", pipeline.input.name, stream.name);
    // Spanned on the stage's `on STREAM`, so a function typed for another stream reports it
    // there.
    let typed = Ident::new("__typed", stage.decl.stream.span());
    let func = &source.call.func;
    let mut shadows: Vec<(BufferId, Mode)> = Vec::new();
    let args: Vec<TokenStream> = args
        .iter()
        .map(|arg| match arg {
            CallArg::Buffer {
                name,
                mode: Mode::Write,
                ..
            } => quote_spanned!(name.span()=> &mut *#name),
            CallArg::Buffer {
                name,
                declared: Mode::Read,
                ..
            } => {
                // A function that takes it mutably fails here, on the name, with a message
                // that says to declare it in `writes(...)`.
                let read_access = rt_fn(name.span(), "read_access");
                quote_spanned!(name.span()=> #read_access(&*#name))
            }
            CallArg::Buffer { name, .. } => quote_spanned!(name.span()=> &*#name),
            CallArg::Expr { expr, buffers } => {
                for buffer in buffers {
                    if !shadows.contains(buffer) {
                        shadows.push(*buffer);
                    }
                }
                quote!(#expr)
            }
        })
        .collect();
    // Inside an expression, a buffer is seen only as declared: `&` for `reads(...)`.
    let shadows = shadows.iter().map(|&(buffer, mode)| {
        let name = pipeline.buffers[buffer.0].ident;
        let borrow = reborrow(name, mode);
        quote!(let #name = #borrow;)
    });
    let stream_arg = quote_spanned!(typed.span()=> &#typed);
    quote! {
        {
            let #typed = #rt::TypedStream::<#marker>::new(__stream, #label);
            #(#shadows)*
            #func(#stream_arg, #(#args),*)?;
        }
    }
}

/// `&mut *name` for the buffer `id`, seen as a buffer of `elem` when its own element type is
/// spelled differently: the compiler then checks, at `at`, that the two are one type.
pub(super) fn retyped_mut(
    pipeline: &Pipeline<'_>,
    id: BufferId,
    elem: Option<&syn::Type>,
    at: &Ident,
) -> TokenStream {
    let buffer = &pipeline.buffers[id.0];
    let name = buffer.ident;
    let (Some(held), Some(elem)) = (buffer.elem, elem) else {
        return quote!(&mut *#name);
    };
    if type_string(held) == type_string(elem) {
        return quote!(&mut *#name);
    }
    let function = match buffer.memory {
        Memory::Pinned => "pinned_as_mut",
        _ => "device_as_mut",
    };
    let function = rt_fn(at.span(), function);
    quote_spanned!(at.span()=> #function::<#elem, _>(&mut *#name))
}

//! The pipeline struct `P`: its streams' marker types, the struct holding its streams, events,
//! plans, kernels and scratch buffers, and its methods (`new`; per kind of step `run`,
//! `run_steps`, `run_ahead`, `profile`, `plan_dot`; `capture`, accessors and constants). One
//! function per generated item.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use super::bounds;
use super::names::{Names, rt, rt_fn, suffix};
use super::{describe, device, step};
use crate::ast::KernelParamType;
use crate::lower::{ImageFormat, KernelId, Kind, Memory, Pipeline};

/// One zero-sized marker type per stream, so a stream of one pipeline cannot fill another's
/// typed slot.
pub fn stream_markers(pipeline: &Pipeline<'_>) -> TokenStream {
    let input = pipeline.input;
    let vis = &input.vis;
    let name = &input.name;
    pipeline
        .streams
        .iter()
        .map(|stream| {
            let marker = format_ident!("{}", stream.marker, span = input.name.span());
            let doc = format!(
                "Marker type of stream `{}` of pipeline [`{name}`]: a `TypedStream<{}>` can \
                 only be this pipeline's `{}` stream.",
                stream.name, stream.marker, stream.name
            );
            quote! {
                #[doc = #doc]
                #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
                #vis struct #marker;
            }
        })
        .collect()
}

/// The struct holding one `TypedKernel` per declared kernel.
pub fn kernels_struct(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let ty = &names.kernels;
    let fields = device::kernel_instances(pipeline)
        .into_iter()
        .map(|(k, d)| {
            let field = names.kernel_field_on(k.0, d);
            let sig = names.kernel_signature(pipeline.kernels[k.0].decl);
            quote!(#field: #rt::TypedKernel<#sig>)
        });
    quote! {
        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        struct #ty { #(#fields,)* }
    }
}

/// The pipeline struct, with the doc comment that lists its stages.
pub fn pipeline_struct(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let input = pipeline.input;
    let vis = &input.vis;
    let name = &input.name;
    let attrs = &input.attrs;
    let kernels_ty = &names.kernels;
    let doc = struct_doc(pipeline);
    let scratch_fields = pipeline.buffers.iter().filter(|b| b.scratch).map(|b| {
        let field = names.scratch_field(b.ident);
        let referent = b.referent;
        if b.memory == Memory::Condition {
            return quote!(#field: ::core::option::Option<#rt::ConditionHandle>);
        }
        quote!(#field: ::core::option::Option<#referent>)
    });
    let control_fields = super::control::struct_fields(pipeline);
    let (devices, events) = if device::is_multi(pipeline) {
        let count = pipeline.devices.len();
        (
            quote!(__devices: [#rt::Context; #count],),
            quote! {
                /// Per device, two sets of the plans' event slots (steps that run ahead
                /// alternate); a stage records into its own device's.
                __events: ::std::vec::Vec<::std::vec::Vec<#rt::Event>>,
            },
        )
    } else {
        (
            quote!(),
            quote! {
                /// Two sets of the plans' event slots (steps that run ahead alternate).
                __events: ::std::vec::Vec<#rt::Event>,
            },
        )
    };
    quote! {
        #(#attrs)*
        #doc
        #vis struct #name {
            __ctx: #rt::Context,
            #devices
            /// The streams of each declaration (one, or the elements of a stream array).
            __lanes: ::std::vec::Vec<::std::vec::Vec<#rt::Stream>>,
            __fork: #rt::Event,
            __progress: #rt::Progress,
            #events
            /// The plan of each kind of step, as last described.
            __plans: ::std::vec::Vec<::core::option::Option<::std::sync::Arc<#rt::StepPlan>>>,
            /// The plan of the last step enqueued (or graph launched): whose stages a fault names.
            __last: ::core::option::Option<::std::sync::Arc<#rt::StepPlan>>,
            /// Counts the scratch buffers' allocations: an instantiation built with another
            /// count's buffers is built again before its next launch (its nodes and the
            /// pipeline's buffers differ), never updated in place.
            __scratch_epoch: u64,
            __kernels: #kernels_ty,
            #(#scratch_fields,)*
            #control_fields
        }
    }
}

/// The doc comment listing stages, streams and the waits between them.
fn struct_doc(pipeline: &Pipeline<'_>) -> TokenStream {
    let mut doc = String::new();
    for kind in &pipeline.kinds {
        match kind.decl {
            Some(step) => doc.push_str(&format!("\n\n# Step `{}`\n\n", step.name)),
            None => doc.push_str("\n\n# Stages\n\n"),
        }
        doc.push_str("| stage | stream | waits for |\n| --- | --- | --- |\n");
        for &stage_id in &kind.order {
            let stage = &pipeline.stages[stage_id.0];
            let waits: Vec<String> = pipeline
                .edges
                .iter()
                .filter(|e| e.to == stage_id)
                .map(|e| format!("`{}`", pipeline.stages[e.from.0].name))
                .collect();
            let waits = if waits.is_empty() {
                "—".to_owned()
            } else {
                waits.join(", ")
            };
            let stream = &pipeline.streams[stage.stream.0];
            let (stage_name, stream_name) = match (stage.looped, stream.count) {
                (Some(_), Some(_)) => {
                    (format!("{}[i]", stage.name), format!("{}[..]", stream.name))
                }
                (Some(_), None) => (format!("{}[i]", stage.name), stream.name.clone()),
                (None, Some(_)) => (stage.name.clone(), format!("{}[..]", stream.name)),
                (None, None) => (stage.name.clone(), stream.name.clone()),
            };
            doc.push_str(&format!("| `{stage_name}` | `{stream_name}` | {waits} |\n"));
        }
    }
    if pipeline.dynamic {
        doc.push_str(
            "\nThe step's shape is known when it is enqueued (loops, stream arrays or ranges), \
             so the table is a sketch: each loop stage once, each range its whole buffer. \
             The step orders its stage instances before it is enqueued.",
        );
    } else {
        doc.push_str(&format!(
            "\nOne step records {} event(s) besides the fork; the origin stream is `{}`.",
            pipeline.kinds.first().map_or(0, |k| k.events.len()),
            pipeline.streams[0].name
        ));
    }
    quote!(#[doc = #doc])
}

/// `impl P { ... }`: every method and constant, in the order the docs list them.
pub fn pipeline_impl(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let name = &pipeline.input.name;
    let kinds = pipeline
        .kinds
        .iter()
        .enumerate()
        .map(|(k, kind)| kind_methods(pipeline, names, k, kind));
    let methods = [
        constants(pipeline),
        super::build::constants(pipeline),
        new_fn(pipeline, names),
        context_fn(),
        stream_accessors(pipeline, names),
        quote!(#(#kinds)*),
        capture_fn(pipeline, names),
        super::build::capture_step_fn(pipeline, names),
        steps_fn(names),
        fault_tracking_fn(),
        step_counts(pipeline),
        origin_fn(),
        step::prepare_fn(pipeline, names),
        describe::describe_fn(pipeline, names),
        step::plan_fn(pipeline, names),
        step::enqueue_fn(pipeline, names),
    ];
    quote! {
        impl #name {
            #(#methods)*
        }
    }
}

/// `NAME`, `STAGES`, `DOT`, and the names the runtime's messages use.
fn constants(pipeline: &Pipeline<'_>) -> TokenStream {
    let name_str = pipeline.input.name.to_string();
    let dot = pipeline.dot();
    let stage_names = pipeline.stages.iter().map(|s| s.name.as_str());
    let stream_names = pipeline.streams.iter().map(|s| s.name.as_str());
    let buffer_names = pipeline.buffers.iter().map(|b| b.name.as_str());
    let kinds = pipeline.kinds.len();
    let swaps = pipeline.swaps.len();
    let devices = device::is_multi(pipeline).then(|| {
        let devices = pipeline.streams.iter().map(|s| s.device);
        let per_device = pipeline.streams.iter().map(|s| s.per_device);
        quote! {
            /// The device of each stream declaration (the first of a device array's when
            /// the declaration puts its lanes `on gpu[..]`).
            const __DECL_DEVICES: &'static [usize] = &[#(#devices),*];
            /// Whether lane `k` of each stream declaration runs on device `__DECL_DEVICES + k`.
            const __DECL_PER_DEVICE: &'static [bool] = &[#(#per_device),*];

            /// The device lane `lane` of stream declaration `decl` runs on.
            fn __lane_device(decl: usize, lane: usize) -> usize {
                let base = Self::__DECL_DEVICES.get(decl).copied().unwrap_or(0);
                if Self::__DECL_PER_DEVICE.get(decl).copied().unwrap_or(false) {
                    base + lane
                } else {
                    base
                }
            }
        }
    });
    quote! {
        /// The pipeline's name.
        pub const NAME: &'static str = #name_str;
        /// The stages, in program order.
        pub const STAGES: &'static [&'static str] = &[#(#stage_names),*];
        /// The stage graph in Graphviz DOT (one digraph per kind of step): one cluster per
        /// stream, dotted arrows for stream order, labelled arrows for the events the
        /// generated code waits on.
        pub const DOT: &'static str = #dot;
        /// The declared streams' names.
        const __STREAM_NAMES: &'static [&'static str] = &[#(#stream_names),*];
        /// The buffers' names.
        const __BUFFER_NAMES: &'static [&'static str] = &[#(#buffer_names),*];
        /// Kinds of step.
        const __KINDS: usize = #kinds;
        /// Declared `swap`s.
        const __SWAPS: usize = #swaps;
        #devices
    }
}

/// `new`: creates the streams (those of a stream array sized by a param before its first
/// step) and the fork event, and loads the kernels (with their bounds and CPU
/// implementations).
fn new_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    // The streams of declaration `i` on `ctx`: a constant array is created now; one sized by a
    // param before its first step.
    let stream_init = |i: usize, ctx: &Ident| {
        let stream = &pipeline.streams[i];
        let decl = step::stream_decl(pipeline, stream);
        let count = match stream.count {
            None => Some(1usize),
            Some(count) => crate::constant::value(count).and_then(|v| usize::try_from(v).ok()),
        };
        match count {
            Some(count) => quote! {
                {
                    let mut __lanes = ::std::vec::Vec::new();
                    #rt::ensure_streams(#ctx, &mut __lanes, #decl, #count)?;
                    __lanes
                }
            },
            None => quote!(::std::vec::Vec::new()),
        }
    };
    let module_load = |m: usize, ctx: &Ident| {
        let module = &pipeline.modules[m];
        let image = &module.decl.image;
        let label = module.decl.name.to_string();
        match module.format {
            ImageFormat::Ptx => quote!(#rt::load_ptx(#ctx, #image, #label)),
            ImageFormat::Cubin => quote!(#rt::load_cubin(#ctx, #image, #label)),
            ImageFormat::Fatbin => quote!(#rt::load_fatbin(#ctx, #image, #label)),
            ImageFormat::CudaC => quote!(#rt::compile_cuda_c(#ctx, #image, #label)),
        }
    };
    let kernel_init = |k: KernelId, module: &Ident| {
        let kernel = &pipeline.kernels[k.0];
        let kernel_name = kernel.name.as_str();
        let sig = names.kernel_signature(kernel.decl);
        let unsafe_token = pipeline.modules[kernel.module.0].decl.unsafe_token;
        let bounds = bounds::bounds_value(pipeline, k);
        let integers = bounds::integer_assertions(pipeline, k);
        // The user wrote `unsafe kernels`: the signature and its bounds are their promise
        // about the image. A token stream cannot carry a `// SAFETY:` comment; the user's
        // `unsafe kernels` is it.
        let declared = quote!({
            #integers
            #[allow(clippy::undocumented_unsafe_blocks)]
            let kernel = #unsafe_token {
                #rt::declare_bounded_kernel::<#sig>(&#module, #kernel_name, #bounds)?
            };
            kernel
        });
        match &kernel.decl.host {
            Some(host) => {
                // The CPU implementation, coerced to the function type of the kernel's
                // signature at the user's path: a mismatch is one error there, and "expected
                // due to this" points at the declared parameter types.
                let path = &host.path;
                // A bounded buffer (`&mut [f32; n]`, or `; unbounded`) is a slice to the CPU
                // implementation.
                let types = kernel.decl.params.iter().map(|param| match param.kind() {
                    KernelParamType::Slice { mutable, elem, .. } => {
                        let mutability = mutable.then(|| quote!(mut));
                        quote_spanned!(param.ty.span()=> &#mutability [#elem])
                    }
                    // The CPU implementation sets the condition through a typed setter.
                    KernelParamType::Condition => {
                        quote_spanned!(param.ty.span()=> #rt::ConditionSetter<'_>)
                    }
                    _ => {
                        let ty = &param.ty;
                        quote!(#ty)
                    }
                });
                let signature = quote_spanned!(kernel.decl.name.span()=> fn(#(#types),*));
                let host = quote_spanned!(path.span()=> {
                    #[allow(clippy::type_complexity)]
                    let host: #signature = #path;
                    host
                });
                quote!(#rt::with_cpu::<#sig, _>(#declared, #host))
            }
            None => declared,
        }
    };
    if device::is_multi(pipeline) {
        return device::new_fn(pipeline, names, stream_init, module_load, kernel_init);
    }
    let kernels_ty = &names.kernels;
    let kinds = pipeline.kinds.len();
    let single = pipeline
        .streams
        .iter()
        .filter(|s| s.count.is_none())
        .count();
    let ctx = format_ident!("ctx");
    let lanes = (0..pipeline.streams.len()).map(|i| stream_init(i, &ctx));
    let module_loads = (0..pipeline.modules.len()).map(|m| {
        let var = device::module_var(m, 0);
        let load = module_load(m, &ctx);
        quote!(let #var = #load?;)
    });
    let kernel_inits = (0..pipeline.kernels.len()).map(|k| {
        let field = names.kernel_field(k);
        let module = device::module_var(pipeline.kernels[k].module.0, 0);
        let init = kernel_init(KernelId(k), &module);
        quote!(#field: #init)
    });
    let scratch_inits = pipeline.buffers.iter().filter(|b| b.scratch).map(|b| {
        let field = names.scratch_field(b.ident);
        if b.memory == Memory::Flag {
            let referent = b.referent;
            quote!(#field: ::core::option::Option::Some(<#referent>::new(ctx, 0)?))
        } else if b.memory == Memory::Condition {
            quote!(#field: ::core::option::Option::Some(#rt::ConditionHandle::eager(ctx)?))
        } else {
            quote!(#field: ::core::option::Option::None)
        }
    });
    let control_inits = super::control::field_inits(pipeline, &ctx);
    quote! {
        /// Creates the pipeline's streams (those of a stream array sized by a param before
        /// its first step) and loads its kernels.
        pub fn new(ctx: &#rt::Context) -> #rt::Result<Self> {
            #(#module_loads)*
            ::core::result::Result::Ok(Self {
                __ctx: ctx.clone(),
                __lanes: ::std::vec![#(#lanes),*],
                __fork: #rt::Event::with_flags(ctx, #rt::EventFlags::ORDERING)?,
                __progress: #rt::Progress::new(ctx, #single)?,
                __events: ::std::vec::Vec::new(),
                __plans: ::std::vec![::core::option::Option::None; #kinds],
                __last: ::core::option::Option::None,
                __scratch_epoch: 0,
                __kernels: #kernels_ty { #(#kernel_inits,)* },
                #(#scratch_inits,)*
                #control_inits
            })
        }
    }
}

/// `context`.
fn context_fn() -> TokenStream {
    let rt = rt();
    quote! {
        /// The context the pipeline runs in.
        pub fn context(&self) -> &#rt::Context {
            &self.__ctx
        }
    }
}

/// `NAME_stream` for every stream, `NAME_streams` for every stream array.
fn stream_accessors(pipeline: &Pipeline<'_>, _names: &Names) -> TokenStream {
    let rt = rt();
    let name = &pipeline.input.name;
    pipeline
        .streams
        .iter()
        .enumerate()
        .map(|(i, stream)| {
            if stream.count.is_some() {
                let accessor = format_ident!("{}_streams", stream.name, span = name.span());
                let doc = format!(
                    "The streams of the array `{}` created so far (it grows to the size a step \
                     asks for). Functions a stage `call`s get one as a `TypedStream<{}>`.",
                    stream.name, stream.marker
                );
                return quote! {
                    #[doc = #doc]
                    pub fn #accessor(&self) -> &[#rt::Stream] {
                        self.__lanes.get(#i).map_or(&[], |lanes| lanes.as_slice())
                    }
                };
            }
            let accessor = format_ident!("{}_stream", stream.name, span = name.span());
            let doc = format!(
                "The `{}` stream, for work around the steps (waiting for a producer before a \
                 step, say). Functions a stage `call`s get it as a `TypedStream<{}>`.",
                stream.name, stream.marker
            );
            quote! {
                #[doc = #doc]
                pub fn #accessor(&self) -> &#rt::Stream {
                    &self.__lanes[#i][0]
                }
            }
        })
        .collect()
}

/// The methods of one kind of step: `run`, `run_steps`, `run_ahead`, `profile`, `plan_dot`
/// (with the kind's suffix).
fn kind_methods(pipeline: &Pipeline<'_>, names: &Names, k: usize, kind: &Kind<'_>) -> TokenStream {
    let rt = rt();
    let suffix = suffix(kind);
    let params_ty = names.params_ty(quote!('a));
    let params_any = names.params_ty(quote!('_));
    let run_ty = &names.run;
    let name_str = pipeline.input.name.to_string();
    let what = match kind.decl {
        Some(step) => format!("step `{}`", step.name),
        None => "step".to_owned(),
    };
    let run = format_ident!("run{}", suffix);
    let run_steps = format_ident!("run{}_steps", suffix);
    let run_ahead = format_ident!("run{}_ahead", suffix);
    let profile = format_ident!("profile{}", suffix);
    let plan_dot = format_ident!("plan_dot{}", suffix);
    let profiler = super::device::profiler(pipeline);
    let run_doc = format!(
        "Enqueues one {what} and returns a guard to wait on. The step's buffers stay borrowed \
         until the guard is waited on or dropped (which waits); more steps of any kind can be \
         enqueued on the guard, ordered on the GPU."
    );
    let steps_doc = format!(
        "Enqueues `steps` consecutive {what}s with the same params, each a closed fork–join \
         region (so each runs after the one before, on every stream), and returns one guard."
    );
    let ahead_doc = format!(
        "Enqueues `steps` consecutive {what}s with the same params that run ahead of each \
         other: each stage waits only for the stages of the step before that it conflicts \
         with (or is declared `after`), so a stream starts its next step as soon as its own \
         work allows, as hand-written multi-stream code does. Race-free like `{run_steps}`; \
         the first step forks from the origin stream and the last joins it."
    );
    let profile_doc = format!(
        "Runs one {what} with a timing event before and after each stage, waits for it, and \
         returns when each stage started and ended on its stream. Export the result with \
         [`StepProfile::to_chrome_trace`](::gpu_pipeline::StepProfile::to_chrome_trace) to \
         see the streams overlap in Perfetto."
    );
    let dot_doc = format!(
        "The {what} these params make, in Graphviz DOT: every stage instance (`load[3]`) on \
         its stream, and every wait the plan enqueues with its reasons. Describes and plans \
         the step (allocating scratch buffers and streams) but enqueues nothing."
    );
    quote! {
        #[doc = #run_doc]
        pub fn #run<'a>(&'a mut self, params: #params_ty) -> #rt::Result<#run_ty<'a>> {
            let mut params = params;
            self.__steps(#k, &mut params, 1, false)?;
            ::core::result::Result::Ok(#run_ty { pipeline: self, params, waited: false })
        }

        #[doc = #steps_doc]
        pub fn #run_steps<'a>(&'a mut self, params: #params_ty, steps: usize) -> #rt::Result<#run_ty<'a>> {
            let mut params = params;
            self.__steps(#k, &mut params, steps, false)?;
            ::core::result::Result::Ok(#run_ty { pipeline: self, params, waited: false })
        }

        #[doc = #ahead_doc]
        pub fn #run_ahead<'a>(&'a mut self, params: #params_ty, steps: usize) -> #rt::Result<#run_ty<'a>> {
            let mut params = params;
            self.__steps(#k, &mut params, steps, true)?;
            ::core::result::Result::Ok(#run_ty { pipeline: self, params, waited: false })
        }

        #[doc = #profile_doc]
        pub fn #profile(&mut self, params: #params_any) -> #rt::Result<#rt::StepProfile> {
            let mut params = params;
            self.__prepare(&params)?;
            let plan = self.__plan(#k, &params)?;
            let profiler = #profiler;
            self.__last = ::core::option::Option::Some(plan.clone());
            self.__enqueue_settled(&mut params, &plan, #rt::StepMode::Closed, ::core::option::Option::Some(&profiler))?;
            self.__wait()?;
            let sites = #rt::profile_sites(&plan, Self::__STREAM_NAMES);
            profiler.finish(#name_str, &sites)
        }

        #[doc = #dot_doc]
        pub fn #plan_dot(&mut self, params: &#params_any) -> #rt::Result<::std::string::String> {
            self.__prepare(params)?;
            let plan = self.__plan(#k, params)?;
            ::core::result::Result::Ok(plan.dot(Self::__STREAM_NAMES, Self::__BUFFER_NAMES))
        }
    }
}

/// `__steps`: what `run`, `run_steps`, `run_ahead` and the guard's `then` share.
fn steps_fn(names: &Names) -> TokenStream {
    let rt = rt();
    let params_ty = names.params_ty(quote!('_));
    quote! {
        /// One step enqueued as the plan says; when it fails or panics part-way, every stream
        /// is waited for before the error returns or the panic goes on.
        fn __enqueue_settled(
            &mut self,
            params: &mut #params_ty,
            plan: &#rt::StepPlan,
            mode: #rt::StepMode,
            profile: ::core::option::Option<&#rt::Profiler>,
        ) -> #rt::Result<()> {
            // A user expression or `call` may panic half-way: the stages started are waited
            // for before the panic goes on, as for an error, since the params' borrow ends
            // with it.
            let enqueued = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| {
                self.__enqueue(params, plan, mode, profile)
            }));
            let enqueued = match enqueued {
                ::core::result::Result::Ok(enqueued) => enqueued,
                ::core::result::Result::Err(panic) => {
                    self.__settle();
                    ::std::panic::resume_unwind(panic)
                }
            };
            if enqueued.is_err() {
                // A step refused part-way (a loop at its `max`, a failing `call`) leaves its
                // started stages, and the steps before it, running unjoined.
                self.__settle();
            }
            enqueued
        }

        /// Prepares, plans and enqueues `steps` steps of kind `kind`.
        fn __steps(
            &mut self,
            kind: usize,
            params: &mut #params_ty,
            steps: usize,
            ahead: bool,
        ) -> #rt::Result<()> {
            self.__prepare(params)?;
            let plan = self.__plan(kind, params)?;
            self.__last = ::core::option::Option::Some(plan.clone());
            for step in 0..steps {
                let mode = if ahead {
                    #rt::StepMode::Ahead {
                        first: step == 0,
                        last: step + 1 == steps,
                        parity: step % 2 == 1,
                    }
                } else {
                    #rt::StepMode::Closed
                };
                self.__enqueue_settled(params, &plan, mode, ::core::option::Option::None)?;
            }
            ::core::result::Result::Ok(())
        }
    }
}

/// `capture`: every kind of step recorded as a graph and instantiated.
fn capture_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let params_ty = names.params_ty(quote!('a));
    let graph_ty = &names.graph;
    let scalars = pipeline.scalars.len();
    let kinds = if pipeline.kinds.len() > 1 {
        "each kind of step "
    } else {
        "one step "
    };
    let doc = format!(
        "Records {kinds}as a CUDA graph (on the CPU backend, a host graph) and instantiates \
         it. The graph borrows the params for its whole life; launch it with \
         [`{graph_ty}::launch`] as often as you like, and between launches read and write its \
         pinned buffers through [`{graph_ty}::window`]."
    );
    // A step recorded from its streams (one that communicates) cannot record a conditional
    // node: each condition would be decided once, at capture. Calling `capture` on it is then
    // an error whose note points at the first `if`/`while`/`switch`.
    let refusal = super::control::first_keyword(pipeline)
        .filter(|_| super::build::captured_not_built(pipeline))
        .map(|span| {
            let bound = rt_fn(span, "CapturedWithoutConditionals");
            quote_spanned!(span=> where #graph_ty<'a>: #bound)
        });
    quote! {
        #[doc = #doc]
        pub fn capture<'a>(&'a mut self, params: #params_ty) -> #rt::Result<#graph_ty<'a>> #refusal {
            let mut params = params;
            let mut execs = ::std::vec::Vec::new();
            execs.resize_with(Self::__KINDS << Self::__SWAPS, || ::core::option::Option::None);
            for kind in 0..Self::__KINDS {
                execs[kind << Self::__SWAPS] = ::core::option::Option::Some(self.__capture(kind, &mut params)?);
            }
            let stale = ::std::vec![[false; #scalars]; execs.len()];
            // Each build checked its launches' bounds.
            let checked = execs.iter().map(::core::option::Option::is_some).collect();
            ::core::result::Result::Ok(#graph_ty { pipeline: self, params, execs, stale, checked, swapped: 0, in_flight: ::core::default::Default::default(), lent: ::core::default::Default::default() })
        }
    }
}

/// `set_fault_tracking`.
fn fault_tracking_fn() -> TokenStream {
    quote! {
        /// Fault tracking, off by default: when on, each stage marks its completion with one
        /// stream memory operation (an eager step's marks carry the step's number, so a step
        /// needs no more; a replay starts with one that resets the marks), so an asynchronous
        /// fault names the first stage that did not complete (off, it names the pipeline
        /// only). Each mark costs about what a launch costs, so
        /// steps of small kernels slow down noticeably. The environment variable
        /// `GPU_PIPELINE_TRACK_FAULTS=1` turns it on for every pipeline created afterwards;
        /// this call applies to steps enqueued or captured afterwards.
        pub fn set_fault_tracking(&mut self, on: bool) {
            self.__progress.set_enabled(on);
        }
    }
}

/// The per-step counts of events, waits and accesses, for a pipeline with one kind of step
/// whose order the macro knows.
fn step_counts(pipeline: &Pipeline<'_>) -> TokenStream {
    if pipeline.dynamic || pipeline.kinds.len() != 1 {
        return quote!();
    }
    let records = pipeline.events.len() + usize::from(!pipeline.fork.is_empty());
    let waits = pipeline.edges.len() + pipeline.fork.len() + pipeline.join.len();
    let accesses: usize = pipeline.stages.iter().map(|s| s.accesses.len()).sum();
    quote! {
        /// Events one step records: one per stage another stream waits on, plus the fork
        /// event when the origin forks other streams. Compare with a per-buffer tracker,
        /// which records an event after every access of every buffer.
        pub const EVENT_RECORDS_PER_STEP: usize = #records;
        /// Stream waits one step enqueues: one per lowered edge, fork and join.
        pub const EVENT_WAITS_PER_STEP: usize = #waits;
        /// Buffer accesses one step makes, summed over stages (what a per-buffer run-time
        /// tracker would put an event on).
        pub const BUFFER_ACCESSES_PER_STEP: usize = #accesses;
    }
}

/// `__origin`: the stream every step starts and ends on.
fn origin_fn() -> TokenStream {
    let rt = rt();
    quote! {
        fn __origin(&self) -> #rt::Result<&#rt::Stream> {
            self.__lanes
                .first()
                .and_then(|lanes| lanes.first())
                .ok_or_else(|| #rt::internal(Self::NAME, "no origin stream"))
        }
    }
}

/// `Debug` for the pipeline.
pub fn pipeline_debug(pipeline: &Pipeline<'_>) -> TokenStream {
    let name = &pipeline.input.name;
    let name_str = name.to_string();
    quote! {
        impl ::core::fmt::Debug for #name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(#name_str).field("context", &self.__ctx).finish_non_exhaustive()
            }
        }
    }
}

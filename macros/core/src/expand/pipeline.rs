//! The pipeline struct `P`: its streams' marker types, the struct holding its streams, events,
//! kernels and scratch buffers, and its methods (`new`, `run`, `run_steps`, `profile`,
//! `capture`, accessors and constants). One function per generated item.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use super::bounds;
use super::names::{Names, rt};
use super::{device, step};
use crate::ast::KernelParamType;
use crate::lower::{ImageFormat, KernelId, Memory, Pipeline, Priority};

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
    let event_count = pipeline.events.len();
    let stream_fields = (0..pipeline.streams.len()).map(|i| {
        let field = names.stream_field(i);
        quote!(#field: #rt::Stream)
    });
    let scratch_fields = pipeline.buffers.iter().filter(|b| b.scratch).map(|b| {
        let field = names.scratch_field(b.ident);
        let referent = b.referent;
        quote!(#field: ::core::option::Option<#referent>)
    });
    let control_fields = super::control::struct_fields(pipeline);
    let devices = device::is_multi(pipeline).then(|| {
        let count = pipeline.devices.len();
        quote!(__devices: [#rt::Context; #count],)
    });
    quote! {
        #(#attrs)*
        #doc
        #vis struct #name {
            __ctx: #rt::Context,
            #devices
            #(#stream_fields,)*
            __fork: #rt::Event,
            __progress: #rt::Progress,

            __events: [#rt::Event; #event_count],
            __kernels: #kernels_ty,
            #(#scratch_fields,)*
            #control_fields
        }
    }
}

/// The doc comment listing stages, streams and the waits between them.
fn struct_doc(pipeline: &Pipeline<'_>) -> TokenStream {
    let mut doc =
        String::from("\n\n# Stages\n\n| stage | stream | waits for |\n| --- | --- | --- |\n");
    for &stage_id in &pipeline.order {
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
        doc.push_str(&format!(
            "| `{}` | `{}` | {} |\n",
            stage.name, pipeline.streams[stage.stream.0].name, waits
        ));
    }
    doc.push_str(&format!(
        "\nOne step records {} event(s) besides the fork; the origin stream is `{}`.",
        pipeline.events.len(),
        pipeline.streams[0].name
    ));
    quote!(#[doc = #doc])
}

/// `impl P { ... }`: every method and constant, in the order the docs list them.
pub fn pipeline_impl(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let name = &pipeline.input.name;
    let methods = [
        constants(pipeline),
        new_fn(pipeline, names),
        context_fn(),
        stream_accessors(pipeline, names),
        run_fn(names),
        run_steps_fn(names),
        profile_fn(pipeline, names),
        capture_fn(pipeline, names),
        super::build::capture_step_fn(pipeline, names),
        super::build::constants(pipeline),
        fault_tracking_fn(),
        step_counts(pipeline),
        stage_sites(pipeline),
        origin_fn(),
        step::prepare_fn(pipeline, names),
        step::enqueue_fn(pipeline, names),
    ];
    quote! {
        impl #name {
            #(#methods)*
        }
    }
}

/// `NAME`, `STAGES` and `DOT`.
fn constants(pipeline: &Pipeline<'_>) -> TokenStream {
    let name_str = pipeline.input.name.to_string();
    let dot = pipeline.dot();
    let stage_names = pipeline.stages.iter().map(|s| s.name.as_str());
    quote! {
        /// The pipeline's name.
        pub const NAME: &'static str = #name_str;
        /// The stages, in program order.
        pub const STAGES: &'static [&'static str] = &[#(#stage_names),*];
        /// The stage graph in Graphviz DOT: one cluster per stream, solid arrows for
        /// stream order, bold arrows for the events the generated code waits on.
        pub const DOT: &'static str = #dot;
    }
}

/// `new`: creates the streams and events and loads the kernels.
fn new_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let stream_init = |i: usize, ctx: &Ident| {
        let stream = &pipeline.streams[i];
        let field = names.stream_field(i);
        let priority = match stream.priority {
            Priority::High => quote!(#rt::StreamPriority::High),
            Priority::Low => quote!(#rt::StreamPriority::Low),
            Priority::Default => quote!(#rt::StreamPriority::Default),
            Priority::Value(v) => quote!(#rt::StreamPriority::Value(#v)),
        };
        let non_blocking = stream.non_blocking;
        quote!(#field: #priority.new_stream(#ctx, #non_blocking)?)
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
                // A bounded buffer (`&mut [f32; n]`) is a slice to the CPU implementation.
                let types = kernel.decl.params.iter().map(|param| match param.kind() {
                    KernelParamType::Slice {
                        mutable,
                        elem,
                        bound: Some(_),
                    } => {
                        let mutability = mutable.then(|| quote!(mut));
                        quote_spanned!(param.ty.span()=> &#mutability [#elem])
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
    let event_count = pipeline.events.len();
    let stream_count = pipeline.streams.len();
    let ctx = format_ident!("ctx");
    let stream_inits = (0..pipeline.streams.len()).map(|i| stream_init(i, &ctx));
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
        } else {
            quote!(#field: ::core::option::Option::None)
        }
    });
    let control_inits = super::control::field_inits(pipeline);
    quote! {
        /// Creates the pipeline's streams and events in `ctx` and loads its kernels.
        pub fn new(ctx: &#rt::Context) -> #rt::Result<Self> {
            #(#module_loads)*
            ::core::result::Result::Ok(Self {
                __ctx: ctx.clone(),
                #(#stream_inits,)*
                __fork: #rt::Event::with_flags(ctx, #rt::EventFlags::ORDERING)?,
                __progress: #rt::Progress::new(ctx, #stream_count)?,
                __events: #rt::events::<#event_count>(ctx)?,
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

/// `NAME_stream` for every stream.
fn stream_accessors(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let name = &pipeline.input.name;
    pipeline
        .streams
        .iter()
        .enumerate()
        .map(|(i, stream)| {
            let field = names.stream_field(i);
            let accessor = format_ident!("{}_stream", stream.name, span = name.span());
            let doc = format!(
                "The `{}` stream, for work around the steps (waiting for a producer before a \
                 step, say). Functions a stage `call`s get it as a `TypedStream<{}>`.",
                stream.name, stream.marker
            );
            quote! {
                #[doc = #doc]
                pub fn #accessor(&self) -> &#rt::Stream {
                    &self.#field
                }
            }
        })
        .collect()
}

/// `run`: one eager step.
fn run_fn(names: &Names) -> TokenStream {
    let rt = rt();
    let params_ty = names.params_ty(quote!('a));
    let run_ty = &names.run;
    quote! {
        /// Enqueues one step and returns a guard to wait on. The step's buffers stay
        /// borrowed until the guard is waited on or dropped (which waits).
        pub fn run<'a>(&'a mut self, params: #params_ty) -> #rt::Result<#run_ty<'a>> {
            let mut params = params;
            self.__prepare(&params)?;
            self.__enqueue(&mut params, ::core::option::Option::None)?;
            ::core::result::Result::Ok(#run_ty { pipeline: self, params, waited: false })
        }
    }
}

/// `run_steps`: several eager steps with one guard.
fn run_steps_fn(names: &Names) -> TokenStream {
    let rt = rt();
    let params_ty = names.params_ty(quote!('a));
    let run_ty = &names.run;
    quote! {
        /// Enqueues `steps` consecutive steps with the same params (consecutive steps are
        /// ordered: each ends with the origin stream joining the others) and returns one
        /// guard for all of them.
        pub fn run_steps<'a>(&'a mut self, params: #params_ty, steps: usize) -> #rt::Result<#run_ty<'a>> {
            let mut params = params;
            self.__prepare(&params)?;
            for _ in 0..steps {
                self.__enqueue(&mut params, ::core::option::Option::None)?;
            }
            ::core::result::Result::Ok(#run_ty { pipeline: self, params, waited: false })
        }
    }
}

/// `profile`: one step with timing events around each stage.
fn profile_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let name_str = pipeline.input.name.to_string();
    let params_ty = names.params_ty(quote!('_));
    let profiler = device::profiler(pipeline);
    let profile_sites = pipeline.order.iter().map(|stage| {
        let stage = &pipeline.stages[stage.0];
        let (name, stream) = (
            stage.name.as_str(),
            pipeline.streams[stage.stream.0].name.as_str(),
        );
        quote!((#name, #stream))
    });
    quote! {
        /// Runs one step with a timing event before and after each stage, waits for it,
        /// and returns when each stage started and ended on its stream. Export the result
        /// with [`StepProfile::to_chrome_trace`](::gpu_pipeline::StepProfile::to_chrome_trace)
        /// to see the streams overlap in Perfetto. The events add a little work to the
        /// step; use `run` or `capture` for production steps.
        pub fn profile(&mut self, params: #params_ty) -> #rt::Result<#rt::StepProfile> {
            let mut params = params;
            self.__prepare(&params)?;
            let profiler = #profiler;
            self.__enqueue(&mut params, ::core::option::Option::Some(&profiler))?;
            self.__wait()?;
            profiler.finish(#name_str, Self::__PROFILE_SITES)
        }

        /// Stage and stream names, in enqueue order.
        const __PROFILE_SITES: &'static [(&'static str, &'static str)] = &[#(#profile_sites),*];
    }
}

/// `capture`: one step recorded as a graph and instantiated.
fn capture_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let launches = super::graph::launch_count(pipeline);
    let params_ty = names.params_ty(quote!('a));
    let graph_ty = &names.graph;
    let doc = format!(
        "Records one step as a CUDA graph (on the host backend, a host graph) and \
         instantiates it. The graph borrows the params for its whole life; launch it with \
         [`{graph_ty}::launch`] as often as you like."
    );
    quote! {
        #[doc = #doc]
        pub fn capture<'a>(&'a mut self, params: #params_ty) -> #rt::Result<#graph_ty<'a>> {
            let mut params = params;
            let (graph, exec, nodes) = self.__capture(&mut params)?;
            ::core::result::Result::Ok(#graph_ty {
                pipeline: self,
                params,
                exec,
                nodes,
                _graph: graph,
                stale: [false; #launches],
            })
        }
    }
}

/// `set_fault_tracking`.
fn fault_tracking_fn() -> TokenStream {
    quote! {
        /// Fault tracking, off by default: when on, each stage marks its completion with one
        /// stream memory operation, and each step (or replay) starts with one more that resets
        /// the marks, so an asynchronous fault names the first stage that did not complete
        /// (off, it names the pipeline only). Each mark costs about what a launch costs, so
        /// steps of small kernels slow down noticeably. The environment variable
        /// `GPU_PIPELINE_TRACK_FAULTS=1` turns it on for every pipeline created afterwards;
        /// this call applies to steps enqueued or captured afterwards.
        pub fn set_fault_tracking(&mut self, on: bool) {
            self.__progress.set_enabled(on);
        }
    }
}

/// The per-step counts of events, waits and accesses.
fn step_counts(pipeline: &Pipeline<'_>) -> TokenStream {
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

/// `__STAGE_SITES`: where each stage marks its progress.
fn stage_sites(pipeline: &Pipeline<'_>) -> TokenStream {
    let sites = pipeline.order.iter().enumerate().map(|(position, stage)| {
        let stage = &pipeline.stages[stage.0];
        let (name, stream, position) = (stage.name.as_str(), stage.stream.0, position as u32 + 1);
        quote!((#name, #stream, #position))
    });
    quote! {
        /// Stage name, stream index and 1-based position, in enqueue order.
        const __STAGE_SITES: &'static [(&'static str, usize, u32)] = &[#(#sites),*];
    }
}

/// `__origin`: the stream every step starts and ends on.
fn origin_fn() -> TokenStream {
    let rt = rt();
    quote! {
        fn __origin(&self) -> &#rt::Stream {
            &self.__stream_0
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

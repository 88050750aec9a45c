//! Code generation: the only phase that uses `quote!` or names runtime paths.
//!
//! For a pipeline `P` it emits:
//! - one zero-sized marker type per stream ([`lower::Stream::marker`]), so a stream of one
//!   pipeline cannot fill another's typed slot;
//! - `P`, owning its typed streams, events, loaded kernels and scratch buffers, with `new`,
//!   `run` (one eager step, returning a guard to wait on), `capture` (one step recorded as a
//!   graph that borrows the params for its whole life) and the constants `NAME`, `STAGES`
//!   and `DOT`;
//! - `PParams<'a>`, the scalars and borrowed buffers of one step;
//! - `PRun<'a>`, the guard of an eager step;
//! - `PGraph<'a>`, the captured step, with `launch` and one `set_<scalar>` per scalar param
//!   that a kernel launch uses, which updates the instantiated graph's kernel nodes in place.
//!
//! Generated code reaches the runtime only through `::gpu_pipeline::__private_0_1`
//! ([`PRIVATE_MODULE`]).

mod graph;
mod names;
mod step;
mod stub;

use proc_macro2::Ident;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use crate::lower::{self, ImageFormat, Priority};
use crate::scope::Scope;
use crate::{ast, lower::Memory};

pub use stub::{after_parse_error, stub};

use names::Names;

/// The hidden runtime module generated code names, versioned like thiserror's `__private17`:
/// a macro crate and a runtime crate that disagree on what it holds fail to resolve the path
/// instead of compiling against the wrong items.
pub(crate) const PRIVATE_MODULE: &str = "__private_0_1";

/// The path generated code uses for everything from the runtime.
fn rt() -> TokenStream {
    let module = Ident::new(PRIVATE_MODULE, proc_macro2::Span::call_site());
    quote!(::gpu_pipeline::#module)
}

/// Generates the items of a checked, lowered pipeline.
pub fn expand(input: &ast::Pipeline, pipeline: &lower::Pipeline) -> TokenStream {
    let scope = Scope::new(input);
    let names = Names::new(input, &scope);
    let markers = markers(input, pipeline);
    let params = names.params_struct(input, &scope);
    let kernels = kernels_struct(&names, &scope);
    let main = pipeline_struct(input, pipeline, &scope, &names);
    let run = step::run_guard(pipeline, &scope, &names);
    let graph = graph::graph_struct(input, pipeline, &scope, &names);
    quote! {
        #markers
        #params
        #kernels
        #main
        #run
        #graph
    }
}

/// One marker type per stream.
fn markers(input: &ast::Pipeline, pipeline: &lower::Pipeline) -> TokenStream {
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
fn kernels_struct(names: &Names, scope: &Scope<'_>) -> TokenStream {
    let rt = rt();
    let ty = &names.kernels;
    let fields = scope.kernels.iter().enumerate().map(|(k, decl)| {
        let field = names.kernel_field(k);
        let sig = names.kernel_signature(decl.decl);
        quote!(#field: #rt::TypedKernel<#sig>)
    });
    quote! {
        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        struct #ty { #(#fields,)* }
    }
}

/// The pipeline struct, its constructor and its constants.
fn pipeline_struct(
    input: &ast::Pipeline,
    pipeline: &lower::Pipeline,
    scope: &Scope<'_>,
    names: &Names,
) -> TokenStream {
    let rt = rt();
    let vis = &input.vis;
    let name = &input.name;
    let attrs = &input.attrs;
    let kernels_ty = &names.kernels;
    let doc = struct_doc(pipeline);
    let name_str = name.to_string();
    let dot = pipeline.dot();
    let stage_names = pipeline.stages.iter().map(|s| s.name.as_str());
    let event_count = pipeline.events.len();

    let stream_fields = pipeline.streams.iter().enumerate().map(|(i, stream)| {
        let field = names.stream_field(i);
        let marker = format_ident!("{}", stream.marker, span = name.span());
        quote!(#field: #rt::TypedStream<#marker>)
    });
    let stream_inits = pipeline.streams.iter().enumerate().map(|(i, stream)| {
        let field = names.stream_field(i);
        let priority = match stream.priority {
            Priority::High => quote!(#rt::StreamPriority::High),
            Priority::Low => quote!(#rt::StreamPriority::Low),
            Priority::Default => quote!(#rt::StreamPriority::Default),
            Priority::Value(v) => quote!(#rt::StreamPriority::Value(#v)),
        };
        let non_blocking = stream.non_blocking;
        let label = format!("{name_str}.{}", stream.name);
        quote!(#field: #rt::TypedStream::new(ctx, #priority, #non_blocking, #label)?)
    });
    let stream_accessors = pipeline.streams.iter().enumerate().map(|(i, stream)| {
        let field = names.stream_field(i);
        let accessor = format_ident!("{}_stream", stream.name, span = name.span());
        let marker = format_ident!("{}", stream.marker, span = name.span());
        let doc = format!("The `{}` stream.", stream.name);
        quote! {
            #[doc = #doc]
            pub fn #accessor(&self) -> &#rt::TypedStream<#marker> {
                &self.#field
            }
        }
    });

    let module_loads = scope.modules.iter().enumerate().map(|(m, module)| {
        let var = format_ident!("__module_{}", m);
        let image = &module.image;
        let label = module.name.to_string();
        let load = match pipeline.modules[m].format {
            ImageFormat::Ptx => quote!(#rt::load_ptx(ctx, #image, #label)),
            ImageFormat::Cubin => quote!(#rt::load_cubin(ctx, #image, #label)),
            ImageFormat::Fatbin => quote!(#rt::load_fatbin(ctx, #image, #label)),
            ImageFormat::CudaC => quote!(#rt::compile_cuda_c(ctx, #image, #label)),
        };
        quote!(let #var = #load?;)
    });
    let kernel_inits = scope.kernels.iter().enumerate().map(|(k, decl)| {
        let field = names.kernel_field(k);
        let module = format_ident!("__module_{}", decl.module);
        let kernel_name = decl.decl.name.to_string();
        let sig = names.kernel_signature(decl.decl);
        let unsafe_token = scope.modules[decl.module].unsafe_token;
        // The user wrote `unsafe kernels`: the signature is their promise about the image.
        // A token stream cannot carry a `// SAFETY:` comment; the user's `unsafe kernels` is it.
        let declared = quote!({
            #[allow(clippy::undocumented_unsafe_blocks)]
            let kernel = #unsafe_token { #rt::declare_kernel::<#sig>(&#module, #kernel_name)? };
            kernel
        });
        match &decl.decl.host {
            Some(host) => {
                let path = &host.path;
                quote!(#field: #rt::with_host::<#sig, _>(#declared, #path))
            }
            None => quote!(#field: #declared),
        }
    });
    let scratch_fields = scope.buffers.iter().filter(|b| b.scratch).map(|b| {
        let field = names.scratch_field(b.name);
        let referent = b.referent;
        quote!(#field: ::core::option::Option<#referent>)
    });
    let scratch_inits = scope.buffers.iter().filter(|b| b.scratch).map(|b| {
        let field = names.scratch_field(b.name);
        if b.memory == Memory::Flag {
            let referent = b.referent;
            quote!(#field: ::core::option::Option::Some(<#referent>::new(ctx, 0)?))
        } else {
            quote!(#field: ::core::option::Option::None)
        }
    });
    let stream_count = pipeline.streams.len();
    let records = pipeline.events.len() + usize::from(!pipeline.fork.is_empty());
    let waits = pipeline.edges.len() + pipeline.fork.len() + pipeline.join.len();
    let accesses: usize = pipeline.stages.iter().map(|s| s.accesses.len()).sum();
    let stage_sites = pipeline.order.iter().enumerate().map(|(position, stage)| {
        let stage = &pipeline.stages[stage.0];
        let (name, stream, position) = (stage.name.as_str(), stage.stream.0, position as u32 + 1);
        quote!((#name, #stream, #position))
    });
    let profile_sites = pipeline.order.iter().map(|stage| {
        let stage = &pipeline.stages[stage.0];
        let (name, stream) = (
            stage.name.as_str(),
            pipeline.streams[stage.stream.0].name.as_str(),
        );
        quote!((#name, #stream))
    });
    let params_ty_any = names.params_ty(quote!('_));
    let prepare = step::prepare_fn(pipeline, scope, names);
    let enqueue = step::enqueue_fn(pipeline, scope, names);
    let params_ty = names.params_ty(quote!('a));
    let run_ty = &names.run;
    let graph_ty = &names.graph;
    let capture_doc = format!(
        "Records one step as a CUDA graph (on the host backend, a host graph) and \
         instantiates it. The graph borrows the params for its whole life; launch it with \
         [`{graph_ty}::launch`] as often as you like."
    );

    quote! {
    #(#attrs)*
    #doc
    #vis struct #name {
        __ctx: #rt::Context,
        #(#stream_fields,)*
                __fork: #rt::Event,
        __progress: #rt::Progress,

        __events: [#rt::Event; #event_count],
        __kernels: #kernels_ty,
        #(#scratch_fields,)*
    }

    impl #name {
        /// The pipeline's name.
        pub const NAME: &'static str = #name_str;
        /// The stages, in program order.
        pub const STAGES: &'static [&'static str] = &[#(#stage_names),*];
        /// The stage graph in Graphviz DOT: one cluster per stream, solid arrows for
        /// stream order, bold arrows for the events the generated code waits on.
        pub const DOT: &'static str = #dot;

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
            })
        }

        /// The context the pipeline runs in.
        pub fn context(&self) -> &#rt::Context {
            &self.__ctx
        }

        #(#stream_accessors)*

        /// Enqueues one step and returns a guard to wait on. The step's buffers stay
        /// borrowed until the guard is waited on or dropped (which waits).
        pub fn run<'a>(&'a mut self, params: #params_ty) -> #rt::Result<#run_ty<'a>> {
            let mut params = params;
            self.__prepare(&params)?;
            self.__enqueue(&mut params, ::core::option::Option::None)?;
            ::core::result::Result::Ok(#run_ty { pipeline: self, params, waited: false })
        }

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

                        /// Runs one step with a timing event before and after each stage, waits for it,
            /// and returns when each stage started and ended on its stream. Export the result
            /// with [`StepProfile::to_chrome_trace`](::gpu_pipeline::StepProfile::to_chrome_trace)
            /// to see the streams overlap in Perfetto. The events add a little work to the
            /// step; use `run` or `capture` for production steps.
            pub fn profile(&mut self, params: #params_ty_any) -> #rt::Result<#rt::StepProfile> {
                let mut params = params;
                self.__prepare(&params)?;
                let profiler = #rt::Profiler::new(&self.__ctx, Self::__STAGE_SITES.len())?;
                self.__enqueue(&mut params, ::core::option::Option::Some(&profiler))?;
                self.__wait()?;
                profiler.finish(#name_str, Self::__PROFILE_SITES)
            }

            /// Stage and stream names, in enqueue order.
            const __PROFILE_SITES: &'static [(&'static str, &'static str)] = &[#(#profile_sites),*];

            #[doc = #capture_doc]
            pub fn capture<'a>(&'a mut self, params: #params_ty) -> #rt::Result<#graph_ty<'a>> {
            let mut params = params;
            self.__prepare(&params)?;
            self.__origin().begin_capture(#rt::CaptureMode::ThreadLocal)?;
            let enqueued = self.__enqueue(&mut params, ::core::option::Option::None);
            // The capture always ends, also when enqueueing failed.
            let graph = self.__origin().end_capture();
            enqueued?;
            let graph = graph?;
            let exec = graph.instantiate()?;
            let nodes = #rt::kernel_nodes_in_launch_order(&graph)?;
                                            ::core::result::Result::Ok(#graph_ty { pipeline: self, params, exec, nodes, _graph: graph })
        }

                    /// Fault tracking, on by default: each stage marks its completion with one stream
            /// memory operation, and each step (or replay) starts with one more that resets
            /// the marks, so a fault names the first stage that did not complete. Turn it off
            /// to save those operations; it applies to steps enqueued or captured afterwards.
            pub fn set_fault_tracking(&mut self, on: bool) {
                self.__progress.set_enabled(on);
            }

                        /// Events one step records: one per stage another stream waits on, plus the fork
            /// event when the origin forks other streams. Compare with a per-buffer tracker,
            /// which records an event after every access of every buffer.
            pub const EVENT_RECORDS_PER_STEP: usize = #records;
            /// Stream waits one step enqueues: one per lowered edge, fork and join.
            pub const EVENT_WAITS_PER_STEP: usize = #waits;
            /// Buffer accesses one step makes, summed over stages (what a per-buffer run-time
            /// tracker would put an event on).
            pub const BUFFER_ACCESSES_PER_STEP: usize = #accesses;

            /// Stage name, stream index and 1-based position, in enqueue order.
            const __STAGE_SITES: &'static [(&'static str, usize, u32)] = &[#(#stage_sites),*];

            fn __origin(&self) -> &#rt::Stream {
            &self.__stream_0
        }

        #prepare
        #enqueue
    }

    impl ::core::fmt::Debug for #name {
        fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
            f.debug_struct(#name_str).field("context", &self.__ctx).finish_non_exhaustive()
        }
    }
    }
}

/// The doc comment listing stages, streams and the waits between them.
fn struct_doc(pipeline: &lower::Pipeline) -> TokenStream {
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

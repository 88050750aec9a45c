//! `PGraph<'a>`: the captured steps, instantiated graphs that borrow the step's params for
//! their whole life; `launch` replays one, typed setters update scalar params, `swap_a_b`
//! exchanges two buffer params between replays, and `window` hands out the pinned buffers
//! between replays (`PWindow`).
//!
//! The graph keeps one instantiation per kind of step and arrangement of the swapped buffers
//! (`kind << swaps | swapped`), built when first needed: a swap then costs nothing at replay
//! time, as two hand-made graphs (one per parity) would.
//!
//! Setters and instantiations: an in-place setter checks the bounds of the launches it feeds
//! at once, against the current arrangement's plans (a refusal changes nothing), and marks the
//! scalar stale in every instantiation; each instantiation then updates its stale kernel nodes,
//! each once, in one batch (`GraphExec::kernel_updates`, through `set_unchecked`: the values
//! were checked when set), when it is next launched (or at `apply_updates`, for the current
//! arrangement). An instantiation is only ever updated while
//! the params are in its own arrangement, so its nodes always get the buffers they were built
//! with. A swap checks the bounds of every launch in the new arrangement before it takes
//! effect, so whatever arrangement is current satisfies its kernels' bounds. A setter whose
//! scalar a replay cannot update in place (a fill value, a loop bound, a scratch length, ...)
//! builds the current arrangement again and drops the others (built again when swapped to);
//! when that fails, the graph keeps its instantiations and the scalar its previous value.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};

use super::bounds::{self, Keep, LaunchSite, launch_sites};
use super::graph_inputs::{host_writes, recapture_fns};
use super::instance::{ref_slots, stage_header};
use super::launch::{Retype, launch_parts};
use super::names::suffix;
use super::names::{Names, rt};
use super::setters::{outdate_on_unwind, setter};
use super::step::{bindings, used_scalars};
use crate::lower::{Memory, Pipeline, ScalarId};

/// The graph struct.
pub fn graph_struct(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let input = pipeline.input;
    let vis = &input.vis;
    let name = &input.name;
    let graph = &names.graph;
    let params_ty = names.params_ty(quote!('a));
    let scalars = pipeline.scalars.len();
    let doc = format!(
        "Steps of [`{name}`] captured as graphs and instantiated: [`{graph}::launch`] replays \
         one. It borrows the step's params for its whole life; dropping it waits for the \
         launches in flight. Between launches, [`{graph}::window`] waits for them and hands \
         out the pinned buffers; scalar params the step reads have `set_<name>` setters (those \
         that update kernel nodes in place apply together at the next launch), and each \
         `swap(a, b)` a `swap_a_b`."
    );
    // The item spanned on the pipeline's name: where the compiler points when it talks of
    // the graph type (a bound a `write_<name>()` does not meet), not the whole macro.
    quote_spanned! {name.span()=>
        #[doc = #doc]
        // A pipeline only ever run eagerly never makes one (spanned on the user's name, the
        // item would be linted as theirs).
        #[allow(dead_code)]
        #vis struct #graph<'a> {
            pipeline: &'a mut #name,
            params: #params_ty,
            /// One per kind of step and arrangement of the swapped buffers.
            execs: ::std::vec::Vec<::core::option::Option<#rt::Captured>>,
            /// Per instantiation, per scalar param: whether a setter changed it since the
            /// instantiation's kernel nodes were last updated.
            stale: ::std::vec::Vec<[bool; #scalars]>,
            /// Per instantiation: its launches are known to pass their kernels' bounds with
            /// the current params (checked when it was built or swapped to), so a swap back to
            /// it checks nothing. A setter clears it for the other arrangements, a recapture
            /// for all.
            checked: ::std::vec::Vec<bool>,
            /// Bit `k` set: the buffers of the `k`-th `swap` are exchanged.
            swapped: usize,
            /// Whether it enqueued work (a replay, a host write, a clone's replays) that may
            /// use the params since a wait last saw all of it finish: its drop, a recapture
            /// and a setter's rebuild wait for the pipeline's streams only then (NVIDIA's
            /// jacobiCudaGraphs recaptures right after reading a replay's result, which
            /// waited). An instantiation launched through [`exec`](Self::exec) is waited for
            /// apart (`lent`).
            in_flight: ::core::sync::atomic::AtomicBool,
            /// Set when [`exec`](Self::exec) lent an instantiation, whose launches may be on
            /// any stream: the next wait that ends work's use of the params (or a launch of
            /// another instantiation) waits for the whole context. Shared with clones.
            lent: ::std::sync::Arc<::core::sync::atomic::AtomicBool>,
        }
    }
}

/// `launch`, `synchronize`, `window`, the accessors, the setters and the swaps.
pub fn graph_impl(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let graph = &names.graph;
    let window = &names.window;
    let params_ty = names.params_ty(quote!('a));
    let name = &pipeline.input.name;
    let name_str = pipeline.name.as_str();
    let scalars = pipeline.scalars.len();
    let sites = launch_sites(pipeline);
    let before_replay = super::control::before_replay(pipeline);
    let after_replay = super::control::after_replay(pipeline);
    let launches = pipeline.kinds.iter().enumerate().map(|(k, kind)| {
        let launch = format_ident!("launch{}", suffix(kind));
        let what = match kind.decl {
            Some(step) => format!("step `{}`", step.name),
            None => "the step".to_owned(),
        };
        let doc = format!(
            "Enqueues one replay of {what} on the pipeline's origin stream, after applying \
             the setters called since its last launch."
        );
        quote! {
            #[doc = #doc]
            pub fn #launch(&mut self) -> #rt::Result<()> {
                let index = (#k << #name::__SWAPS) | self.swapped;
                let ready = match self.execs.get(index) {
                    ::core::option::Option::Some(::core::option::Option::Some(captured)) => captured.ready(self.pipeline.__scratch_epoch),
                    _ => false,
                };
                if !ready {
                    // After a failed recapture: built from the current params now.
                    self.__ensure_captured()?;
                }
                // A launch of another instantiation than the one lent would not be ordered
                // after the lent one's launches.
                self.__settle_lent(true)?;
                self.__apply(index)?;
                let captured = self
                    .execs
                    .get(index)
                    .and_then(::core::option::Option::as_ref)
                    .ok_or_else(|| #rt::internal(#name_str, "a kind of step was not captured"))?;
                let current = match &self.pipeline.__last {
                    ::core::option::Option::Some(plan) => ::std::sync::Arc::ptr_eq(plan, &captured.plan),
                    ::core::option::Option::None => false,
                };
                if !current {
                    self.pipeline.__last = ::core::option::Option::Some(captured.plan.clone());
                }
                // The captured step begins by resetting the progress marks itself, and marks
                // with tag 0.
                self.pipeline.__progress.replayed();
                *self.in_flight.get_mut() = true;
                let __replay = || -> #rt::Result<()> {
                    #before_replay
                    captured.exec.launch(self.pipeline.__origin()?)
                };
                __replay().map_err(|e| #rt::replay_error(#name_str, e))?;
                #after_replay
                if let ::core::option::Option::Some(::core::option::Option::Some(captured)) = self.execs.get_mut(index) {
                    captured.launched();
                }
                ::core::result::Result::Ok(())
            }
        }
    });
    let setters =
        (0..pipeline.scalars.len()).map(|id| setter(pipeline, names, &sites, ScalarId(id)));
    let swaps = pipeline.swaps.iter().enumerate().map(|(k, (a, b))| {
        let (a, b) = (pipeline.buffers[a.0].ident, pipeline.buffers[b.0].ident);
        let swap = format_ident!("swap_{}_{}", a, b, span = a.span());
        let doc = format!(
            "Exchanges `{a}` and `{b}` for the following launches: the step then reads and \
             writes `{b}` where it declares `{a}`, and the other way round, as a ping-pong \
             solver swaps its grids. The first time each arrangement is needed, the step is \
             built for it (and kept); after that a swap costs a check of the kernels' bounds \
             in the new arrangement, which refuses it (changing nothing) where a bound breaks. \
             Both buffers stay borrowed by the graph, so neither is freed or aliased while a \
             launch may use it; [`params`](Self::params) shows the current arrangement."
        );
        let guarded = outdate_on_unwind(
            quote!(()),
            quote! {
                ::core::mem::swap(&mut self.params.#a, &mut self.params.#b);
                self.swapped ^= 1 << #k;
                if let ::core::result::Result::Err(e) = self.__arrange() {
                    ::core::mem::swap(&mut self.params.#a, &mut self.params.#b);
                    self.swapped ^= 1 << #k;
                    return ::core::result::Result::Err(e);
                }
                ::core::result::Result::Ok(())
            },
        );
        quote! {
            #[doc = #doc]
            pub fn #swap(&mut self) -> #rt::Result<()> {
                #guarded
            }
        }
    });
    let recapture = recapture_fns(pipeline, names);
    let host_writes = host_writes(pipeline);
    let apply = apply_fn(pipeline, names, &sites);
    let arrange = arrange_fn(pipeline, names, &sites);
    quote! {
        impl<'a> #graph<'a> {
            #(#launches)*

            /// Blocks until every launch so far has finished. A device `while` loop that
            /// stopped at its maximum iteration count in one of them is an
            /// `Error::IterationLimit` here.
            pub fn synchronize(&self) -> #rt::Result<()> {
                self.pipeline.__wait_origin()?;
                // Every launch and host write so far ended on the origin, and has finished.
                self.in_flight.store(false, ::core::sync::atomic::Ordering::Relaxed);
                self.__settle_lent(false)?;
                #rt::check_graph_loops(#name_str, self.execs.iter().flatten().map(|captured| &captured.exec))
            }

            /// Waits for every launch so far, then hands out the graph's pinned buffers (`&mut`
            /// for those declared `&mut`, to write the next replay's input; `&` for all, to
            /// read the last replay's output) until the window's own `launch` replays the step
            /// again. While the window lives nothing can launch the graph; its slices block
            /// launches and wait for device work on their own, so nothing can touch memory a
            /// replay may still use.
            pub fn window(&mut self) -> #rt::Result<#window<'_, 'a>> {
                self.synchronize()?;
                ::core::result::Result::Ok(#window { graph: self })
            }

            /// The params the graph was captured with (scalars as last set, swapped buffers as
            /// currently arranged). Its buffers may still be in use by launches in flight: read
            /// their contents after [`synchronize`](Self::synchronize) (or through a
            /// [`window`](Self::window)), or a copy enqueued on another stream may see them
            /// half written (the checked CPU backend reports it as a race).
            pub fn params(&self) -> &#params_ty {
                &self.params
            }

            /// The instantiated graph of the (first kind of) step in the current arrangement,
            /// with the in-place setters called since the last launch applied to it first (as
            /// a launch applies them: a fresh `clone_step`'s values too); `None` while it has
            /// to be built again (after a failed recapture, until the next launch), or when
            /// the setters could not be applied (the next launch or
            /// [`apply_updates`](Self::apply_updates) returns why). Its launches may go to any
            /// stream: once it is lent, the graph's next
            /// wait, recapture, host write or launch waits for the whole context first, so
            /// they stay ordered after them. The other way round is the caller's to order, as
            /// for any launch on a stream of its own: a launch on another stream is not ordered
            /// after this graph's launches and host writes (`write_<name>()`) enqueued before
            /// it: call [`synchronize`](Self::synchronize) first, or it reads its inputs, and
            /// writes its outputs, while they still run. Its launches are not steps of the
            /// pipeline: they leave the step counter (what `if step % k == r` tests) where
            /// [`launch`](Self::launch) left it, so each of them tests the value of the last
            /// `launch`. Dropping the graph waits for its lent launches too, with a
            /// synchronize of the whole context, which CUDA refuses while a stream captures:
            /// a graph dropped then, with lent launches possibly still running, aborts the
            /// process (its borrows would end under them), so synchronize first.
            pub fn exec(&mut self) -> ::core::option::Option<&#rt::GraphExec> {
                // Its launch would otherwise run the values from before the setters.
                self.__apply(self.swapped).ok()?;
                self.lent.store(true, ::core::sync::atomic::Ordering::Relaxed);
                self.execs
                    .get(self.swapped)
                    .and_then(::core::option::Option::as_ref)
                    .filter(|captured| captured.ready(self.pipeline.__scratch_epoch))
                    .map(|captured| &captured.exec)
            }

            /// The number of nodes in the graph of the (first kind of) step in the current
            /// arrangement.
            pub fn node_count(&self) -> #rt::Result<usize> {
                match self.execs.get(self.swapped).and_then(::core::option::Option::as_ref) {
                    ::core::option::Option::Some(captured) => captured.graph.node_count(),
                    ::core::option::Option::None => ::core::result::Result::Ok(0),
                }
            }

            /// The number of edges in the graph of the (first kind of) step in the current
            /// arrangement (see `GRAPH_EDGES` on the pipeline, where the shape is fixed).
            pub fn edge_count(&self) -> #rt::Result<usize> {
                match self.execs.get(self.swapped).and_then(::core::option::Option::as_ref) {
                    ::core::option::Option::Some(captured) => captured.graph.edge_count(),
                    ::core::option::Option::None => ::core::result::Result::Ok(0),
                }
            }

            /// Applies the in-place setters called since the last launch to every kind of
            /// step in the current arrangement (each `launch` does this for its own): each
            /// kernel node that reads a changed scalar is updated once, in one batch (see
            /// `GraphExec::kernel_updates`). The setters checked the kernels' bounds already;
            /// an error names the pipeline and leaves what failed pending.
            pub fn apply_updates(&mut self) -> #rt::Result<()> {
                for kind in 0..#name::__KINDS {
                    self.__apply((kind << #name::__SWAPS) | self.swapped)?;
                }
                ::core::result::Result::Ok(())
            }

            #recapture

            #host_writes

            #(#swaps)*

            #(#setters)*

            #apply

            #arrange

            /// Builds every kind of step in the current arrangement that has no launchable
            /// instantiation: an outdated one is updated from the new build in place where the
            /// driver allows it, instantiated anew otherwise.
            fn __ensure_captured(&mut self) -> #rt::Result<()> {
                for kind in 0..#name::__KINDS {
                    let index = (kind << #name::__SWAPS) | self.swapped;
                    let ready = match self.execs.get(index) {
                        ::core::option::Option::Some(::core::option::Option::Some(captured)) => captured.ready(self.pipeline.__scratch_epoch),
                        ::core::option::Option::Some(::core::option::Option::None) => false,
                        ::core::option::Option::None => true,
                    };
                    if !ready {
                        let built = self.pipeline.__build(kind, &mut self.params)?;
                        let _outcome = #rt::commit(&mut self.execs[index], built)?;
                        // Built with every current value, its bounds checked by the build.
                        self.stale[index] = [false; #scalars];
                        self.checked[index] = true;
                    }
                }
                ::core::result::Result::Ok(())
            }

            /// The result of a change run by `outdate_on_unwind`: after a panic, every
            /// instantiation outdated, then the panic resumed.
            fn __outdated_on_unwind<R>(&mut self, run: ::std::thread::Result<R>) -> R {
                match run {
                    ::core::result::Result::Ok(done) => done,
                    ::core::result::Result::Err(panic) => {
                        self.__outdate_all();
                        ::std::panic::resume_unwind(panic)
                    }
                }
            }

            /// Marks every instantiation outdated: none is launched before it is updated from
            /// a build of the current params.
            fn __outdate_all(&mut self) {
                for captured in self.execs.iter_mut().flatten() {
                    captured.outdated = true;
                }
                self.checked.fill(false);
            }

            /// Builds every kind of step in the current arrangement again and puts each build
            /// in place of its instantiation (a whole update where the driver allows it, a new
            /// instantiation otherwise); the other arrangements' instantiations are outdated
            /// (updated from a new build when swapped to). When a kind cannot be built, changes
            /// no instantiation; when putting a build in place fails, outdates them all.
            fn __rebuild(&mut self) -> #rt::Result<#rt::Recaptured> {
                let mut fresh = ::std::vec::Vec::with_capacity(#name::__KINDS);
                for kind in 0..#name::__KINDS {
                    fresh.push(self.pipeline.__build(kind, &mut self.params)?);
                }
                let arrangements = (1usize << #name::__SWAPS) - 1;
                for (index, slot) in self.execs.iter_mut().enumerate() {
                    if index & arrangements != self.swapped {
                        if let ::core::option::Option::Some(captured) = slot {
                            captured.outdated = true;
                        }
                        self.checked[index] = false;
                    }
                }
                let mut outcome = #rt::Recaptured::Updated;
                for (kind, built) in fresh.into_iter().enumerate() {
                    let index = (kind << #name::__SWAPS) | self.swapped;
                    match #rt::commit(&mut self.execs[index], built) {
                        ::core::result::Result::Ok(done) => outcome = outcome.and(done),
                        ::core::result::Result::Err(e) => {
                            self.__outdate_all();
                            return ::core::result::Result::Err(e);
                        }
                    }
                    self.stale[index] = [false; #scalars];
                    self.checked[index] = true;
                }
                ::core::result::Result::Ok(outcome)
            }

            /// A setter's rebuild: after the launches in flight, `__rebuild`.
            fn __recapture(&mut self) -> #rt::Result<()> {
                self.__wait_launches()?;
                self.__settle_lent(true)?;
                self.__rebuild().map(|_| ())
            }

            /// Waits for the pipeline's streams when work this graph enqueued may still run
            /// (nothing to wait for right after a `synchronize` or a window).
            fn __wait_launches(&mut self) -> #rt::Result<()> {
                if *self.in_flight.get_mut() {
                    self.pipeline.__wait()?;
                    *self.in_flight.get_mut() = false;
                }
                ::core::result::Result::Ok(())
            }

            /// After [`exec`](Self::exec) lent an instantiation: waits for the context, where
            /// its launches went. `clear` from `&mut self`, where no lent reference is left
            /// (a new one sets the flag again); only once every wait succeeded: a wait that
            /// failed (a capture on another stream refuses a context synchronize) may have
            /// left a lent launch running, so the next call waits again.
            fn __settle_lent(&self, clear: bool) -> #rt::Result<()> {
                use ::core::sync::atomic::Ordering;
                if self.lent.load(Ordering::Relaxed) {
                    // Every device's: a lent instantiation of a step over several devices
                    // runs on each of them, wherever it was launched.
                    self.pipeline.__ctx.synchronize().map_err(|e| #rt::step_error(#name_str, e))?;
                    for __lane in self.pipeline.__lanes.iter().flatten() {
                        __lane.context().synchronize().map_err(|e| #rt::step_error(#name_str, e))?;
                    }
                    if clear {
                        self.lent.store(false, Ordering::Relaxed);
                    }
                }
                ::core::result::Result::Ok(())
            }
        }
    }
}

/// `__apply(index)`: the in-place setters' changes, applied to instantiation `index` (which
/// must be the current arrangement's) in one batch that touches each stale kernel node once.
/// The walk over the plan numbers the top-level launches as the graph's kernel nodes are.
fn apply_fn(pipeline: &Pipeline<'_>, names: &Names, sites: &[LaunchSite<'_>]) -> TokenStream {
    let rt = rt();
    let name = &pipeline.input.name;
    let name_str = pipeline.name.as_str();
    let scalars = pipeline.scalars.len();
    let scratch_fields = names.scratch_fields(pipeline);
    let bind = bindings(pipeline, names, &quote!(__p), &used_scalars(pipeline, true));
    let arms = pipeline.stages.iter().enumerate().filter_map(|(t, stage)| {
        let stage_sites: Vec<&LaunchSite<'_>> =
            sites.iter().filter(|site| site.stage.0 == t).collect();
        if stage_sites.is_empty() {
            return None;
        }
        let slots = ref_slots(stage);
        let updates = stage_sites.iter().map(|site| {
            if site.scalars.is_empty() {
                return quote!(__node += 1;);
            }
            let apart = super::launch::apart_lets(
                pipeline,
                &super::launch::launch_uses(site.args, &slots[site.statement]),
            );
            let (config, args) = launch_parts(
                pipeline,
                site.source,
                site.kernel,
                site.args,
                Retype::Cast,
                &slots[site.statement],
                false,
            );
            let kernel = format_ident!(
                "{}",
                super::names::kernel_field_name(site.kernel, site.device)
            );
            let stale = site.scalars.iter().map(|id| id.0);
            // The setters checked these arguments against the kernel's bounds when each value
            // was set (and a swap, the swapped arrangement's; outdated instantiations are not
            // updated), so the batch does not check them again per node. A token stream cannot carry a `// SAFETY:` comment; the
            // user's `unsafe kernels` spans the block, as for the kernel's declaration.
            let unsafe_token = pipeline.modules[pipeline.kernels[site.kernel.0].module.0]
                .decl
                .unsafe_token;
            quote! {
                if #(__stale[#stale])||* {
                    #apart
                    let __kernel_node = __nodes
                        .get(__node)
                        .ok_or_else(|| #rt::internal(#name_str, "a launch has no kernel node"))?;
                    // Evaluated outside the block: the user's expressions get no `unsafe`.
                    let (__config, __args) = (#config, #args);
                    #[allow(clippy::undocumented_unsafe_blocks)]
                    let __set = #unsafe_token {
                        __updates.set_unchecked(__kernel_node, &__kernels.#kernel, __config, __args)
                    };
                    __set.map_err(|e| #rt::step_error(#name_str, e))?;
                }
                __node += 1;
            }
        });
        let header = stage_header(pipeline, stage);
        Some(quote!(#t => { #header #(#updates)* }))
    });
    quote! {
        #[allow(unused_variables, unused_braces, clippy::all)]
        fn __apply(&mut self, __index: usize) -> #rt::Result<()> {
            let Self { pipeline, params: __p, execs: __execs, stale: __all_stale, .. } = self;
            let ::core::option::Option::Some(__stale) = __all_stale.get_mut(__index) else {
                return ::core::result::Result::Ok(());
            };
            if !__stale.contains(&true) {
                return ::core::result::Result::Ok(());
            }
            // An outdated instantiation (its params replaced by a recapture that failed), or
            // one built with other scratch buffers than the pipeline's (a clone resized them),
            // is built again, with every current value, before it is next launched: its nodes
            // are not updated from params no setter checked, nor pointed at buffers its other
            // nodes do not use.
            let __epoch = pipeline.__scratch_epoch;
            let ::core::option::Option::Some(__captured) = __execs
                .get_mut(__index)
                .and_then(::core::option::Option::as_mut)
                .filter(|captured| captured.ready(__epoch))
            else {
                return ::core::result::Result::Ok(());
            };
            {
                let __stale: &[bool; #scalars] = __stale;
                let #name { __kernels, #(#scratch_fields,)* .. } = &mut **pipeline;
                #bind
                let #rt::Captured { exec: __exec, nodes: __nodes, plan: __plan, .. } = __captured;
                let mut __updates = __exec.kernel_updates().map_err(|e| #rt::step_error(#name_str, e))?;
                let mut __node = 0usize;
                for __planned in &__plan.closed.stages {
                    let __instance = __plan
                        .instances
                        .get(__planned.stage.0)
                        .ok_or_else(|| #rt::internal(#name_str, "a planned stage is not described"))?;
                    let __refs: &[#rt::Ref] = &__instance.refs;
                    match __instance.template {
                        #(#arms)*
                        _ => {}
                    }
                }
            }
            *__stale = [false; #scalars];
            ::core::result::Result::Ok(())
        }
    }
}

/// `__arrange`: after a swap, makes the current arrangement ready to launch: built where it is
/// not yet (the build checks the bounds), and otherwise every bounded launch of every kind
/// checked against the swapped buffers, unless that arrangement passed the same check with
/// the same params already (`checked`: a ping-pong solver checks each arrangement once).
fn arrange_fn(pipeline: &Pipeline<'_>, names: &Names, sites: &[LaunchSite<'_>]) -> TokenStream {
    let rt = rt();
    let name = &pipeline.input.name;
    let scratch_fields = names.scratch_fields(pipeline);
    let bounded = bounds::bounded_sites(pipeline, sites);
    if pipeline.swaps.is_empty() {
        return TokenStream::new();
    }
    let bind = bindings(pipeline, names, &quote!(__p), &used_scalars(pipeline, true));
    let checks = bounds::check_walk(
        pipeline,
        &bounded,
        &quote!(__plan),
        &quote!(&__plan.closed),
        &quote!(return ::core::result::Result::Err(__refusal);),
        Keep::No,
    );
    let body_checks = bounds::body_check_walk(
        pipeline,
        &quote!(__plan),
        &quote!(&__plan.closed),
        &quote!(return ::core::result::Result::Err(__refusal);),
    );
    quote! {
        #[allow(unused_variables, unused_braces, clippy::all)]
        fn __arrange(&mut self) -> #rt::Result<()> {
            self.__ensure_captured()?;
            let Self { pipeline, params: __p, execs: __execs, swapped: __swapped, checked: __checked, .. } = self;
            let __arrangement = *__swapped;
            let __known = |__kind: usize| {
                __checked.get((__kind << #name::__SWAPS) | __arrangement) == ::core::option::Option::Some(&true)
            };
            if (0..#name::__KINDS).all(__known) {
                return ::core::result::Result::Ok(());
            }
            let #name { __kernels, __scratch_epoch, #(#scratch_fields,)* .. } = &mut **pipeline;
            #bind
            for __kind in 0..#name::__KINDS {
                let __index = (__kind << #name::__SWAPS) | __arrangement;
                if __checked.get(__index) == ::core::option::Option::Some(&true) {
                    continue;
                }
                let ::core::option::Option::Some(__captured) = __execs
                    .get(__index)
                    .and_then(::core::option::Option::as_ref)
                    .filter(|captured| captured.ready(*__scratch_epoch))
                else {
                    continue;
                };
                let __plan: &#rt::StepPlan = &__captured.plan;
                #checks
                #body_checks
                if let ::core::option::Option::Some(__known) = __checked.get_mut(__index) {
                    *__known = true;
                }
            }
            ::core::result::Result::Ok(())
        }
    }
}

/// Dropping the graph waits for the replays in flight, which use the borrowed params.
pub fn graph_drop(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let graph = &names.graph;
    let name_str = pipeline.name.as_str();
    quote! {
        impl ::core::ops::Drop for #graph<'_> {
            fn drop(&mut self) {
                // The params' borrow ends here: no replay may still be using them. A graph
                // that enqueued nothing since a wait saw its work finish (built, say, and
                // dropped, or synchronized) has nothing to wait for.
                if let ::core::result::Result::Err(e) = self.__settle_lent(true) {
                    #rt::settle_failed_wait(#name_str, &e);
                }
                if let ::core::result::Result::Err(e) = self.__wait_launches() {
                    self.pipeline.__settle_failed_wait(&e);
                }
                // What the builds made for themselves is freed after one wait for the
                // context, not one each.
                #rt::drop_captured(::core::mem::take(&mut self.execs));
            }
        }
    }
}

/// `Debug` for the graph.
pub fn graph_debug(names: &Names) -> TokenStream {
    let graph = &names.graph;
    quote! {
        impl ::core::fmt::Debug for #graph<'_> {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                let captured = self.execs.iter().flatten().count();
                f.debug_struct(::core::stringify!(#graph))
                    .field("captured", &captured)
                    .field("swapped", &self.swapped)
                    .finish_non_exhaustive()
            }
        }
    }
}

/// `PWindow<'g, 'a>`: the pinned buffers between replays.
pub fn window_items(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let input = pipeline.input;
    let vis = &input.vis;
    let graph = &names.graph;
    let window = &names.window;
    let params_ty = names.params_ty(quote!('a));
    let doc = format!(
        "The time between two replays of a [`{graph}`], from [`{graph}::window`]: the replays \
         so far are complete, and the graph's pinned buffers are the host's until the \
         window's `launch` replays the step again. Each pinned param `x` has `x()` (its \
         elements, to read) and, when declared `&mut`, `x_mut()` (to write the next replay's \
         input)."
    );
    let accessors = pipeline
        .buffers
        .iter()
        .filter(|b| !b.scratch && !b.array && b.memory == Memory::Pinned)
        .map(|b| {
            let name = b.ident;
            let elem = b.elem.map_or_else(|| quote!(_), |elem| quote!(#elem));
            let read_doc = format!("The elements of `{name}`, as the last replay left them.");
            let read = quote! {
                #[doc = #read_doc]
                pub fn #name(&self) -> #rt::Result<#rt::HostView<'_, #elem>> {
                    self.graph.params.#name.as_slice()
                }
            };
            if !b.mutable {
                return read;
            }
            let write = format_ident!("{}_mut", name, span = name.span());
            let write_doc = format!(
                "The elements of `{name}`, to change before the next replay (which reads what \
                 they hold when it is launched)."
            );
            quote! {
                #read
                #[doc = #write_doc]
                pub fn #write(&mut self) -> #rt::Result<#rt::HostViewMut<'_, #elem>> {
                    self.graph.params.#name.as_mut_slice()
                }
            }
        });
    let launches = pipeline.kinds.iter().map(|kind| {
        let launch = format_ident!("launch{}", suffix(kind));
        let doc = "Ends the window and enqueues one replay (see the graph's method of the same \
                   name).";
        quote! {
            #[doc = #doc]
            pub fn #launch(self) -> #rt::Result<()> {
                self.graph.#launch()
            }
        }
    });
    quote! {
        #[doc = #doc]
        #vis struct #window<'g, 'a> {
            graph: &'g mut #graph<'a>,
        }

        impl<'g, 'a> #window<'g, 'a> {
            #(#accessors)*

            /// The graph's params.
            pub fn params(&self) -> &#params_ty {
                &self.graph.params
            }

            #(#launches)*
        }

        impl ::core::fmt::Debug for #window<'_, '_> {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(::core::stringify!(#window)).finish_non_exhaustive()
            }
        }
    }
}

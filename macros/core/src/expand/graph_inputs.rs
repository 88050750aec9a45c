//! What a captured step's graph offers for new inputs between replays, beside its setters:
//! `recapture` (the step recorded again with new params, the instantiations updated in place
//! where the driver allows) and the typed host writes into the buffers the graph holds.

use super::names::{Names, rt, rt_fn};
use crate::lower::{Memory, Mode, Pipeline};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};

/// `recapture`, `recapture_with` and `clone_step`.
///
/// Soundness: `recapture` drops the old params without waiting (their borrows last as long as
/// the graph's, so nothing else reaches those buffers until the graph is dropped, which waits),
/// and the driver's update leaves launches in flight as they were. `recapture_with` hands out
/// the params themselves, so a reference may leave through the closure: it waits for the
/// launches in flight and outdates every instantiation before the closure runs, so none
/// built from the old params is launched again. A clone reborrows the graph's params and
/// pipeline, so the two are never used at once, and replays on the same origin stream.
pub(super) fn recapture_fns(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let graph = &names.graph;
    let name = &pipeline.input.name;
    let params_ty = names.params_ty(quote!('a));
    let scalars = pipeline.scalars.len();
    let recapture_doc = "Builds the step again from new params (each kind of step, in the current arrangement \
         of swapped buffers) and puts the build in place of the executable graph: updated in \
         place (`cuGraphExecUpdate`) when the topology is unchanged, instantiated anew when it \
         is not, and the returned `gpu_pipeline::Recaptured` says which happened. \
         What a solver that re-captures every iteration calls, as NVIDIA's jacobiCudaGraphs \
         does; an update does not wait for the launches in flight, which keep the parameters \
         they were launched with (a new instantiation waits for them before it drops the old \
         one).\n\n\
         The new params are borrowed as `capture` borrows them, for the graph's whole life; \
         the old ones are dropped here, and what they borrowed stays borrowed until the graph \
         is dropped (which waits for the launches). To change some params and keep the rest \
         (or swap two buffers), use [`recapture_with`](Self::recapture_with). On an error \
         (a kernel's bound refuses the new params, say), or a panic of the step's own \
         expressions while it is built, the graph keeps the new params and no launchable \
         instantiation: the next launch builds the step from them again.";
    let recapture_with_doc = "Waits for the launches in flight, lets `edit` change the params \
         in place (a scalar, a buffer replaced by another borrowed for as long, two buffers \
         swapped), then builds the step again as [`recapture`](Self::recapture) does and says \
         whether the executable graph was updated in place or instantiated anew. A reference \
         `edit` takes out of the params may be used once it returns: no instantiation built \
         from the old params is launched again (on an error, or if `edit` panics, the next \
         launch builds the step from the params as `edit` left them).";
    let clone_doc = format!(
        "A second, independent executable graph of the captured step: each kind of step in \
         the current arrangement cloned (`cuGraphClone`) and instantiated (built again where \
         the graph has device `while`/`if` nodes, which CUDA cannot clone), with the current \
         scalar values. The clone is a [`{graph}`] of its own (its own setters, swaps, window \
         and recaptures, which leave this graph as it is) that borrows this graph, and with it \
         the params and the pipeline, for its life: the two are never used at once, and the \
         clone's replays run on the same origin stream, after this graph's. Dropping the clone \
         waits for its launches, and so does dropping this graph (a clone forgotten with \
         `mem::forget` included)."
    );
    let recapture_body = super::setters::outdate_on_unwind(
        quote!(#rt::Recaptured),
        quote! {
            self.params = params;
            let outcome = self.__rebuild();
            if outcome.is_err() {
                self.__outdate_all();
            }
            outcome
        },
    );
    quote! {
        #[doc = #recapture_doc]
        pub fn recapture(&mut self, params: #params_ty) -> #rt::Result<#rt::Recaptured> {
            #recapture_body
        }

        #[doc = #recapture_with_doc]
        pub fn recapture_with<F>(&mut self, edit: F) -> #rt::Result<#rt::Recaptured>
        where
            F: ::core::ops::FnOnce(&mut #params_ty),
        {
            self.__wait_launches()?;
            self.__settle_lent(true)?;
            self.__outdate_all();
            edit(&mut self.params);
            self.__rebuild()
        }

        #[doc = #clone_doc]
        pub fn clone_step(&mut self) -> #rt::Result<#graph<'_>> {
            self.__ensure_captured()?;
            // The clone's replays use these params too, and a clone may be forgotten: the
            // original's drop, where the params' borrow ends, then waits for them. The other
            // way round, this graph's launches in flight use the params the clone's
            // `recapture_with` hands out: the clone starts with them in flight.
            let in_flight = ::core::mem::replace(self.in_flight.get_mut(), true);
            // The clone's replays are not ordered after a lent instantiation's launches.
            self.__settle_lent(true)?;
            let Self { pipeline, params, execs, swapped, lent, .. } = self;
            let mut clone = #graph {
                pipeline: &mut **pipeline,
                params: params.__reborrow(),
                execs: ::std::vec::Vec::new(),
                // Clones have their build's parameters: the setters called since are applied
                // at their first launch.
                stale: ::std::vec![[true; #scalars]; execs.len()],
                // Checked again at the clone's first swaps (its builds checked these bounds,
                // but with the params as they were then).
                checked: ::std::vec![false; execs.len()],
                swapped: *swapped,
                in_flight: ::core::sync::atomic::AtomicBool::new(in_flight),
                lent: ::std::sync::Arc::clone(lent),
            };
            clone.execs.resize_with(execs.len(), || ::core::option::Option::None);
            for kind in 0..#name::__KINDS {
                let index = (kind << #name::__SWAPS) | *swapped;
                if let ::core::option::Option::Some(captured) =
                    execs.get(index).and_then(::core::option::Option::as_ref)
                {
                    clone.execs[index] = #rt::clone_captured(captured)?;
                }
            }
            // What could not be cloned is built.
            clone.__ensure_captured()?;
            ::core::result::Result::Ok(clone)
        }
    }
}

/// Whether the step touches one buffer, and how it writes it: whole (in some statement), or
/// only ranges of it.
fn writes_of(pipeline: &Pipeline<'_>, buffer: usize) -> (bool, bool, bool) {
    let (mut touched, mut whole, mut ranges) = (false, false, false);
    let touches = pipeline
        .stages
        .iter()
        .flat_map(|stage| &stage.statements)
        .flat_map(|statement| &statement.accesses)
        .filter(|touch| touch.buffer.0 == buffer);
    for touch in touches {
        touched = true;
        if touch.mode != Mode::Write {
            continue;
        }
        match touch.subscript.and_then(|reference| reference.range) {
            Some(_) => ranges = true,
            None => whole = true,
        }
    }
    (touched, whole, ranges)
}

/// `write_<name>()` for each device buffer param (not an array) the step uses: a `HostWrite`
/// handle in the origin stream's order. A param declared `&`, or one a statement writes whole, gets one whose bound
/// no type meets, so calling it is a compile error that says why; where the step writes
/// ranges of the buffer, the handle refuses host writes into them at run time.
pub(super) fn host_writes(pipeline: &Pipeline<'_>) -> TokenStream {
    let rt = rt();
    let name = &pipeline.input.name;
    let name_str = pipeline.name.as_str();
    let methods = pipeline.buffers.iter().enumerate().filter_map(|(index, buffer)| {
        if buffer.scratch || buffer.array || buffer.memory != Memory::Device {
            return None;
        }
        let referent = buffer.referent;
        let field = buffer.ident;
        let label = buffer.name.as_str();
        let method = format_ident!("write_{}", field, span = field.span());
        let (touched, whole, ranges) = writes_of(pipeline, index);
        if !touched {
            // Nothing of the step uses it: nothing to write for.
            return None;
        }
        let refusal = if !buffer.mutable {
            Some(rt_fn(field.span(), "DeclaredMut"))
        } else if whole {
            Some(rt_fn(field.span(), "NotWrittenByTheStep"))
        } else {
            None
        };
        if let Some(trait_path) = refusal {
            // The bound is spanned on the param, so the compiler's notes point at it.
            let bound = quote_spanned!(field.span()=> Self: #trait_path);
            return Some(quote! {
                #[doc(hidden)]
                pub fn #method(&mut self) -> #rt::Result<#rt::HostWrite<'_, #referent>>
                where
                    #bound,
                {
                    ::core::result::Result::Err(#rt::internal(#name_str, "a refused host write"))
                }
            });
        }
        let doc = format!(
            "A `gpu_pipeline::HostWrite` handle that writes `{label}` between replays (`upload`, \
             `fill`), enqueued in the origin stream's order with the launches (on a stream of \
             its own device joined with it, for a buffer of another device), without \
             waiting for them (unless `exec` lent an instantiation since: then it waits for \
             the context first).{ranges_doc}",
            ranges_doc = if ranges {
                " The step writes ranges of it: a host write into one of them is refused."
            } else {
                ""
            }
        );
        let plans = if ranges {
            quote! {
                (0..#name::__KINDS)
                    .filter_map(|kind| execs.get((kind << #name::__SWAPS) | *swapped))
                    .flatten()
                    .map(|captured| &*captured.plan)
            }
        } else {
            quote!(::core::iter::empty())
        };
        Some(quote! {
            #[doc = #doc]
            pub fn #method(&mut self) -> #rt::Result<#rt::HostWrite<'_, #referent>>
            {
                // What the replays write is the current params' plans'.
                self.__ensure_captured()?;
                // Enqueued on the origin, which a lent instantiation's launches may not be.
                self.__settle_lent(true)?;
                // The handle's writes are enqueued on the origin, into the params.
                *self.in_flight.get_mut() = true;
                let Self { pipeline, params, execs, swapped, .. } = self;
                let stream = pipeline.__origin()?;
                let streams = (stream, &pipeline.__lanes[..]);
                ::core::result::Result::Ok(#rt::host_write(#name_str, #label, #index, #plans, streams, &mut *params.#field))
            }
        })
    });
    quote!(#(#methods)*)
}

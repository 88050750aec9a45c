//! `PRun<'a>`: the guard of eager steps, and the wait it and the graph share.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::names::suffix;
use super::names::{Names, rt};
use crate::lower::Pipeline;

/// The guard struct.
pub fn run_struct(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let input = pipeline.input;
    let vis = &input.vis;
    let name = &input.name;
    let run = &names.run;
    let params_ty = names.params_ty(quote!('a));
    let doc = format!(
        "Steps of [`{name}`] enqueued and not yet waited for. Wait on them with \
         [`{run}::wait`]; dropping the guard waits too (and logs an error it cannot return). \
         The steps' buffers stay borrowed until then. More steps, of any kind, can be \
         enqueued with the same params (`then`, `then_<step>`): they are ordered after the \
         ones before on the GPU, with no host wait in between."
    );
    quote! {
        #[doc = #doc]
        #[must_use = "a step runs asynchronously: wait on it to see its errors"]
        #vis struct #run<'a> {
            pipeline: &'a mut #name,
            params: #params_ty,
            waited: bool,
        }
    }
}

/// `wait`, `is_complete`, `params` and the `then` of each kind of step.
pub fn run_impl(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let run = &names.run;
    let params_ty = names.params_ty(quote!('a));
    let thens = pipeline.kinds.iter().enumerate().map(|(k, kind)| {
        let then = format_ident!("then{}", suffix(kind));
        let what = match kind.decl {
            Some(step) => format!("step `{}`", step.name),
            None => "step".to_owned(),
        };
        let doc = format!(
            "Enqueues one more {what} with the same params, after everything enqueued before \
             (a closed step: it forks from and joins the origin stream)."
        );
        quote! {
            #[doc = #doc]
            pub fn #then(&mut self) -> #rt::Result<&mut Self> {
                self.pipeline.__steps(#k, &mut self.params, 1, false)?;
                ::core::result::Result::Ok(self)
            }
        }
    });
    quote! {
        impl<'a> #run<'a> {
            /// Blocks until the steps have finished. An asynchronous fault names the pipeline
            /// and the first stage that did not complete.
            pub fn wait(mut self) -> #rt::Result<()> {
                self.waited = true;
                self.pipeline.__wait()
            }

            /// Whether the steps have finished, without blocking.
            pub fn is_complete(&self) -> #rt::Result<bool> {
                self.pipeline.__origin()?.is_complete()
            }

            /// The steps' params. Its buffers are in use until the steps finish: read their
            /// contents after [`wait`](Self::wait) returns (the params are the caller's again
            /// then), or a copy enqueued on another stream may see them half written.
            pub fn params(&self) -> &#params_ty {
                &self.params
            }

            #(#thens)*
        }
    }
}

/// Dropping the guard waits, and settles the error it cannot return (`__settle_failed_wait`).
pub fn run_drop(names: &Names) -> TokenStream {
    let run = &names.run;
    quote! {
        impl ::core::ops::Drop for #run<'_> {
            fn drop(&mut self) {
                if !self.waited {
                    if let ::core::result::Result::Err(e) = self.pipeline.__wait() {
                        self.pipeline.__settle_failed_wait(&e);
                    }
                }
            }
        }
    }
}

/// `Debug` for the guard.
pub fn run_debug(names: &Names) -> TokenStream {
    let run = &names.run;
    quote! {
        impl ::core::fmt::Debug for #run<'_> {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(::core::stringify!(#run)).field("waited", &self.waited).finish_non_exhaustive()
            }
        }
    }
}

/// `P::__wait`: waits for every stream, and names the first stage that did not complete when
/// a fault surfaces.
pub fn wait_fn(pipeline: &Pipeline<'_>) -> TokenStream {
    let rt = rt();
    let name = &pipeline.input.name;
    let name_str = pipeline.name.as_str();
    quote! {
        impl #name {
            /// Waits for every stream, origin first (it joins the others at the end of a step).
            fn __wait(&self) -> #rt::Result<()> {
                let sites: &[#rt::StageSite] = match &self.__last {
                    ::core::option::Option::Some(plan) => &plan.sites,
                    ::core::option::Option::None => &[],
                };
                for stream in self.__lanes.iter().flatten() {
                    #rt::Stream::synchronize(stream)
                        .map_err(|e| #rt::step_error_at(#name_str, &self.__progress, sites, e))?;
                }
                ::core::result::Result::Ok(())
            }

            /// After a step failed part-way: waits for every stream, whatever each wait
            /// reports (logged), since work of the step, and of the steps run ahead before it,
            /// may already run on them; so the params' borrows end with the error only once
            /// nothing the failed step enqueued can still touch them.
            fn __settle(&self) {
                for stream in self.__lanes.iter().flatten() {
                    if let ::core::result::Result::Err(e) = #rt::Stream::synchronize(stream) {
                        #rt::settle_failed_wait(#name_str, &e);
                    }
                }
            }

            /// A wait for every stream (`__wait`) failed with `error`, which stops at the
            /// first stream that fails: `error` is settled (an abort where the wait was
            /// refused), then the rest are waited for one by one before the borrows end.
            fn __settle_failed_wait(&self, error: &#rt::Error) {
                #rt::settle_failed_wait(#name_str, error);
                self.__settle();
            }

            /// After graph launches: on CUDA the origin stream only, since each launch is a
            /// closed fork–join region that ends on the origin and a fault anywhere surfaces
            /// there too (the context's errors are sticky, and the host nodes' panics are
            /// reported on the launching stream); on the CPU backend, whose streams report
            /// their own failures, every stream.
            fn __wait_origin(&self) -> #rt::Result<()> {
                if self.__ctx.backend() != #rt::Backend::Cuda {
                    return self.__wait();
                }
                let sites: &[#rt::StageSite] = match &self.__last {
                    ::core::option::Option::Some(plan) => &plan.sites,
                    ::core::option::Option::None => &[],
                };
                let origin = self.__origin()?;
                #rt::Stream::synchronize(origin)
                    .map_err(|e| #rt::step_error_at(#name_str, &self.__progress, sites, e))
            }
        }
    }
}

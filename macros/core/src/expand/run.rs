//! `PRun<'a>`: the guard of an eager step, and the wait it and the graph share.

use proc_macro2::TokenStream;
use quote::quote;
use syn::Ident;

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
        "One enqueued step of [`{name}`]. Wait on it with [`{run}::wait`]; dropping it waits too \
         (and logs an error it cannot return). The step's buffers stay borrowed until then."
    );
    quote! {
        #[doc = #doc]
        #[must_use = "a step runs asynchronously: wait on it to see its errors"]
        #vis struct #run<'a> {
            pipeline: &'a #name,
            params: #params_ty,
            waited: bool,
        }
    }
}

/// `wait`, `is_complete` and `params` of the guard.
pub fn run_impl(names: &Names) -> TokenStream {
    let rt = rt();
    let run = &names.run;
    let params_ty = names.params_ty(quote!('a));
    quote! {
        impl<'a> #run<'a> {
            /// Blocks until the step has finished. An asynchronous fault names the pipeline.
            pub fn wait(mut self) -> #rt::Result<()> {
                self.waited = true;
                self.pipeline.__wait()
            }

            /// Whether the step has finished, without blocking.
            pub fn is_complete(&self) -> #rt::Result<bool> {
                self.pipeline.__origin().is_complete()
            }

            /// The step's params.
            pub fn params(&self) -> &#params_ty {
                &self.params
            }
        }
    }
}

/// Dropping the guard waits, and logs the error it cannot return.
pub fn run_drop(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let run = &names.run;
    let name_str = pipeline.name.as_str();
    quote! {
        impl ::core::ops::Drop for #run<'_> {
            fn drop(&mut self) {
                if !self.waited {
                    if let ::core::result::Result::Err(e) = self.pipeline.__wait() {
                        #rt::log_unobserved_error(#name_str, &e);
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
pub fn wait_fn(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let rt = rt();
    let name = &pipeline.input.name;
    let name_str = pipeline.name.as_str();
    let stream_fields: Vec<Ident> = (0..pipeline.streams.len())
        .map(|i| names.stream_field(i))
        .collect();
    quote! {
        impl #name {
            /// Waits for every stream, origin first (it joins the others at the end of a step).
            fn __wait(&self) -> #rt::Result<()> {
                #( #rt::Stream::synchronize(&self.#stream_fields)
                    .map_err(|e| #rt::step_error_at(#name_str, &self.__progress, Self::__STAGE_SITES, e))?; )*
                ::core::result::Result::Ok(())
            }
        }
    }
}

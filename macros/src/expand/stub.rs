//! What a pipeline with errors expands to: the `compile_error!`s plus items with the same
//! public names, so code that uses the pipeline reports nothing more (one mistake, one error).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::names::with_lifetime;
use super::rt;
use crate::ast;

/// The errors and the stub items.
pub fn stub(input: &ast::Pipeline, errors: syn::Error) -> TokenStream {
    let rt = rt();
    let errors = errors.into_compile_error();
    let vis = &input.vis;
    let name = &input.name;
    let params = format_ident!("{}Params", name);
    let run = format_ident!("{}Run", name);
    let graph = format_ident!("{}Graph", name);
    let lt = syn::Lifetime::new("'a", proc_macro2::Span::call_site());
    let borrows = input
        .params()
        .any(|p| matches!(ast::ungroup_type(&p.ty), syn::Type::Reference(_)));
    let params_ty = if borrows {
        quote!(#params<'a>)
    } else {
        quote!(#params)
    };
    let fields = input.params().map(|p| {
        let field = &p.name;
        let ty = with_lifetime(&p.ty, &lt);
        quote!(pub #field: #ty)
    });
    let unreachable = quote!(::core::unreachable!("this pipeline failed to compile"));
    quote! {
        #errors
        #vis struct #name;
        #vis struct #params_ty { #(#fields,)* }
        #vis struct #run<'a>(::core::marker::PhantomData<&'a ()>);
        #vis struct #graph<'a>(::core::marker::PhantomData<&'a ()>);
        #[allow(unused_variables, clippy::all)]
        impl #name {
            pub fn new(ctx: &#rt::Context) -> #rt::Result<Self> { #unreachable }
            pub fn run<'a>(&'a mut self, params: #params_ty) -> #rt::Result<#run<'a>> { #unreachable }
            pub fn capture<'a>(&'a mut self, params: #params_ty) -> #rt::Result<#graph<'a>> { #unreachable }
        }
        #[allow(clippy::all)]
        impl #run<'_> {
            pub fn wait(self) -> #rt::Result<()> { #unreachable }
        }
        #[allow(clippy::all)]
        impl #graph<'_> {
            pub fn launch(&mut self) -> #rt::Result<()> { #unreachable }
            pub fn synchronize(&self) -> #rt::Result<()> { #unreachable }
        }
    }
}

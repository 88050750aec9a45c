//! `PParams<'a>`: the scalars and borrowed buffers of one step.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Lifetime;

use super::names::{Names, rt_fn, with_lifetime};
use crate::ast::type_string;
use crate::lower::Pipeline;
use crate::symbol::PRIMITIVE_SCALARS;

/// The params struct: one public field per param, references given the lifetime `'a`.
pub fn params_struct(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let input = pipeline.input;
    let vis = &input.vis;
    let ty = names.params_ty(quote!('a));
    let name = &input.name;
    let lt = Lifetime::new("'a", Span::call_site());
    let fields = input.params().map(|param| {
        let field = &param.name;
        let field_ty = with_lifetime(&param.ty, &lt);
        let doc = format!("`{}` of one step.", param.name);
        quote!(#[doc = #doc] pub #field: #field_ty)
    });
    let doc = format!(
        "The scalars and buffers of one step of [`{name}`]. Scalars are copied into each \
         step; buffers stay borrowed while the step (or the captured graph) may use them."
    );
    quote! {
        #[doc = #doc]
        #vis struct #ty { #(#fields,)* }
    }
}

/// `Debug` of the params struct, by hand: primitive scalars show their value, everything else
/// its declared type. A derive would need `Debug` of every param type (a library handle need
/// not have it) and would repeat, on the whole macro call, any error in a buffer type.
pub fn params_debug(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let fields = pipeline.input.params().map(|param| {
        let name = &param.name;
        let label = name.to_string();
        let scalar = pipeline
            .scalars
            .iter()
            .find(|scalar| std::ptr::eq(scalar.decl, param));
        match scalar {
            Some(scalar) if PRIMITIVE_SCALARS.contains(&scalar.ty.as_str()) => {
                quote!(.field(#label, &self.#name))
            }
            _ => {
                let ty = type_string(&param.ty);
                quote!(.field(#label, &::core::format_args!("{}", #ty)))
            }
        }
    });
    let name_str = names.params.to_string();
    let anonymous = names.params_ty(quote!('_));
    quote! {
        impl ::core::fmt::Debug for #anonymous {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(#name_str) #(#fields)* .finish()
            }
        }
    }
}

/// `__reborrow`: the params borrowed again for a shorter life (each `&mut` reborrowed, each
/// `&` copied, each scalar cloned), which a clone of a captured step holds while it borrows
/// the graph it was cloned from.
pub fn params_reborrow(pipeline: &Pipeline<'_>, names: &Names) -> TokenStream {
    let params = &names.params;
    let ty = names.params_ty(quote!('a));
    let short = names.params_ty(quote!('_));
    let fields = pipeline.input.params().map(|param| {
        let field = &param.name;
        match crate::ast::ungroup_type(&param.ty) {
            syn::Type::Reference(r) if r.mutability.is_some() => quote!(#field: &mut *self.#field),
            syn::Type::Reference(_) => quote!(#field: self.#field),
            // As the steps copy it: a type that is not `Clone` is reported once, at the param.
            _ => {
                let ty = &param.ty;
                let scalar = rt_fn(field.span(), "scalar");
                quote_spanned!(field.span()=> #field: #scalar::<#ty>(&self.#field))
            }
        }
    });
    let generics = if names.params_borrow {
        quote!(<'a>)
    } else {
        quote!()
    };
    quote! {
        impl #generics #ty {
            /// The same params, borrowed again for as long as `self` is.
            fn __reborrow(&mut self) -> #short {
                #params { #(#fields,)* }
            }
        }
    }
}

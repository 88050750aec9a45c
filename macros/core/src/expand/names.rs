//! The names and types generated code uses, derived once from the pipeline's name and
//! declarations.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{Ident, Lifetime, Type};

use crate::ast::{self, KernelParamType, type_string, ungroup_type};
use crate::scope::{Scope, Value};
use crate::symbol::PRIMITIVE_SCALARS;

/// Generated identifiers for one pipeline.
pub struct Names {
    /// `PParams`.
    pub params: Ident,
    /// `PRun`.
    pub run: Ident,
    /// `PGraph`.
    pub graph: Ident,
    /// The hidden struct of loaded kernels.
    pub kernels: Ident,
    /// Whether the params struct borrows anything (and so takes a lifetime).
    pub params_borrow: bool,
}

impl Names {
    pub fn new(input: &ast::Pipeline, scope: &Scope<'_>) -> Names {
        let name = &input.name;
        let span = name.span();
        Names {
            params: format_ident!("{}Params", name, span = span),
            run: format_ident!("{}Run", name, span = span),
            graph: format_ident!("{}Graph", name, span = span),
            kernels: format_ident!("__{}Kernels", name, span = span),
            params_borrow: scope.buffers.iter().any(|b| !b.scratch),
        }
    }

    /// `PParams<'lt>`, or `PParams` when it borrows nothing.
    pub fn params_ty(&self, lt: TokenStream) -> TokenStream {
        let params = &self.params;
        if self.params_borrow {
            quote!(#params<#lt>)
        } else {
            quote!(#params)
        }
    }

    /// The field of stream `i`.
    pub fn stream_field(&self, i: usize) -> Ident {
        format_ident!("__stream_{}", i)
    }

    /// The field of kernel `k`.
    pub fn kernel_field(&self, k: usize) -> Ident {
        format_ident!("k{}", k)
    }

    /// The field of a scratch buffer.
    pub fn scratch_field(&self, name: &Ident) -> Ident {
        format_ident!("__scratch_{}", name)
    }

    /// The kernel's signature as a tuple type with `'static` slices, for `TypedKernel<Sig>`.
    pub fn kernel_signature(&self, kernel: &ast::Kernel) -> TokenStream {
        let params = kernel.params.iter().map(|param| match param.kind() {
            KernelParamType::Scalar(ty) => quote!(#ty),
            KernelParamType::Slice {
                mutable: false,
                elem,
            } => quote!(&'static [#elem]),
            KernelParamType::Slice {
                mutable: true,
                elem,
            } => quote!(&'static mut [#elem]),
            // `check` rejected these; keep the tokens so nothing panics.
            KernelParamType::Unsupported => {
                let ty = &param.ty;
                quote!(#ty)
            }
        });
        quote!((#(#params,)*))
    }

    /// The params struct: public fields, references given the lifetime `'a`.
    pub fn params_struct(&self, input: &ast::Pipeline, scope: &Scope<'_>) -> TokenStream {
        let vis = &input.vis;
        let ty = self.params_ty(quote!('a));
        let name = &input.name;
        let lt = Lifetime::new("'a", proc_macro2::Span::call_site());
        let fields = input.params().map(|param| {
            let field = &param.name;
            let field_ty = with_lifetime(&param.ty, &lt);
            let doc = format!("`{}` of one step.", param.name);
            quote!(#[doc = #doc] pub #field: #field_ty)
        });
        // `Debug` by hand: primitive scalars show their value, everything else its declared
        // type. A derive would need `Debug` of every param type (a library handle need not
        // have it) and would repeat, on the whole macro call, any error in a buffer type.
        let debug_fields = input.params().map(|param| {
            let name = &param.name;
            let label = name.to_string();
            let ty = type_string(&param.ty);
            let scalar = matches!(scope.value(name), Some(Value::Scalar(_)));
            if scalar && PRIMITIVE_SCALARS.contains(&ty.as_str()) {
                quote!(.field(#label, &self.#name))
            } else {
                quote!(.field(#label, &::core::format_args!("{}", #ty)))
            }
        });
        let name_str = self.params.to_string();
        let anonymous = self.params_ty(quote!('_));
        let doc = format!(
            "The scalars and buffers of one step of [`{name}`]. Scalars are copied into each \
             step; buffers stay borrowed while the step (or the captured graph) may use them."
        );
        quote! {
            #[doc = #doc]
            #vis struct #ty { #(#fields,)* }

            impl ::core::fmt::Debug for #anonymous {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    f.debug_struct(#name_str) #(#debug_fields)* .finish()
                }
            }
        }
    }
}

/// `ty` with `lt` on every reference that has no lifetime of its own.
pub fn with_lifetime(ty: &Type, lt: &Lifetime) -> Type {
    match ungroup_type(ty) {
        Type::Reference(reference) => {
            let mut reference = reference.clone();
            if reference.lifetime.is_none() {
                reference.lifetime = Some(lt.clone());
            }
            *reference.elem = with_lifetime(&reference.elem, lt);
            Type::Reference(reference)
        }
        other => other.clone(),
    }
}

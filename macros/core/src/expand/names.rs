//! The names and types generated code uses, derived once from the pipeline's name and
//! declarations, and the path through which it reaches the runtime.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::{Ident, Lifetime, Type};

use crate::ast::{self, KernelParamType, ungroup_type};
use crate::lower::{KernelId, Kind, Pipeline};

/// The hidden runtime module generated code names, versioned like thiserror's `__private17`:
/// a macro crate and a runtime crate that disagree on what it holds fail to resolve the path
/// instead of compiling against the wrong items.
pub const PRIVATE_MODULE: &str = "__private_0_1";

/// The path generated code uses for everything from the runtime.
pub fn rt() -> TokenStream {
    let module = Ident::new(PRIVATE_MODULE, Span::call_site());
    quote!(::gpu_pipeline::#module)
}

/// The path of runtime item `name`, spanned on the user's tokens (a statement's keyword, an
/// argument) so that the compiler's errors and notes point there rather than at the whole
/// macro.
pub fn rt_fn(span: Span, name: &str) -> TokenStream {
    let name = Ident::new(name, span);
    let module = Ident::new(PRIVATE_MODULE, span);
    quote_spanned!(span=> ::gpu_pipeline::#module::#name)
}

/// Generated identifiers for one pipeline.
pub struct Names {
    /// `PParams`.
    pub params: Ident,
    /// `PRun`.
    pub run: Ident,
    /// `PGraph`.
    pub graph: Ident,
    /// `PWindow`.
    pub window: Ident,
    /// The hidden struct of loaded kernels.
    pub kernels: Ident,
    /// Whether the params struct borrows anything (and so takes a lifetime).
    pub params_borrow: bool,
}

impl Names {
    /// The names of `pipeline`'s items.
    pub fn new(pipeline: &Pipeline<'_>) -> Names {
        let name = &pipeline.input.name;
        let span = name.span();
        Names {
            params: format_ident!("{}Params", name, span = span),
            run: format_ident!("{}Run", name, span = span),
            graph: format_ident!("{}Graph", name, span = span),
            window: format_ident!("{}Window", name, span = span),
            kernels: format_ident!("__{}Kernels", name, span = span),
            params_borrow: pipeline.buffers.iter().any(|b| !b.scratch),
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

    /// The field of kernel `k`.
    pub fn kernel_field(&self, k: usize) -> Ident {
        format_ident!("k{}", k)
    }

    /// The field of kernel `k` loaded on device `d` (the first device's is `kernel_field`).
    pub fn kernel_field_on(&self, k: usize, d: usize) -> Ident {
        format_ident!("{}", kernel_field_name(KernelId(k), d))
    }

    /// The field of a scratch buffer.
    pub fn scratch_field(&self, name: &Ident) -> Ident {
        format_ident!("__scratch_{}", name)
    }

    /// The fields of every scratch buffer, in declaration order.
    pub fn scratch_fields(&self, pipeline: &Pipeline<'_>) -> Vec<Ident> {
        pipeline
            .buffers
            .iter()
            .filter(|b| b.scratch)
            .map(|b| self.scratch_field(b.ident))
            .collect()
    }

    /// The kernel's signature as a tuple type with `'static` slices, for `TypedKernel<Sig>`.
    pub fn kernel_signature(&self, kernel: &ast::Kernel) -> TokenStream {
        let params = kernel.params.iter().map(|param| match param.kind() {
            KernelParamType::Scalar(ty) => quote!(#ty),
            KernelParamType::Slice {
                mutable: false,
                elem,
                ..
            } => quote!(&'static [#elem]),
            KernelParamType::Slice {
                mutable: true,
                elem,
                ..
            } => quote!(&'static mut [#elem]),
            KernelParamType::Condition => {
                let rt = rt();
                quote!(#rt::SetsCondition)
            }
            // `check` rejected these; keep the tokens so nothing panics.
            KernelParamType::Unsupported => {
                let ty = &param.ty;
                quote!(#ty)
            }
        });
        quote!((#(#params,)*))
    }
}

/// The name of the field of kernel `k` loaded on device `d`: `k3` on the first device,
/// `k3_on1` on the second.
pub fn kernel_field_name(k: KernelId, d: usize) -> String {
    if d == 0 {
        format!("k{}", k.0)
    } else {
        format!("k{}_on{}", k.0, d)
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

/// The suffix of a kind of step's methods: `` for the unnamed kind, `_finish` for
/// `step finish`.
pub fn suffix(kind: &Kind<'_>) -> String {
    match kind.decl {
        Some(step) => format!("_{}", step.name),
        None => String::new(),
    }
}

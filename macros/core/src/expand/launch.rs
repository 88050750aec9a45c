//! A launch's configuration and argument tuple over the step's bindings: what the step
//! enqueues, what a setter updates a kernel node with, and what the bound checks read.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, Ident};

use super::names::{rt, rt_fn};
use crate::ast::{self, KernelParamType, type_string};
use crate::lower::{Arg, KernelId, Mode, Pipeline};

/// The local that holds scalar argument `arg` of launch `site`, evaluated once when the step
/// (or a setter) starts, so that the bound checks and the launch see one value.
pub fn local(site: usize, arg: usize) -> Ident {
    format_ident!("__bound_{}_{}", site, arg)
}

/// The reborrow of buffer `name` for one use.
pub fn reborrow(name: &Ident, mode: Mode) -> TokenStream {
    match mode {
        Mode::Read => quote!(&*#name),
        Mode::Write => quote!(&mut *#name),
    }
}

/// The launch configuration and argument tuple of a launch statement, over the bindings.
/// With `locals` (the launch's site), scalar arguments are the locals that
/// `bounds::check_first` evaluated them into.
pub fn launch_parts(
    pipeline: &Pipeline<'_>,
    launch: &ast::Launch,
    kernel: KernelId,
    args: &[Arg],
    retype: Retype,
    locals: Option<usize>,
) -> (TokenStream, TokenStream) {
    let rt = rt();
    let dim = |option: &Option<ast::LaunchOption>| match option {
        Some(option) => {
            let value = &option.value;
            quote!(#value)
        }
        None => quote!(1u32),
    };
    let grid = dim(&launch.grid);
    let block = dim(&launch.block);
    let shared = launch.shared.as_ref().map(|s| {
        let value = &s.value;
        quote!(.with_shared_mem(#value))
    });
    let config = quote!(#rt::LaunchConfig::new(#grid, #block) #shared);
    // The kernel's declared parameters, so a type assertion quotes the user's own type.
    let declared = &pipeline.kernels[kernel.0].decl.params;
    let args = args
        .iter()
        .zip(&launch.args)
        .enumerate()
        .map(|(i, (arg, expr))| match (arg, locals) {
            (Arg::Scalar { .. }, Some(site)) => {
                let local = local(site, i);
                quote!(#local)
            }
            _ => arg_tokens(pipeline, arg, expr, declared.get(i), retype),
        });
    (config, quote!((#(#args,)*)))
}

/// How a launch argument passes a buffer whose element type is spelled differently from the
/// kernel parameter's (`DeviceBuffer<Real>` for `&[f32]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retype {
    /// Asserted when the program compiles, at the argument: what the step itself does.
    Assert,
    /// Checked when it runs: what a setter does, so a mismatch is reported once, by the step.
    Cast,
}

/// One argument of a launch, over the bindings: a buffer reborrowed (and retyped where its
/// element type is spelled differently), a scalar with its type asserted where needed.
pub fn arg_tokens(
    pipeline: &Pipeline<'_>,
    arg: &Arg,
    expr: &Expr,
    declared: Option<&ast::KernelParam>,
    retype: Retype,
) -> TokenStream {
    let rt = rt();
    match arg {
        Arg::Buffer { buffer, mode } => {
            let held = &pipeline.buffers[buffer.0];
            let name = held.ident;
            // The argument as written, for spans.
            let at = ast::bare_ident(expr).unwrap_or(name);
            let wanted = match declared.map(ast::KernelParam::kind) {
                Some(KernelParamType::Slice { elem, .. }) => Some(elem),
                _ => None,
            };
            match (held.elem, wanted) {
                // Spelled differently (`Real` and `f32`): the compiler decides, at the name.
                (Some(held), Some(wanted)) if type_string(held) != type_string(wanted) => {
                    let borrow = reborrow(name, *mode);
                    match (retype, mode) {
                        (Retype::Assert, Mode::Read) => {
                            let function = rt_fn(at.span(), "device_as");
                            quote_spanned!(at.span()=> #function::<#wanted, _>(#borrow))
                        }
                        (Retype::Assert, Mode::Write) => {
                            let function = rt_fn(at.span(), "device_as_mut");
                            quote_spanned!(at.span()=> #function::<#wanted, _>(#borrow))
                        }
                        (Retype::Cast, Mode::Read) => {
                            quote!(#rt::device_cast::<#wanted, _>(#borrow)?)
                        }
                        (Retype::Cast, Mode::Write) => {
                            quote!(#rt::device_cast_mut::<#wanted, _>(#borrow)?)
                        }
                    }
                }
                _ => reborrow(name, *mode),
            }
        }
        Arg::Scalar {
            ty,
            assert_type: true,
            ..
        } => {
            // The declared type keeps its span, so rustc's "expected due to this" points at
            // the kernel's signature rather than at the whole macro call.
            let ty: syn::Type = match declared.map(ast::KernelParam::kind) {
                Some(KernelParamType::Scalar(declared)) => declared.clone(),
                _ => syn::parse_str(ty).unwrap_or_else(|_| syn::parse_quote!(_)),
            };
            // The type error, if any, lands on the user's argument.
            quote_spanned!(expr.span()=> { let __arg: #ty = #expr; __arg })
        }
        Arg::Scalar { .. } => quote!(#expr),
    }
}

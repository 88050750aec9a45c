//! A launch's configuration and argument tuple over the step's bindings: what the step
//! enqueues, what a built graph adds as a kernel node, what a setter updates a kernel node
//! with, and what the bound checks read. Also the value a subscripted buffer reference
//! (`xs[k]`, `x[lo..hi]`) becomes, which copies and fills share.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, Ident};

use super::names::{rt, rt_fn};
use crate::ast::{self, BufRef, KernelParamType, type_string};
use crate::lower::{Arg, BufferId, KernelId, Mode, Pipeline, StageId};

/// The local that holds the scalar arguments of launch statement `statement` of stage
/// `stage`, evaluated once per stage instance by the bound checks that run before anything of
/// a step is enqueued (or built): the check and the launch see one value.
pub fn stored(stage: StageId, statement: usize) -> Ident {
    format_ident!("__bound_{}_{}", stage.0, statement)
}

/// The reborrow of buffer `name` for one use.
pub fn reborrow(name: &Ident, mode: Mode) -> TokenStream {
    match mode {
        Mode::Read => quote!(&*#name),
        Mode::Write => quote!(&mut *#name),
    }
}

/// The `let`s that turn each buffer one statement names in several ranges, one of them
/// written (a copy from `f[0..4]` to `f[8..12]`, a launch given two halves of one buffer),
/// into an `Apart` for the statement: the buffer's name is shadowed by it, so that
/// [`subscripted`] borrows every range from one exclusive borrow (two `view_mut`s of one
/// buffer would not compile). `uses` are the statement's buffer uses with their slots; a
/// buffer also named whole is an error the checks report (it overlaps every range).
pub fn apart_lets(
    pipeline: &Pipeline<'_>,
    uses: &[(BufferId, Mode, Option<usize>)],
) -> TokenStream {
    let rt = rt();
    let mut lets = TokenStream::new();
    for (i, (buffer, _, _)) in uses.iter().enumerate() {
        if uses[..i].iter().any(|(b, _, _)| b == buffer) {
            continue;
        }
        let same = || uses.iter().filter(|(b, _, _)| b == buffer);
        let ranges = same().filter(|(_, _, slot)| slot.is_some()).count();
        let whole = same().any(|(_, _, slot)| slot.is_none());
        let written = same().any(|(_, mode, _)| *mode == Mode::Write);
        if ranges < 2 || whole || !written {
            continue;
        }
        let held = &pipeline.buffers[buffer.0];
        let name = held.ident;
        let apart = format_ident!("__apart_{}", name);
        let make = if held.array {
            quote!(#rt::Apart::of_array(&mut *#name))
        } else {
            quote!(#rt::Apart::new(&mut *#name))
        };
        lets.extend(quote! {
            let mut #apart = #make;
            let #name = &mut #apart;
        });
    }
    lets
}

/// The buffer uses of a launch's arguments, with their slots, for [`apart_lets`].
pub fn launch_uses(args: &[Arg], slots: &[Option<usize>]) -> Vec<(BufferId, Mode, Option<usize>)> {
    let mut slots = slots.iter().copied();
    args.iter()
        .filter_map(|arg| match arg {
            Arg::Buffer { buffer, mode } => Some((*buffer, *mode, slots.next().flatten())),
            Arg::Scalar { .. } => None,
        })
        .collect()
}

/// A buffer reference as a value a copy, fill or launch takes. Without a `slot` (no subscript)
/// the buffer reborrowed; with one, the resolved reference `__refs[slot]` of the stage
/// instance: a view of a range (`rt::view(&*x, r)`), an element of an array
/// (`rt::element(&*xs, r)`), or a view of an element's range.
pub fn subscripted(
    pipeline: &Pipeline<'_>,
    buffer: crate::lower::BufferId,
    mode: Mode,
    slot: Option<usize>,
) -> TokenStream {
    let rt = rt();
    let held = &pipeline.buffers[buffer.0];
    let name = held.ident;
    let Some(slot) = slot else {
        return reborrow(name, mode);
    };
    let r = quote!(__refs[#slot]);
    let base = match (held.array, mode) {
        (true, Mode::Read) => quote!(#rt::element(&*#name, #r)?),
        (true, Mode::Write) => quote!(#rt::element_mut(&mut *#name, #r)?),
        (false, mode) => reborrow(name, mode),
    };
    match mode {
        Mode::Read => quote!(#rt::view(#base, #r)?),
        Mode::Write => quote!(#rt::view_mut(#base, #r)?),
    }
}

/// The launch configuration and argument tuple of a launch statement, over the bindings.
/// `slots` gives each buffer argument, in order, its resolved reference if subscripted. With
/// `stored` (the local the bound checks evaluated the launch's scalar arguments into, see
/// [`stored`]), scalar arguments are taken from `__bound`, its value for this instance.
pub fn launch_parts(
    pipeline: &Pipeline<'_>,
    launch: &ast::Launch,
    kernel: KernelId,
    args: &[Arg],
    retype: Retype,
    slots: &[Option<usize>],
    stored: bool,
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
    let mut buffer_slots = slots.iter().copied();
    let mut scalar = 0usize;
    let args = args
        .iter()
        .zip(&launch.args)
        .enumerate()
        .map(|(i, (arg, expr))| match arg {
            Arg::Buffer { .. } => {
                let slot = buffer_slots.next().flatten();
                arg_tokens(pipeline, arg, expr, declared.get(i), retype, slot)
            }
            Arg::Scalar { .. } if stored => {
                let index = syn::Index::from(scalar);
                scalar += 1;
                quote!(__bound.#index)
            }
            Arg::Scalar { .. } => arg_tokens(pipeline, arg, expr, declared.get(i), retype, None),
        });
    (config, quote!((#(#args,)*)))
}

/// The scalar arguments of a launch statement, evaluated, as a tuple (what [`stored`] holds).
pub fn scalar_tuple(
    pipeline: &Pipeline<'_>,
    launch: &ast::Launch,
    kernel: KernelId,
    args: &[Arg],
) -> TokenStream {
    let declared = &pipeline.kernels[kernel.0].decl.params;
    let scalars = args
        .iter()
        .zip(&launch.args)
        .enumerate()
        .filter(|(_, (arg, _))| matches!(arg, Arg::Scalar { .. }))
        .map(|(i, (arg, expr))| {
            arg_tokens(pipeline, arg, expr, declared.get(i), Retype::Cast, None)
        });
    quote!((#(#scalars,)*))
}

/// The argument tuple a bound check reads: the scalars from `__bound` (see [`scalar_tuple`]),
/// every buffer shared (a subscripted one as a view of its resolved reference).
pub fn checked_tuple(
    args: &[Arg],
    slots: &[Option<usize>],
    pipeline: &Pipeline<'_>,
) -> TokenStream {
    let mut buffer_slots = slots.iter().copied();
    let mut scalar = 0usize;
    let items = args.iter().map(|arg| match arg {
        Arg::Buffer { buffer, .. } => {
            let slot = buffer_slots.next().flatten();
            let value = subscripted(pipeline, *buffer, Mode::Read, slot);
            if slot.is_some() {
                quote!(&#value)
            } else {
                value
            }
        }
        Arg::Scalar { .. } => {
            let index = syn::Index::from(scalar);
            scalar += 1;
            quote!(__bound.#index)
        }
    });
    quote!((#(#items,)*))
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
/// element type is spelled differently) or the view of its resolved reference, a scalar with
/// its type asserted where needed.
pub fn arg_tokens(
    pipeline: &Pipeline<'_>,
    arg: &Arg,
    expr: &Expr,
    declared: Option<&ast::KernelParam>,
    retype: Retype,
    slot: Option<usize>,
) -> TokenStream {
    let rt = rt();
    match arg {
        Arg::Buffer { buffer, mode } => {
            if slot.is_some() {
                return subscripted(pipeline, *buffer, *mode, slot);
            }
            let held = &pipeline.buffers[buffer.0];
            let name = held.ident;
            // The argument as written, for spans.
            let at = BufRef::of_expr(expr).map_or(name, |r| r.name);
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

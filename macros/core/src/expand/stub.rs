//! What a pipeline with errors expands to: the `compile_error!`s plus items with the same
//! public names, so code that uses the pipeline reports nothing more (one mistake, one error).
//!
//! The stub is built from whatever parsed: after a check error, the whole input; after a
//! syntax error, an outline of it ([`after_parse_error`]).

use std::collections::HashSet;

use proc_macro2::{TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Attribute, Token, braced, token};

use super::names::{rt, with_lifetime};
use crate::scope::{self, Memory};
use crate::symbol::kw;
use crate::{ast, lower};

/// The errors and the stub items; `tokens` is the macro's input, whose paths the stub names
/// (see [`path_uses`]).
pub fn stub(input: &ast::Pipeline, errors: syn::Error, tokens: &TokenStream) -> TokenStream {
    let rt = rt();
    let errors = errors.into_compile_error();
    let uses = path_uses(input, tokens);
    let vis = &input.vis;
    let name = &input.name;
    let params = format_ident!("{}Params", name);
    let run = format_ident!("{}Run", name);
    let graph = format_ident!("{}Graph", name);
    let window = format_ident!("{}Window", name);
    let lt = syn::Lifetime::new("'a", proc_macro2::Span::call_site());
    // One field per param name (a duplicate is already reported). A type rustc would reject
    // too (`&mut DeviceBuffer` without its element type) becomes a type parameter, so that
    // neither the stub nor the code that fills it in reports it again.
    let mut seen = HashSet::new();
    let fields: Vec<(&syn::Ident, Option<&syn::Type>)> = input
        .params()
        .filter(|p| seen.insert(p.name.to_string()))
        .map(|p| (&p.name, (!lacks_element_type(&p.ty)).then_some(&p.ty)))
        .collect();
    let generics: Vec<syn::Ident> = fields
        .iter()
        .filter(|(_, ty)| ty.is_none())
        .map(|(name, _)| format_ident!("__{}", name.to_string().to_uppercase()))
        .collect();
    let borrows = fields.iter().any(|(_, ty)| {
        ty.is_some_and(|ty| matches!(ast::ungroup_type(ty), syn::Type::Reference(_)))
    });
    let params_ty = match (borrows, generics.is_empty()) {
        (true, _) => quote!(#params<'a, #(#generics),*>),
        (false, false) => quote!(#params<#(#generics),*>),
        (false, true) => quote!(#params),
    };
    let mut generic = generics.iter();
    let fields = fields.iter().map(|(field, ty)| match ty {
        Some(ty) => {
            let ty = with_lifetime(ty, &lt);
            quote!(pub #field: #ty)
        }
        None => {
            let ty = generic.next();
            quote!(pub #field: #ty)
        }
    });
    let unreachable = quote!(::core::unreachable!("this pipeline failed to compile"));
    // `new` takes one context per declared device, as the real expansion does.
    let mut seen = HashSet::new();
    let devices: Vec<&crate::ast::Device> = input
        .devices()
        .filter(|d| seen.insert(d.name.to_string()))
        .collect();
    let device_params = devices.iter().map(|d| {
        let name = &d.name;
        match crate::scope::array_len(d) {
            Some(n) => quote!(#name: &[#rt::Context; #n]),
            None => quote!(#name: &#rt::Context),
        }
    });
    let new_fn = if devices.is_empty() {
        quote!(pub fn new(ctx: &#rt::Context) -> #rt::Result<Self> { #unreachable })
    } else {
        quote! {
            pub fn new(#(#device_params),*) -> #rt::Result<Self> { #unreachable }
            pub fn devices(&self) -> &[#rt::Context] { #unreachable }
        }
    };

    // One marker type and one accessor per stream name, as the real expansion has, so that
    // `call` functions typed `&TypedStream<PMain>` resolve.
    let mut seen = HashSet::new();
    let streams: Vec<(syn::Ident, syn::Ident, bool)> = input
        .streams()
        .filter(|stream| seen.insert(stream.name.to_string()))
        .map(|stream| {
            let marker = format_ident!("{}", lower::marker(name, &stream.name));
            let array = stream.count.is_some();
            let accessor = if array {
                format_ident!("{}_streams", stream.name)
            } else {
                format_ident!("{}_stream", stream.name)
            };
            (marker, accessor, array)
        })
        .collect();
    let mut seen = HashSet::new();
    let markers: Vec<&syn::Ident> = streams
        .iter()
        .map(|(marker, _, _)| marker)
        .filter(|marker| seen.insert(marker.to_string()))
        .collect();
    let accessors = streams.iter().map(|(_, accessor, array)| {
        if *array {
            quote!(pub fn #accessor(&self) -> &[#rt::Stream] { #unreachable })
        } else {
            quote!(pub fn #accessor(&self) -> &#rt::Stream { #unreachable })
        }
    });
    // The methods of each kind of step, named as the real expansion names them.
    let mut seen = HashSet::new();
    let suffixes: Vec<String> = {
        let steps: Vec<String> = input
            .steps()
            .map(|step| format!("_{}", step.name))
            .filter(|s| seen.insert(s.clone()))
            .collect();
        if steps.is_empty() {
            vec![String::new()]
        } else {
            steps
        }
    };
    // Each name once: steps `a` and `a_steps` both name a `run_a_steps` (an error reported
    // on the second step's name, not again as a duplicate definition).
    let mut defined = HashSet::new();
    let run_ty = &run;
    let kind_methods: Vec<TokenStream> = suffixes
        .iter()
        .flat_map(|suffix| {
            let run = format_ident!("run{}", suffix);
            let run_steps = format_ident!("run{}_steps", suffix);
            let run_ahead = format_ident!("run{}_ahead", suffix);
            let profile = format_ident!("profile{}", suffix);
            let plan_dot = format_ident!("plan_dot{}", suffix);
            [
                (run.clone(), quote!(pub fn #run<'a, #(#generics),*>(&'a mut self, params: #params_ty) -> #rt::Result<#run_ty<'a>> { #unreachable })),
                (run_steps.clone(), quote!(pub fn #run_steps<'a, #(#generics),*>(&'a mut self, params: #params_ty, steps: usize) -> #rt::Result<#run_ty<'a>> { #unreachable })),
                (run_ahead.clone(), quote!(pub fn #run_ahead<'a, #(#generics),*>(&'a mut self, params: #params_ty, steps: usize) -> #rt::Result<#run_ty<'a>> { #unreachable })),
                (profile.clone(), quote!(pub fn #profile<'a, #(#generics),*>(&'a mut self, params: #params_ty) -> #rt::Result<#rt::StepProfile> { #unreachable })),
                (plan_dot.clone(), quote!(pub fn #plan_dot<'a, #(#generics),*>(&'a mut self, params: &#params_ty) -> #rt::Result<::std::string::String> { #unreachable })),
            ]
        })
        .filter(|(name, _)| defined.insert(name.to_string()))
        .map(|(_, method)| method)
        .collect();
    let thens = suffixes.iter().map(|suffix| {
        let then = format_ident!("then{}", suffix);
        quote!(pub fn #then(&mut self) -> #rt::Result<&mut Self> { #unreachable })
    });
    let launches: Vec<syn::Ident> = suffixes
        .iter()
        .map(|suffix| format_ident!("launch{}", suffix))
        .collect();
    let graph_launches = launches
        .iter()
        .map(|launch| quote!(pub fn #launch(&mut self) -> #rt::Result<()> { #unreachable }));
    let window_launches = launches
        .iter()
        .map(|launch| quote!(pub fn #launch(self) -> #rt::Result<()> { #unreachable }));
    let swaps = input.swaps().map(|swap| {
        let method = format_ident!("swap_{}_{}", swap.a, swap.b);
        quote!(pub fn #method(&mut self) -> #rt::Result<()> { #unreachable })
    });
    // An accessor for every borrowed param, `_mut` too: more is harmless in a stub.
    let mut seen = HashSet::new();
    let window_accessors = input
        .params()
        .filter(|p| matches!(ast::ungroup_type(&p.ty), syn::Type::Reference(_)))
        .filter(|p| seen.insert(p.name.to_string()))
        .map(|p| {
            let field = &p.name;
            let field_mut = format_ident!("{}_mut", p.name);
            // The real accessors' types where the expansion has them (a pinned buffer, not an
            // array, of a known element type), so that code reading the elements is no second
            // error.
            let shape = scope::shape(&p.ty);
            let pinned = shape.memory == Some(Memory::Pinned)
                && matches!(shape.referent, syn::Type::Path(_));
            match shape.elem.filter(|_| pinned) {
                Some(elem) => quote! {
                    pub fn #field(&self) -> #rt::Result<#rt::HostView<'_, #elem>> { #unreachable }
                    pub fn #field_mut(&mut self) -> #rt::Result<#rt::HostViewMut<'_, #elem>> { #unreachable }
                },
                None => quote! {
                    pub fn #field(&self) -> #rt::Result<&[u8]> { #unreachable }
                    pub fn #field_mut(&mut self) -> #rt::Result<&mut [u8]> { #unreachable }
                },
            }
        });
    // A setter for every by-value param: the real expansion has them only for scalars that a
    // launch uses, but more is harmless in a stub.
    let mut seen = HashSet::new();
    let setters = input
        .params()
        .filter(|p| !matches!(ast::ungroup_type(&p.ty), syn::Type::Reference(_)))
        .filter(|p| !lacks_element_type(&p.ty))
        .filter(|p| seen.insert(p.name.to_string()))
        .map(|p| {
            let field = &p.name;
            let ty = &p.ty;
            let setter = format_ident!("set_{}", p.name);
            quote!(pub fn #setter(&mut self, #field: #ty) -> #rt::Result<()> { #unreachable })
        });
    // A host write for every `DeviceBuffer` param, as the real expansion has for those the
    // step uses: a call to one is no second error.
    let mut seen = HashSet::new();
    let host_writes = input
        .params()
        .filter(|p| !lacks_element_type(&p.ty))
        .filter(|p| scope::shape(&p.ty).memory == Some(Memory::Device))
        .filter(|p| seen.insert(p.name.to_string()))
        .map(|p| {
            let method = format_ident!("write_{}", p.name);
            let referent = scope::shape(&p.ty).referent;
            quote!(pub fn #method(&mut self) -> #rt::Result<#rt::HostWrite<'_, #referent>> { #unreachable })
        });
    quote! {
        #errors
        #uses
        #(
            #[allow(dead_code)]
            #vis struct #markers;
        )*
        #[allow(dead_code)]
        #vis struct #name;
        #[allow(dead_code)]
        #vis struct #params_ty { #(#fields,)* }
        #[allow(dead_code)]
        #vis struct #run<'a>(::core::marker::PhantomData<&'a ()>);
        #[allow(dead_code)]
        #vis struct #graph<'a>(::core::marker::PhantomData<&'a ()>);
        #[allow(dead_code)]
        #vis struct #window<'g, 'a>(::core::marker::PhantomData<&'g &'a ()>);
        #[allow(dead_code, unused_variables, clippy::all)]
        impl #name {
            pub const NAME: &'static str = "";
            pub const STAGES: &'static [&'static str] = &[];
            pub const DOT: &'static str = "";
            #new_fn
            pub fn context(&self) -> &#rt::Context { #unreachable }
            #(#accessors)*
            #(#kind_methods)*
            pub fn capture<'a, #(#generics),*>(&'a mut self, params: #params_ty) -> #rt::Result<#graph<'a>> { #unreachable }
            pub fn set_fault_tracking(&mut self, on: bool) { #unreachable }
        }
        #[allow(dead_code, unused_variables, clippy::all)]
        impl<'a> #run<'a> {
            pub fn wait(self) -> #rt::Result<()> { #unreachable }
            pub fn is_complete(&self) -> #rt::Result<bool> { #unreachable }
            pub fn params<#(#generics),*>(&self) -> &#params_ty { #unreachable }
            #(#thens)*
        }
        #[allow(dead_code, unused_variables, clippy::all)]
        impl<'a> #graph<'a> {
            #(#graph_launches)*
            pub fn synchronize(&self) -> #rt::Result<()> { #unreachable }
            pub fn window(&mut self) -> #rt::Result<#window<'_, 'a>> { #unreachable }
            pub fn params<#(#generics),*>(&self) -> &#params_ty { #unreachable }
            pub fn exec(&mut self) -> ::core::option::Option<&#rt::GraphExec> { #unreachable }
            pub fn node_count(&self) -> #rt::Result<usize> { #unreachable }
            pub fn edge_count(&self) -> #rt::Result<usize> { #unreachable }
            pub fn apply_updates(&mut self) -> #rt::Result<()> { #unreachable }
            pub fn recapture<#(#generics),*>(&mut self, params: #params_ty) -> #rt::Result<#rt::Recaptured> { #unreachable }
            pub fn recapture_with<#(#generics,)* F: ::core::ops::FnOnce(&mut #params_ty)>(&mut self, edit: F) -> #rt::Result<#rt::Recaptured> { #unreachable }
            pub fn clone_step(&mut self) -> #rt::Result<#graph<'_>> { #unreachable }
            #(#swaps)*
            #(#setters)*
            #(#host_writes)*
        }
        #[allow(dead_code, unused_variables, clippy::all)]
        impl<'g, 'a> #window<'g, 'a> {
            #(#window_accessors)*
            pub fn params<#(#generics),*>(&self) -> &#params_ty { #unreachable }
            #(#window_launches)*
        }
    }
}

/// `const _: () = { use NAME as _; ... };` for the first segment of every path the input
/// names (`cpu::stencil`, `std::f32::consts::PI`, a single-segment `cpu = stencil` or
/// `ptx(HEAT_PTX)`), so that an import used only inside the pipeline is
/// used in the stub too: a mistake in the pipeline is one error, not that error and an
/// unused-import warning on the user's `use` line. A `use .. as _` resolves any module, type,
/// function or constant without the type inference that naming a generic function would
/// need. Left out: the pipeline's own kernel modules (`k::stencil`), `crate`, `self`, `super`
/// and `Self`, primitive types (`u32::MAX`: no item to import), and paths inside attributes
/// (`#[allow(clippy::..)]` names a tool).
fn path_uses(input: &ast::Pipeline, tokens: &TokenStream) -> TokenStream {
    let mut modules: HashSet<String> = input.modules().map(|m| m.name.to_string()).collect();
    let mut found: Vec<syn::Ident> = Vec::new();
    first_segments(tokens.clone(), &mut found, &mut modules);
    for module in input.modules() {
        if let syn::Expr::Path(path) = ast::ungroup_expr(&module.image) {
            found.extend(path.path.get_ident().cloned());
        }
        for kernel in &module.kernels {
            if let Some(host) = &kernel.host
                && host.path.leading_colon.is_none()
            {
                found.extend(host.path.segments.first().map(|s| s.ident.clone()));
            }
        }
    }
    let mut seen = HashSet::new();
    let uses = found
        .into_iter()
        .filter(|ident| {
            let name = ident.to_string();
            !modules.contains(&name)
                && !matches!(name.as_str(), "crate" | "self" | "super" | "Self" | "str")
                && !name.starts_with('$')
                && !crate::symbol::PRIMITIVE_SCALARS.contains(&name.as_str())
                && seen.insert(name)
        })
        // Spanned on the user's name: should it not resolve, rustc says so there.
        .map(|ident| quote_spanned!(ident.span()=> #[allow(unused_imports)] use #ident as _;));
    quote! {
        const _: () = { #(#uses)* };
    }
}

/// The identifiers of `tokens` that begin a path (`a` of `a::b`, not after `.`, `::` or
/// `'`), skipping attributes; and into `modules` the name of every `kernels NAME =` (after a
/// syntax error the outline has no modules) and every `launch NAME::..` (an unknown module is
/// the macro's error already).
fn first_segments(tokens: TokenStream, found: &mut Vec<syn::Ident>, modules: &mut HashSet<String>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let punct = |tree: Option<&TokenTree>, c: char| matches!(tree, Some(TokenTree::Punct(p)) if p.as_char() == c);
    for (i, tree) in tokens.iter().enumerate() {
        match tree {
            TokenTree::Group(group) => {
                let attribute = i > 0 && punct(tokens.get(i - 1), '#');
                if !attribute && !declares_items(&group.stream()) {
                    first_segments(group.stream(), found, modules);
                }
            }
            TokenTree::Ident(ident) => {
                let back = |k: usize| i.checked_sub(k).and_then(|k| tokens.get(k));
                let after_path = punct(back(1), '.')
                    || punct(back(1), '\'')
                    || (punct(back(1), ':') && punct(back(2), ':'));
                let path = punct(tokens.get(i + 1), ':') && punct(tokens.get(i + 2), ':');
                if path && !after_path {
                    found.push(ident.clone());
                }
                if ident == "kernels"
                    && let Some(TokenTree::Ident(module)) = tokens.get(i + 1)
                    && punct(tokens.get(i + 2), '=')
                {
                    modules.insert(module.to_string());
                }
                // `launch k::stencil(..)`: the pipeline's kernel module, known or not.
                if ident == "launch"
                    && let Some(TokenTree::Ident(module)) = tokens.get(i + 1)
                {
                    modules.insert(module.to_string());
                }
            }
            TokenTree::Punct(_) | TokenTree::Literal(_) => {}
        }
    }
}

/// Whether `tokens` (a group's) declare items at their top level: a block with a `use`,
/// `struct` or `fn` of its own (in a host closure), whose paths may start with names that do
/// not resolve outside it; or the kernels block, whose `cpu = ..` paths come from the AST.
fn declares_items(tokens: &TokenStream) -> bool {
    tokens.clone().into_iter().any(|tree| {
        matches!(&tree, TokenTree::Ident(ident) if [
            "use", "struct", "enum", "union", "mod", "type", "trait", "fn", "const", "static",
            "impl", "macro_rules",
        ]
        .iter()
        .any(|word| ident == word))
    })
}

/// `DeviceBuffer`, `PinnedBuffer` or `Vec` without its element type, behind a reference or
/// not: `check` reports it, and rustc would too (a missing generic argument).
fn lacks_element_type(ty: &syn::Type) -> bool {
    let shape = scope::shape(ty);
    matches!(
        shape.memory,
        Some(Memory::Device | Memory::Pinned | Memory::Pageable)
    ) && shape.elem.is_none()
        && matches!(shape.referent, syn::Type::Path(_))
}

/// What an input with a syntax error expands to: the error, plus the stub when at least
/// `[attrs] [vis] pipeline NAME { ... }` parses, with the streams and params of the blocks
/// that parse on their own. Without that, code using the pipeline would report an unknown
/// type for every mention of it.
pub fn after_parse_error(tokens: TokenStream, error: syn::Error) -> TokenStream {
    match outline.parse2(tokens.clone()) {
        Ok(input) => stub(&input, error, &tokens),
        Err(_) => error.into_compile_error(),
    }
}

/// The header of a pipeline and its `streams`, `devices` and `params` blocks, skipping
/// everything else.
fn outline(input: ParseStream<'_>) -> syn::Result<ast::Pipeline> {
    let attrs = input.call(Attribute::parse_outer)?;
    let vis = input.parse()?;
    let pipeline_token = input.parse()?;
    let name = input.parse()?;
    let content;
    braced!(content in input);
    let mut items = Vec::new();
    while !content.is_empty() {
        if content.peek(kw::streams) && content.peek2(token::Brace) {
            let keyword = content.parse()?;
            if let Some(streams) = block(&content)? {
                items.push(ast::Item::Streams(ast::Streams {
                    attrs: Vec::new(),
                    keyword,
                    streams,
                }));
            }
        } else if content.peek(kw::devices) && content.peek2(token::Brace) {
            let keyword = content.parse()?;
            if let Some(devices) = block(&content)? {
                items.push(ast::Item::Devices(ast::Devices {
                    attrs: Vec::new(),
                    keyword,
                    devices,
                }));
            }
        } else if content.peek(kw::params) && content.peek2(token::Brace) {
            let keyword = content.parse()?;
            if let Some(params) = block(&content)? {
                items.push(ast::Item::Params(ast::Params {
                    attrs: Vec::new(),
                    keyword,
                    params,
                }));
            }
        } else {
            content.parse::<TokenTree>()?;
        }
    }
    Ok(ast::Pipeline {
        attrs,
        vis,
        pipeline_token,
        name,
        items,
    })
}

/// `{ a, b, c }`, or `None` when its contents do not parse (the block is consumed either way).
fn block<T: syn::parse::Parse>(input: ParseStream<'_>) -> syn::Result<Option<Vec<T>>> {
    let content;
    braced!(content in input);
    let tokens: TokenStream = content.parse()?;
    Ok(Punctuated::<T, Token![,]>::parse_terminated
        .parse2(tokens)
        .ok()
        .map(|list| list.into_iter().collect()))
}

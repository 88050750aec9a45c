//! The logic of the `gpu_pipeline!` macro, in an ordinary library so its unit tests are an
//! ordinary test binary (a proc-macro crate's tests link the standard library dynamically
//! and cannot run where no toolchain is installed). `gpu-pipeline-macros` is the thin
//! proc-macro entry point; the language is documented there.
// No unsafe code in the macro. Test builds `deny` instead of `forbid` so the one test that
// calls the CUDA driver under compute-sanitizer (tests/mod.rs) can allow it explicitly.
#![cfg_attr(not(test), forbid(unsafe_code))]
#![cfg_attr(test, deny(unsafe_code))]

// The phases; `gpu_pipeline` runs them in order.
#[allow(
    dead_code,
    reason = "the syntax tree keeps every token of the input for spans, whether read or not"
)]
mod ast;
mod check;
mod expand;
mod lower;
mod scope;

// What the phases share: the words of the language, the error collector, and the values of
// constant expressions.
mod constant;
mod ctxt;
mod symbol;

#[cfg(test)]
mod tests;

use proc_macro2::TokenStream;

use scope::Scope;

/// Expands one `gpu_pipeline!` invocation: the generated items, or on error the
/// `compile_error!`s plus stubs with the same public names.
///
/// The phases, in order:
/// 1. `ast`: parse the input, keeping the user's tokens for spans;
/// 2. `scope`: index every declaration by name, once;
/// 3. `check::declarations`: names, types and statements, on the syntax tree;
/// 4. `lower`: the stage graph, each statement resolved and its accesses derived;
/// 5. `check::ordering`: the rules on the derived order;
/// 6. `expand`: the generated code.
///
/// Each check phase reports all of its errors together, and nothing is generated unless it
/// passed.
///
/// ```
/// use quote::quote;
/// let expanded = gpu_pipeline_macros_core::gpu_pipeline(quote! {
///     pub pipeline Clear {
///         streams { main, side }
///         params { x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }
///         stage zero on main { fill x = 0.0; }
///         stage one on side { fill y = 1.0; }
///     }
/// })
/// .to_string();
/// assert!(expanded.contains("pub struct Clear"), "{expanded}");
/// assert!(expanded.contains("pub struct ClearParams"), "{expanded}");
/// assert!(!expanded.contains("compile_error"));
///
/// // A stage on a stream that was never declared: an error on that token, and stubs
/// // with the same public names so that the user's code still resolves them.
/// let refused = gpu_pipeline_macros_core::gpu_pipeline(quote! {
///     pub pipeline Clear {
///         streams { main }
///         params { x: &mut DeviceBuffer<f32> }
///         stage zero on elsewhere { fill x = 0.0; }
///     }
/// })
/// .to_string();
/// assert!(refused.contains("compile_error"), "{refused}");
/// assert!(refused.contains("elsewhere"), "{refused}");
/// assert!(refused.contains("pub struct Clear"), "{refused}");
/// ```
pub fn gpu_pipeline(tokens: TokenStream) -> TokenStream {
    let input = match syn::parse2::<ast::Pipeline>(tokens.clone()) {
        Ok(input) => input,
        Err(error) => return expand::after_parse_error(tokens, error),
    };
    match analyse(&input) {
        Ok(pipeline) => expand::expand(&pipeline),
        Err(errors) => expand::stub(&input, errors, &tokens),
    }
}

/// Phases 2 to 5: the checked stage graph of a parsed input, or every error found.
fn analyse(input: &ast::Pipeline) -> syn::Result<lower::Pipeline<'_>> {
    let scope = Scope::new(input);
    check::declarations(&scope)?;
    let pipeline = lower::lower(&scope)?;
    check::ordering(&pipeline)?;
    Ok(pipeline)
}

//! The logic of the `gpu_pipeline!` macro, in an ordinary library so its unit tests are an
//! ordinary test binary (a proc-macro crate's tests link the standard library dynamically
//! and cannot run where no toolchain is installed). `gpu-pipeline-macros` is the thin
//! proc-macro entry point; the language is documented there.
// No unsafe code in the macro. Test builds `deny` instead of `forbid` so the one test that
// calls the CUDA driver under compute-sanitizer (tests/mod.rs) can allow it explicitly.
#![cfg_attr(not(test), forbid(unsafe_code))]
#![cfg_attr(test, deny(unsafe_code))]

#[allow(
    dead_code,
    reason = "the syntax tree keeps every token of the input for spans, whether read or not"
)]
mod ast;
mod check;
mod ctxt;
mod expand;
mod lower;
mod scope;
mod symbol;

#[cfg(test)]
mod tests;

use proc_macro2::TokenStream;

/// Expands one `gpu_pipeline!` invocation: the generated items, or on error the
/// `compile_error!`s plus stubs with the same public names.
pub fn gpu_pipeline(tokens: TokenStream) -> TokenStream {
    let input = match syn::parse2::<ast::Pipeline>(tokens.clone()) {
        Ok(input) => input,
        Err(error) => return expand::after_parse_error(tokens, error),
    };
    match check::check(&input) {
        Ok(pipeline) => expand::expand(&input, &pipeline),
        Err(errors) => expand::stub(&input, errors),
    }
}

//! The `gpu_pipeline!` procedural macro. Users depend on the `gpu-pipeline` crate, which
//! re-exports it; see that crate's documentation for the language.
#![forbid(unsafe_code)]

use proc_macro::TokenStream;

/// Declares a multi-stream GPU pipeline. See the `gpu-pipeline` crate for the language.
#[proc_macro]
pub fn gpu_pipeline(input: TokenStream) -> TokenStream {
    let _ = input;
    TokenStream::new()
}

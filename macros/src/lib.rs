#![doc = include_str!("../LANGUAGE.md")]
#![forbid(unsafe_code)]

use proc_macro::TokenStream;

#[doc = include_str!("../LANGUAGE.md")]
#[proc_macro]
pub fn gpu_pipeline(input: TokenStream) -> TokenStream {
    gpu_pipeline_macros_core::gpu_pipeline(input.into()).into()
}

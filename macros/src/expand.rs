//! Code generation: the only phase that uses `quote!` or names runtime paths.
//!
//! PHASE 2 PLACEHOLDER, NOT DONE: this will emit, per pipeline, the struct owning its typed
//! streams (one marker type per [`lower::Stream::marker`]), events and modules; the params
//! struct; eager `run`, graph `capture` and replay; typed setters for scalar params; `dot()`;
//! `quote_spanned!` type assertions for the [`lower::Arg::Scalar`] arguments marked
//! `assert_type`; and, on error, stubs with the same public names. It waits for the runtime API
//! it targets. Until then a checked pipeline expands to nothing.

use proc_macro2::TokenStream;

use crate::{ast, lower};

/// Generates the items of a checked, lowered pipeline. Phase 2 fills this in.
pub fn expand(input: &ast::Pipeline, pipeline: &lower::Pipeline) -> TokenStream {
    let _ = (input, pipeline);
    TokenStream::new()
}

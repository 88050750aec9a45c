//! Code generation: the only phase that uses `quote!` or names runtime paths.
//!
//! For a pipeline `P` it emits, one function per item:
//! - one zero-sized marker type per stream ([`crate::lower::Stream::marker`]), so a stream of one
//!   pipeline cannot fill another's typed slot;
//! - `PParams<'a>`, the scalars and borrowed buffers of one step ([`params`]);
//! - `P`, owning its typed streams, events, loaded kernels and scratch buffers, with `new`,
//!   `run` (one eager step, returning a guard to wait on), `capture` (one step recorded as a
//!   graph that borrows the params for its whole life) and the constants `NAME`, `STAGES`
//!   and `DOT` ([`pipeline`]); the step itself is [`step`];
//! - `PRun<'a>`, the guard of an eager step ([`run`]);
//! - `PGraph<'a>`, the captured step, with `launch` and one `set_<scalar>` per scalar param
//!   that a kernel launch uses, which updates the instantiated graph's kernel nodes in place
//!   ([`graph`]).
//!
//! Generated code reaches the runtime only through `::gpu_pipeline::__private_0_1`
//! ([`names::PRIVATE_MODULE`]). A pipeline with errors expands to a [`stub()`] instead.

mod graph;
mod names;
mod params;
mod pipeline;
mod run;
mod step;
mod stub;

use proc_macro2::TokenStream;
use quote::quote;

use crate::lower::Pipeline;

pub use stub::{after_parse_error, stub};

use names::Names;

/// Generates the items of a checked, lowered pipeline.
pub fn expand(p: &Pipeline<'_>) -> TokenStream {
    let names = Names::new(p);
    let items = [
        pipeline::stream_markers(p),
        params::params_struct(p, &names),
        params::params_debug(p, &names),
        pipeline::kernels_struct(p, &names),
        pipeline::pipeline_struct(p, &names),
        pipeline::pipeline_impl(p, &names),
        pipeline::pipeline_debug(p),
        run::run_struct(p, &names),
        run::run_impl(p, &names),
        run::run_drop(p, &names),
        run::run_debug(&names),
        run::wait_fn(p),
        graph::graph_struct(p, &names),
        graph::graph_impl(p, &names),
        graph::graph_drop(p, &names),
        graph::graph_debug(&names),
        graph::window_items(p, &names),
    ];
    quote!(#(#items)*)
}

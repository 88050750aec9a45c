//! Code generation: the only phase that uses `quote!` or names runtime paths.
//!
//! For a pipeline `P` it emits, one function per item:
//! - one zero-sized marker type per stream ([`crate::lower::Stream::marker`]), so a stream of one
//!   pipeline cannot fill another's typed slot;
//! - `PParams<'a>`, the scalars and borrowed buffers of one step ([`params`]);
//! - `P`, owning its streams, events, plans, loaded kernels and scratch buffers, with `new`,
//!   per kind of step `run`, `run_steps`, `run_ahead`, `profile` and `plan_dot`, `capture`
//!   (every kind of step built as a graph that borrows the params for its whole life) and the
//!   constants `NAME`, `STAGES` and `DOT` ([`pipeline`]); the step itself, described,
//!   planned and enqueued, is [`step`], the graph built from its plan [`build`];
//! - `PRun<'a>`, the guard of eager steps ([`run`]);
//! - `PGraph<'a>`, the captured steps, with `launch`, `window`, one `swap_a_b` per `swap`
//!   and one `set_<scalar>` per scalar param a step reads ([`graph`]), and `PWindow`, the
//!   pinned buffers between replays.
//!
//! Generated code reaches the runtime only through `::gpu_pipeline::__private_0_1`
//! ([`names::PRIVATE_MODULE`]). A pipeline with errors expands to a [`stub()`] instead.

mod bounds;
mod build;
mod collective;
mod constants;
mod control;
mod describe;
mod device;
mod graph;
mod graph_inputs;
mod instance;
mod launch;
mod names;
mod params;
mod pipeline;
mod run;
mod setters;
mod step;
mod stub;
mod window;

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
        params::params_reborrow(p, &names),
        pipeline::kernels_struct(p, &names),
        pipeline::pipeline_struct(p, &names),
        pipeline::pipeline_impl(p, &names),
        pipeline::pipeline_debug(p),
        run::run_struct(p, &names),
        run::run_impl(p, &names),
        run::run_drop(&names),
        run::run_debug(&names),
        run::wait_fn(p),
        graph::graph_struct(p, &names),
        graph::graph_impl(p, &names),
        graph::graph_drop(p, &names),
        graph::graph_debug(&names),
        graph::window_items(p, &names),
        constants::assertions(p),
    ];
    quote!(#(#items)*)
}

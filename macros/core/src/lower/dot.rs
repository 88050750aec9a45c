//! Graphviz DOT text of a lowered pipeline: what `Pipeline::dot` returns at run time.
//!
//! One cluster per stream, with the start and end of the step on the origin's cluster and the
//! stream order drawn dotted; one solid edge per emitted wait, labelled with its reasons; the
//! fork and join edges labelled as such. Node ids are quoted stage names; the start and end
//! are `"(start)"` and `"(end)"`, which no Rust ident can be.

use std::fmt::Write as _;

use super::{ORIGIN, Pipeline, Reason, StageId, StreamId};

const START: &str = "\"(start)\"";
const END: &str = "\"(end)\"";

impl Pipeline<'_> {
    /// The stage graph in Graphviz DOT: one cluster per stream, stream order dotted, one
    /// labelled edge per emitted wait, plus the fork and join edges of the step.
    pub fn dot(&self) -> String {
        let mut out = String::new();
        // `fmt::Write` for `String` never fails; ignoring its `Result` keeps this panic-free.
        let _ = write_dot(&mut out, self);
        out
    }
}

fn write_dot(out: &mut String, pipeline: &Pipeline<'_>) -> std::fmt::Result {
    let stage = |id: StageId| {
        pipeline
            .stages
            .get(id.0)
            .map_or_else(String::new, |stage| format!("\"{}\"", stage.name))
    };
    writeln!(out, "digraph {} {{", pipeline.name)?;
    writeln!(out, "    node [shape=box];")?;
    for (index, stream) in pipeline.streams.iter().enumerate() {
        let id = StreamId(index);
        writeln!(out, "    subgraph cluster_{} {{", stream.name)?;
        writeln!(out, "        label = \"{}\";", stream.name)?;
        let mut chain: Vec<String> = pipeline
            .stages
            .iter()
            .enumerate()
            .filter(|(_, stage)| stage.stream == id)
            .map(|(index, _)| stage(StageId(index)))
            .collect();
        if id == ORIGIN {
            chain.insert(0, START.to_owned());
            chain.push(END.to_owned());
            writeln!(out, "        {START} [shape=circle];")?;
        }
        for node in chain.iter().filter(|node| !node.starts_with("\"(")) {
            writeln!(out, "        {node};")?;
        }
        if id == ORIGIN {
            writeln!(out, "        {END} [shape=doublecircle];")?;
        }
        if chain.len() > 1 {
            writeln!(out, "        {} [style=dotted];", chain.join(" -> "))?;
        }
        writeln!(out, "    }}")?;
    }
    for edge in &pipeline.edges {
        let reasons: Vec<String> = edge
            .reasons
            .iter()
            .map(|reason| match reason {
                Reason::Hazard { buffer, hazard } => {
                    let name = pipeline
                        .buffers
                        .get(buffer.0)
                        .map_or("?", |b| b.name.as_str());
                    format!("{} {name}", hazard.abbreviation())
                }
                Reason::After => "after".to_owned(),
            })
            .collect();
        let label = reasons.join(", ");
        writeln!(
            out,
            "    {} -> {} [label=\"{label}\"];",
            stage(edge.from),
            stage(edge.to)
        )?;
    }
    let first = |stream: StreamId| pipeline.stages.iter().position(|s| s.stream == stream);
    let last = |stream: StreamId| pipeline.stages.iter().rposition(|s| s.stream == stream);
    for &stream in &pipeline.fork {
        if let Some(first) = first(stream) {
            writeln!(
                out,
                "    {START} -> {} [label=\"fork\"];",
                stage(StageId(first))
            )?;
        }
    }
    for &stream in &pipeline.join {
        if let Some(last) = last(stream) {
            writeln!(
                out,
                "    {} -> {END} [label=\"join\"];",
                stage(StageId(last))
            )?;
        }
    }
    writeln!(out, "}}")
}

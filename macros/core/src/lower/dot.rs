//! Graphviz DOT text of a lowered pipeline: what `Pipeline::DOT` holds.
//!
//! One digraph per kind of step (one for a pipeline without `step` blocks), each with one
//! cluster per stream, the start and end of the step on the origin's cluster and the stream
//! order drawn dotted; one solid edge per emitted wait, labelled with its reasons; the fork
//! and join edges labelled as such. Node ids are quoted stage names; the start and end are
//! `"(start)"` and `"(end)"`, which no Rust ident can be. A stage inside a `for` loop is
//! drawn once, as `name[i]`, and a stream array as one cluster `name[..]`: for such a
//! pipeline the drawing is a sketch, and `P::dot(params)` draws the instances of a step.

use std::fmt::Write as _;

use super::{Kind, ORIGIN, Pipeline, Reason, StageId, StreamId};

const START: &str = "\"(start)\"";
const END: &str = "\"(end)\"";

impl Pipeline<'_> {
    /// The stage graph in Graphviz DOT: per kind of step, one cluster per stream, stream order
    /// dotted, one labelled edge per emitted wait, plus the fork and join edges of the step.
    pub fn dot(&self) -> String {
        let mut out = String::new();
        for kind in &self.kinds {
            // `fmt::Write` for `String` never fails; ignoring its `Result` keeps this
            // panic-free.
            let _ = write_dot(&mut out, self, kind);
        }
        out
    }
}

fn write_dot(out: &mut String, pipeline: &Pipeline<'_>, kind: &Kind<'_>) -> std::fmt::Result {
    let stage = |id: StageId| {
        pipeline.stages.get(id.0).map_or_else(String::new, |stage| {
            if stage.looped.is_some() {
                format!("\"{}[i]\"", stage.name)
            } else {
                format!("\"{}\"", stage.name)
            }
        })
    };
    let member = |id: &StageId| kind.stages.contains(id);
    match kind.decl {
        Some(step) => writeln!(out, "digraph {}_{} {{", pipeline.name, step.name)?,
        None => writeln!(out, "digraph {} {{", pipeline.name)?,
    }
    writeln!(out, "    node [shape=box];")?;
    for (index, stream) in pipeline.streams.iter().enumerate() {
        let id = StreamId(index);
        writeln!(out, "    subgraph cluster_{} {{", stream.name)?;
        if stream.count.is_some() {
            writeln!(out, "        label = \"{}[..]\";", stream.name)?;
        } else {
            writeln!(out, "        label = \"{}\";", stream.name)?;
        }
        let mut chain: Vec<String> = kind
            .stages
            .iter()
            .filter(|&&s| pipeline.stages[s.0].stream == id)
            .map(|&s| stage(s))
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
    for edge in pipeline.edges.iter().filter(|e| member(&e.from)) {
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
    let on = |stream: StreamId| {
        kind.stages
            .iter()
            .copied()
            .filter(move |s| pipeline.stages[s.0].stream == stream)
    };
    for &stream in &kind.fork {
        if let Some(first) = on(stream).next() {
            writeln!(out, "    {START} -> {} [label=\"fork\"];", stage(first))?;
        }
    }
    for &stream in &kind.join {
        if let Some(last) = on(stream).next_back() {
            writeln!(out, "    {} -> {END} [label=\"join\"];", stage(last))?;
        }
    }
    writeln!(out, "}}")
}

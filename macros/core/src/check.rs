//! The rules a pipeline must follow: one commented function per rule, every error collected and
//! reported together, each on the user's own tokens.
//!
//! Two passes, around lowering. [`declarations`] runs on the syntax tree: the rules here on
//! declarations and names, those in [`bounds`] on kernel bounds, those in [`statements`] on
//! what each statement names, those in [`accesses`] on every other appearance of a buffer,
//! those in [`collective`] on communication statements, those in [`devices`] on which device
//! each statement's work reaches, and those in [`limits`] on values no GPU accepts. Only when
//! none of them fails is the pipeline lowered. [`ordering()`] then runs the rules that need
//! the stage graph, in [`mod@ordering`]: `after` cycles and flag waits, and (in [`claims`])
//! `concurrent` claims. Nothing reaches
//! code generation unless every rule passed.

mod accesses;
mod bounds;
mod claims;
mod collective;
mod comm_lengths;
mod control;
mod devices;
mod flag_iterations;
mod flow;
mod hint;
mod iterations;
mod kernel_set;
mod limits;
mod ordering;
mod ranges;
mod repetition;
pub(crate) mod scratch;
mod statements;
mod switch;
mod switch_value;
mod window_parts;
mod windows;

use std::collections::HashMap;

use syn::Ident;

use crate::ast::{self, KernelParamType, type_string};
use crate::ctxt::Ctxt;
use crate::lower;
use crate::scope::{DeclProblem, Memory, MemoryType, Scope};

use hint::unknown;

/// The rules on declarations and statements, on the syntax tree: every name resolves to the
/// right kind of thing, so that lowering cannot fail.
pub fn declarations(scope: &Scope<'_>) -> syn::Result<()> {
    let cx = Ctxt::new();
    let input = scope.input;
    sections(&cx, input);
    attributes(&cx, input);
    unique_names(&cx, scope);
    stream_markers(&cx, scope);
    unsafe_kernels(&cx, input);
    kernel_signatures(&cx, scope);
    bounds::check(&cx, scope);
    declarations_of_buffers(&cx, scope);
    memory_in_params(&cx, scope);
    stage_streams(&cx, scope);
    stage_after(&cx, scope);
    empty_stages(&cx, scope);
    claim_names(&cx, scope);
    statements::check(&cx, scope);
    ranges::scratch_ranges_inside(&cx, scope);
    control::check(&cx, scope);
    kernel_set::check(&cx, scope);
    repetition::check(&cx, scope);
    iterations::check(&cx, scope);
    accesses::check(&cx, scope);
    collective::check(&cx, scope);
    devices::check(&cx, scope);
    limits::check(&cx, scope);
    // Whether every group's sends meet receives is a property of the whole program: judged
    // once each statement passed its own rules, so that a mistake there gives one error.
    if !cx.failed() {
        collective::groups_pair(&cx, scope);
    }
    cx.check()
}

/// The rules on the stage graph.
pub fn ordering(pipeline: &lower::Pipeline<'_>) -> syn::Result<()> {
    let cx = Ctxt::new();
    ordering::check(&cx, pipeline);
    flow::check(&cx, pipeline);
    windows::check(&cx, pipeline);
    cx.check()
}

/// A pipeline has exactly one `streams` block with at least one stream, at most one `params`
/// and one `scratch` block, and at least one stage. Blocks may come in any order.
fn sections(cx: &Ctxt, input: &ast::Pipeline) {
    let (mut streams, mut params, mut scratch) = (0, 0, 0);
    for item in &input.items {
        let (count, keyword, span) = match item {
            ast::Item::Streams(block) => (&mut streams, "streams", block.keyword.span),
            ast::Item::Params(block) => (&mut params, "params", block.keyword.span),
            ast::Item::Scratch(block) => (&mut scratch, "scratch", block.keyword.span),
            _ => continue,
        };
        *count += 1;
        if *count == 2 {
            cx.error_at(
                span,
                format!("second `{keyword}` block; declare all of them in one"),
            );
        }
    }
    let name = &input.name;
    if input.streams().next().is_none() {
        cx.error_spanned_by(
            name,
            format!("pipeline `{name}` declares no streams; add `streams {{ main }}`"),
        );
    }
    if input.stages().next().is_none() {
        let stream = input
            .streams()
            .next()
            .map_or("main".to_owned(), |s| s.name.to_string());
        cx.error_spanned_by(
            name,
            format!(
                "pipeline `{name}` has no stages; add one, e.g. `stage first on {stream} {{ ... }}`"
            ),
        );
    }
}

/// A kernel block declares the C signatures of code the compiler cannot see: a wrong element
/// type or a `&[T]` for a parameter the kernel writes is undefined behaviour on the device.
/// Like Rust 2024's `unsafe extern`, the declaration says so with `unsafe`.
fn unsafe_kernels(cx: &Ctxt, input: &ast::Pipeline) {
    for module in input.items.iter().filter_map(|item| match item {
        ast::Item::Kernels(module) if module.unsafe_token.is_none() => Some(module),
        _ => None,
    }) {
        let name = &module.name;
        cx.error_spanned_by(
            module.keyword,
            format!(
                "kernel signatures are a promise the compiler cannot check; write `unsafe kernels \
                 {name} = ...` to vouch that they match the image, as `unsafe extern` does for \
                 foreign functions"
            ),
        );
    }
}

/// Inside a pipeline only doc comments are accepted: other attributes would be silently
/// dropped, or (`#[cfg]`) would change which stages exist after the graph was computed.
fn attributes(cx: &Ctxt, input: &ast::Pipeline) {
    let mut all: Vec<&syn::Attribute> = Vec::new();
    item_attributes(&input.items, &mut all);
    for attr in all.into_iter().filter(|attr| !attr.path().is_ident("doc")) {
        let path = ast::tokens_string(attr.path());
        cx.error_spanned_by(
            attr,
            format!(
                "unsupported attribute `#[{path}]`; only doc comments are allowed inside a pipeline"
            ),
        );
    }
}

/// The attributes of `items` and everything inside them.
fn item_attributes<'a>(items: &'a [ast::Item], all: &mut Vec<&'a syn::Attribute>) {
    for item in items {
        match item {
            ast::Item::Streams(block) => {
                all.extend(&block.attrs);
                block
                    .streams
                    .iter()
                    .for_each(|stream| all.extend(&stream.attrs));
            }
            ast::Item::Kernels(module) => {
                all.extend(&module.attrs);
                module
                    .kernels
                    .iter()
                    .for_each(|kernel| all.extend(&kernel.attrs));
            }
            ast::Item::Params(block) => {
                all.extend(&block.attrs);
                block
                    .params
                    .iter()
                    .for_each(|param| all.extend(&param.attrs));
            }
            ast::Item::Scratch(block) => {
                all.extend(&block.attrs);
                block
                    .buffers
                    .iter()
                    .for_each(|buffer| all.extend(&buffer.attrs));
            }
            ast::Item::Stage(stage) => all.extend(&stage.attrs),
            ast::Item::Devices(block) => {
                all.extend(&block.attrs);
                block
                    .devices
                    .iter()
                    .for_each(|device| all.extend(&device.attrs));
            }
            ast::Item::For(body) => item_attributes(&body.items, all),
            ast::Item::Step(block) => {
                all.extend(&block.attrs);
                item_attributes(&block.items, all);
            }
            ast::Item::Concurrent(_) | ast::Item::Swap(_) => {}
        }
    }
}

/// Each stream, module, stage, and param or scratch buffer is declared once; kernels are unique
/// within their module and kernel parameters within their kernel. Params and scratch buffers
/// share one namespace because statements name both the same way.
fn unique_names(cx: &Ctxt, scope: &Scope<'_>) {
    duplicates(cx, scope.streams.iter().map(|s| &s.name), |name| {
        format!("duplicate stream `{name}`")
    });
    duplicates(cx, scope.modules.iter().map(|m| &m.name), |name| {
        format!("duplicate kernel module `{name}`")
    });
    for module in &scope.modules {
        let module_name = &module.name;
        duplicates(cx, module.kernels.iter().map(|k| &k.name), |name| {
            format!("duplicate kernel `{name}` in module `{module_name}`")
        });
        for kernel in &module.kernels {
            let kernel_name = &kernel.name;
            duplicates(cx, kernel.params.iter().map(|p| &p.name), |name| {
                format!("duplicate parameter `{name}` in kernel `{kernel_name}`")
            });
        }
    }
    duplicates(cx, scope.input.params().map(|p| &p.name), |name| {
        format!("duplicate param `{name}`")
    });
    duplicates(cx, scope.input.scratch().map(|s| &s.name), |name| {
        format!("duplicate scratch buffer `{name}`")
    });
    let params: HashMap<String, &Ident> = scope
        .input
        .params()
        .map(|param| (param.name.to_string(), &param.name))
        .collect();
    for scratch in scope.input.scratch() {
        if params.contains_key(&scratch.name.to_string()) {
            let name = &scratch.name;
            cx.error_spanned_by(
                name,
                format!("scratch buffer `{name}` has the name of a param; rename one of them"),
            );
        }
    }
    duplicates(cx, scope.stages.iter().map(|s| &s.name), |name| {
        format!("duplicate stage `{name}`")
    });
}

/// Reports every occurrence of a name after its first.
fn duplicates<'a>(
    cx: &Ctxt,
    names: impl Iterator<Item = &'a Ident>,
    message: impl Fn(&Ident) -> String,
) {
    let mut seen = HashMap::new();
    for name in names {
        if seen.insert(name.to_string(), ()).is_some() {
            cx.error_spanned_by(name, message(name));
        }
    }
}

/// Each stream gets a marker type named after the pipeline and the stream in camel case; two
/// different stream names must not produce the same marker (`copy_in` and `copyIn`), nor one
/// that the macro gives a type of its own (stream `graph` of pipeline `Step` and `StepGraph`).
fn stream_markers(cx: &Ctxt, scope: &Scope<'_>) {
    let pipeline = &scope.input.name;
    let mut markers: HashMap<String, &Ident> = HashMap::new();
    for stream in &scope.streams {
        let marker = lower::marker(pipeline, &stream.name);
        if let Some(what) = lower::generated_type(pipeline, &marker) {
            let name = &stream.name;
            cx.error_spanned_by(
                name,
                format!(
                    "stream `{name}` would get the marker type `{marker}`, the name of {what}; \
                     rename the stream (for example `{name}_work`)"
                ),
            );
            continue;
        }
        match markers.get(&marker) {
            Some(first) if **first != stream.name => {
                let name = &stream.name;
                cx.error_spanned_by(
                    name,
                    format!("streams `{first}` and `{name}` would both get the marker type `{marker}`; rename one"),
                );
            }
            Some(_) => {}
            None => {
                markers.insert(marker, &stream.name);
            }
        }
    }
}

/// Kernel parameters are scalars by value, `&[T]` for buffers the kernel reads, or `&mut [T]`
/// for buffers it writes (`&[T; n]`, `&mut [T; n]` with a bound). That is what lets the macro
/// derive each launch's accesses.
fn kernel_signatures(cx: &Ctxt, scope: &Scope<'_>) {
    for kernel in &scope.kernels {
        for param in &kernel.decl.params {
            if let KernelParamType::Unsupported = param.kind() {
                cx.error_spanned_by(
                    &param.ty,
                    format!(
                        "unsupported kernel parameter type `{}`; write a scalar by value, `&[T]` for a buffer the kernel reads or `&mut [T]` for one it writes (`&[T; n]` to bound its indices by `n`)",
                        type_string(&param.ty),
                    ),
                );
            }
        }
    }
}

/// Params borrow their memory (`&` or `&mut`) and scratch buffers are owned by the pipeline,
/// with a length for buffers and none for flag cells. Buffer types name their element type.
fn declarations_of_buffers(cx: &Ctxt, scope: &Scope<'_>) {
    for buffer in &scope.buffers {
        let Some(problem) = buffer.problem else {
            continue;
        };
        let name = buffer.name;
        let ty = type_string(buffer.referent);
        match problem {
            DeclProblem::OwnedParam => {
                let hint = match buffer.memory {
                    Memory::Pageable => format!(
                        "host memory for the GPU must be pinned: declare `{name}: &mut PinnedBuffer<{}>`",
                        buffer.elem.map_or("T".to_owned(), type_string),
                    ),
                    _ => format!(
                        "declare `{name}: &mut {ty}`, or move it to `scratch {{ ... }}` for a buffer the pipeline owns"
                    ),
                };
                cx.error_spanned_by(buffer.ty, format!("param `{name}` takes `{ty}` by value; {hint}"));
            }
            DeclProblem::MissingElem => cx.error_spanned_by(
                buffer.referent,
                format!("`{ty}` needs its element type, e.g. `{ty}<f32>`"),
            ),
            DeclProblem::BorrowedScratch => cx.error_spanned_by(
                buffer.ty,
                format!("scratch buffer `{name}` is owned by the pipeline; write `{name}: {ty}` without the reference"),
            ),
            DeclProblem::ScratchNotMemory => cx.error_spanned_by(
                buffer.ty,
                format!("scratch buffer `{name}` must be a `DeviceBuffer<T>`, `PinnedBuffer<T>` or `FlagCell`, not `{ty}`; values belong in `params {{ ... }}`"),
            ),
            DeclProblem::MissingLen => cx.error_spanned_by(
                name,
                format!("scratch buffer `{name}` needs a length: write `{name}: {ty} = LEN`"),
            ),
            DeclProblem::ConditionLen => {
                let message = format!("condition `{name}` holds one value and takes no length; write `{name}: Condition`");
                match buffer.len {
                    Some(len) => cx.error_spanned_by(len, message),
                    None => cx.error_spanned_by(name, message),
                }
            }
            DeclProblem::ConditionParam => cx.error_spanned_by(
                buffer.ty,
                format!("a `Condition` belongs to the pipeline, which makes one handle per conditional node it builds; declare it in `scratch {{ {name}: Condition }}`"),
            ),
            DeclProblem::FlagLen => {
                let message = format!("flag cell `{name}` holds one value and takes no length; write `{name}: {ty}`");
                match buffer.len {
                    Some(len) => cx.error_spanned_by(len, message),
                    None => cx.error_spanned_by(name, message),
                }
            }
        }
    }
}

/// Every buffer a step reaches is a param of its own, so that each statement's access to it
/// is ordered: a memory type held inside a param's type (`Arc<Mutex<DeviceBuffer<f32>>>`, a
/// `Vec` or tuple of buffers, an `Option<&mut DeviceBuffer<f32>>`, a view) would reach a
/// `call` or `host` statement as a scalar or an opaque handle, which the ordering cannot
/// see through: two stages using the buffer inside it would race.
fn memory_in_params(cx: &Ctxt, scope: &Scope<'_>) {
    for param in scope.input.params() {
        let Some(segment) = crate::scope::hidden_memory(param) else {
            continue;
        };
        let Some(kind) = crate::scope::memory_type(segment) else {
            continue;
        };
        let name = &param.name;
        let held = &segment.ident;
        let elem = crate::scope::memory_elem(segment).map_or("T".to_owned(), type_string);
        let instead = match kind {
            MemoryType::Device | MemoryType::Pinned => format!(
                "`{name}: &mut {held}<{elem}>` (`&` if the step only reads it; several: `{name}: &mut [{held}<{elem}>]`, an array of buffers)"
            ),
            MemoryType::Flag => format!("`{name}: &mut {}`", type_string_of(segment)),
            MemoryType::Window => format!("`{name}: &mut Window<{elem}>`"),
            MemoryType::Condition => format!(
                "in `scratch {{ {name}: Condition }}` (a condition belongs to the pipeline)"
            ),
            MemoryType::DeviceView => format!(
                "`{name}: &mut DeviceBuffer<{elem}>`, the buffer it views (a statement names a part of it as `{name}[lo..hi]`)"
            ),
            MemoryType::PinnedView => format!(
                "`{name}: &mut PinnedBuffer<{elem}>`, the buffer it views (a statement names a part of it as `{name}[lo..hi]`)"
            ),
            MemoryType::Managed => format!(
                "`{name}: &mut ManagedBuffer<{elem}>`, a handle that `call` and `host` statements name whole in `reads(...)`/`writes(...)`"
            ),
        };
        cx.error_spanned_by(
            segment,
            format!(
                "param `{name}` holds a `{held}` inside `{}`, where the pipeline cannot see it: it orders the memory each statement names, so stages that reach this one through `{name}` would race; declare it as a param of its own, {instead}, and name that in the statements that use it",
                type_string(&param.ty)
            ),
        );
    }
}

/// `FlagCell` or `FlagCell<u64>`, as written.
fn type_string_of(segment: &syn::PathSegment) -> String {
    ast::tokens_string(segment)
}

/// Every stage runs on a declared stream.
fn stage_streams(cx: &Ctxt, scope: &Scope<'_>) {
    let names = scope.stream_names();
    for stage in &scope.stages {
        if scope.stream(&stage.stream).is_none() {
            cx.error_spanned_by(
                &stage.stream,
                unknown(
                    "stream",
                    &stage.stream,
                    &names,
                    "declare it in `streams { ... }`",
                ),
            );
        }
    }
}

/// `after` names declared stages, each once, and not the stage itself. (Cycles through later
/// stages need the whole graph; `ordering` finds them.)
fn stage_after(cx: &Ctxt, scope: &Scope<'_>) {
    let names = scope.stage_names();
    for stage in &scope.stages {
        let mut seen = HashMap::new();
        for name in &stage.after {
            if *name == stage.name {
                cx.error_spanned_by(
                    name,
                    format!("stage `{name}` cannot run after itself; remove `{name}` from `after`"),
                );
            } else if scope.stage(name).is_none() {
                cx.error_spanned_by(
                    name,
                    unknown(
                        "stage",
                        name,
                        &names,
                        "declare it with `stage NAME on STREAM { ... }`",
                    ),
                );
            } else if seen.insert(name.to_string(), ()).is_some() {
                cx.error_spanned_by(
                    name,
                    format!("`{name}` is named twice in `after`; keep one"),
                );
            }
        }
    }
}

/// A stage does something. An empty stage with `after` is allowed: it is a barrier that orders
/// the later stages of its stream after the stages it names.
fn empty_stages(cx: &Ctxt, scope: &Scope<'_>) {
    for stage in &scope.stages {
        if stage.statements.is_empty() && stage.after.is_empty() {
            let name = &stage.name;
            cx.error_spanned_by(
                name,
                format!(
                    "stage `{name}` is empty; add a statement, or `after ...` to make it a barrier"
                ),
            );
        }
    }
}

/// `concurrent(...)` names at least two declared stages, each once. Whether the claim holds is
/// checked on the stage graph in `ordering`.
fn claim_names(cx: &Ctxt, scope: &Scope<'_>) {
    let names = scope.stage_names();
    for claim in scope.input.claims() {
        if claim.stages.len() < 2 {
            cx.error_at(
                claim.keyword.span,
                "`concurrent` needs at least two stages, e.g. `concurrent(a, b)`",
            );
        }
        let mut seen = HashMap::new();
        for name in &claim.stages {
            if scope.stage(name).is_none() {
                cx.error_spanned_by(
                    name,
                    unknown(
                        "stage",
                        name,
                        &names,
                        "declare it with `stage NAME on STREAM { ... }`",
                    ),
                );
            } else if seen.insert(name.to_string(), ()).is_some() {
                cx.error_spanned_by(
                    name,
                    format!("`{name}` is named twice in `concurrent`; keep one"),
                );
            }
        }
    }
}

//! Rules on devices: what `devices { ... }` and `on DEVICE` declare, and that each
//! statement's work stays on the device of its stage's stream.
//!
//! A kernel, a memset, a flag operation or a communication statement reaches only the
//! memory of its own device; a copy goes between host and device memory of its own device,
//! or between two devices (a peer copy, enqueued on a stream of either). A kernel reaches a
//! buffer on another device only where its launch says so, `peer(halo)` (peer access, which
//! `new` enables). Either way the access is one the ordering analysis orders like any other:
//! everything the checks do for one device holds across devices.
//!
//! Where a device depends on a loop variable (a stage on `s[i]` of a stream array `on
//! gpu[..]`, a buffer `xs[i]` of an array `on gpu[..]`) the macro cannot see it: the
//! runtime checks those launches before each one is enqueued.

use std::collections::HashMap;

use syn::Ident;

use super::hint::unknown;
use super::iterations::{Evaluation, Iterations};
use crate::ast::{self, BufRef, KernelParamType, Statement};
use crate::ctxt::Ctxt;
use crate::scope::{Memory, Scope, Value};

/// Every device rule.
pub fn check(cx: &Ctxt, scope: &Scope<'_>) {
    declarations(cx, scope);
    for (id, stage) in scope.stages.iter().enumerate() {
        let Some(stream) = scope.stream(&stage.stream) else {
            continue;
        };
        // Inside a `for` with constant bounds, every iteration is checked with the loop
        // variable's value (`work[i]` next to `fields[(i + 1) % 4]`); the first iteration
        // with an error reports it.
        let body = scope.stage_loops[id].map(|l| scope.loops[l]);
        if body.and_then(Iterations::of).is_some() {
            for evaluation in Evaluation::of_stage(scope, id) {
                let here = Ctxt::new();
                stage_statements(&here, scope, stage, stream, &evaluation);
                if cx.absorb(here) {
                    break;
                }
            }
            continue;
        }
        stage_statements(cx, scope, stage, stream, &Evaluation::default());
        if let Some(body) = body {
            launches_in_every_iteration(cx, scope, stage, stream, body);
        }
    }
}

/// Inside a `for` whose bounds are not constants: a stage on element `lane` of a stream
/// array `on gpu[..]` given element `index` of a buffer array `on gpu[..]` of the same
/// devices, where `index - lane` is a constant other than 0 whatever the params are
/// (`work[i]` and `fields[i + 1]`), runs a kernel on another device's memory in every
/// iteration.
fn launches_in_every_iteration(
    cx: &Ctxt,
    scope: &Scope<'_>,
    stage: &ast::Stage,
    stream: usize,
    body: &ast::ForLoop,
) {
    let Some(lane) = stage.lane.as_ref() else {
        return;
    };
    if !scope.stream_per_device(stream) {
        return;
    }
    let symbols = super::iterations::symbols(scope, body);
    let Some(lane_poly) = super::iterations::polynomial(scope, lane, &symbols) else {
        return;
    };
    for statement in ast::flatten(&stage.statements) {
        let Statement::Launch(launch) = statement else {
            continue;
        };
        let Some(kernel) = launch
            .target()
            .and_then(|(module, kernel)| scope.kernel(scope.module(module)?, kernel))
            .map(|id| scope.kernels[id].decl)
        else {
            continue;
        };
        for (param, arg) in kernel.params.iter().zip(&launch.args) {
            let (KernelParamType::Slice { .. }, Some(buffer)) =
                (param.kind(), BufRef::of_expr(arg))
            else {
                continue;
            };
            let (Some(index), Some(id)) = (buffer.index, scope.buffer(buffer.name)) else {
                continue;
            };
            let peer = launch.peer.as_ref().is_some_and(|p| p.names(buffer.name));
            if peer
                || !scope.buffer_per_device(id)
                || scope.buffer_device(id) != scope.stream_device(stream)
            {
                continue;
            }
            let apart = super::iterations::polynomial(scope, index, &symbols)
                .and_then(|poly| poly.sub(&lane_poly))
                .and_then(|difference| difference.as_constant());
            let Some(apart) = apart.filter(|&d| d != 0) else {
                continue;
            };
            let name = buffer.name;
            let (index, lane) = (ast::tokens_string(index), ast::tokens_string(lane));
            let array = &scope.devices[scope.stream_device(stream)].decl.name;
            cx.error_spanned_by(
                name,
                format!(
                    "`{name}[{index}]` lives on device `{array}[{lane} {} {}]`, but stage `{}` runs on stream `{}[{lane}]`, on device `{array}[{lane}]`, in every iteration: kernel `{}` reaches only its own device's memory; pass `{name}[{lane}]`, or reach it through peer access: `peer({name})` after the launch",
                    if apart > 0 { "+" } else { "-" },
                    apart.unsigned_abs(),
                    stage.name,
                    stage.stream,
                    kernel.name,
                ),
            );
        }
    }
}

/// The device rules on one stage's statements, in one iteration.
fn stage_statements(
    cx: &Ctxt,
    scope: &Scope<'_>,
    stage: &ast::Stage,
    stream: usize,
    iteration: &Evaluation<'_>,
) {
    let Some(device) = stage_device(cx, scope, stage, stream, iteration) else {
        return;
    };
    let site = Site {
        scope,
        stage,
        device,
        iteration,
    };
    for statement in &stage.statements {
        site.statement(cx, statement);
    }
}

/// One `devices` block with at least one device, each named once; every `on` names one of
/// them, after a stream or a param or scratch buffer of device memory (or the communicator).
fn declarations(cx: &Ctxt, scope: &Scope<'_>) {
    let blocks: Vec<&ast::Devices> = scope
        .input
        .items
        .iter()
        .filter_map(|item| match item {
            ast::Item::Devices(block) => Some(block),
            _ => None,
        })
        .collect();
    for block in blocks.iter().skip(1) {
        cx.error_at(
            block.keyword.span,
            "second `devices` block; declare all of them in one",
        );
    }
    for block in &blocks {
        if block.devices.is_empty() {
            cx.error_at(
                block.keyword.span,
                "`devices` declares no device; name one per context `new` takes, e.g. `devices { gpu0, gpu1 }`",
            );
        }
    }
    let mut seen: HashMap<String, &Ident> = HashMap::new();
    for device in scope.input.devices() {
        if seen.insert(device.name.to_string(), &device.name).is_some() {
            let name = &device.name;
            cx.error_spanned_by(name, format!("duplicate device `{name}`"));
        }
        if let Some(count) = &device.count {
            let positive = crate::constant::value(count).is_some_and(|n| n > 0);
            if !positive {
                cx.error_spanned_by(
                    count,
                    format!(
                        "a device array's length is a positive integer constant, e.g. `{}[4]`; `new` then takes `&[Context; 4]`",
                        device.name
                    ),
                );
            }
        }
    }
    let names: Vec<String> = scope.input.devices().map(|d| d.name.to_string()).collect();
    let known = |on: &ast::OnDevice| {
        if scope.devices.is_empty() {
            let name = &on.device;
            cx.error_spanned_by(
                name,
                format!(
                    "`on {name}` names a device, but the pipeline declares none; add `devices {{ ... }}` with `{name}` among them (its `new` then takes one context per device)"
                ),
            );
        } else if let Some(id) = scope.device(&on.device) {
            index(cx, scope, on, id);
        } else {
            cx.error_spanned_by(
                &on.device,
                unknown(
                    "device",
                    &on.device,
                    &names,
                    "declare it in `devices { ... }`",
                ),
            );
        }
    };
    for stream in &scope.streams {
        if let Some(on) = &stream.device {
            known(on);
            each_on_array(cx, scope, on, stream.count.as_ref(), "stream", &stream.name);
        }
    }
    for param in scope.input.params() {
        let Some(on) = &param.device else {
            continue;
        };
        match scope.value(&param.name) {
            Some(Value::Scalar(_)) => cx.error_spanned_by(
                &on.device,
                format!(
                    "`{}` is a scalar, copied into each step on the host; only buffers live on a device: remove `on {}`",
                    param.name, on.device
                ),
            ),
            Some(Value::Buffer(id)) => {
                let buffer = &scope.buffers[id];
                match buffer.memory {
                    Memory::Device | Memory::Pinned | Memory::Flag | Memory::Condition => {
                        known(on);
                        if let (Some(ast::DeviceIndex::Each(span)), false) = (&on.index, buffer.array) {
                            cx.error_at(
                                *span,
                                format!(
                                    "`on {}[..]` puts element `k` of an array on `{}[k]`, but `{}` is one buffer: make it an array (`&mut [DeviceBuffer<T>]`) or name one device, `on {}[0]`",
                                    on.device, on.device, param.name, on.device
                                ),
                            );
                        }
                    }
                    Memory::Opaque if buffer.is_communicator() => known(on),
                    Memory::Pageable | Memory::Opaque => cx.error_spanned_by(
                        &on.device,
                        format!(
                            "`{}` is not memory of a device (`{}`); `on` applies to `DeviceBuffer`, `PinnedBuffer`, `FlagCell` and the communicator: remove `on {}`",
                            param.name,
                            ast::type_string(buffer.referent),
                            on.device
                        ),
                    ),
                }
            }
            None => {}
        }
    }
    for scratch in scope.input.scratch() {
        if let Some(on) = &scratch.device {
            known(on);
            if let Some(ast::DeviceIndex::Each(span)) = &on.index {
                cx.error_at(
                    *span,
                    format!(
                        "a scratch buffer is one buffer, on one device: name one, `on {}[0]`, or declare a param array `{}: &mut [DeviceBuffer<T>] on {}[..]`",
                        on.device, scratch.name, on.device
                    ),
                );
            }
        }
    }
}

/// `on gpu0` names a device; `on gpu[k]` an element of a device array, `k` a constant below
/// its length; `on gpu[..]` every element, for an array of streams or buffers.
fn index(cx: &Ctxt, scope: &Scope<'_>, on: &ast::OnDevice, id: usize) {
    let name = &on.device;
    let array = scope.devices[id].element.is_some();
    let len = scope.array_devices(id);
    match (&on.index, array) {
        (None, false) | (Some(ast::DeviceIndex::Each(_)), true) => {}
        (None, true) => cx.error_spanned_by(
            name,
            format!(
                "`{name}` is an array of {len} devices: name one, `on {name}[0]`, or put element `k` of a stream array or buffer array on `{name}[k]` with `on {name}[..]`"
            ),
        ),
        (Some(ast::DeviceIndex::Each(span)), false) => cx.error_at(
            *span,
            format!("`{name}` is one device, not an array: write `on {name}`"),
        ),
        (Some(ast::DeviceIndex::At(expr)), false) => cx.error_spanned_by(
            expr,
            format!("`{name}` is one device, not an array: write `on {name}`"),
        ),
        (Some(ast::DeviceIndex::At(expr)), true) => match crate::constant::value(expr) {
            Some(k) if (0..len as i128).contains(&k) => {}
            Some(k) => cx.error_spanned_by(
                expr,
                format!(
                    "device index {k} is past the device array `{name}` of {len} devices (`{name}[0]` to `{name}[{}]`)",
                    len - 1
                ),
            ),
            None => cx.error_spanned_by(
                expr,
                format!(
                    "a stream or buffer is placed on its device when `new` runs: write a constant index below {len}, or `on {name}[..]` to put element `k` of an array on `{name}[k]`"
                ),
            ),
        },
    }
}

/// A stream array `on gpu[..]` has one stream per device: its length is the device array's.
fn each_on_array(
    cx: &Ctxt,
    scope: &Scope<'_>,
    on: &ast::OnDevice,
    count: Option<&syn::Expr>,
    what: &str,
    name: &Ident,
) {
    let Some(ast::DeviceIndex::Each(span)) = &on.index else {
        return;
    };
    let Some(id) = scope.device(&on.device) else {
        return;
    };
    let len = scope.array_devices(id);
    let device = &on.device;
    match count {
        None => cx.error_at(
            *span,
            format!(
                "`on {device}[..]` puts element `k` of a {what} array on `{device}[k]`, but `{name}` is one {what}: declare `{name}[{len}] on {device}[..]`, or name one device, `on {device}[0]`"
            ),
        ),
        Some(count) => {
            if crate::constant::value(count) != Some(len as i128) {
                cx.error_spanned_by(
                    count,
                    format!(
                        "a {what} array `on {device}[..]` has one {what} per device: declare `{name}[{len}]`, the length of `{device}`"
                    ),
                );
            }
        }
    }
}

/// The device a stage runs on, when the macro can see it: its stream's, or for a stream
/// array `on gpu[..]` the element its constant lane names (a lane past the array is an
/// error here).
fn stage_device(
    cx: &Ctxt,
    scope: &Scope<'_>,
    stage: &ast::Stage,
    stream: usize,
    iteration: &Evaluation<'_>,
) -> Option<usize> {
    let base = scope.stream_device(stream);
    if !scope.stream_per_device(stream) {
        return Some(base);
    }
    let lane = stage.lane.as_ref()?;
    let k = iteration.value(lane)?;
    let len = scope.array_devices(base);
    if !(0..len as i128).contains(&k) {
        let name = &stage.stream;
        cx.error_spanned_by(
            lane,
            format!(
                "stream `{name}` has {len} streams, one per device of {}; `{name}[{k}]`{} is past them",
                scope.devices[base].decl.name,
                iteration.when(Some(lane)),
            ),
        );
        return None;
    }
    Some(base + k as usize)
}

/// A stage, and the device its stream runs on (in one iteration, inside a loop).
struct Site<'s, 'a> {
    scope: &'s Scope<'a>,
    stage: &'a ast::Stage,
    device: usize,
    iteration: &'s Evaluation<'s>,
}

impl Site<'_, '_> {
    /// The device `name` lives on, when it is device memory (or the communicator).
    fn device_of(&self, name: &Ident) -> Option<usize> {
        let id = self.scope.buffer(name)?;
        let buffer = &self.scope.buffers[id];
        let memory = matches!(
            buffer.memory,
            Memory::Device | Memory::Pinned | Memory::Flag | Memory::Condition
        ) || buffer.is_communicator();
        (memory && buffer.problem.is_none() && !self.scope.buffer_per_device(id))
            .then(|| self.scope.buffer_device(id))
    }

    /// The device element `index` of `name` lives on: [`Site::device_of`], or for an array
    /// `on gpu[..]` the element a constant index names (one past the array is an error
    /// here, as CUDA would fault on it).
    fn device_of_element(
        &self,
        cx: &Ctxt,
        name: &Ident,
        index: Option<&syn::Expr>,
    ) -> Option<usize> {
        let id = self.scope.buffer(name)?;
        if !self.scope.buffer_per_device(id) {
            return self.device_of(name);
        }
        let k = self.iteration.value(index?)?;
        let base = self.scope.buffer_device(id);
        let len = self.scope.array_devices(base);
        if !(0..len as i128).contains(&k) {
            cx.error_spanned_by(
                index,
                format!(
                    "`{name}` has one buffer per device of {}, {len} in all; `{name}[{k}]`{} is past them",
                    self.scope.devices[base].decl.name,
                    self.iteration.when(index),
                ),
            );
            return None;
        }
        Some(base + k as usize)
    }

    /// "stage `s` runs on stream `a`, on device `gpu0`".
    fn where_(&self) -> String {
        let lane = self
            .stage
            .lane
            .as_ref()
            .map_or(String::new(), |l| format!("[{}]", ast::tokens_string(l)));
        format!(
            "stage `{}` runs on stream `{}{lane}`, on device {}{}",
            self.stage.name,
            self.stage.stream,
            self.scope.device_name(self.device),
            match self.scope.stream(&self.stage.stream) {
                Some(id) if self.scope.stream_per_device(id) => {
                    self.iteration.when(self.stage.lane.as_ref())
                }
                _ => String::new(),
            },
        )
    }

    /// `name` must live on the stage's device; `what` says what reaches it and `fix` what to
    /// write instead.
    fn local(&self, cx: &Ctxt, name: &Ident, what: &str) {
        let device = self.device_of(name);
        self.local_at(cx, name, device, what);
    }

    /// [`Site::local`] for a buffer found on `device`.
    fn local_at(&self, cx: &Ctxt, name: &Ident, device: Option<usize>, what: &str) {
        self.local_element(cx, name, None, device, what);
    }

    /// [`Site::local_at`] for `name[index]`, an element of a buffer array (named with the
    /// element its index gives in this iteration).
    fn local_element(
        &self,
        cx: &Ctxt,
        name: &Ident,
        index: Option<&syn::Expr>,
        device: Option<usize>,
        what: &str,
    ) {
        let subject = match index {
            Some(index)
                if self
                    .scope
                    .buffer(name)
                    .is_some_and(|id| self.scope.buffer_per_device(id)) =>
            {
                let written = ast::tokens_string(index);
                match self.iteration.value(index) {
                    Some(k) if written != k.to_string() => format!(
                        "`{name}[{written}]` (`{name}[{k}]`{})",
                        self.iteration.when(Some(index))
                    ),
                    _ => format!("`{name}[{written}]`"),
                }
            }
            _ => format!("`{name}`"),
        };
        let Some(device) = device else {
            return;
        };
        if device == self.device {
            return;
        }
        let there = self.scope.device_name(device);
        let kernel = what.starts_with("kernel");
        let on_here = self
            .scope
            .devices
            .get(self.device)
            .map_or(String::new(), |d| d.label());
        let on_there = self
            .scope
            .devices
            .get(device)
            .map_or(String::new(), |d| d.label());
        let id = self.scope.buffer(name);
        let memory = id.map(|id| self.scope.buffers[id].memory);
        // Only device memory copies between devices (a peer copy): `copy` refuses flag
        // cells, and pinned memory copies to and from its own device only.
        let why = match memory {
            Some(Memory::Pinned) => {
                ", and pinned memory, though it is the host's, is allocated for one device's context: the runtime reaches and orders it through that device's streams only"
            }
            Some(Memory::Flag) => {
                ", and a flag cell is one word that its device's streams poll and write in place (`copy` does not take it)"
            }
            _ => "",
        };
        let fix = match memory {
            // A fill writes the buffer: a copy of it on this device would be filled instead.
            Some(Memory::Device) | None if what == "a `fill`" => {
                format!("run this stage on a stream `on {on_there}`")
            }
            Some(Memory::Device) | None => format!(
                "copy it first, in a stage ordered before this one (`copy {name} -> {name}_{on_here};` into a buffer declared `on {on_here}`), {}run this stage on a stream `on {on_there}`{}",
                if kernel { "" } else { "or " },
                if kernel {
                    format!(", or reach it through peer access: `peer({name})` after the launch")
                } else {
                    String::new()
                },
            ),
            Some(_) if id.is_some_and(|id| self.scope.buffer_per_device(id)) => format!(
                "name the element of `{name}` that lives on device {}, or run this stage on a stream `on {on_there}`",
                self.scope.device_name(self.device)
            ),
            Some(_) => format!(
                "declare `{name}` `on {on_here}`, or run this stage on a stream `on {on_there}`"
            ),
        };
        cx.error_spanned_by(
            name,
            format!(
                "{subject} lives on device {there}, but {}: {what} reaches only its own device's memory{why}; {fix}",
                self.where_(),
            ),
        );
    }

    fn statement(&self, cx: &Ctxt, statement: &Statement) {
        match statement {
            Statement::Launch(launch) => self.launch(cx, launch),
            Statement::Copy(copy) => self.copy(cx, copy),
            Statement::Fill(fill) => {
                // An element of a buffer array is on its own device (`xs[(i + 1) % 2]` in
                // a constant loop is decided here, as for a launch's arguments).
                let dst = fill.dst_ref.borrow();
                let device = self.device_of_element(cx, dst.name, dst.index);
                self.local_element(cx, dst.name, dst.index, device, "a `fill`");
            }
            Statement::Wait(wait) => self.local(cx, &wait.flag, "a `wait`"),
            Statement::Write(write) => self.local(cx, &write.flag, "a `write`"),
            Statement::Call(call) => {
                let function = format!("`{}`", ast::function_name(&call.call));
                for name in call.accesses.reads().chain(call.accesses.writes()) {
                    self.local(cx, name, &function);
                }
            }
            Statement::Comm(comm) => self.comm(cx, comm),
            Statement::Control(control) => {
                if self
                    .scope
                    .input
                    .items
                    .iter()
                    .any(|item| matches!(item, ast::Item::Devices(_)))
                {
                    let instead = if matches!(control.test(), Some(ast::Condition::Step(_))) {
                        "run the work every k-th step on the host instead (a second kind of \
                         step, `step snapshot { .. }`, run when `step % k == 0` in your loop)"
                    } else {
                        "decide on the host (read the value back between replays)"
                    };
                    cx.error_at(
                        control.keyword_span(),
                        format!(
                            "{} `{}` in a pipeline with `devices`: a step over several devices \
                             is captured from its streams, and a conditional node cannot be \
                             captured that way yet; {instead}, or drop `devices` and use one \
                             rank per GPU",
                            if control.word() == "if" { "an" } else { "a" },
                            control.word()
                        ),
                    );
                }
                for body in control.bodies() {
                    for statement in body {
                        self.statement(cx, statement);
                    }
                }
            }
            // The host function is enqueued on the stage's stream, which orders it against
            // the memory it declares: that memory must be the stage's device's, as a `call`'s.
            // Pinned memory is the host's, but the runtime takes a closure's copy of it through
            // the stream and refuses a buffer of another context (`host_closure_with`), so a
            // pinned buffer of another device is refused here rather than at every run.
            Statement::Host(host) => {
                for name in host.accesses.reads().chain(host.accesses.writes()) {
                    self.local(cx, name, "a `host` closure");
                }
            }
            Statement::NotCapturable(_) => {}
        }
    }

    fn launch(&self, cx: &Ctxt, launch: &ast::Launch) {
        let Some(kernel) = launch
            .target()
            .and_then(|(module, kernel)| self.scope.kernel(self.scope.module(module)?, kernel))
            .map(|id| self.scope.kernels[id].decl)
        else {
            return;
        };
        if let (Some(peer), true) = (&launch.peer, self.scope.devices.is_empty()) {
            cx.error_at(
                peer.span,
                "`peer` reaches a buffer on another device, but the pipeline declares no devices; remove `peer(..)`, or declare `devices { ... }` and put the buffer `on` one",
            );
        }
        let what = format!("kernel `{}`", kernel.name);
        let mut passed: Vec<&Ident> = Vec::new();
        for (param, arg) in kernel.params.iter().zip(&launch.args) {
            let (KernelParamType::Slice { .. }, Some(buffer)) =
                (param.kind(), BufRef::of_expr(arg))
            else {
                continue;
            };
            passed.push(buffer.name);
            let device = self.device_of_element(cx, buffer.name, buffer.index);
            if launch
                .peer
                .as_ref()
                .is_some_and(|peer| peer.names(buffer.name))
            {
                continue;
            }
            self.local_element(cx, buffer.name, buffer.index, device, &what);
        }
        if let Some(peer) = &launch.peer {
            for name in &peer.names {
                if !passed.contains(&name) {
                    cx.error_spanned_by(
                        name,
                        format!(
                            "`peer({name})` names a buffer this launch does not pass to kernel `{}`; name only its buffer arguments that may live on another device",
                            kernel.name
                        ),
                    );
                }
            }
        }
    }

    /// Host memory copies to and from its own device; between two devices a copy is a peer
    /// copy, enqueued on a stream of either.
    fn copy(&self, cx: &Ctxt, copy: &ast::Copy) {
        let memory = |name: &Ident| {
            self.scope
                .buffer(name)
                .map(|id| self.scope.buffers[id].memory)
        };
        let (Some(src_memory), Some(dst_memory)) = (memory(&copy.src), memory(&copy.dst)) else {
            return;
        };
        // An element of a buffer array is on its own device (`f[1]`, or `f[i]` in a constant
        // loop), as for a `fill` or a launch's arguments.
        let (src_ref, dst_ref) = (copy.src_ref.borrow(), copy.dst_ref.borrow());
        // `f` or `f[1]`, as written.
        let element = |end: &ast::BufRef<'_>| match end.index {
            Some(index) => format!("{}[{}]", end.name, ast::tokens_string(index)),
            None => end.name.to_string(),
        };
        if src_memory == Memory::Device && dst_memory == Memory::Device {
            let src = self.device_of_element(cx, src_ref.name, src_ref.index);
            let dst = self.device_of_element(cx, dst_ref.name, dst_ref.index);
            let (Some(src), Some(dst)) = (src, dst) else {
                return;
            };
            if src != self.device && dst != self.device {
                let name = |d: usize| self.scope.device_name(d);
                cx.error_between(
                    copy.src.span(),
                    copy.dst.span(),
                    format!(
                        "`copy {} -> {}` goes from device {} to device {}, but {}; a peer copy is enqueued on a stream of one of its two devices: run the stage on a stream of {} or {}",
                        element(&src_ref),
                        element(&dst_ref),
                        name(src),
                        name(dst),
                        self.where_(),
                        name(src),
                        name(dst)
                    ),
                );
            }
            return;
        }
        for end in [&src_ref, &dst_ref] {
            let device = self.device_of_element(cx, end.name, end.index);
            self.local_element(
                cx,
                end.name,
                end.index,
                device,
                "a `copy` to or from host memory",
            );
        }
    }

    /// The communicator runs on one device: its statements run on streams of that device,
    /// over buffers of that device.
    fn comm(&self, cx: &Ctxt, comm: &ast::Comm) {
        let word = comm.word();
        let communicator = self
            .scope
            .buffers
            .iter()
            .enumerate()
            .find(|(_, buffer)| buffer.is_communicator());
        if let Some((id, buffer)) = communicator {
            let device = self.scope.buffer_device(id);
            if device != self.device {
                cx.error_at(
                    comm.keyword,
                    format!(
                        "`{word}` goes through `{}`, which runs on device {}, but {}; put the stage on a stream of device {}",
                        buffer.name,
                        self.scope.device_name(device),
                        self.where_(),
                        self.scope.device_name(device)
                    ),
                );
                return;
            }
        }
        for (operand, _) in comm.operands() {
            self.local(cx, &operand.name, &format!("`{word}`"));
        }
    }
}

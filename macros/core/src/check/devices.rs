//! Rules on devices: what `devices { ... }` and `on DEVICE` declare, and that each
//! statement's work stays on the device of its stage's stream.
//!
//! A kernel, a memset, a flag operation or a communication statement reaches only the
//! memory of its own device; a copy goes between host and device memory of its own device,
//! or between two devices (a peer copy, enqueued on a stream of either). So a buffer on
//! another device is reached only through a `copy`, which the ordering analysis orders like
//! any other access: everything the checks do for one device holds across devices.

use std::collections::HashMap;

use syn::Ident;

use super::hint::unknown;
use crate::ast::{self, KernelParamType, Statement, bare_ident};
use crate::ctxt::Ctxt;
use crate::scope::{Memory, Scope, Value};

/// Every device rule.
pub fn check(cx: &Ctxt, scope: &Scope<'_>) {
    declarations(cx, scope);
    for stage in &scope.stages {
        let Some(stream) = scope.stream(&stage.stream) else {
            continue;
        };
        let site = Site {
            scope,
            stage,
            device: scope.stream_device(stream),
        };
        for statement in &stage.statements {
            site.statement(cx, statement);
        }
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
    for device in &scope.devices {
        if seen.insert(device.name.to_string(), &device.name).is_some() {
            let name = &device.name;
            cx.error_spanned_by(name, format!("duplicate device `{name}`"));
        }
    }
    let names = scope.device_names();
    let known = |on: &ast::OnDevice| {
        if scope.devices.is_empty() {
            let name = &on.device;
            cx.error_spanned_by(
                name,
                format!(
                    "`on {name}` names a device, but the pipeline declares none; add `devices {{ ... }}` with `{name}` among them (its `new` then takes one context per device)"
                ),
            );
        } else if scope.device(&on.device).is_none() {
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
                    Memory::Device | Memory::Pinned | Memory::Flag => known(on),
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
        }
    }
}

/// A stage, and the device its stream runs on.
struct Site<'s, 'a> {
    scope: &'s Scope<'a>,
    stage: &'a ast::Stage,
    device: usize,
}

impl Site<'_, '_> {
    /// The device `name` lives on, when it is device memory (or the communicator).
    fn device_of(&self, name: &Ident) -> Option<usize> {
        let id = self.scope.buffer(name)?;
        let buffer = &self.scope.buffers[id];
        let memory = matches!(
            buffer.memory,
            Memory::Device | Memory::Pinned | Memory::Flag
        ) || buffer.is_communicator();
        (memory && buffer.problem.is_none()).then(|| self.scope.buffer_device(id))
    }

    /// "stage `s` runs on stream `a`, on device `gpu0`".
    fn where_(&self) -> String {
        format!(
            "stage `{}` runs on stream `{}`, on device {}",
            self.stage.name,
            self.stage.stream,
            self.scope.device_name(self.device)
        )
    }

    /// `name` must live on the stage's device; `what` says what reaches it and `fix` what to
    /// write instead.
    fn local(&self, cx: &Ctxt, name: &Ident, what: &str) {
        let Some(device) = self.device_of(name) else {
            return;
        };
        if device == self.device {
            return;
        }
        let there = self.scope.device_name(device);
        let on_here = self
            .scope
            .devices
            .get(self.device)
            .map_or(String::new(), |d| d.name.to_string());
        let on_there = self
            .scope
            .devices
            .get(device)
            .map_or(String::new(), |d| d.name.to_string());
        cx.error_spanned_by(
            name,
            format!(
                "`{name}` lives on device {there}, but {}: {what} reaches only its own device's memory; copy it first, in a stage ordered before this one (`copy {name} -> {name}_{on_here};` into a buffer declared `on {on_here}`), or run this stage on a stream `on {on_there}`",
                self.where_(),
            ),
        );
    }

    fn statement(&self, cx: &Ctxt, statement: &Statement) {
        match statement {
            Statement::Launch(launch) => self.launch(cx, launch),
            Statement::Copy(copy) => self.copy(cx, copy),
            Statement::Fill(fill) => self.local(cx, &fill.dst, "a `fill`"),
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
                    cx.error_at(
                        control.keyword_span(),
                        format!(
                            "a device `{}` in a pipeline with `devices`: a step over several \
                             devices is captured from its streams, and a conditional node cannot \
                             be captured that way yet; decide on the host (read the value back \
                             between replays), or drop `devices` and use one rank \
                             per GPU",
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
            Statement::Host(_) | Statement::NotCapturable(_) => {}
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
        let what = format!("kernel `{}`", kernel.name);
        for (param, arg) in kernel.params.iter().zip(&launch.args) {
            if let (KernelParamType::Slice { .. }, Some(name)) = (param.kind(), bare_ident(arg)) {
                self.local(cx, name, &what);
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
        if src_memory == Memory::Device && dst_memory == Memory::Device {
            let (Some(src), Some(dst)) = (self.device_of(&copy.src), self.device_of(&copy.dst))
            else {
                return;
            };
            if src != self.device && dst != self.device {
                let name = |d: usize| self.scope.device_name(d);
                cx.error_between(
                    copy.src.span(),
                    copy.dst.span(),
                    format!(
                        "`copy {} -> {}` goes from device {} to device {}, but {}; a peer copy is enqueued on a stream of one of its two devices: run the stage on a stream of {} or {}",
                        copy.src,
                        copy.dst,
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
        self.local(cx, &copy.src, "a `copy` to or from host memory");
        self.local(cx, &copy.dst, "a `copy` to or from host memory");
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

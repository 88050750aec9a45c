//! Name resolution, built once per input and shared by `check` and `lower`: every declaration
//! of the pipeline indexed by name, and every param and scratch type classified as a scalar or
//! as memory.
//!
//! Where a name is declared twice the first declaration wins; `check` reports the second.

use std::collections::HashMap;

use syn::{Expr, Ident, Type};

use crate::ast::{self, BufRef, KernelParamType, ungroup_type};
use crate::symbol::{
    COMMUNICATOR, CONDITION, DEVICE_BUFFER, DEVICE_VIEWS, FLAG_CELL, MANAGED_BUFFER, PINNED_BUFFER,
    PINNED_VIEWS, VEC, WINDOW,
};

/// The declarations of one pipeline, by name.
#[derive(Debug)]
pub struct Scope<'a> {
    /// The whole input.
    pub input: &'a ast::Pipeline,
    /// Streams in declaration order; the index is the stream id.
    pub streams: Vec<&'a ast::Stream>,
    /// Kernel modules in declaration order.
    pub modules: Vec<&'a ast::Module>,
    /// Kernels over all modules, in declaration order.
    pub kernels: Vec<KernelDecl<'a>>,
    /// Scalar params in declaration order.
    pub scalars: Vec<&'a ast::Param>,
    /// Buffer params, then scratch buffers, in declaration order.
    pub buffers: Vec<BufferDecl<'a>>,
    /// Stages in program order; the index is the stage id.
    pub stages: Vec<&'a ast::Stage>,
    /// Declared devices in order, a device array's elements one by one; none for a pipeline
    /// on one device (its `new` takes one context).
    pub devices: Vec<DeviceSlot<'a>>,
    device_ids: HashMap<String, usize>,
    /// Where each stage sits (parallel to `stages`).
    pub places: Vec<ast::StagePlace<'a>>,
    /// The kinds of step: the `step` blocks in order, or one unnamed kind when there are none.
    pub kinds: Vec<Option<&'a ast::StepBlock>>,
    /// The kind of each stage (parallel to `stages`).
    pub stage_kinds: Vec<usize>,
    /// The `for` loops, in program order.
    pub loops: Vec<&'a ast::ForLoop>,
    /// The loop of each stage (parallel to `stages`).
    pub stage_loops: Vec<Option<usize>>,
    stream_ids: HashMap<String, usize>,
    module_ids: HashMap<String, usize>,
    kernel_ids: HashMap<(usize, String), usize>,
    values: HashMap<String, Value>,
    stage_ids: HashMap<String, usize>,
}

/// One device: a named device, or one element of a device array.
#[derive(Debug, Clone, Copy)]
pub struct DeviceSlot<'a> {
    /// Its declaration.
    pub decl: &'a ast::Device,
    /// Its index in a device array (`gpu[2]`); `None` for a named device.
    pub element: Option<usize>,
}

impl DeviceSlot<'_> {
    /// `gpu0`, or `gpu[2]` for an element of an array.
    pub fn label(&self) -> String {
        match self.element {
            Some(k) => format!("{}[{k}]", self.decl.name),
            None => self.decl.name.to_string(),
        }
    }
}

/// How many devices a device array declares (its count when it is a positive constant;
/// `check` reports any other); `None` for a named device.
pub fn array_len(device: &ast::Device) -> Option<usize> {
    let count = device.count.as_ref()?;
    Some(
        crate::constant::value(count)
            .and_then(|v| usize::try_from(v).ok())
            .filter(|&n| n > 0)
            .unwrap_or(1),
    )
}

/// A kernel and the module that exports it.
#[derive(Debug)]
pub struct KernelDecl<'a> {
    /// Index into [`Scope::modules`].
    pub module: usize,
    /// The declaration.
    pub decl: &'a ast::Kernel,
}

/// What a param or scratch name refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// Index into [`Scope::scalars`].
    Scalar(usize),
    /// Index into [`Scope::buffers`].
    Buffer(usize),
}

/// Kinds of memory a name can refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// `DeviceBuffer<T>`.
    Device,
    /// `PinnedBuffer<T>`: page-locked host memory.
    Pinned,
    /// `FlagCell`: a device word for wait/write value.
    Flag,
    /// `Condition` (scratch only): the condition of one `while`, `do ... while`, `if` or
    /// `switch` that a kernel sets itself.
    Condition,
    /// `Vec<T>` or `[T]`: pageable host memory.
    Pageable,
    /// A reference to any other type, such as a library handle; only `call` and `host`
    /// statements may name it.
    Opaque,
}

/// A param or scratch declaration that names memory.
#[derive(Debug)]
pub struct BufferDecl<'a> {
    /// Its name.
    pub name: &'a Ident,
    /// The declared type, as written.
    pub ty: &'a Type,
    /// The type behind the reference (`DeviceBuffer<f32>` for `&mut DeviceBuffer<f32>`).
    pub referent: &'a Type,
    /// Which memory it is.
    pub memory: Memory,
    /// Whether the pipeline may write it: `&mut` params and every scratch buffer.
    pub mutable: bool,
    /// The element type, when the type names one.
    pub elem: Option<&'a Type>,
    /// Whether it is pipeline-owned scratch rather than a param.
    pub scratch: bool,
    /// Whether the param is a slice of buffers (`&mut [DeviceBuffer<f32>]`), each statement
    /// naming one element (`xs[k]`).
    pub array: bool,
    /// The length expression of a scratch buffer.
    pub len: Option<&'a Expr>,
    /// What is wrong with the declaration, if anything. Statements that use a buffer with a
    /// problem are not checked further, so one mistake gives one error.
    pub problem: Option<DeclProblem>,
    /// `on DEVICE`, if given.
    pub device: Option<&'a ast::OnDevice>,
}

impl BufferDecl<'_> {
    /// Whether this is a window param (`&mut Window<T>`): this rank's part read by launches,
    /// the neighbours' parts written with `on rank EXPR`, the signals derived.
    pub fn is_window(&self) -> bool {
        self.memory == Memory::Opaque && !self.scratch && window_elem(self.referent).is_some()
    }

    /// Whether this is the pipeline's communicator (`&Communicator`), which communication
    /// statements go through.
    pub fn is_communicator(&self) -> bool {
        self.memory == Memory::Opaque
            && !self.scratch
            && match self.referent {
                Type::Path(path) => path
                    .path
                    .segments
                    .last()
                    .is_some_and(|last| last.ident == COMMUNICATOR && last.arguments.is_none()),
                _ => false,
            }
    }
}

/// A declaration `check` rejects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeclProblem {
    /// A param of an owned memory type (`DeviceBuffer<f32>` without `&`).
    OwnedParam,
    /// `DeviceBuffer`, `PinnedBuffer` or `Vec` without its element type.
    MissingElem,
    /// A scratch buffer behind a reference.
    BorrowedScratch,
    /// A scratch entry that is not a buffer or flag cell.
    ScratchNotMemory,
    /// A scratch buffer without `= LEN`.
    MissingLen,
    /// A scratch flag cell with `= LEN`.
    FlagLen,
    /// A `Condition` with `= LEN`.
    ConditionLen,
    /// A `Condition` param (a condition is the pipeline's own: scratch).
    ConditionParam,
}

/// A type taken apart: its reference, if any, and the memory kind behind it.
#[derive(Debug, Clone, Copy)]
pub struct TypeShape<'a> {
    /// `None` for an owned type, `Some(mutable)` for `&`/`&mut`.
    pub reference: Option<bool>,
    /// The type behind the reference.
    pub referent: &'a Type,
    /// The memory kind, if the referent names one.
    pub memory: Option<Memory>,
    /// The element type, when the referent has one.
    pub elem: Option<&'a Type>,
}

/// Takes a param or scratch type apart. Types are recognised by their last path segment, so
/// `gpu_pipeline::DeviceBuffer<f32>` and `DeviceBuffer<f32>` mean the same.
pub fn shape(ty: &Type) -> TypeShape<'_> {
    let (reference, referent) = match ungroup_type(ty) {
        Type::Reference(reference) => (
            Some(reference.mutability.is_some()),
            ungroup_type(&reference.elem),
        ),
        ty => (None, ty),
    };
    let (memory, elem) = match referent {
        Type::Slice(slice) => (Some(Memory::Pageable), Some(ungroup_type(&slice.elem))),
        Type::Path(path) if path.qself.is_none() => match path.path.segments.last() {
            Some(last) => {
                let elem = first_type_argument(&last.arguments);
                let memory = if last.ident == DEVICE_BUFFER {
                    Some(Memory::Device)
                } else if last.ident == PINNED_BUFFER {
                    Some(Memory::Pinned)
                } else if last.ident == FLAG_CELL {
                    Some(Memory::Flag)
                } else if last.ident == CONDITION && last.arguments.is_none() {
                    Some(Memory::Condition)
                } else if last.ident == VEC {
                    Some(Memory::Pageable)
                } else {
                    None
                };
                (memory, elem)
            }
            None => (None, None),
        },
        _ => (None, None),
    };
    TypeShape {
        reference,
        referent,
        memory,
        elem: memory.and(elem),
    }
}

fn first_type_argument(arguments: &syn::PathArguments) -> Option<&Type> {
    match arguments {
        syn::PathArguments::AngleBracketed(generic) => {
            generic.args.iter().find_map(|arg| match arg {
                syn::GenericArgument::Type(ty) => Some(ungroup_type(ty)),
                _ => None,
            })
        }
        _ => None,
    }
}

impl<'a> Scope<'a> {
    /// Indexes every declaration of `input`.
    pub fn new(input: &'a ast::Pipeline) -> Self {
        let mut scope = Scope {
            input,
            streams: Vec::new(),
            modules: Vec::new(),
            kernels: Vec::new(),
            scalars: Vec::new(),
            buffers: Vec::new(),
            stages: Vec::new(),
            devices: Vec::new(),
            device_ids: HashMap::new(),
            places: Vec::new(),
            kinds: Vec::new(),
            stage_kinds: Vec::new(),
            loops: input.loops(),
            stage_loops: Vec::new(),
            stream_ids: HashMap::new(),
            module_ids: HashMap::new(),
            kernel_ids: HashMap::new(),
            values: HashMap::new(),
            stage_ids: HashMap::new(),
        };
        for device in input.devices() {
            scope
                .device_ids
                .entry(device.name.to_string())
                .or_insert(scope.devices.len());
            match array_len(device) {
                None => scope.devices.push(DeviceSlot {
                    decl: device,
                    element: None,
                }),
                Some(n) => scope.devices.extend((0..n).map(|k| DeviceSlot {
                    decl: device,
                    element: Some(k),
                })),
            }
        }
        for stream in input.streams() {
            scope
                .stream_ids
                .entry(stream.name.to_string())
                .or_insert(scope.streams.len());
            scope.streams.push(stream);
        }
        for module in input.modules() {
            let module_id = scope.modules.len();
            scope
                .module_ids
                .entry(module.name.to_string())
                .or_insert(module_id);
            scope.modules.push(module);
            for kernel in &module.kernels {
                let key = (module_id, kernel.name.to_string());
                scope.kernel_ids.entry(key).or_insert(scope.kernels.len());
                scope.kernels.push(KernelDecl {
                    module: module_id,
                    decl: kernel,
                });
            }
        }
        for param in input.params() {
            let value = match param_buffer(param) {
                Some(buffer) => {
                    scope.buffers.push(buffer);
                    Value::Buffer(scope.buffers.len() - 1)
                }
                None => {
                    scope.scalars.push(param);
                    Value::Scalar(scope.scalars.len() - 1)
                }
            };
            scope.values.entry(param.name.to_string()).or_insert(value);
        }
        for scratch in input.scratch() {
            scope.buffers.push(scratch_buffer(scratch));
            let value = Value::Buffer(scope.buffers.len() - 1);
            scope
                .values
                .entry(scratch.name.to_string())
                .or_insert(value);
        }
        let steps: Vec<&ast::StepBlock> = input.steps().collect();
        scope.kinds = if steps.is_empty() {
            vec![None]
        } else {
            steps.iter().map(|&step| Some(step)).collect()
        };
        for place in input.stage_places() {
            let stage = place.stage;
            scope
                .stage_ids
                .entry(stage.name.to_string())
                .or_insert(scope.stages.len());
            scope.stages.push(stage);
            let kind = place
                .step
                .and_then(|step| steps.iter().position(|s| std::ptr::eq(*s, step)))
                .unwrap_or(0);
            scope.stage_kinds.push(kind);
            let looped = place
                .looped
                .and_then(|body| scope.loops.iter().position(|l| std::ptr::eq(*l, body)));
            scope.stage_loops.push(looped);
            scope.places.push(place);
        }
        scope
    }

    /// The id of the stream called `name`.
    pub fn stream(&self, name: &Ident) -> Option<usize> {
        self.stream_ids.get(&name.to_string()).copied()
    }

    /// The id of the module called `name`.
    pub fn module(&self, name: &Ident) -> Option<usize> {
        self.module_ids.get(&name.to_string()).copied()
    }

    /// The id of kernel `name` in module `module`.
    pub fn kernel(&self, module: usize, name: &Ident) -> Option<usize> {
        self.kernel_ids.get(&(module, name.to_string())).copied()
    }

    /// What the param or scratch name `name` refers to.
    pub fn value(&self, name: &Ident) -> Option<Value> {
        self.values.get(&name.to_string()).copied()
    }

    /// The buffer called `name`, if `name` is one.
    pub fn buffer(&self, name: &Ident) -> Option<usize> {
        match self.value(name)? {
            Value::Buffer(id) => Some(id),
            Value::Scalar(_) => None,
        }
    }

    /// The id of the stage called `name`.
    pub fn stage(&self, name: &Ident) -> Option<usize> {
        self.stage_ids.get(&name.to_string()).copied()
    }

    /// The id of the device called `name`.
    pub fn device(&self, name: &Ident) -> Option<usize> {
        self.device_ids.get(&name.to_string()).copied()
    }

    /// The device `on DEVICE` names, or the first one where none is named (an unknown name
    /// too: `check` reports it). For `on gpu[k]`, element `k`; for `on gpu[..]`, the array's
    /// first element (element `k` of the stream or buffer array is on `gpu[k]`).
    pub fn device_of(&self, on: Option<&ast::OnDevice>) -> usize {
        let Some(on) = on else {
            return 0;
        };
        let Some(base) = self.device(&on.device) else {
            return 0;
        };
        let len = self.devices[base..]
            .iter()
            .take_while(|d| std::ptr::eq(d.decl, self.devices[base].decl))
            .count();
        match &on.index {
            Some(ast::DeviceIndex::At(expr)) => crate::constant::value(expr)
                .and_then(|k| usize::try_from(k).ok())
                .filter(|&k| k < len)
                .map_or(base, |k| base + k),
            _ => base,
        }
    }

    /// The number of devices of the array `id` is the first element of (1 for a named
    /// device).
    pub fn array_devices(&self, id: usize) -> usize {
        let Some(first) = self.devices.get(id) else {
            return 1;
        };
        self.devices[id..]
            .iter()
            .take_while(|d| std::ptr::eq(d.decl, first.decl))
            .count()
    }

    /// Whether stream `id` is an array with element `k` on device `gpu[k]` (`on gpu[..]`).
    pub fn stream_per_device(&self, id: usize) -> bool {
        self.streams
            .get(id)
            .and_then(|s| s.device.as_ref())
            .is_some_and(|on| matches!(on.index, Some(ast::DeviceIndex::Each(_))))
    }

    /// Whether buffer `id` is an array with element `k` on device `gpu[k]` (`on gpu[..]`).
    pub fn buffer_per_device(&self, id: usize) -> bool {
        self.buffers
            .get(id)
            .and_then(|b| b.device)
            .is_some_and(|on| matches!(on.index, Some(ast::DeviceIndex::Each(_))))
    }

    /// The device stream `id` runs on.
    pub fn stream_device(&self, id: usize) -> usize {
        self.device_of(self.streams.get(id).and_then(|s| s.device.as_ref()))
    }

    /// The device buffer `id` lives on.
    pub fn buffer_device(&self, id: usize) -> usize {
        self.device_of(self.buffers.get(id).and_then(|b| b.device))
    }

    /// The device's name for messages: as declared, or "its device" for a pipeline on one.
    pub fn device_name(&self, id: usize) -> String {
        match self.devices.get(id) {
            Some(device) => format!("`{}`", device.label()),
            None => "its device".to_owned(),
        }
    }

    /// Names of the declared devices.
    pub fn device_names(&self) -> Vec<String> {
        self.devices.iter().map(DeviceSlot::label).collect()
    }

    /// Names of the declared streams, for "declared streams are ..." hints.
    pub fn stream_names(&self) -> Vec<String> {
        self.streams
            .iter()
            .map(|stream| stream.name.to_string())
            .collect()
    }

    /// Names of the declared stages.
    pub fn stage_names(&self) -> Vec<String> {
        self.stages
            .iter()
            .map(|stage| stage.name.to_string())
            .collect()
    }

    /// The buffer references of one statement: kernel arguments for slice parameters, a copy's
    /// source and destination, a fill's destination, a communication statement's operands
    /// with a range.
    pub fn statement_refs(&self, statement: &'a ast::Statement) -> Vec<BufRef<'a>> {
        match statement {
            ast::Statement::Launch(launch) => {
                let Some(kernel) = launch
                    .target()
                    .and_then(|(module, kernel)| self.kernel(self.module(module)?, kernel))
                    .map(|id| self.kernels[id].decl)
                else {
                    return Vec::new();
                };
                kernel
                    .params
                    .iter()
                    .zip(&launch.args)
                    .filter(|(param, _)| matches!(param.kind(), KernelParamType::Slice { .. }))
                    .filter_map(|(_, arg)| BufRef::of_expr(arg))
                    .collect()
            }
            ast::Statement::Copy(copy) => vec![copy.src_ref.borrow(), copy.dst_ref.borrow()],
            ast::Statement::Fill(fill) => vec![fill.dst_ref.borrow()],
            ast::Statement::Comm(comm) => comm
                .operands()
                .into_iter()
                .filter_map(|(operand, _)| self.comm_operand_ref(operand))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// A communication operand with its range, as the step's plan orders and checks it; `None`
    /// (the whole buffer, as a communication statement's operands were before their ranges
    /// were known) for a range that names a buffer other than as its length: the
    /// communicator's `size()` or `rank()`, which a communication range may use but the step's
    /// shape, computed from scalar params, may not.
    pub fn comm_operand_ref(&self, operand: &'a ast::Operand) -> Option<BufRef<'a>> {
        let reference = operand.reference()?;
        let names_a_buffer = reference
            .subscript_exprs()
            .into_iter()
            .any(|expr| self.buffer_named_in(expr).is_some());
        (!names_a_buffer).then_some(reference)
    }

    /// The first buffer (the communicator included) `expr` names other than as its length
    /// (`comm` in `0..comm.size()`, not `x` in `0..x.len()`).
    pub fn buffer_named_in(&self, expr: &Expr) -> Option<ast::Mention> {
        ast::mentions(expr).into_iter().find(|mention| {
            mention.use_ != ast::Use::Length && self.buffer(&mention.ident).is_some()
        })
    }

    /// Names of every buffer.
    pub fn buffer_names(&self) -> Vec<String> {
        self.buffers
            .iter()
            .map(|buffer| buffer.name.to_string())
            .collect()
    }
}

/// `T` of `Window<T>` (the runtime's window type, known by its last path segment).
pub fn window_elem(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ungroup_type(ty) else {
        return None;
    };
    let last = path.path.segments.last()?;
    if last.ident != crate::symbol::WINDOW {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first() {
        Some(syn::GenericArgument::Type(elem)) if args.args.len() == 1 => Some(elem),
        _ => None,
    }
}

/// The runtime's memory types, as the macro knows them by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryType {
    /// `DeviceBuffer<T>`.
    Device,
    /// `PinnedBuffer<T>`.
    Pinned,
    /// `FlagCell` or `FlagCell<W>`.
    Flag,
    /// `Window<T>`.
    Window,
    /// `Condition`.
    Condition,
    /// A view or region of device memory (`DeviceView<'_, T>`, ...).
    DeviceView,
    /// A view or region of pinned memory (`PinnedView<'_, T>`, `HostView`, ...).
    PinnedView,
    /// `ManagedBuffer<T>`.
    Managed,
}

/// Which of the runtime's memory types `segment` names, if any. `Window` counts only with
/// its element type (`Window<f32>`), so an application's own `Window` is not taken for it.
pub fn memory_type(segment: &syn::PathSegment) -> Option<MemoryType> {
    let ident = &segment.ident;
    let kind = if *ident == DEVICE_BUFFER {
        MemoryType::Device
    } else if *ident == PINNED_BUFFER {
        MemoryType::Pinned
    } else if *ident == FLAG_CELL {
        MemoryType::Flag
    } else if *ident == WINDOW && !segment.arguments.is_none() {
        MemoryType::Window
    } else if *ident == CONDITION && segment.arguments.is_none() {
        MemoryType::Condition
    } else if DEVICE_VIEWS.iter().any(|view| ident == view) {
        MemoryType::DeviceView
    } else if PINNED_VIEWS.iter().any(|view| ident == view) {
        MemoryType::PinnedView
    } else if *ident == MANAGED_BUFFER {
        MemoryType::Managed
    } else {
        return None;
    };
    Some(kind)
}

/// The element type a memory type's segment names (`f32` of `DeviceView<'a, f32>`).
pub fn memory_elem(segment: &syn::PathSegment) -> Option<&Type> {
    first_type_argument(&segment.arguments)
}

/// The first of the runtime's memory types that `param`'s type holds where the pipeline does
/// not see it: anywhere in a scalar's type (`Arc<Mutex<DeviceBuffer<f32>>>`,
/// `Option<&mut DeviceBuffer<f32>>`, `(DeviceView<'a, f32>, u32)`), and inside the type a
/// reference points to (`&Vec<DeviceBuffer<f32>>`, `&[DeviceBuffer<f32>; 2]`,
/// `&mut [&mut DeviceBuffer<f32>]`). What a reference points to may itself be one (that is a
/// buffer, a window, or an opaque handle such as `&mut ManagedBuffer<f32>`, each named whole
/// by the statements that use it), and so may a slice's element (a buffer array). The
/// argument types of a function type (`Arc<dyn Fn(&DeviceBuffer<f32>)>`) hold nothing; its
/// return type is searched like the rest.
pub fn hidden_memory(param: &ast::Param) -> Option<&syn::PathSegment> {
    let outer = match ungroup_type(&param.ty) {
        Type::Reference(reference) => ungroup_type(&reference.elem),
        // A param of a memory type by value is refused as an owned param.
        owned if shape(owned).memory.is_some() => return None,
        scalar => return first_memory(scalar),
    };
    match outer {
        Type::Slice(slice) => match ungroup_type(&slice.elem) {
            Type::Path(path) if buffer_array(param).is_some() => in_arguments(&path.path),
            elem => first_memory(elem),
        },
        Type::Path(path) if path.qself.is_none() => in_arguments(&path.path),
        other => first_memory(other),
    }
}

/// The first memory type in the generic arguments of `path`'s segments.
fn in_arguments(path: &syn::Path) -> Option<&syn::PathSegment> {
    path.segments.iter().find_map(|segment| {
        let mut finder = MemoryFinder(None);
        syn::visit::Visit::visit_path_arguments(&mut finder, &segment.arguments);
        finder.0
    })
}

/// The first memory type anywhere in `ty`.
fn first_memory(ty: &Type) -> Option<&syn::PathSegment> {
    let mut finder = MemoryFinder(None);
    syn::visit::Visit::visit_type(&mut finder, ty);
    finder.0
}

/// Finds the first path segment that names a memory type, outside function types' arguments.
struct MemoryFinder<'a>(Option<&'a syn::PathSegment>);

/// Names an application may well give its own types (a taper `Window<f32>`, an enum
/// `Condition`, a `HostSlice`): inside another type they are taken for the runtime's only
/// when written `gpu_pipeline::...`. The runtime's other names are its own.
const COMMON_NAMES: &[&str] = &[
    "Window",
    "Condition",
    "HostView",
    "HostViewMut",
    "HostSlice",
];

impl<'a> syn::visit::Visit<'a> for MemoryFinder<'a> {
    fn visit_path(&mut self, path: &'a syn::Path) {
        if self.0.is_some() {
            return;
        }
        let Some(last) = path.segments.last() else {
            return;
        };
        // `PhantomData<DeviceBuffer<f32>>` holds no memory.
        if last.ident == "PhantomData" {
            return;
        }
        let ours = path
            .segments
            .first()
            .is_some_and(|first| first.ident == "gpu_pipeline")
            || !COMMON_NAMES.iter().any(|name| last.ident == name);
        if ours && memory_type(last).is_some() {
            self.0 = Some(last);
            return;
        }
        syn::visit::visit_path(self, path);
    }

    // `fn(&DeviceBuffer<f32>)` and `dyn Fn(&DeviceBuffer<f32>)` take memory; they hold none.
    // What one returns (`dyn Fn() -> Arc<DeviceBuffer<f32>>`) it reaches without a param.
    fn visit_type_fn_ptr(&mut self, function: &'a syn::TypeFnPtr) {
        syn::visit::Visit::visit_return_type(self, &function.output);
    }

    fn visit_parenthesized_generic_arguments(
        &mut self,
        arguments: &'a syn::ParenthesizedGenericArguments,
    ) {
        syn::visit::Visit::visit_return_type(self, &arguments.output);
    }
}

/// A param that names memory, or `None` for a scalar. A reference to a type the macro does not
/// know (a library handle, say) is opaque host memory: it can be declared in `call` and `host`
/// accesses, but passed to no kernel or copy.
fn param_buffer(param: &ast::Param) -> Option<BufferDecl<'_>> {
    if let Some(array) = buffer_array(param) {
        return Some(array);
    }
    let shape = shape(&param.ty);
    let (memory, mutable, problem) = match (shape.reference, shape.memory) {
        (None, None) => return None,
        (None, Some(memory)) => (memory, false, Some(DeclProblem::OwnedParam)),
        (Some(mutable), None) => (Memory::Opaque, mutable, None),
        (Some(mutable), Some(memory)) => {
            let problem = if memory == Memory::Condition {
                Some(DeclProblem::ConditionParam)
            } else {
                (memory != Memory::Flag && shape.elem.is_none()).then_some(DeclProblem::MissingElem)
            };
            (memory, mutable, problem)
        }
    };
    Some(BufferDecl {
        name: &param.name,
        ty: &param.ty,
        referent: shape.referent,
        memory,
        mutable,
        elem: shape.elem,
        scratch: false,
        array: false,
        len: None,
        problem,
        device: param.device.as_ref(),
    })
}

/// `&mut [DeviceBuffer<T>]` or `&[PinnedBuffer<T>]`: a slice of buffers, each statement
/// naming one element.
fn buffer_array(param: &ast::Param) -> Option<BufferDecl<'_>> {
    let syn::Type::Reference(reference) = ungroup_type(&param.ty) else {
        return None;
    };
    let syn::Type::Slice(slice) = ungroup_type(&reference.elem) else {
        return None;
    };
    let inner = shape(&slice.elem);
    let memory = match inner.memory {
        Some(memory @ (Memory::Device | Memory::Pinned)) if inner.reference.is_none() => memory,
        _ => return None,
    };
    Some(BufferDecl {
        name: &param.name,
        ty: &param.ty,
        referent: inner.referent,
        memory,
        mutable: reference.mutability.is_some(),
        elem: inner.elem,
        scratch: false,
        array: true,
        len: None,
        problem: inner.elem.is_none().then_some(DeclProblem::MissingElem),
        device: param.device.as_ref(),
    })
}

fn scratch_buffer(scratch: &ast::Scratch) -> BufferDecl<'_> {
    let shape = shape(&scratch.ty);
    let problem = match (shape.reference, shape.memory) {
        (Some(_), _) => Some(DeclProblem::BorrowedScratch),
        (None, None | Some(Memory::Pageable | Memory::Opaque)) => {
            Some(DeclProblem::ScratchNotMemory)
        }
        (None, Some(Memory::Flag)) => scratch.len.is_some().then_some(DeclProblem::FlagLen),
        (None, Some(Memory::Condition)) => {
            scratch.len.is_some().then_some(DeclProblem::ConditionLen)
        }
        (None, Some(Memory::Device | Memory::Pinned)) => match (shape.elem, &scratch.len) {
            (None, _) => Some(DeclProblem::MissingElem),
            (Some(_), None) => Some(DeclProblem::MissingLen),
            (Some(_), Some(_)) => None,
        },
    };
    BufferDecl {
        name: &scratch.name,
        ty: &scratch.ty,
        referent: shape.referent,
        memory: shape.memory.unwrap_or(Memory::Opaque),
        mutable: true,
        elem: shape.elem,
        scratch: true,
        array: false,
        len: scratch.len.as_ref(),
        problem,
        device: scratch.device.as_ref(),
    }
}

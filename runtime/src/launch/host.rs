//! Kernels on the host backend: typed host implementations, and the launch path that runs
//! them in stream order.
//!
//! A kernel's host implementation is plain Rust over slices, called **once per launch** (not
//! once per thread): for `saxpy(unsigned n, float a, const float* x, float* y)` declared as
//! `(u32, f32, &[f32], &mut [f32])`, it is
//!
//! ```
//! fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
//!     for i in 0..n as usize {
//!         y[i] += a * x[i];
//!     }
//! }
//! ```
//!
//! and it is attached with [`TypedKernel::with_host`](crate::TypedKernel::with_host)`(`
//! [`HostKernel::new`]`(saxpy))` (in `gpu_pipeline!`, with `host = path::to::saxpy` on the
//! kernel's declaration). Each parameter type of the signature maps to the type the function
//! receives ([`HostParam::Value`]): scalars to themselves, `&[T]` to `&[T]`, `&mut [T]` to
//! `&mut [T]`, each slice exactly as long as the buffer or view passed.
//!
//! A launch on the host backend enqueues one host operation, labelled
//! `launch <module>::<kernel>`, whose buffer arguments declare their accesses (written where
//! the signature says `&mut`), so the race detector sees them. When it runs, each buffer
//! argument is resolved to a live host allocation and checked to lie within it, arguments
//! that overlap where one is written are refused, and the allocations are locked (read or
//! write, in a global order) while the implementation runs. A panic is caught by the engine
//! and reported at the stream's next synchronize, naming the operation.

use std::fmt;
use std::sync::Arc;

use bytemuck::Pod;

use super::args::{DeviceRepr, KernelArgs, KernelParam, Signature};
use super::config::LaunchConfig;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::HostKernelTag;
use crate::host::{Access, BufferArg, HostOp, HostStream, KernelArgValue, KernelFn};
use crate::memory::alloc::{DeviceAlloc, KeepAlive, same_memory_space};
use crate::memory::host_mem::{HostMem, lock_all, merge_accesses};
use crate::memory::view::DeviceRegion;
use crate::module::Kernel;
use crate::stream::Stream;

/// One argument of a launch, as the host backend takes it. Built by the crate's
/// [`KernelArg`](super::KernelArg) implementations.
#[doc(hidden)]
pub struct HostArg(HostArgKind);

enum HostArgKind {
    Scalar(Box<[u8]>),
    Buffer {
        alloc: Arc<DeviceAlloc>,
        offset: usize,
        bytes: usize,
        elem_size: usize,
    },
}

impl HostArg {
    pub(crate) fn scalar(bytes: &[u8]) -> HostArg {
        HostArg(HostArgKind::Scalar(bytes.into()))
    }

    pub(crate) fn buffer(region: &DeviceRegion<'_>, elem_size: usize) -> HostArg {
        HostArg(HostArgKind::Buffer {
            alloc: Arc::clone(region.alloc),
            offset: region.offset,
            bytes: region.bytes,
            elem_size,
        })
    }
}

impl fmt::Debug for HostArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            HostArgKind::Scalar(bytes) => f.debug_tuple("Scalar").field(bytes).finish(),
            HostArgKind::Buffer { offset, bytes, .. } => f
                .debug_struct("Buffer")
                .field("offset", offset)
                .field("bytes", bytes)
                .finish(),
        }
    }
}

/// One argument as a host implementation receives it while its launch runs: a scalar's
/// bytes, or a buffer region that is alive and locked for the call.
#[doc(hidden)]
#[derive(Debug)]
pub struct HostKernelArg<'r>(ResolvedArg<'r>);

#[derive(Debug)]
enum ResolvedArg<'r> {
    Scalar(&'r [u8]),
    Buffer {
        ptr: *mut u8,
        bytes: usize,
        elem_size: usize,
        writable: bool,
    },
}

/// A kernel parameter type ([`KernelParam`]) and the value a host implementation receives
/// for it: `T` for a [`DeviceRepr`] scalar `T`, `&'a [T]` for `&[T]`, `&'a mut [T]` for
/// `&mut [T]`. Implemented for exactly the parameter types (the trait is sealed through
/// [`KernelParam`]).
pub trait HostParam: KernelParam {
    /// What the host implementation receives, borrowed for one call.
    type Value<'a>;

    /// Builds the value from one resolved argument, checking its kind, size and alignment.
    ///
    /// # Safety
    /// A buffer argument must point to `bytes` initialised bytes that stay valid, and that
    /// nothing else writes (nor, for a writable argument, reads), for `'a`.
    #[doc(hidden)]
    unsafe fn from_arg<'a>(arg: &'a HostKernelArg<'_>) -> Result<Self::Value<'a>, String>;
}

impl<T: DeviceRepr> HostParam for T {
    type Value<'a> = T;

    unsafe fn from_arg(arg: &HostKernelArg<'_>) -> Result<T, String> {
        match arg.0 {
            ResolvedArg::Scalar(bytes) if bytes.len() == std::mem::size_of::<T>() => {
                Ok(bytemuck::pod_read_unaligned(bytes))
            }
            _ => Err(format!(
                "expected a {}-byte scalar `{}`, got {}",
                std::mem::size_of::<T>(),
                std::any::type_name::<T>(),
                arg.describe()
            )),
        }
    }
}

impl<T: Pod> HostParam for &[T] {
    type Value<'a> = &'a [T];

    unsafe fn from_arg<'a>(arg: &'a HostKernelArg<'_>) -> Result<&'a [T], String> {
        let (ptr, len) = arg.slice_parts::<T>(false)?;
        // SAFETY: `slice_parts` checked the alignment and that `len` elements are the
        // argument's bytes; the caller vouches that they are initialised, valid and not
        // written by anything else for `'a`.
        Ok(unsafe { std::slice::from_raw_parts(ptr.cast_const(), len) })
    }
}

impl<T: Pod> HostParam for &mut [T] {
    type Value<'a> = &'a mut [T];

    unsafe fn from_arg<'a>(arg: &'a HostKernelArg<'_>) -> Result<&'a mut [T], String> {
        let (ptr, len) = arg.slice_parts::<T>(true)?;
        // SAFETY: as for `&[T]`; the argument is writable, so the caller vouches that
        // nothing else reads or writes these bytes for `'a`.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
    }
}

impl HostKernelArg<'_> {
    fn describe(&self) -> String {
        match self.0 {
            ResolvedArg::Scalar(bytes) => format!("a {}-byte scalar", bytes.len()),
            ResolvedArg::Buffer { bytes, .. } => format!("a buffer of {bytes} bytes"),
        }
    }

    /// The pointer and element count of a buffer argument viewed as `[T]`.
    fn slice_parts<T>(&self, writes: bool) -> Result<(*mut T, usize), String> {
        let size = std::mem::size_of::<T>();
        let type_name = std::any::type_name::<T>();
        let ResolvedArg::Buffer {
            ptr,
            bytes,
            elem_size,
            writable,
        } = self.0
        else {
            return Err(format!(
                "expected a buffer of `{type_name}`, got {}",
                self.describe()
            ));
        };
        if writes && !writable {
            return Err(format!(
                "a `&mut [{type_name}]` parameter got a buffer passed read-only"
            ));
        }
        if size == 0 || elem_size != size || !bytes.is_multiple_of(size) {
            return Err(format!(
                "a buffer of {elem_size}-byte elements ({bytes} bytes) cannot be viewed as \
                 `[{type_name}]`"
            ));
        }
        if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Err(format!(
                "the buffer at {ptr:p} is not aligned for `{type_name}`"
            ));
        }
        Ok((ptr.cast(), bytes / size))
    }
}

/// A host implementation of a kernel with signature `Sig`: any `Fn` (typically a plain
/// function item) taking, for each parameter `P` of `Sig`, a [`HostParam::Value`] of `P`.
///
/// ```
/// use gpu_pipeline::{HostKernel, HostKernelFn};
/// type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);
/// fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
///     for i in 0..n as usize {
///         y[i] += a * x[i];
///     }
/// }
/// fn is_host_impl<Sig, F: HostKernelFn<Sig>>(_: &F) {}
/// is_host_impl::<Saxpy, _>(&saxpy);
/// let host: HostKernel<Saxpy> = HostKernel::new(saxpy);
/// # let _ = host;
/// ```
///
/// Closures work too when their parameter types are written out (`|n: u32, x: &[f32]| ...`);
/// Rust infers the borrowed parameters of a function item on its own.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a host implementation of a kernel with signature `{Sig}`",
    note = "a host implementation takes one argument per kernel parameter: the scalar itself \
            for a scalar, `&[T]` for `&[T]`, `&mut [T]` for `&mut [T]`, e.g. \
            `fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32])`"
)]
pub trait HostKernelFn<Sig>: Send + Sync + 'static {
    /// Calls the implementation with the resolved arguments.
    ///
    /// # Safety
    /// Every buffer argument must satisfy [`HostParam::from_arg`]'s contract for the call.
    #[doc(hidden)]
    unsafe fn call(&self, args: &[HostKernelArg<'_>]) -> Result<(), String>;
}

macro_rules! host_fns {
    ($( ($($P:ident $v:ident),*) )*) => {$(
        impl<F, $($P: HostParam),*> HostKernelFn<($($P,)*)> for F
        where
            F: for<'a> Fn($($P::Value<'a>),*) + Send + Sync + 'static,
        {
            unsafe fn call(&self, args: &[HostKernelArg<'_>]) -> Result<(), String> {
                let [$($v),*] = args else {
                    return Err(arity(<[()]>::len(&[$(host_fns!(@unit $P)),*]), args.len()));
                };
                $(
                    // SAFETY: forwarded from the caller's contract.
                    let $v = unsafe { $P::from_arg($v) }?;
                )*
                self($($v),*);
                Ok(())
            }
        }
    )*};
    (@unit $P:ident) => { () };
}

fn arity(expected: usize, got: usize) -> String {
    format!("the kernel takes {expected} arguments but the launch passed {got}")
}

host_fns! {
    ()
    (A0 a0)
    (A0 a0, A1 a1)
    (A0 a0, A1 a1, A2 a2)
    (A0 a0, A1 a1, A2 a2, A3 a3)
    (A0 a0, A1 a1, A2 a2, A3 a3, A4 a4)
    (A0 a0, A1 a1, A2 a2, A3 a3, A4 a4, A5 a5)
    (A0 a0, A1 a1, A2 a2, A3 a3, A4 a4, A5 a5, A6 a6)
    (A0 a0, A1 a1, A2 a2, A3 a3, A4 a4, A5 a5, A6 a6, A7 a7)
    (A0 a0, A1 a1, A2 a2, A3 a3, A4 a4, A5 a5, A6 a6, A7 a7, A8 a8)
    (A0 a0, A1 a1, A2 a2, A3 a3, A4 a4, A5 a5, A6 a6, A7 a7, A8 a8, A9 a9)
    (A0 a0, A1 a1, A2 a2, A3 a3, A4 a4, A5 a5, A6 a6, A7 a7, A8 a8, A9 a9, A10 a10)
    (A0 a0, A1 a1, A2 a2, A3 a3, A4 a4, A5 a5, A6 a6, A7 a7, A8 a8, A9 a9, A10 a10,
     A11 a11)
}

/// The host implementation of a kernel with signature `Sig`, shared (cloning is cheap).
/// Attach it with [`TypedKernel::with_host`](crate::TypedKernel::with_host).
pub struct HostKernel<Sig> {
    f: Arc<dyn HostKernelFn<Sig>>,
}

impl<Sig> HostKernel<Sig> {
    /// Wraps a host implementation (see [`HostKernelFn`]).
    pub fn new<F: HostKernelFn<Sig>>(f: F) -> HostKernel<Sig> {
        HostKernel { f: Arc::new(f) }
    }
}

impl<Sig> Clone for HostKernel<Sig> {
    fn clone(&self) -> Self {
        HostKernel { f: self.f.clone() }
    }
}

impl<Sig> fmt::Debug for HostKernel<Sig> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostKernel")
            .field("signature", &std::any::type_name::<Sig>())
            .finish()
    }
}

/// The error of a launch on the host backend of a kernel without a host implementation.
pub(crate) fn missing_host_impl(call: &'static str, kernel: &Kernel) -> Error {
    Error::BackendMismatch {
        call,
        backend: "host",
        reason: format!(
            "kernel `{}` of module `{}` has no host implementation; declare one with \
             `host = path::to::fn` on the kernel in `gpu_pipeline!`, or attach one with \
             `TypedKernel::with_host`",
            kernel.name(),
            kernel.module_name()
        ),
    }
}

/// The host-backend values of a launch's arguments (a buffer written where `Sig` says
/// `&mut`), and what the launch must keep alive; buffers of another context are refused.
pub(crate) fn host_arg_values<Sig: Signature, A: KernelArgs>(
    call: &'static str,
    ctx: &Context,
    args: &A,
) -> Result<(Vec<KernelArgValue>, Vec<KeepAlive>)> {
    let mut values = Vec::new();
    let mut keep = Vec::new();
    for (index, arg) in args.host_args().into_iter().enumerate() {
        match arg.0 {
            HostArgKind::Scalar(bytes) => values.push(KernelArgValue::Scalar(bytes)),
            HostArgKind::Buffer {
                alloc,
                offset,
                bytes,
                elem_size,
            } => {
                let mem = match &alloc.host {
                    Some(mem) if same_memory_space(&alloc.ctx, ctx) => mem,
                    _ => {
                        return Err(Error::invalid(
                            call,
                            format!(
                                "argument {index} is a buffer of another context than the \
                                 stream's"
                            ),
                        ));
                    }
                };
                values.push(KernelArgValue::Buffer(BufferArg {
                    address: mem.address() as usize + offset,
                    byte_len: bytes,
                    elem_size,
                    writable: Sig::WRITES.get(index).copied().unwrap_or(true),
                    buffer: mem.id(),
                }));
                keep.push(KeepAlive::Device(alloc));
            }
        }
    }
    Ok((values, keep))
}

/// The engine's kernel function for `host`: resolves, checks and locks the arguments, then
/// calls the implementation once.
fn kernel_fn<Sig: 'static>(host: &HostKernel<Sig>) -> KernelFn {
    let f = host.f.clone();
    Arc::new(move |args: &[KernelArgValue]| run(&*f, args))
}

/// A buffer argument resolved to its live allocation.
struct Region {
    index: usize,
    mem: Arc<HostMem>,
    offset: usize,
    bytes: usize,
    elem_size: usize,
    writable: bool,
}

fn run<Sig: 'static>(f: &dyn HostKernelFn<Sig>, args: &[KernelArgValue]) -> Result<(), String> {
    let mut regions = Vec::new();
    for (index, arg) in args.iter().enumerate() {
        let KernelArgValue::Buffer(b) = arg else {
            continue;
        };
        let mem = HostMem::lookup(b.buffer)
            .ok_or_else(|| format!("argument {index}: its buffer was freed"))?;
        let offset = b
            .address
            .checked_sub(mem.address() as usize)
            .filter(|o| {
                o.checked_add(b.byte_len)
                    .is_some_and(|end| end <= mem.bytes())
            })
            .ok_or_else(|| format!("argument {index} does not lie within `{}`", mem.name()))?;
        regions.push(Region {
            index,
            mem,
            offset,
            bytes: b.byte_len,
            elem_size: b.elem_size,
            writable: b.writable,
        });
    }
    // `&mut [T]` must not alias anything: two regions of one allocation that overlap, one of
    // them written, are refused (the typed API cannot build them; this keeps it so).
    for (i, a) in regions.iter().enumerate() {
        for b in &regions[i + 1..] {
            let overlap = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
            if a.mem.id() == b.mem.id() && overlap && (a.writable || b.writable) {
                return Err(format!(
                    "arguments {} and {} overlap in `{}` and one of them is written",
                    a.index,
                    b.index,
                    a.mem.name()
                ));
            }
        }
    }
    let accesses = regions
        .iter()
        .map(|r| {
            let access = if r.writable {
                Access::Write
            } else {
                Access::Read
            };
            (&*r.mem, access)
        })
        .collect();
    let _locks = lock_all(merge_accesses(accesses));
    let mut next = regions.iter();
    let resolved: Vec<HostKernelArg<'_>> = args
        .iter()
        .map(|arg| match arg {
            KernelArgValue::Scalar(bytes) => HostKernelArg(ResolvedArg::Scalar(bytes)),
            KernelArgValue::Buffer(_) => {
                let r = next.next().expect("one region per buffer argument");
                HostKernelArg(ResolvedArg::Buffer {
                    ptr: r.mem.at(r.offset),
                    bytes: r.bytes,
                    elem_size: r.elem_size,
                    writable: r.writable,
                })
            }
        })
        .collect();
    // SAFETY: every buffer argument lies within a live allocation (held by `regions` for the
    // call), written ones overlap no other argument, and the locks held until the call
    // returns exclude every other host operation that writes them (or, for written ones,
    // touches them). Host slices of the memory are excluded by the buffer types' rules
    // (fences, `&mut` borrows, and graph launches refusing borrowed memory). The bytes are
    // initialised: host allocations are zeroed and only ever hold `Pod` data.
    unsafe { f.call(&resolved) }
}

/// Enqueues `kernel` with `args` on the host stream `h`: one host operation that calls the
/// implementation once, or a graph node when `stream` captures.
pub(crate) fn launch<Sig: Signature + 'static, A: KernelArgs>(
    kernel: &Kernel,
    host: Option<&HostKernel<Sig>>,
    stream: &Stream,
    h: &HostStream,
    config: &LaunchConfig,
    args: &A,
) -> Result<()> {
    const CALL: &str = "TypedKernel::launch";
    kernel.validate(config)?;
    if !same_memory_space(kernel.context(), stream.context()) {
        return Err(Error::invalid(
            CALL,
            format!(
                "`{}` is loaded in another context than the stream's",
                kernel.name()
            ),
        ));
    }
    let host = host.ok_or_else(|| missing_host_impl(CALL, kernel))?;
    let (values, keep) = host_arg_values::<Sig, A>(CALL, stream.context(), args)?;
    args.enqueued_on(stream);
    let label = format!("launch {}::{}", kernel.module_name(), kernel.name());
    let mut op = HostOp::kernel(label, kernel_fn(host), values);
    // The op holds the memory it touches; a graph node also holds the buffers and the
    // module, as on CUDA, and says which kernel it launches.
    for item in keep {
        if let KeepAlive::Device(alloc) = &item
            && let Some(mem) = &alloc.host
        {
            op = op.retain(mem.clone());
        }
        op = op.retain_in_graph(Arc::new(item));
    }
    let op = op
        .retain_in_graph(Arc::new(KeepAlive::Object(kernel.module_keepalive())))
        .retain_in_graph(Arc::new(HostKernelTag {
            kernel: kernel.inner.id,
            config: *config,
        }));
    Ok(h.enqueue(op)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
        for i in 0..n as usize {
            y[i] += a * x[i];
        }
    }

    type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);

    #[test]
    fn a_function_item_is_a_host_implementation_of_its_signature() {
        fn implements<Sig, F: HostKernelFn<Sig>>(_: &F) {}
        implements::<Saxpy, _>(&saxpy);
        implements::<(), _>(&|| {});
        implements::<(u32, &'static [u8]), _>(&|_: u32, _: &[u8]| {});
        let _ = HostKernel::<Saxpy>::new(saxpy);
    }

    #[test]
    fn resolved_arguments_become_typed_values() {
        let x = [1.0f32, 2.0, 3.0];
        let mut y = [10.0f32, 20.0, 30.0];
        let args = [
            HostKernelArg(ResolvedArg::Scalar(&3u32.to_ne_bytes())),
            HostKernelArg(ResolvedArg::Scalar(&2.0f32.to_ne_bytes())),
            HostKernelArg(ResolvedArg::Buffer {
                ptr: x.as_ptr().cast_mut().cast(),
                bytes: 12,
                elem_size: 4,
                writable: false,
            }),
            HostKernelArg(ResolvedArg::Buffer {
                ptr: y.as_mut_ptr().cast(),
                bytes: 12,
                elem_size: 4,
                writable: true,
            }),
        ];
        let f: &dyn HostKernelFn<Saxpy> = &saxpy;
        // SAFETY: the buffers are the live local arrays, `y` touched by nothing else.
        unsafe { f.call(&args) }.unwrap();
        assert_eq!(y, [12.0, 24.0, 36.0]);
        // SAFETY: as above; rejected before any access.
        let err = unsafe { f.call(&args[..3]) }.unwrap_err();
        assert_eq!(err, "the kernel takes 4 arguments but the launch passed 3");
        // A read-only buffer for a `&mut` parameter, and a scalar of the wrong size.
        let swapped = [
            HostKernelArg(ResolvedArg::Scalar(&3u64.to_ne_bytes())),
            HostKernelArg(ResolvedArg::Scalar(&2.0f32.to_ne_bytes())),
        ];
        // SAFETY: no buffers.
        let err = unsafe { <u32 as HostParam>::from_arg(&swapped[0]) }.unwrap_err();
        assert!(err.contains("4-byte scalar"), "{err}");
        // SAFETY: rejected before any access.
        let err = unsafe { <&mut [f32] as HostParam>::from_arg(&args[2]) }.unwrap_err();
        assert!(err.contains("read-only"), "{err}");
    }
}

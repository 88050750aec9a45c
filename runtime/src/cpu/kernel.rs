//! Kernels on the CPU backend: typed CPU implementations, and the code that runs them with
//! their arguments resolved, checked and locked.
//!
//! A kernel's CPU implementation is plain Rust over slices, called **once per launch** (not
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
//! and it is attached with [`TypedKernel::with_cpu`](crate::TypedKernel::with_cpu)`(`
//! [`CpuKernel::new`]`(saxpy))` (in `gpu_pipeline!`, with `cpu = path::to::saxpy` on the
//! kernel's declaration). Each parameter type of the signature maps to the type the function
//! receives ([`CpuParam::Value`]): scalars to themselves, `&[T]` to `&[T]`, `&mut [T]` to
//! `&mut [T]`, each slice exactly as long as the buffer or view passed.
//! [`CpuKernel::with_geometry`] wraps an implementation that also receives the launch's
//! [`LaunchConfig`] first, to loop over blocks and threads as the CUDA kernel does.
//!
//! A launch enqueues one operation whose buffer arguments declare their accesses (written
//! where the signature says `&mut`), so the race detector sees them. When it runs, the
//! allocations are locked (read or write, in a global order), arguments that overlap where one
//! is written are refused, and each argument becomes a slice of its allocation: all in safe
//! Rust, so a CPU implementation cannot reach memory it was not passed. A panic is caught by
//! the engine and reported at the stream's next synchronize, naming the operation.

use std::fmt;
use std::sync::Arc;

use bytemuck::Pod;

use super::memory::{Locked, Memory, lock_all};
use super::op::{KernelArgValue, KernelFn};
use crate::error::Error;
use crate::launch::config::LaunchConfig;
use crate::launch::param::{DeviceRepr, KernelParam};
use crate::vocab::access::Access;

/// One argument as a CPU implementation receives it while its launch runs: a scalar's bytes,
/// or the bytes of a buffer region, shared or exclusive.
#[doc(hidden)]
#[derive(Debug)]
pub enum KernelArg<'a> {
    /// A by-value argument's bytes.
    Scalar(&'a [u8]),
    /// A buffer the kernel reads.
    Slice {
        /// The region's bytes.
        bytes: &'a [u8],
        /// Size of one element.
        elem_size: usize,
    },
    /// A buffer the kernel writes.
    SliceMut {
        /// The region's bytes.
        bytes: &'a mut [u8],
        /// Size of one element.
        elem_size: usize,
    },
}

impl KernelArg<'_> {
    fn describe(&self) -> String {
        match self {
            KernelArg::Scalar(bytes) => format!("a {}-byte scalar", bytes.len()),
            KernelArg::Slice { bytes, .. } => {
                format!("a read-only buffer of {} bytes", bytes.len())
            }
            KernelArg::SliceMut { bytes, .. } => format!("a buffer of {} bytes", bytes.len()),
        }
    }
}

/// A kernel parameter type ([`KernelParam`]) and the value a CPU implementation receives for
/// it: `T` for a [`DeviceRepr`] scalar `T`, `&'a [T]` for `&[T]`, `&'a mut [T]` for
/// `&mut [T]`. Implemented for exactly the parameter types (the trait is sealed through
/// [`KernelParam`]).
///
/// ```
/// use gpu_pipeline::CpuParam;
/// fn receives<P: CpuParam>() -> &'static str {
///     std::any::type_name::<P::Value<'static>>()
/// }
/// assert_eq!(receives::<f32>(), "f32");
/// assert_eq!(receives::<&[u32]>(), "&[u32]");
/// assert_eq!(receives::<&mut [u32]>(), "&mut [u32]");
/// ```
pub trait CpuParam: KernelParam {
    /// What the CPU implementation receives, borrowed for one call.
    type Value<'a>;

    /// Builds the value from one resolved argument, checking its kind, size and alignment.
    #[doc(hidden)]
    fn from_arg(arg: KernelArg<'_>) -> Result<Self::Value<'_>, String>;
}

impl<T: DeviceRepr> CpuParam for T {
    type Value<'a> = T;

    fn from_arg(arg: KernelArg<'_>) -> Result<T, String> {
        match arg {
            KernelArg::Scalar(bytes) if bytes.len() == std::mem::size_of::<T>() => {
                Ok(bytemuck::pod_read_unaligned(bytes))
            }
            other => Err(format!(
                "expected a {}-byte scalar `{}`, got {}",
                std::mem::size_of::<T>(),
                std::any::type_name::<T>(),
                other.describe()
            )),
        }
    }
}

fn cast_error<T>(elem_size: usize, len: usize, e: bytemuck::PodCastError) -> String {
    format!(
        "a buffer of {elem_size}-byte elements ({len} bytes) cannot be viewed as `[{}]`: {e:?}",
        std::any::type_name::<T>()
    )
}

impl<T: Pod> CpuParam for &[T] {
    type Value<'a> = &'a [T];

    fn from_arg(arg: KernelArg<'_>) -> Result<&[T], String> {
        let (bytes, elem_size) = match arg {
            KernelArg::Slice { bytes, elem_size } => (bytes, elem_size),
            KernelArg::SliceMut { bytes, elem_size } => (&*bytes, elem_size),
            other => {
                return Err(format!(
                    "expected a buffer of `{}`, got {}",
                    std::any::type_name::<T>(),
                    other.describe()
                ));
            }
        };
        if elem_size != std::mem::size_of::<T>() {
            return Err(cast_error::<T>(
                elem_size,
                bytes.len(),
                bytemuck::PodCastError::SizeMismatch,
            ));
        }
        bytemuck::try_cast_slice(bytes).map_err(|e| cast_error::<T>(elem_size, bytes.len(), e))
    }
}

impl<T: Pod> CpuParam for &mut [T] {
    type Value<'a> = &'a mut [T];

    fn from_arg(arg: KernelArg<'_>) -> Result<&mut [T], String> {
        match arg {
            KernelArg::SliceMut { bytes, elem_size } => {
                let len = bytes.len();
                if elem_size != std::mem::size_of::<T>() {
                    return Err(cast_error::<T>(
                        elem_size,
                        len,
                        bytemuck::PodCastError::SizeMismatch,
                    ));
                }
                bytemuck::try_cast_slice_mut(bytes).map_err(|e| cast_error::<T>(elem_size, len, e))
            }
            KernelArg::Slice { .. } => Err(format!(
                "a `&mut [{}]` parameter got a buffer passed read-only",
                std::any::type_name::<T>()
            )),
            other => Err(format!(
                "expected a buffer of `{}`, got {}",
                std::any::type_name::<T>(),
                other.describe()
            )),
        }
    }
}

/// A CPU implementation of a kernel with signature `Sig`: any `Fn` (typically a plain
/// function item) taking, for each parameter `P` of `Sig`, a [`CpuParam::Value`] of `P`.
///
/// ```
/// use gpu_pipeline::{CpuKernel, CpuKernelFn};
/// type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);
/// fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32]) {
///     for i in 0..n as usize {
///         y[i] += a * x[i];
///     }
/// }
/// fn is_cpu_impl<Sig, F: CpuKernelFn<Sig>>(_: &F) {}
/// is_cpu_impl::<Saxpy, _>(&saxpy);
/// let cpu: CpuKernel<Saxpy> = CpuKernel::new(saxpy);
/// # let _ = cpu;
/// ```
///
/// Closures work too when their parameter types are written out (`|n: u32, x: &[f32]| ...`);
/// Rust infers the borrowed parameters of a function item on its own.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a CPU implementation of a kernel with signature `{Sig}`",
    note = "a CPU implementation takes one argument per kernel parameter: the scalar itself \
            for a scalar, `&[T]` for `&[T]`, `&mut [T]` for `&mut [T]`, e.g. \
            `fn saxpy(n: u32, a: f32, x: &[f32], y: &mut [f32])`"
)]
pub trait CpuKernelFn<Sig>: Send + Sync + 'static {
    /// Calls the implementation with the resolved arguments.
    #[doc(hidden)]
    fn call(&self, args: Vec<KernelArg<'_>>) -> Result<(), String>;
}

macro_rules! cpu_fns {
    ($( ($($P:ident $v:ident),*) )*) => {$(
        impl<F, $($P: CpuParam),*> CpuKernelFn<($($P,)*)> for F
        where
            F: for<'a> Fn($($P::Value<'a>),*) + Send + Sync + 'static,
        {
            fn call(&self, args: Vec<KernelArg<'_>>) -> Result<(), String> {
                const COUNT: usize = <[()]>::len(&[$(cpu_fns!(@unit $P)),*]);
                let got = args.len();
                let Ok([$($v),*]) = <[KernelArg<'_>; COUNT]>::try_from(args) else {
                    return Err(arity(COUNT, got));
                };
                $(let $v = $P::from_arg($v)?;)*
                self($($v),*);
                Ok(())
            }
        }
    )*};
    (@unit $P:ident) => { () };
}

pub(super) fn arity(expected: usize, got: usize) -> String {
    format!("the kernel takes {expected} arguments but the launch passed {got}")
}

cpu_fns! {
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

/// The CPU implementation of a kernel with signature `Sig`, shared (cloning is cheap).
/// Attach it with [`TypedKernel::with_cpu`](crate::TypedKernel::with_cpu). Built with
/// [`CpuKernel::new`] from a function of the arguments, or with
/// [`CpuKernel::with_geometry`] from one that also receives the launch's geometry.
///
/// ```
/// use gpu_pipeline::CpuKernel;
/// fn add_one(n: u32, data: &mut [f32]) {
///     data[..n as usize].iter_mut().for_each(|x| *x += 1.0);
/// }
/// let cpu: CpuKernel<(u32, &'static mut [f32])> = CpuKernel::new(add_one);
/// let shared = cpu.clone(); // cheap: one implementation, shared
/// # drop(shared);
/// ```
pub struct CpuKernel<Sig> {
    f: CpuImpl,
    _sig: std::marker::PhantomData<fn(Sig)>,
}

/// A CPU implementation with its arguments resolved, given the launch's geometry.
type CpuCall = dyn Fn(&LaunchConfig, Vec<KernelArg<'_>>) -> Result<(), String> + Send + Sync;
type CpuImpl = Arc<CpuCall>;

impl<Sig> CpuKernel<Sig> {
    /// Wraps a CPU implementation (see [`CpuKernelFn`]).
    pub fn new<F: CpuKernelFn<Sig>>(f: F) -> CpuKernel<Sig> {
        CpuKernel::from_impl(Arc::new(move |_: &LaunchConfig, args| f.call(args)))
    }

    pub(super) fn from_impl(f: CpuImpl) -> CpuKernel<Sig> {
        CpuKernel {
            f,
            _sig: std::marker::PhantomData,
        }
    }
}

impl<Sig: 'static> CpuKernel<Sig> {
    /// The engine's kernel function: resolves, checks and locks the arguments, then calls the
    /// implementation once.
    pub(crate) fn kernel_fn(&self) -> KernelFn {
        let f = self.f.clone();
        Arc::new(move |config: &LaunchConfig, args: &[KernelArgValue]| run(&*f, config, args))
    }
}

impl<Sig> Clone for CpuKernel<Sig> {
    fn clone(&self) -> Self {
        CpuKernel::from_impl(self.f.clone())
    }
}

impl<Sig> fmt::Debug for CpuKernel<Sig> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuKernel")
            .field("signature", &std::any::type_name::<Sig>())
            .finish()
    }
}

/// The error of a CPU-backend launch of a kernel without a CPU implementation.
pub(crate) fn missing_cpu_impl(call: &'static str, kernel: &str, module: &str) -> Error {
    Error::BackendMismatch {
        call,
        backend: "cpu",
        reason: format!(
            "kernel `{kernel}` of module `{module}` has no CPU implementation; declare one with \
             `cpu = path::to::fn` on the kernel in `gpu_pipeline!`, or attach one with \
             `TypedKernel::with_cpu`"
        ),
    }
}

/// One buffer argument of a launch, resolved to its allocation.
#[derive(Clone, Copy, Debug)]
struct Region {
    index: usize,
    offset: usize,
    bytes: usize,
    elem_size: usize,
    writable: bool,
}

impl Region {
    fn overlaps(&self, other: &Region) -> bool {
        self.offset < other.offset + other.bytes && other.offset < self.offset + self.bytes
    }
}

fn run(f: &CpuCall, config: &LaunchConfig, args: &[KernelArgValue]) -> Result<(), String> {
    // The buffer arguments, grouped by allocation.
    let mut groups: Vec<(Arc<Memory>, Vec<Region>)> = Vec::new();
    for (index, arg) in args.iter().enumerate() {
        let KernelArgValue::Buffer(b) = arg else {
            continue;
        };
        let in_bounds = b
            .offset
            .checked_add(b.byte_len)
            .is_some_and(|end| end <= b.memory.bytes());
        if !in_bounds {
            return Err(format!(
                "argument {index} does not lie within `{}`",
                b.memory.name()
            ));
        }
        let region = Region {
            index,
            offset: b.offset,
            bytes: b.byte_len,
            elem_size: b.elem_size,
            writable: b.writable,
        };
        match groups.iter_mut().find(|(m, _)| Arc::ptr_eq(m, &b.memory)) {
            Some((_, regions)) => regions.push(region),
            None => groups.push((b.memory.clone(), vec![region])),
        }
    }
    // `&mut [T]` must not alias anything: two regions of one allocation that overlap, one of
    // them written, are refused (the typed API cannot build them; this keeps it so).
    for (memory, regions) in &groups {
        for (i, a) in regions.iter().enumerate() {
            for b in &regions[i + 1..] {
                if a.overlaps(b) && (a.writable || b.writable) {
                    return Err(format!(
                        "arguments {} and {} overlap in `{}` and one of them is written",
                        a.index,
                        b.index,
                        memory.name()
                    ));
                }
            }
        }
    }
    let accesses: Vec<(Arc<Memory>, Access)> = groups
        .iter()
        .map(|(memory, regions)| {
            let writes = regions.iter().any(|r| r.writable);
            (
                memory.clone(),
                if writes { Access::Write } else { Access::Read },
            )
        })
        .collect();
    let mut locks = lock_all(&accesses)?;
    let mut resolved: Vec<Option<KernelArg<'_>>> = args
        .iter()
        .map(|arg| match arg {
            KernelArgValue::Scalar(bytes) => Some(KernelArg::Scalar(bytes)),
            KernelArgValue::Buffer(_) => None,
        })
        .collect();
    for (memory, locked) in locks.iter_mut() {
        let Some((_, regions)) = groups.iter().find(|(m, _)| std::ptr::eq(&**m, *memory)) else {
            continue;
        };
        for (index, arg) in carve(locked, regions) {
            resolved[index] = Some(arg);
        }
    }
    let resolved: Vec<KernelArg<'_>> = resolved
        .into_iter()
        .enumerate()
        .map(|(i, arg)| arg.ok_or_else(|| format!("argument {i} could not be resolved")))
        .collect::<Result<_, _>>()?;
    f(config, resolved)
}

/// Cuts one locked allocation into the slices of its regions: written regions (which overlap
/// nothing) become exclusive slices, read regions shared slices of the gaps between them.
fn carve<'a>(locked: &'a mut Locked<'_>, regions: &[Region]) -> Vec<(usize, KernelArg<'a>)> {
    let mut out = Vec::with_capacity(regions.len());
    let gaps: Vec<(usize, &'a [u8])> = match locked {
        Locked::Read(_) => vec![(0, locked.bytes())],
        Locked::Write(_) => {
            let Some(mut rest) = locked.bytes_mut() else {
                return out;
            };
            let mut writes: Vec<&Region> = regions.iter().filter(|r| r.writable).collect();
            writes.sort_by_key(|r| r.offset);
            let mut gaps = Vec::with_capacity(writes.len() + 1);
            let mut base = 0;
            for w in writes {
                let (gap, tail) = rest.split_at_mut(w.offset - base);
                let (written, tail) = tail.split_at_mut(w.bytes);
                let gap: &'a [u8] = gap;
                gaps.push((base, gap));
                out.push((
                    w.index,
                    KernelArg::SliceMut {
                        bytes: written,
                        elem_size: w.elem_size,
                    },
                ));
                base = w.offset + w.bytes;
                rest = tail;
            }
            let rest: &'a [u8] = rest;
            gaps.push((base, rest));
            gaps
        }
    };
    for r in regions.iter().filter(|r| !r.writable) {
        // Every read region lies within one gap: it overlaps no written region.
        if let Some((start, gap)) = gaps
            .iter()
            .find(|(start, gap)| *start <= r.offset && r.offset + r.bytes <= start + gap.len())
        {
            let from = r.offset - start;
            out.push((
                r.index,
                KernelArg::Slice {
                    bytes: &gap[from..from + r.bytes],
                    elem_size: r.elem_size,
                },
            ));
        }
    }
    out
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
    fn a_function_item_is_a_cpu_implementation_of_its_signature() {
        fn implements<Sig, F: CpuKernelFn<Sig>>(_: &F) {}
        implements::<Saxpy, _>(&saxpy);
        implements::<(), _>(&|| {});
        implements::<(u32, &'static [u8]), _>(&|_: u32, _: &[u8]| {});
        let _ = CpuKernel::<Saxpy>::new(saxpy);
    }

    #[test]
    fn resolved_arguments_become_typed_values() {
        let x: Vec<u8> = bytemuck::cast_slice(&[1.0f32, 2.0, 3.0]).to_vec();
        let mut y = [10.0f32, 20.0, 30.0];
        let n = 3u32.to_ne_bytes();
        let a = 2.0f32.to_ne_bytes();
        let args = vec![
            KernelArg::Scalar(&n),
            KernelArg::Scalar(&a),
            KernelArg::Slice {
                bytes: &x,
                elem_size: 4,
            },
            KernelArg::SliceMut {
                bytes: bytemuck::cast_slice_mut(&mut y),
                elem_size: 4,
            },
        ];
        let f: &dyn CpuKernelFn<Saxpy> = &saxpy;
        f.call(args).unwrap();
        assert_eq!(y, [12.0, 24.0, 36.0]);
        let err = f.call(vec![KernelArg::Scalar(&n)]).unwrap_err();
        assert_eq!(err, "the kernel takes 4 arguments but the launch passed 1");
        let wide = 3u64.to_ne_bytes();
        let err = <u32 as CpuParam>::from_arg(KernelArg::Scalar(&wide)).unwrap_err();
        assert!(err.contains("4-byte scalar"), "{err}");
        let err = <&mut [f32] as CpuParam>::from_arg(KernelArg::Slice {
            bytes: &x,
            elem_size: 4,
        })
        .unwrap_err();
        assert!(err.contains("read-only"), "{err}");
    }

    #[test]
    fn carving_gives_disjoint_writes_and_shared_reads() {
        let ctx = super::super::shared::ContextShared::new(false);
        let memory = Memory::new(&ctx, 64, super::super::memory::MemoryKind::Device).unwrap();
        let regions = [
            Region {
                index: 0,
                offset: 0,
                bytes: 16,
                elem_size: 4,
                writable: true,
            },
            Region {
                index: 1,
                offset: 16,
                bytes: 32,
                elem_size: 4,
                writable: false,
            },
            Region {
                index: 2,
                offset: 20,
                bytes: 8,
                elem_size: 4,
                writable: false,
            },
            Region {
                index: 3,
                offset: 48,
                bytes: 16,
                elem_size: 4,
                writable: true,
            },
        ];
        let mut locked = memory.lock_for_op(Access::Write).unwrap();
        let mut parts = carve(&mut locked, &regions);
        parts.sort_by_key(|(i, _)| *i);
        let lens: Vec<(usize, usize, bool)> = parts
            .iter()
            .map(|(i, a)| match a {
                KernelArg::SliceMut { bytes, .. } => (*i, bytes.len(), true),
                KernelArg::Slice { bytes, .. } => (*i, bytes.len(), false),
                KernelArg::Scalar(_) => (*i, 0, false),
            })
            .collect();
        assert_eq!(
            lens,
            [(0, 16, true), (1, 32, false), (2, 8, false), (3, 16, true)]
        );
    }
}

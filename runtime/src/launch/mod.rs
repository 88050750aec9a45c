//! Launching kernels: the configuration, the arguments, the bounds, and the ways in.
//!
//! - [`Kernel::typed_with_bounds`] (unsafe, once) declares the kernel's parameter types as
//!   a [`Signature`] tuple and, for buffers the kernel indexes with a length it is given,
//!   which scalars bound those indices ([`Bounds`]: `y` below `n`). It returns a
//!   [`TypedKernel`], whose [`TypedKernel::launch`] is safe: its arguments must match the
//!   signature at compile time ([`KernelArgsFor`]), device buffers can only be passed where
//!   the signature allows (`&mut` to write), and each bounded buffer must be at least as
//!   long as its bound, checked before every launch. The promise is one a reader of the
//!   kernel can verify: "each buffer is indexed below its declared bound".
//! - [`Kernel::typed`] (unsafe, once) declares no bounds: the promise is then that the
//!   kernel indexes every buffer within the buffer passed, whatever the scalar arguments
//!   are, which a kernel that takes its length as a parameter cannot keep.
//! - [`Kernel::launch`] (unsafe, every time) takes any arguments; the caller vouches that
//!   they match the kernel and that it stays within the buffers passed.
//!
//! All check the [`LaunchConfig`] against the device and kernel limits first, and the
//! arguments' contexts against the stream's; the backends do the rest (`cuda/launch.rs`:
//! raise the dynamic shared memory limit when needed, keep buffers and the module alive in a
//! capture; `cpu/kernel.rs`: run the CPU implementation as one stream operation). The
//! arguments are packed on the stack: no allocation per CUDA launch.

mod args;
mod bounds;
pub(crate) mod config;
pub(crate) mod index;
pub(crate) mod param;
pub(crate) mod violation;

use std::marker::PhantomData;
use std::sync::Arc;

pub(crate) use args::sealed;
pub use args::{
    ArgRef, DeviceRepr, KernelArg, KernelArgs, KernelArgsFor, KernelParam, ParamLayout, PassedAs,
    Signature, check_param_sizes,
};
pub use bounds::{Bound, Bounds, MAX_BOUND_FACTORS};
pub use config::{
    DEFAULT_DYNAMIC_SHARED_LIMIT, Dim3, LaunchConfig, LaunchConfigError, LaunchLimits,
};
pub use index::{IndexType, ParamKind};
pub use violation::{BoundProblem, BoundViolation};

use crate::context::Context;
use crate::cpu::{self, CpuKernel};
use crate::cuda;
use crate::error::{Error, Result};
use crate::memory::alloc::DeviceMemory;
use crate::module::{Kernel, KernelBackend, ModuleBackend};
use crate::stream::{Stream, StreamBackend, mixed};

impl Kernel {
    /// Checks `config` against this kernel's limits ([`LaunchConfig::validate`]), with an
    /// error that names the kernel.
    pub fn validate(&self, config: &LaunchConfig) -> Result<()> {
        self.validate_for("Kernel::launch", config)
    }

    #[inline]
    pub(crate) fn validate_for(&self, call: &'static str, config: &LaunchConfig) -> Result<()> {
        config
            .validate(&self.inner.limits)
            .map_err(|e| self.config_error(call, e))
    }

    #[cold]
    pub(crate) fn config_error(&self, call: &'static str, e: LaunchConfigError) -> Error {
        Error::invalid(
            call,
            format!(
                "cannot launch `{}` of module `{}`: {e}",
                self.name(),
                self.module_name()
            ),
        )
    }

    /// The size of each parameter in bytes, as compiled (`cuFuncGetParamInfo`, CUDA 12.4;
    /// [`Error::Unsupported`] on older drivers; CUDA only).
    ///
    /// It asks for parameters until the driver answers that there are no more, which is a
    /// driver error that compute-sanitizer reports; `typed` asks only for the declared ones.
    pub fn param_sizes(&self) -> Result<Vec<usize>> {
        // CUDA caps a kernel's parameters at 32 KiB, so far fewer than 32768 of them.
        self.cuda_only("Kernel::param_sizes")?
            .param_sizes_up_to(32768)
    }

    /// The launch path shared by [`Kernel::launch`] and [`TypedKernel::launch`] on CUDA.
    #[inline]
    pub(crate) fn launch_cuda<A: KernelArgs>(
        &self,
        call: &'static str,
        stream: &cuda::Stream,
        config: &LaunchConfig,
        args: &A,
    ) -> Result<()> {
        self.validate_for(call, config)?;
        let function = self.cuda_only(call)?;
        cuda::launch(call, stream, function, config, &CudaArgsOf(args))
    }

    /// What a graph node or CPU-backend launch keeps alive of the kernel: its module.
    pub(crate) fn module_keep_cpu(&self) -> cpu::Keep {
        match self.module().kind() {
            ModuleBackend::Cpu(token) => cpu::Keep::Object(token.clone()),
            ModuleBackend::Cuda(module) => cpu::Keep::Object(module.clone()),
        }
    }
}

/// Refuses a graph's condition handle among `args`: a kernel launched on a stream (or a
/// kernel node given new arguments) may set only an eager handle, whose word it writes; a
/// graph's handle is set by kernel nodes that graph adds with it.
pub(crate) fn refuse_graph_conditions<A: KernelArgs>(call: &'static str, args: &A) -> Result<()> {
    let mut graph = false;
    args.visit_conditions(&mut |handle| graph |= handle.owner.is_some());
    if graph {
        return Err(Error::invalid(
            call,
            "a kernel is given a graph's condition handle outside that graph; a graph's handle \
             is set by the kernel nodes added with it (`add_kernel_node`), a launch on a stream \
             sets an eager one (`ConditionHandle::eager`)",
        ));
    }
    Ok(())
}

/// Refuses new arguments for a kernel node that sets a condition (any handle among `args`): its
/// node's loop is decided, and counted against its maximum, by the handle it was built with,
/// which another would leave unset (a loop that never ends).
pub(crate) fn refuse_condition_updates<A: KernelArgs>(call: &'static str, args: &A) -> Result<()> {
    let mut any = false;
    args.visit_conditions(&mut |_| any = true);
    if any {
        return Err(Error::invalid(
            call,
            "a kernel node that sets a condition keeps the arguments it was built with; build \
             the graph again to change them",
        ));
    }
    Ok(())
}

/// Argument tuples as the CUDA backend takes them.
pub(crate) struct CudaArgsOf<'a, A>(pub(crate) &'a A);

impl<A: KernelArgs> cuda::CudaArgs for CudaArgsOf<'_, A> {
    #[inline(always)]
    fn with_params<R>(&self, f: impl FnOnce(&mut [*mut std::ffi::c_void]) -> R) -> R {
        self.0.with_params(f)
    }

    #[inline(always)]
    fn visit_memory(&self, mut f: impl FnMut(&Arc<cuda::DeviceMemory>)) -> Result<()> {
        let mut foreign = None;
        self.0
            .visit_buffers(|index, region| match &region.alloc.memory {
                DeviceMemory::Cuda(memory) => f(memory),
                DeviceMemory::Cpu(_) => {
                    foreign.get_or_insert(index);
                }
            });
        match foreign {
            None => Ok(()),
            Some(index) => Err(Error::mismatch(
                "Kernel::launch",
                format!("argument {index} is CPU-backend memory and the stream runs on CUDA"),
            )),
        }
    }
}

/// The error for argument `index` of `kernel`, a buffer of another context (or backend) than
/// the stream's that the stream's device has no peer access to: it names the kernel, its
/// module and the parameter, by name where the declaration gave names.
#[cold]
fn foreign_buffer<Sig>(call: &'static str, kernel: &TypedKernel<Sig>, index: usize) -> Error {
    let k = kernel.kernel();
    let name = kernel.bounds().param_name(index);
    let param = if name.starts_with('`') {
        format!(" ({name})")
    } else {
        String::new()
    };
    Error::mismatch(
        call,
        format!(
            "argument {index}{param} of `{}` of module `{}` is a buffer of another context than \
             the stream's, and peer access from the stream's device to it is not enabled",
            k.name(),
            k.module_name()
        ),
    )
}

/// The named error (see [`foreign_buffer`]) where a buffer argument of `kernel` is not
/// memory of `ctx` or of a context it has peer access to: what a refused CUDA launch reports.
fn check_arg_contexts<Sig, A: KernelArgs>(
    call: &'static str,
    kernel: &TypedKernel<Sig>,
    ctx: &Context,
    args: &A,
) -> Result<()> {
    let mut foreign = None;
    args.visit_buffers(|index, region| {
        let alloc = &region.alloc.ctx;
        if foreign.is_none() && !(alloc.shares_memory_with(ctx) || ctx.peer_access_enabled(alloc)) {
            foreign = Some(index);
        }
    });
    foreign.map_or(Ok(()), |index| Err(foreign_buffer(call, kernel, index)))
}

/// The CPU-backend values of `kernel`'s arguments (a buffer written where `Sig` says
/// `&mut`); buffers of another context or backend are refused, naming the parameter.
pub(crate) fn cpu_args<Sig: Signature, A: KernelArgs>(
    call: &'static str,
    kernel: &TypedKernel<Sig>,
    ctx: &Context,
    args: &A,
) -> Result<Vec<cpu::KernelArgValue>> {
    let mut values = Vec::new();
    let mut error = None;
    args.visit(&mut |index, arg| match arg {
        ArgRef::Scalar(bytes) => values.push(cpu::KernelArgValue::Scalar(bytes.into())),
        ArgRef::Buffer { region, elem_size } => match (
            &region.alloc.memory,
            region.alloc.ctx.shares_memory_with(ctx) || ctx.peer_access_enabled(&region.alloc.ctx),
        ) {
            (DeviceMemory::Cpu(memory), true) => {
                values.push(cpu::KernelArgValue::Buffer(cpu::BufferArg {
                    memory: memory.clone(),
                    offset: region.offset,
                    byte_len: region.bytes,
                    elem_size,
                    writable: Sig::WRITES.get(index).copied().unwrap_or(true),
                }));
            }
            _ => {
                error.get_or_insert_with(|| foreign_buffer(call, kernel, index));
            }
        },
    });
    match error {
        Some(e) => Err(e),
        None => Ok(values),
    }
}

/// A kernel whose parameter types are declared ([`Kernel::typed`]): launching it is safe,
/// and its arguments are checked against `Sig` at compile time.
///
/// ```no_run
/// # use gpu_pipeline::*;
/// # fn demo(saxpy: &TypedKernel<(u32, f32, &'static [f32], &'static mut [f32])>,
/// #         stream: &Stream, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) -> Result<()> {
/// let n = y.len() as u32;
/// saxpy.launch(stream, LaunchConfig::for_elements(n, 256), (n, 2.0f32, x, y))?;
/// # Ok(()) }
/// ```
///
/// On the CPU backend a launch runs the kernel's CPU implementation, attached with
/// [`TypedKernel::with_cpu`]; without one it fails with [`Error::BackendMismatch`] naming the
/// kernel.
pub struct TypedKernel<Sig> {
    kernel: Kernel,
    cpu: Option<CpuKernel<Sig>>,
    /// Checked against `Sig` when declared (`Kernel::typed_with_bounds`).
    bounds: Bounds,
    _sig: PhantomData<fn() -> Sig>,
}

impl<Sig> TypedKernel<Sig> {
    /// Wraps a kernel whose signature the caller vouched for (`Kernel::typed`), without
    /// bounds.
    pub(crate) fn declared(kernel: Kernel) -> TypedKernel<Sig> {
        TypedKernel {
            kernel,
            cpu: None,
            bounds: Bounds::new(),
            _sig: PhantomData,
        }
    }
}

impl<Sig: Signature> TypedKernel<Sig> {
    /// Adds bounds the caller vouched for, after checking them against `Sig`
    /// (`Kernel::typed_with_bounds`).
    pub(crate) fn bounded(self, call: &'static str, bounds: Bounds) -> Result<TypedKernel<Sig>> {
        bounds.validate(Sig::KINDS).map_err(|message| {
            Error::invalid(
                call,
                format!(
                    "`{}` of module `{}`: {message}",
                    self.kernel.name(),
                    self.kernel.module_name()
                ),
            )
        })?;
        Ok(TypedKernel { bounds, ..self })
    }

    /// Checks every declared bound against `args` without launching: what each launch (and
    /// [`GraphExec::set_kernel_params`](crate::GraphExec::set_kernel_params)) checks first.
    /// For code that must know all the launches of a step pass before it enqueues any of
    /// them. Buffers may be passed shared here (`&y` for a `&mut [T]` parameter); a tuple
    /// that does not match the signature is refused with [`BoundProblem::Mismatch`].
    ///
    /// A refusal is [`Error::KernelBound`], naming the kernel, the buffer, the bound and the
    /// values. Allocates nothing unless it refuses.
    #[inline]
    pub fn check_bounds<A: KernelArgs>(&self, args: &A) -> Result<()> {
        self.check_bounds_for("TypedKernel::check_bounds", args)
    }

    #[inline]
    pub(crate) fn check_bounds_for<A: KernelArgs>(
        &self,
        call: &'static str,
        args: &A,
    ) -> Result<()> {
        if self.bounds.is_empty() {
            return Ok(());
        }
        self.bounds
            .check(Sig::KINDS, args)
            .map_err(|refusal| self.bound_error(call, args, &refusal))
    }

    #[cold]
    fn bound_error<A: KernelArgs>(
        &self,
        call: &'static str,
        args: &A,
        refusal: &bounds::Refusal,
    ) -> Error {
        let violation = self.bounds.violation(
            self.kernel.name(),
            self.kernel.module_name(),
            Sig::KINDS,
            args,
            refusal,
        );
        Error::KernelBound {
            call,
            violation: Box::new(violation),
        }
    }
}

impl<Sig: Signature + 'static> TypedKernel<Sig> {
    /// Enqueues the kernel on `stream`, after checking the configuration and every declared
    /// bound ([`TypedKernel::check_bounds`]).
    #[inline]
    pub fn launch<A: KernelArgsFor<Sig>>(
        &self,
        stream: &Stream,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        const CALL: &str = "TypedKernel::launch";
        self.check_bounds_for(CALL, &args)?;
        refuse_graph_conditions(CALL, &args)?;
        match stream.kind() {
            // The CUDA layer refuses a foreign buffer before it enqueues anything, without its
            // name; only a refusal pays for the named check (the CPU path names it itself).
            StreamBackend::Cuda(s) => {
                self.kernel
                    .launch_cuda(CALL, s, &config, &args)
                    .map_err(|e| {
                        check_arg_contexts(CALL, self, stream.context(), &args)
                            .err()
                            .unwrap_or(e)
                    })
            }
            StreamBackend::Cpu(s) => self.launch_cpu(CALL, stream, s, &config, &args),
        }
    }

    fn launch_cpu<A: KernelArgs>(
        &self,
        call: &'static str,
        stream: &Stream,
        s: &cpu::Stream,
        config: &LaunchConfig,
        args: &A,
    ) -> Result<()> {
        let kernel = &self.kernel;
        kernel.validate_for(call, config)?;
        if !matches!(kernel.inner.backend, KernelBackend::Cpu) {
            return Err(mixed(call, "kernel"));
        }
        if !kernel.context().shares_memory_with(stream.context()) {
            return Err(Error::mismatch(
                call,
                format!(
                    "`{}` is loaded in another context than the stream's",
                    kernel.name()
                ),
            ));
        }
        let cpu_impl = self
            .cpu
            .as_ref()
            .ok_or_else(|| cpu::missing_cpu_impl(call, kernel.name(), kernel.module_name()))?;
        let values = cpu_args::<Sig, A>(call, self, stream.context(), args)?;
        let label = format!("launch {}::{}", kernel.module_name(), kernel.name());
        let tag = cpu::KernelTag {
            kernel: kernel.inner.id,
            config: *config,
            in_call: crate::call_scope::in_call(),
        };
        let module = kernel.module_keep_cpu();
        Ok(s.launch_kernel(label, cpu_impl.kernel_fn(), values, tag, module)?)
    }
}

impl<Sig> TypedKernel<Sig> {
    /// The untyped kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// The declared bounds (empty for a kernel declared with [`Kernel::typed`]).
    pub fn bounds(&self) -> &Bounds {
        &self.bounds
    }

    /// Attaches the kernel's CPU implementation: what launches on the CPU backend run, once
    /// per launch (see [`CpuKernelFn`](crate::CpuKernelFn) for its shape). Kept and ignored
    /// on CUDA, so one declaration serves both backends.
    ///
    /// ```
    /// use gpu_pipeline::{CpuKernel, TypedKernel};
    /// type AddScalar = (u32, f32, &'static mut [f32]);
    /// fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
    ///     data[..n as usize].iter_mut().for_each(|x| *x += value);
    /// }
    /// fn with_its_cpu_implementation(kernel: TypedKernel<AddScalar>) -> TypedKernel<AddScalar> {
    ///     kernel.with_cpu(CpuKernel::new(add_scalar))
    /// }
    /// ```
    pub fn with_cpu(self, cpu: CpuKernel<Sig>) -> TypedKernel<Sig> {
        TypedKernel {
            cpu: Some(cpu),
            ..self
        }
    }

    /// The CPU implementation, for graph nodes built on the CPU backend.
    pub(crate) fn cpu_impl(&self) -> Option<&CpuKernel<Sig>> {
        self.cpu.as_ref()
    }

    /// [`TypedKernel::with_cpu`] under the name of earlier versions.
    #[doc(hidden)]
    pub fn with_host(self, cpu: CpuKernel<Sig>) -> TypedKernel<Sig> {
        self.with_cpu(cpu)
    }

    /// Whether a CPU implementation is attached.
    pub fn has_cpu(&self) -> bool {
        self.cpu.is_some()
    }

    /// [`TypedKernel::has_cpu`] under the name of earlier versions.
    #[doc(hidden)]
    pub fn has_host(&self) -> bool {
        self.has_cpu()
    }
}

impl<Sig> Clone for TypedKernel<Sig> {
    fn clone(&self) -> Self {
        TypedKernel {
            kernel: self.kernel.clone(),
            cpu: self.cpu.clone(),
            bounds: self.bounds,
            _sig: PhantomData,
        }
    }
}

impl<Sig> std::fmt::Debug for TypedKernel<Sig> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedKernel")
            .field("kernel", &self.kernel)
            .field("signature", &std::any::type_name::<Sig>())
            .field("cpu", &self.cpu.is_some())
            .field("bounds", &self.bounds.len())
            .finish()
    }
}

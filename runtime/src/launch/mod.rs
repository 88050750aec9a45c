//! Launching kernels: the configuration, the arguments, and the two ways in.
//!
//! - [`Kernel::typed`] (unsafe, once) declares the kernel's parameter types as a
//!   [`Signature`] tuple and returns a [`TypedKernel`], whose [`TypedKernel::launch`] is safe:
//!   its arguments must match the signature at compile time ([`KernelArgsFor`]), and
//!   device buffers can only be passed where the signature allows (`&mut` to write).
//! - [`Kernel::launch`] (unsafe, every time) takes any arguments; the caller vouches that
//!   they match the kernel.
//!
//! Both check the [`LaunchConfig`] against the device and kernel limits first, raise the
//! kernel's dynamic shared memory limit when a launch asks for more than 48 KiB, and, while
//! the stream captures, hand the buffers and the module to the graph being recorded so
//! they outlive it. The arguments are packed on the stack: no allocation per launch.
//!
//! On the host backend a typed launch runs the kernel's host implementation
//! ([`TypedKernel::with_host`], see [`host`](self::host)) as one stream operation.

mod args;
mod config;
pub(crate) mod host;

use std::marker::PhantomData;

pub use args::{
    DeviceRepr, KernelArg, KernelArgs, KernelArgsFor, KernelParam, ParamLayout, PassedAs, Retained,
    Signature, check_param_sizes,
};
pub use config::{
    DEFAULT_DYNAMIC_SHARED_LIMIT, Dim3, LaunchConfig, LaunchConfigError, LaunchLimits,
};
pub use host::{HostKernel, HostKernelFn, HostParam};

use crate::driver::check;
use crate::error::{Error, Result};
use crate::memory::alloc::KeepAlive;
use crate::module::Kernel;
use crate::stream::Stream;
use crate::sys::{self, CUresult};

impl Kernel {
    /// Checks `config` against this kernel's limits ([`LaunchConfig::validate`]), with an
    /// error that names the kernel.
    pub fn validate(&self, config: &LaunchConfig) -> Result<()> {
        config
            .validate(&self.inner.limits)
            .map_err(|e| self.config_error("Kernel::launch", e))
    }

    #[cold]
    pub(crate) fn config_error(&self, call: &'static str, e: LaunchConfigError) -> Error {
        Error::invalid(
            call,
            format!(
                "cannot launch `{}` of module `{}`: {e}",
                self.inner.name, self.inner.module_name
            ),
        )
    }

    /// Enqueues the kernel on `stream` with `args`, without checking their types.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters one by one: the same size and meaning
    /// (a device buffer where the kernel takes a pointer, of the element type it reads), and
    /// a buffer the kernel writes must be passed as `&mut`. Prefer [`Kernel::typed`].
    pub unsafe fn launch<A: KernelArgs>(
        &self,
        stream: &Stream,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        if stream.host.is_some() {
            // The host backend runs only typed kernels with a host implementation.
            return Err(host::missing_host_impl("Kernel::launch", self));
        }
        self.launch_args(stream, &config, args)
    }

    /// Declares the kernel's parameter types; launches through the result are safe and
    /// type-checked against `Sig` at compile time.
    ///
    /// Where the driver can report the kernel's parameter sizes (`cuFuncGetParamInfo`,
    /// CUDA 12.4), they are compared with `Sig` and a mismatch (count or size) is an error.
    ///
    /// ```no_run
    /// # use gpu_pipeline::*;
    /// # fn main() -> Result<()> {
    /// # let ctx = Context::cuda(0)?;
    /// # let module = Module::load_ptx(&ctx, include_str!("../../kernels/test_kernels.ptx"))?;
    /// // extern "C" __global__ void saxpy(unsigned n, float a, const float* x, float* y);
    /// // SAFETY: the kernel's C parameters are (unsigned, float, const float*, float*), and it
    /// // writes only through `y`.
    /// let saxpy = unsafe { module.function("saxpy")?.typed::<(u32, f32, &[f32], &mut [f32])>()? };
    /// # Ok(()) }
    /// ```
    ///
    /// # Safety
    /// `Sig` must describe the kernel: one entry per parameter, in order; a scalar of the
    /// C parameter's layout; `&[T]` for a `const T*` the kernel only reads within the
    /// buffer passed; `&mut [T]` for a `T*` it may read and write within the buffer passed.
    pub unsafe fn typed<Sig: Signature>(&self) -> Result<TypedKernel<Sig>> {
        // The check is a safety net on top of the caller's promise: where the driver cannot
        // answer, the declaration stands on that promise alone.
        // Only the declared parameters are asked for: probing past the last one is a driver
        // error (INVALID_VALUE), which tools such as compute-sanitizer report. A kernel with
        // more parameters than declared is therefore not caught here.
        match self.param_sizes_up_to(Sig::PARAM_LAYOUTS.len()) {
            Ok(sizes) => check_param_sizes(Sig::PARAM_LAYOUTS, &sizes).map_err(|m| {
                Error::invalid(
                    "Kernel::typed",
                    format!(
                        "`{}` of module `{}`: {m}",
                        self.inner.name, self.inner.module_name
                    ),
                )
            })?,
            Err(e) => tracing::debug!(error = %e, kernel = %self.inner.name, "no parameter info"),
        }
        Ok(TypedKernel {
            kernel: self.clone(),
            host: None,
            _sig: PhantomData,
        })
    }

    /// The size of each parameter in bytes, as compiled (`cuFuncGetParamInfo`, CUDA 12.4;
    /// [`Error::Unsupported`] on older drivers).
    ///
    /// It asks for parameters until the driver answers that there are no more, which is a
    /// driver error that compute-sanitizer reports; `typed` asks only for the declared ones.
    pub fn param_sizes(&self) -> Result<Vec<usize>> {
        // CUDA caps a kernel's parameters at 32 KiB, so far fewer than 32768 of them.
        self.param_sizes_up_to(32768)
    }

    /// The sizes of the first `count` parameters, fewer if the kernel has fewer.
    fn param_sizes_up_to(&self, count: usize) -> Result<Vec<usize>> {
        let c = self.context().bound_cuda("Kernel::param_sizes")?;
        let get_info = c
            .driver
            .optional(c.driver.cuFuncGetParamInfo, "cuFuncGetParamInfo")?;
        let mut sizes = Vec::new();
        for index in 0..count {
            let (mut offset, mut size) = (0, 0);
            // SAFETY: a live function and valid out-pointers; an index past the last
            // parameter is CUDA_ERROR_INVALID_VALUE.
            let code = unsafe { get_info(self.inner.raw, index, &mut offset, &mut size) };
            // Past the last parameter the driver answers INVALID_VALUE (NOT_FOUND is
            // accepted too, should a driver choose it).
            if matches!(
                code,
                CUresult::CUDA_ERROR_INVALID_VALUE | CUresult::CUDA_ERROR_NOT_FOUND
            ) {
                break;
            }
            check("cuFuncGetParamInfo", code)?;
            sizes.push(size);
        }
        Ok(sizes)
    }

    /// The launch path shared by [`Kernel::launch`] and [`TypedKernel::launch`].
    #[inline]
    fn launch_args<A: KernelArgs>(
        &self,
        stream: &Stream,
        config: &LaunchConfig,
        args: A,
    ) -> Result<()> {
        if let Err(e) = config.validate(&self.inner.limits) {
            return Err(self.config_error("Kernel::launch", e));
        }
        self.ensure_dynamic_shared(config.shared_mem_bytes)?;
        let (c, raw_stream) = stream.cuda("Kernel::launch")?;
        if c.raw != self.inner.ctx_raw {
            return Err(self.context_error("Kernel::launch"));
        }
        let capture = stream.tracked_capture();
        args.enqueued_on(stream);
        if capture.is_some() {
            stream.keep_alive_in_capture(|| KeepAlive::Object(self.module_keepalive()));
        }
        let (g, b) = (config.grid, config.block);
        let code = args.with_params(|params| {
            // SAFETY: a live function of the stream's context, validated dimensions and
            // shared memory, and one pointer per parameter to a packed value whose layout
            // matches it (the caller's or `typed`'s promise), valid for the call; the driver
            // copies the values before returning.
            unsafe {
                (c.driver.cuLaunchKernel)(
                    self.inner.raw,
                    g.x,
                    g.y,
                    g.z,
                    b.x,
                    b.y,
                    b.z,
                    config.shared_mem_bytes,
                    raw_stream,
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            }
        });
        check("cuLaunchKernel", code)?;
        let now = stream.tracked_capture();
        if now != capture {
            // A capture began on another thread during the launch, which may be in it.
            self.retain_late(stream, &args);
        }
        if let Some(id) = now {
            // The node just added, in launch order (see `Graph::kernel_nodes_in_launch_order`).
            crate::graph::note_captured_kernel(stream, id);
        }
        Ok(())
    }

    #[cold]
    fn retain_late<A: KernelArgs>(&self, stream: &Stream, args: &A) {
        args.enqueued_on(stream);
        stream.keep_alive_in_capture(|| KeepAlive::Object(self.module_keepalive()));
    }

    #[cold]
    fn context_error(&self, call: &'static str) -> Error {
        Error::invalid(
            call,
            format!(
                "`{}` is loaded in another context than the stream's",
                self.inner.name
            ),
        )
    }

    /// What a graph node launching this kernel with `args` must keep alive.
    pub(crate) fn retain<A: KernelArgs>(&self, args: &A, out: &mut Retained) {
        args.retain(out);
        out.items.push(KeepAlive::Object(self.module_keepalive()));
    }

    /// Validates `config` and builds the node parameters for a graph kernel node, calling
    /// `f` with them while the packed arguments they point at are alive.
    pub(crate) fn with_node_params<A: KernelArgs, R>(
        &self,
        call: &'static str,
        config: &LaunchConfig,
        args: A,
        f: impl FnOnce(&sys::CUDA_KERNEL_NODE_PARAMS) -> Result<R>,
    ) -> Result<R> {
        if let Err(e) = config.validate(&self.inner.limits) {
            return Err(self.config_error(call, e));
        }
        self.ensure_dynamic_shared(config.shared_mem_bytes)?;
        let (g, b) = (config.grid, config.block);
        args.with_params(|params| {
            f(&sys::CUDA_KERNEL_NODE_PARAMS {
                func: self.inner.raw,
                gridDimX: g.x,
                gridDimY: g.y,
                gridDimZ: g.z,
                blockDimX: b.x,
                blockDimY: b.y,
                blockDimZ: b.z,
                sharedMemBytes: config.shared_mem_bytes,
                kernelParams: params.as_mut_ptr(),
                extra: std::ptr::null_mut(),
                kern: std::ptr::null_mut(),
                ctx: std::ptr::null_mut(),
            })
        })
    }

    pub(crate) fn context_raw(&self) -> sys::CUcontext {
        self.inner.ctx_raw
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
/// On the host backend a launch runs the kernel's host implementation, attached with
/// [`TypedKernel::with_host`]; without one it fails with [`Error::BackendMismatch`] naming
/// the kernel.
pub struct TypedKernel<Sig> {
    kernel: Kernel,
    host: Option<HostKernel<Sig>>,
    _sig: PhantomData<fn() -> Sig>,
}

impl<Sig: Signature + 'static> TypedKernel<Sig> {
    /// Enqueues the kernel on `stream`.
    #[inline]
    pub fn launch<A: KernelArgsFor<Sig>>(
        &self,
        stream: &Stream,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        if let Some(h) = &stream.host {
            return host::launch(&self.kernel, self.host.as_ref(), stream, h, &config, &args);
        }
        self.kernel.launch_args(stream, &config, args)
    }
}

impl<Sig> TypedKernel<Sig> {
    /// The untyped kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Attaches the kernel's host implementation: what launches on the host backend run,
    /// once per launch (see [`HostKernelFn`] for its shape). Kept and ignored on CUDA, so one
    /// declaration serves both backends.
    ///
    /// ```no_run
    /// # use gpu_pipeline::*;
    /// # fn main() -> Result<()> {
    /// fn add_scalar(n: u32, value: f32, data: &mut [f32]) {
    ///     data[..n as usize].iter_mut().for_each(|x| *x += value);
    /// }
    /// let ctx = Context::auto()?;
    /// let module = Module::load_ptx(&ctx, include_str!("../../kernels/test_kernels.ptx"))?;
    /// // SAFETY: add_scalar(unsigned n, float value, float* data), writing only `data`.
    /// let kernel = unsafe { module.function("add_scalar")?.typed::<(u32, f32, &mut [f32])>()? }
    ///     .with_host(HostKernel::new(add_scalar));
    /// # Ok(()) }
    /// ```
    pub fn with_host(self, host: HostKernel<Sig>) -> TypedKernel<Sig> {
        TypedKernel {
            host: Some(host),
            ..self
        }
    }

    /// Whether a host implementation is attached.
    pub fn has_host(&self) -> bool {
        self.host.is_some()
    }
}

impl<Sig> Clone for TypedKernel<Sig> {
    fn clone(&self) -> Self {
        TypedKernel {
            kernel: self.kernel.clone(),
            host: self.host.clone(),
            _sig: PhantomData,
        }
    }
}

impl<Sig> std::fmt::Debug for TypedKernel<Sig> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedKernel")
            .field("kernel", &self.kernel)
            .field("signature", &std::any::type_name::<Sig>())
            .field("host", &self.host.is_some())
            .finish()
    }
}

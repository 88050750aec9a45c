//! The crate's `unsafe` public entry points: where a user vouches for what no check can see
//! (a kernel's parameter list, a raw stream handle of another library). Their bodies are the
//! safe layers' own.
//!
//! Public-type methods, so they sit above the backends (docs/DESIGN.md, "Layers"); with
//! sys/, driver/ and cuda/, this is the fourth place that holds `unsafe`: each block here
//! forwards the caller's promise to a backend's `unsafe fn`.

#[cfg(feature = "cudarc")]
pub(crate) mod cudarc;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::launch::{Bounds, KernelArgs, LaunchConfig, Signature, TypedKernel, check_param_sizes};
use crate::module::{Kernel, Module};
use crate::stream::{Stream, StreamBackend};
use crate::sys;

impl Stream {
    /// Borrows a stream created by another library. It is not destroyed on drop. Work
    /// enqueued through it while it captures is tracked like any other, through this or any
    /// other `Stream` over the same handle. `CU_STREAM_PER_THREAD` (`0x2`) is refused: it
    /// names another stream on every thread, and a `Stream` may move between threads.
    ///
    /// # Safety
    /// `raw` must be a valid stream of `ctx`'s context (or the NULL/legacy stream) and stay
    /// valid for as long as the returned `Stream` (and anything enqueued through it that
    /// refers to it) is alive; and no code other than gpu-pipeline may begin a capture on it
    /// while the returned `Stream` is alive (work enqueued here into a capture we did not
    /// begin could not keep its memory alive: such an enqueue fails instead, when seen).
    pub unsafe fn from_handle(ctx: &Context, raw: sys::CUstream) -> Result<Stream> {
        let c = ctx.cuda_only("Stream::from_handle")?;
        // SAFETY: forwarded from the caller's contract.
        let stream = unsafe { crate::cuda::Stream::borrow(c, raw)? };
        Ok(Stream::from_backend(ctx, StreamBackend::Cuda(stream)))
    }
}

impl Kernel {
    /// Enqueues the kernel on `stream` with `args`, without checking their types.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters one by one: the same size and meaning
    /// (a device buffer where the kernel takes a pointer, of the element type it reads), and
    /// the kernel must index each buffer within the buffer or view passed, with these
    /// arguments; a buffer the kernel writes must be passed as `&mut`. Prefer
    /// [`Kernel::typed_with_bounds`], which checks the last part at every launch.
    pub unsafe fn launch<A: KernelArgs>(
        &self,
        stream: &Stream,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        const CALL: &str = "Kernel::launch";
        match stream.kind() {
            StreamBackend::Cuda(s) => self.launch_cuda(CALL, s, &config, &args),
            // The CPU backend runs only typed kernels with a CPU implementation.
            StreamBackend::Cpu(_) => Err(crate::cpu::missing_cpu_impl(
                CALL,
                self.name(),
                self.module_name(),
            )),
        }
    }

    /// Declares the kernel's parameter types, without bounds; launches through the result
    /// are safe and type-checked against `Sig` at compile time.
    ///
    /// Without bounds, the promise covers every launch whatever its scalar arguments are:
    /// the kernel stays within the buffers passed. A kernel that takes its length as a
    /// parameter (`saxpy(n, a, x, y)`) cannot keep that promise, since a caller may pass any
    /// `n`: declare it with [`Kernel::typed_with_bounds`] instead.
    ///
    /// The parameter list a PTX image declares for the kernel is compared with `Sig` on both
    /// backends, and a mismatch (count or size, or an integer or buffer declared where the
    /// image has a floating-point parameter, as in `(f32, u32, ..)` for `(unsigned n, float a,
    /// ..)`) is an [`Error::InvalidArgument`] naming the kernel, the parameter and both lists. Where the driver can report the kernel's parameter sizes
    /// (`cuFuncGetParamInfo`, CUDA 12.4; cubin and fatbin images too), they are compared as
    /// well.
    ///
    /// ```no_run,standalone_crate
    /// # use gpu_pipeline::*;
    /// # fn main() -> Result<()> {
    /// # let ctx = Context::cuda(0)?;
    /// # let module = Module::load_ptx(&ctx, include_str!("../../kernels/test_kernels.ptx"))?;
    /// // extern "C" __global__ void empty();
    /// // SAFETY: the kernel takes no parameters and touches no memory.
    /// let empty = unsafe { module.function("empty")?.typed::<()>()? };
    /// # Ok(()) }
    /// ```
    ///
    /// # Safety
    /// `Sig` must describe the kernel: one entry per parameter, in order; a scalar of the
    /// C parameter's layout; `&[T]` for a `const T*` the kernel only reads, `&mut [T]` for a
    /// `T*` it may read and write; and for every launch, whatever its arguments, the kernel
    /// indexes each buffer within the buffer (or view) passed for it.
    pub unsafe fn typed<Sig: Signature>(&self) -> Result<TypedKernel<Sig>> {
        // The image's own parameter list (PTX), on both backends: a declaration that cannot
        // match fails on the CPU backend as it would on a GPU.
        if let Some(image) = self.module().image_params(self.name()) {
            let sizes: Vec<usize> = image.iter().map(|p| p.size).collect();
            check_param_sizes(Sig::PARAM_LAYOUTS, &sizes)
                .and_then(|()| crate::module::check_param_types(Sig::KINDS, image))
                .map_err(|m| {
                    Error::invalid(
                        "Kernel::typed",
                        format!(
                            "`{}` of module `{}`: {m}; declared {}, the image's `.entry` takes {}",
                            self.name(),
                            self.module_name(),
                            crate::module::describe_declared(Sig::PARAM_LAYOUTS, Sig::KINDS),
                            crate::module::describe_image(image),
                        ),
                    )
                })?;
        }
        // The check is a safety net on top of the caller's promise: where the driver cannot
        // answer, the declaration stands on that promise alone. Only the declared parameters
        // are asked for: probing past the last one is a driver error (INVALID_VALUE), which
        // tools such as compute-sanitizer report. A kernel with more parameters than declared
        // is therefore not caught here.
        if let Ok(function) = self.cuda_only("Kernel::typed") {
            match function.param_sizes_up_to(Sig::PARAM_LAYOUTS.len()) {
                Ok(sizes) => check_param_sizes(Sig::PARAM_LAYOUTS, &sizes).map_err(|m| {
                    Error::invalid(
                        "Kernel::typed",
                        format!("`{}` of module `{}`: {m}", self.name(), self.module_name()),
                    )
                })?,
                Err(e) => tracing::debug!(error = %e, kernel = %self.name(), "no parameter info"),
            }
        }
        Ok(TypedKernel::declared(self.clone()))
    }

    /// Declares the kernel's parameter types and, for the buffers it indexes with lengths it
    /// is given, the bound of those indices ([`Bounds`]); launches through the result are
    /// safe, type-checked against `Sig` at compile time, and refused with
    /// [`Error::KernelBound`] whenever a buffer passed is shorter than its bound (checked
    /// before every launch, [`Graph::add_kernel_node`](crate::Graph::add_kernel_node) and
    /// [`GraphExec::set_kernel_params`](crate::GraphExec::set_kernel_params)).
    ///
    /// `bounds` is checked against `Sig` here: a bound on a scalar, a factor that is not an
    /// integer parameter or a malformed bound is an [`Error::InvalidArgument`].
    ///
    /// ```no_run,standalone_crate
    /// # use gpu_pipeline::*;
    /// # fn main() -> Result<()> {
    /// # let ctx = Context::cuda(0)?;
    /// # let stream = Stream::new(&ctx)?;
    /// # let module = Module::load_ptx(&ctx, include_str!("../../kernels/test_kernels.ptx"))?;
    /// // extern "C" __global__ void saxpy(unsigned n, float a, const float* x, float* y) {
    /// //     unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    /// //     if (i < n) y[i] = a * x[i] + y[i];
    /// // }
    /// type Saxpy = (u32, f32, &'static [f32], &'static mut [f32]);
    /// const SAXPY: Bounds = Bounds::new()
    ///     .names(&["n", "a", "x", "y"])
    ///     .buffer(2, Bound::param(0)) // x[i] only for i < n
    ///     .buffer(3, Bound::param(0)); // y[i] only for i < n
    /// // SAFETY: the kernel's C parameters are (unsigned, float, const float*, float*), it
    /// // writes only through `y`, and it indexes `x` and `y` only below `n` (`if (i < n)`).
    /// let saxpy = unsafe { module.function("saxpy")?.typed_with_bounds::<Saxpy>(SAXPY)? };
    /// let x = DeviceBuffer::from_slice(&stream, &[1.0f32; 1024])?;
    /// let mut y = DeviceBuffer::<f32>::zeros(&stream, 1024)?;
    /// saxpy.launch(&stream, LaunchConfig::for_elements(1024, 256), (1024u32, 2.0f32, &x, &mut y))?;
    /// // `n` = 1025 > y.len(): refused before anything is enqueued.
    /// let refused = saxpy.launch(&stream, LaunchConfig::for_elements(1025, 256), (1025u32, 2.0f32, &x, &mut y));
    /// assert!(matches!(refused, Err(Error::KernelBound { .. })));
    /// # Ok(()) }
    /// ```
    ///
    /// # Safety
    /// `Sig` must describe the kernel as for [`Kernel::typed`]: one entry per parameter, in
    /// order; a scalar of the C parameter's layout; `&[T]` for a `const T*` the kernel only
    /// reads, `&mut [T]` for a `T*` it may read and write. And for every launch, the kernel
    /// indexes each buffer with a bound in `bounds` only below that bound's value (in
    /// elements of `T`), and each buffer without one within the buffer passed. The first
    /// part is what a reader of the kernel verifies (`if (i < n)`); that each buffer is
    /// long enough is checked here.
    pub unsafe fn typed_with_bounds<Sig: Signature>(
        &self,
        bounds: Bounds,
    ) -> Result<TypedKernel<Sig>> {
        // SAFETY: the caller's contract covers `typed`'s, with bounds where it declares them;
        // `bounded` checks the bounds against `Sig` before the kernel can be launched.
        let kernel = unsafe { self.typed::<Sig>()? };
        kernel.bounded("Kernel::typed_with_bounds", bounds)
    }
}

/// One declared kernel of a module, without bounds, for the expansions of earlier
/// `gpu_pipeline!` versions.
///
/// # Safety
/// `Sig` must be the kernel's real parameter list (see [`Kernel::typed`]): the user vouched
/// for it by writing `unsafe kernels`.
pub unsafe fn declare_kernel<Sig: Signature>(
    module: &Module,
    name: &str,
) -> Result<TypedKernel<Sig>> {
    let kernel = module.function(name)?;
    // SAFETY: the caller's contract, as documented above.
    unsafe { kernel.typed::<Sig>() }
}

/// One declared kernel of a module with the bounds its declaration names
/// (`y: &mut [f32; n]`), for `gpu_pipeline!` expansions.
///
/// # Safety
/// `Sig` and `bounds` must describe the kernel (see [`Kernel::typed_with_bounds`]): the user
/// vouched for both by writing `unsafe kernels`.
pub unsafe fn declare_bounded_kernel<Sig: Signature>(
    module: &Module,
    name: &str,
    bounds: Bounds,
) -> Result<TypedKernel<Sig>> {
    let kernel = module.function(name)?;
    // SAFETY: the caller's contract, as documented above.
    unsafe { kernel.typed_with_bounds::<Sig>(bounds) }
}

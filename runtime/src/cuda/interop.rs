//! The crate's `unsafe` public entry points: where a user vouches for what no check can see
//! (a kernel's parameter list, a raw stream handle of another library). Their bodies are the
//! safe layers' own.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::launch::{KernelArgs, LaunchConfig, Signature, TypedKernel, check_param_sizes};
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
        let stream = unsafe { super::Stream::borrow(c, raw)? };
        Ok(Stream::from_backend(ctx, StreamBackend::Cuda(stream)))
    }
}

impl Kernel {
    /// Enqueues the kernel on `stream` with `args`, without checking their types.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters one by one: the same size and meaning
    /// (a device buffer where the kernel takes a pointer, of the element type it reads), and
    /// the kernel must index each buffer within the buffer or view passed; a buffer the kernel
    /// writes must be passed as `&mut`. Prefer [`Kernel::typed`].
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
    /// // writes only through `y`, within the buffers passed.
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
}

/// One declared kernel of a module, for `gpu_pipeline!` expansions.
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

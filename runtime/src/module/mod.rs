//! Modules and kernels: PTX, cubin and fatbin images loaded into a context, and the
//! functions (kernels) looked up in them.
//!
//! A [`Kernel`] holds its module, so a module is unloaded only after its last kernel is gone;
//! on CUDA the unload first waits for the context's work, so no enqueued launch can outlive
//! its code. Launching is in [`crate::launch`].
//!
//! On the CPU backend nothing is compiled: a module records the kernel names its image
//! defines (PTX `.entry` names; a cubin or fatbin accepts any name), so that asking for a
//! kernel the PTX lacks is the same error as on CUDA. Kernels run there through a CPU
//! implementation attached with [`TypedKernel::with_cpu`](crate::TypedKernel::with_cpu).

use std::ffi::CString;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::context::{Context, ContextBackend};
use crate::cuda::{self, DeviceAttribute};
use crate::error::{Error, Result};
use crate::launch::config::{Dim3, LaunchLimits};
use crate::sys;

#[cfg(feature = "nvrtc")]
mod cuda_source;
mod params;

pub(crate) use params::{EntryParams, check_param_types, describe_declared, describe_image};

/// A function attribute id (`CUfunction_attribute`).
///
/// ```
/// use gpu_pipeline::{Backend, Context, FunctionAttribute, Module};
/// let ctx = Context::auto()?; // CUDA device 0 when there is one, else the CPU backend
/// let ptx = ".version 8.0\n.target sm_75\n.address_size 64\n.visible .entry noop()\n{\n\tret;\n}";
/// let kernel = Module::load_ptx(&ctx, ptx)?.function("noop")?;
/// match ctx.backend() {
///     Backend::Cuda => {
///         let max = kernel.attribute(FunctionAttribute::MAX_THREADS_PER_BLOCK)?;
///         assert_eq!(max as u32, kernel.attributes()?.max_threads_per_block);
///     }
///     _ => assert!(kernel.attribute(FunctionAttribute::NUM_REGS).is_err()), // CUDA only
/// }
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub use crate::sys::CUfunction_attribute as FunctionAttribute;

/// A loaded module (`CUmodule` on CUDA). Cloning is cheap and shares the module.
///
/// ```
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{Context, Module};
/// let ctx = Context::cpu();
/// let ptx = ".version 8.0\n.target sm_75\n.address_size 64\n.visible .entry scale(.param .u32 n)\n{\n\tret;\n}\n";
/// let module = Module::load_ptx(&ctx, ptx)?.named("scale.ptx");
/// assert_eq!(module.kernel_names(), ["scale"]);
/// assert!(module.function("missing").is_err()); // names the module and what it has
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Module {
    ctx: Context,
    backend: ModuleBackend,
    info: Arc<ModuleInfo>,
    /// How errors name the module (`Module::named`); defaults to the image kind.
    name: Arc<str>,
}

/// The one backend value a [`Module`] holds.
#[derive(Clone, Debug)]
pub(crate) enum ModuleBackend {
    /// A module the driver loaded.
    Cuda(Arc<cuda::Module>),
    /// A CPU-backend module: a token that graph nodes keep, as they keep a CUDA module.
    Cpu(Arc<CpuModule>),
}

/// What a module is on the CPU backend: nothing but its identity.
#[derive(Debug)]
pub(crate) struct CpuModule;

/// What the image told us, and the limits launches are checked against.
#[derive(Debug)]
struct ModuleInfo {
    /// The kernels the image defines, when we could read them (PTX `.entry`, cubin
    /// `.text.*` sections), for "no such kernel" errors.
    entries: Vec<String>,
    /// Whether any kernel name is accepted on the CPU backend (cubin and fatbin images,
    /// whose kernels are not read there).
    any_name: bool,
    /// Each kernel's parameter list as the image declares it (PTX only; empty otherwise),
    /// which typed declarations are checked against on both backends.
    params: Vec<EntryParams>,
    /// The device's launch limits, read once at load.
    limits: DeviceLimits,
}

/// The device half of [`LaunchLimits`].
#[derive(Clone, Copy, Debug)]
struct DeviceLimits {
    max_threads_per_block: u32,
    max_block: Dim3,
    max_grid: Dim3,
    max_shared_per_block_opt_in: u32,
}

/// Limits on the CPU backend: those every CUDA GPU since compute capability 3.0 has (1024
/// threads a block; blocks of at most 1024 x 1024 x 64; grids of at most 2^31 - 1 x 65535 x
/// 65535), so a launch no GPU would run is refused here too, in CI, rather than first on a
/// GPU. Shared memory differs from GPU to GPU (64 KiB a block on sm_75, 227 KiB on sm_90 and
/// sm_100), so it is limited to the largest, what no GPU runs past: a request of megabytes
/// (a size computed in elements where bytes were meant, say) fails in CI too. A CPU
/// implementation runs once per launch, whatever the geometry.
const CPU_DEVICE_LIMITS: DeviceLimits = DeviceLimits {
    max_threads_per_block: 1024,
    max_block: Dim3::new(1024, 1024, 64),
    max_grid: Dim3::new(i32::MAX as u32, 65535, 65535),
    max_shared_per_block_opt_in: 227 * 1024,
};

/// What kind of image a module came from, for its default name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ImageKind {
    Ptx,
    Cubin,
    Fatbin,
    /// CUDA C source, not compiled on the CPU backend.
    CudaSource,
}

impl ImageKind {
    fn default_name(self) -> &'static str {
        match self {
            ImageKind::Ptx => "<PTX module>",
            ImageKind::Cubin => "<cubin module>",
            ImageKind::Fatbin => "<fatbin module>",
            ImageKind::CudaSource => "<CUDA C module>",
        }
    }
}

impl Module {
    /// Loads PTX text, JIT-compiling it for the context's device. A PTX the JIT rejects is a
    /// [`Error::Driver`] from `cuModuleLoadDataEx` whose description carries the JIT's error
    /// log (line numbers and messages).
    ///
    /// ```no_run,standalone_crate
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// let ctx = gpu_pipeline::Context::cuda(0)?;
    /// let module = gpu_pipeline::Module::load_ptx(&ctx, include_str!("../../kernels/test_kernels.ptx"))?
    ///     .named("test_kernels");
    /// let saxpy = module.function("saxpy")?;
    /// # Ok(()) }
    /// ```
    pub fn load_ptx(ctx: &Context, ptx: &str) -> Result<Module> {
        let entries = crate::image::check_ptx(ptx)
            .map_err(|e| Error::invalid_image("Module::load_ptx", e))?;
        // `check_ptx` refused any NUL, so this cannot fail; map it rather than unwrap.
        let text = CString::new(ptx).map_err(|e| {
            Error::invalid(
                "Module::load_ptx",
                format!("the PTX text contains a NUL byte at {}", e.nul_position()),
            )
        })?;
        let module = Module::load(ctx, cuda::ModuleImage::Ptx(&text), ImageKind::Ptx, entries)?;
        Ok(module.with_params(params::entry_params(ptx)))
    }

    /// Records the image's parameter lists (a module is not shared yet when this runs).
    fn with_params(mut self, params: Vec<EntryParams>) -> Module {
        if let Some(info) = Arc::get_mut(&mut self.info) {
            info.params = params;
        }
        self
    }

    /// The parameter list the image declares for `kernel`, when it was read (PTX images).
    pub(crate) fn image_params(&self, kernel: &str) -> Option<&[params::PtxParam]> {
        self.info
            .params
            .iter()
            .find(|e| e.kernel == kernel)
            .and_then(|e| e.params.as_deref())
    }

    /// Loads a cubin (an ELF image compiled for the device's architecture, e.g. by
    /// `nvcc -cubin -arch=sm_90`). The image is checked first by
    /// [`image::check_cubin`](crate::image::check_cubin), since the driver reads it by the
    /// offsets and sizes its headers claim; a refusal is an [`Error::InvalidImage`].
    pub fn load_cubin(ctx: &Context, image: &[u8]) -> Result<Module> {
        let entries = crate::image::check_cubin(image)
            .map_err(|e| Error::invalid_image("Module::load_cubin", e))?;
        Module::load(
            ctx,
            cuda::ModuleImage::Cubin(image),
            ImageKind::Cubin,
            entries,
        )
    }

    /// Loads a fatbin (`nvcc -fatbin -no-compress`): several cubins and PTX, from which the
    /// driver picks the best one for the device. The image and every entry in it are checked
    /// first by [`image::check_fatbin`](crate::image::check_fatbin) (compressed entries
    /// cannot be, and are refused); a refusal is an [`Error::InvalidImage`].
    pub fn load_fatbin(ctx: &Context, image: &[u8]) -> Result<Module> {
        crate::image::check_fatbin(image)
            .map_err(|e| Error::invalid_image("Module::load_fatbin", e))?;
        Module::load(
            ctx,
            cuda::ModuleImage::Fatbin(image),
            ImageKind::Fatbin,
            Vec::new(),
        )
    }

    /// A module of CUDA C `source` on the CPU backend, where nothing is compiled (so no NVRTC
    /// or CUDA toolkit is needed): it records the `__global__` kernels the source defines, so
    /// asking for another is the usual error, and its kernels run through their CPU
    /// implementations. On CUDA the source must be compiled: `None`.
    pub(crate) fn cpu_from_cuda_source(ctx: &Context, source: &str) -> Option<Module> {
        if !matches!(ctx.kind(), ContextBackend::Cpu(_)) {
            return None;
        }
        let entries = params::global_names(source);
        Some(Module {
            ctx: ctx.clone(),
            backend: ModuleBackend::Cpu(Arc::new(CpuModule)),
            info: Arc::new(ModuleInfo {
                // A source whose kernels we could not find accepts any name, as a cubin does.
                any_name: entries.is_empty(),
                entries,
                params: Vec::new(),
                limits: CPU_DEVICE_LIMITS,
            }),
            name: Arc::from(ImageKind::CudaSource.default_name()),
        })
    }

    fn load(
        ctx: &Context,
        image: cuda::ModuleImage<'_>,
        kind: ImageKind,
        entries: Vec<String>,
    ) -> Result<Module> {
        let (backend, limits) = match ctx.kind() {
            ContextBackend::Cuda(c) => {
                let limits = read_device_limits(ctx)?;
                let (module, info) = cuda::Module::load(c, image)?;
                if !info.is_empty() {
                    tracing::debug!(kind = ?kind, log = %info, "module JIT info log");
                }
                (ModuleBackend::Cuda(Arc::new(module)), limits)
            }
            ContextBackend::Cpu(_) => (ModuleBackend::Cpu(Arc::new(CpuModule)), CPU_DEVICE_LIMITS),
        };
        Ok(Module {
            ctx: ctx.clone(),
            backend,
            info: Arc::new(ModuleInfo {
                any_name: kind != ImageKind::Ptx,
                entries,
                params: Vec::new(),
                limits,
            }),
            name: Arc::from(kind.default_name()),
        })
    }

    /// Names the module in error messages (e.g. after the file it came from).
    pub fn named(mut self, name: impl Into<String>) -> Module {
        self.name = Arc::from(name.into());
        self
    }

    /// The module's name in error messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kernels the image was seen to define (PTX entries, cubin text sections); empty
    /// for a fatbin.
    pub fn kernel_names(&self) -> &[String] {
        &self.info.entries
    }

    /// The context the module is loaded in.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The raw handle, owned by this module; `None` on the CPU backend.
    pub fn handle(&self) -> Option<sys::CUmodule> {
        match &self.backend {
            ModuleBackend::Cuda(m) => Some(m.raw()),
            ModuleBackend::Cpu(_) => None,
        }
    }

    /// The kernel called `name` (its `extern "C"` name; a C++ kernel needs its mangled name).
    /// A missing name is an [`Error::InvalidArgument`] naming the kernel and the module and
    /// listing the kernels it has.
    pub fn function(&self, name: &str) -> Result<Kernel> {
        const CALL: &str = "Module::function";
        let missing = || Error::invalid(CALL, missing_kernel_message(name, &self.name, &self.info));
        let d = self.info.limits;
        let (backend, limits) = match &self.backend {
            ModuleBackend::Cuda(m) => {
                let function = m.function(CALL, name)?.ok_or_else(missing)?;
                let attribute = |a| function.attribute(a).map(|v| v.max(0) as u32);
                let limits = LaunchLimits {
                    max_threads_per_block: d
                        .max_threads_per_block
                        .min(attribute(FunctionAttribute::MAX_THREADS_PER_BLOCK)?),
                    max_block: d.max_block,
                    max_grid: d.max_grid,
                    max_shared_per_block_opt_in: d.max_shared_per_block_opt_in,
                    static_shared_bytes: attribute(FunctionAttribute::SHARED_SIZE_BYTES)?,
                };
                (KernelBackend::Cuda(function), limits)
            }
            ModuleBackend::Cpu(_) => {
                if !self.info.any_name && !self.info.entries.iter().any(|e| e == name) {
                    return Err(missing());
                }
                let limits = LaunchLimits {
                    max_threads_per_block: d.max_threads_per_block,
                    max_block: d.max_block,
                    max_grid: d.max_grid,
                    max_shared_per_block_opt_in: d.max_shared_per_block_opt_in,
                    static_shared_bytes: 0,
                };
                (KernelBackend::Cpu, limits)
            }
        };
        Ok(Kernel {
            inner: Arc::new(KernelInner {
                module: self.clone(),
                name: Arc::from(name),
                limits,
                id: next_kernel_id(),
                backend,
            }),
        })
    }

    /// The backend value, for the crate's dispatch.
    pub(crate) fn kind(&self) -> &ModuleBackend {
        &self.backend
    }
}

fn read_device_limits(ctx: &Context) -> Result<DeviceLimits> {
    use DeviceAttribute as A;
    let device = ctx
        .device()
        .ok_or_else(|| Error::cuda_only("Module::load"))?;
    let get = |a| device.attribute(a).map(|v| v.max(0) as u32);
    Ok(DeviceLimits {
        max_threads_per_block: get(A::MAX_THREADS_PER_BLOCK)?,
        max_block: Dim3::new(
            get(A::MAX_BLOCK_DIM_X)?,
            get(A::MAX_BLOCK_DIM_Y)?,
            get(A::MAX_BLOCK_DIM_Z)?,
        ),
        max_grid: Dim3::new(
            get(A::MAX_GRID_DIM_X)?,
            get(A::MAX_GRID_DIM_Y)?,
            get(A::MAX_GRID_DIM_Z)?,
        ),
        max_shared_per_block_opt_in: get(A::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
    })
}

fn missing_kernel_message(name: &str, module: &str, info: &ModuleInfo) -> String {
    let entries = &info.entries;
    let mut message = format!("no kernel named `{name}` in module `{module}`");
    if !entries.is_empty() {
        let list = entries
            .iter()
            .map(|e| format!("`{e}`"))
            .collect::<Vec<_>>()
            .join(", ");
        message.push_str(&format!("; it defines {list}"));
        if entries.iter().any(|e| e.starts_with("_Z")) {
            message.push_str(
                " (names starting `_Z` are C++-mangled: declare the kernel `extern \"C\"`)",
            );
        }
    } else if !info.any_name {
        // PTX or CUDA C whose text names no kernel.
        message.push_str(
            "; its image defines no kernel at all (is it a file's path rather than its \
             contents? embed the file with `include_str!(\"..\")` or `include_bytes!`)",
        );
    }
    message
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("name", &self.name)
            .field("raw", &self.handle())
            .finish()
    }
}

/// A kernel (`CUfunction` on CUDA) of a loaded module, with the limits its launches are
/// checked against. Cloning is cheap; every clone keeps the module loaded.
///
/// Launching needs the kernel's parameter types, which the driver cannot check: declare
/// them once with [`Kernel::typed`] and launch the [`TypedKernel`](crate::TypedKernel)
/// safely, or use the unsafe [`Kernel::launch`]. On the CPU backend the launch runs the
/// CPU implementation attached with [`TypedKernel::with_cpu`](crate::TypedKernel::with_cpu).
///
/// ```
/// use gpu_pipeline::{Context, CpuKernel, DeviceBuffer, LaunchConfig, Module, Stream};
/// let ctx = Context::cpu();
/// let ptx = ".version 8.0\n.target sm_75\n.address_size 64\n.visible .entry scale(.param .u32 n, .param .f32 f, .param .u64 x)\n{\n\tret;\n}\n";
/// let module = Module::load_ptx(&ctx, ptx)?.named("scale");
/// let kernel = module.function("scale")?;
/// assert_eq!(kernel.name(), "scale");
/// // SAFETY: `scale(n, f, x)` multiplies `x[i]` by `f` for `i < n` only, and `x` is
/// // passed with `n` elements below.
/// let scale = unsafe { kernel.typed::<(u32, f32, &'static mut [f32])>()? };
/// fn scale_on_cpu(n: u32, f: f32, x: &mut [f32]) {
///     x[..n as usize].iter_mut().for_each(|v| *v *= f);
/// }
/// let scale = scale.with_cpu(CpuKernel::new(scale_on_cpu));
/// let stream = Stream::new(&ctx)?;
/// let mut x = DeviceBuffer::from_slice(&stream, &[1.0f32, 2.0])?;
/// scale.launch(&stream, LaunchConfig::for_elements(2, 32), (2u32, 3.0f32, &mut x))?;
/// assert_eq!(x.to_vec(&stream)?, [3.0, 6.0]);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone)]
pub struct Kernel {
    pub(crate) inner: Arc<KernelInner>,
}

pub(crate) struct KernelInner {
    pub(crate) module: Module,
    pub(crate) name: Arc<str>,
    pub(crate) limits: LaunchLimits,
    /// A process-unique id: how CPU-backend graph nodes name the kernel they launch.
    pub(crate) id: u64,
    pub(crate) backend: KernelBackend,
}

/// The one backend value a [`Kernel`] holds.
pub(crate) enum KernelBackend {
    /// A function of a loaded CUDA module.
    Cuda(cuda::Function),
    /// A CPU-backend kernel: its code is the CPU implementation a typed kernel carries.
    Cpu,
}

fn next_kernel_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A kernel's attributes, as the driver reports them after compilation.
///
/// ```
/// use gpu_pipeline::{Backend, Context, Module};
/// let ctx = Context::auto()?; // CUDA device 0 when there is one, else the CPU backend
/// let ptx = ".version 8.0\n.target sm_75\n.address_size 64\n.visible .entry noop()\n{\n\tret;\n}";
/// let kernel = Module::load_ptx(&ctx, ptx)?.function("noop")?;
/// match ctx.backend() {
///     Backend::Cuda => {
///         let attributes = kernel.attributes()?;
///         // The PTX was compiled, when loaded, for this device's architecture.
///         let (major, minor) = ctx.device().unwrap().compute_capability()?;
///         assert_eq!(attributes.binary_version, major * 10 + minor);
///         assert_eq!(attributes.static_shared_bytes, 0);
///         assert_eq!(attributes.max_threads_per_block, kernel.limits().max_threads_per_block);
///     }
///     // The CPU backend compiles nothing: there are no attributes to report.
///     _ => assert!(kernel.attributes().is_err()),
/// }
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelAttributes {
    /// Registers per thread.
    pub num_regs: u32,
    /// The most threads a block of this kernel can have (register use lowers it).
    pub max_threads_per_block: u32,
    /// Static shared memory per block, in bytes.
    pub static_shared_bytes: u32,
    /// Constant memory, in bytes.
    pub const_bytes: u32,
    /// Local memory per thread, in bytes.
    pub local_bytes: u32,
    /// PTX ISA version the kernel was compiled from, e.g. `70` for 7.0.
    pub ptx_version: u32,
    /// The binary's architecture, e.g. `90` for sm_90.
    pub binary_version: u32,
    /// The dynamic shared memory launches may currently request without raising it.
    pub max_dynamic_shared_bytes: u32,
}

impl Kernel {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The name of the module it comes from.
    pub fn module_name(&self) -> &str {
        &self.inner.module.name
    }

    /// The raw handle, valid while this kernel (or a clone) lives; `None` on the CPU
    /// backend.
    pub fn handle(&self) -> Option<sys::CUfunction> {
        match &self.inner.backend {
            KernelBackend::Cuda(f) => Some(f.raw()),
            KernelBackend::Cpu => None,
        }
    }

    /// The context the kernel's module is loaded in.
    pub fn context(&self) -> &Context {
        &self.inner.module.ctx
    }

    /// The module it comes from.
    pub fn module(&self) -> &Module {
        &self.inner.module
    }

    /// The limits launches are checked against (on the CPU backend, those every CUDA GPU
    /// has, and the largest GPU's 227 KiB of shared memory a block).
    pub fn limits(&self) -> &LaunchLimits {
        &self.inner.limits
    }

    /// The CUDA function, or the error every CUDA-only operation returns on the CPU backend.
    pub(crate) fn cuda_only(&self, call: &'static str) -> Result<&cuda::Function> {
        match &self.inner.backend {
            KernelBackend::Cuda(f) => Ok(f),
            KernelBackend::Cpu => Err(Error::cuda_only(call)),
        }
    }

    /// One attribute (`cuFuncGetAttribute`; CUDA only).
    pub fn attribute(&self, attribute: FunctionAttribute) -> Result<i32> {
        self.cuda_only("Kernel::attribute")?.attribute(attribute)
    }

    /// The attributes that matter for launching (CUDA only).
    pub fn attributes(&self) -> Result<KernelAttributes> {
        let get = |a| self.attribute(a).map(|v| v.max(0) as u32);
        Ok(KernelAttributes {
            num_regs: get(FunctionAttribute::NUM_REGS)?,
            max_threads_per_block: get(FunctionAttribute::MAX_THREADS_PER_BLOCK)?,
            static_shared_bytes: get(FunctionAttribute::SHARED_SIZE_BYTES)?,
            const_bytes: get(FunctionAttribute::CONST_SIZE_BYTES)?,
            local_bytes: get(FunctionAttribute::LOCAL_SIZE_BYTES)?,
            ptx_version: get(FunctionAttribute::PTX_VERSION)?,
            binary_version: get(FunctionAttribute::BINARY_VERSION)?,
            max_dynamic_shared_bytes: get(FunctionAttribute::MAX_DYNAMIC_SHARED_SIZE_BYTES)?,
        })
    }

    /// Lets launches use up to `bytes` of dynamic shared memory (launches above 48 KiB do
    /// this on their own). Fails above the device's opt-in limit less static shared memory.
    /// A no-op on the CPU backend.
    pub fn set_max_dynamic_shared_bytes(&self, bytes: u32) -> Result<()> {
        let max = self.inner.limits.max_dynamic_shared_bytes();
        if bytes > max {
            return Err(Error::invalid(
                "Kernel::set_max_dynamic_shared_bytes",
                format!(
                    "`{}`: {bytes} bytes of dynamic shared memory requested; at most {max} are \
                     available",
                    self.name()
                ),
            ));
        }
        match &self.inner.backend {
            KernelBackend::Cuda(f) => f.set_max_dynamic_shared(bytes),
            KernelBackend::Cpu => Ok(()),
        }
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.inner.name)
            .field("module", &self.inner.module.name)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(entries: &[&str], any_name: bool) -> ModuleInfo {
        ModuleInfo {
            entries: entries.iter().map(|e| e.to_string()).collect(),
            any_name,
            params: Vec::new(),
            limits: CPU_DEVICE_LIMITS,
        }
    }

    #[test]
    fn a_missing_kernel_names_the_kernel_the_module_and_what_exists() {
        let msg = missing_kernel_message("saxpy", "test_kernels", &info(&["saxpy"], false));
        assert_eq!(
            msg,
            "no kernel named `saxpy` in module `test_kernels`; it defines `saxpy`"
        );
        let msg = missing_kernel_message("foo", "m", &info(&["_Z3fooPf"], false));
        assert!(msg.contains("extern \"C\""), "{msg}");
    }

    /// PTX naming no kernel is most often a path passed where the text belongs; a fatbin's
    /// kernels are not listed, so it says nothing of the kind.
    #[test]
    fn an_image_with_no_kernels_suggests_embedding_the_file() {
        let msg = missing_kernel_message("scale", "k", &info(&[], false));
        assert!(msg.contains("include_str!"), "{msg}");
        let msg = missing_kernel_message("scale", "k", &info(&[], true));
        assert_eq!(msg, "no kernel named `scale` in module `k`");
    }
}

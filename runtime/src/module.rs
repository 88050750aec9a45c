//! Modules and kernels: PTX, cubin and fatbin images loaded into a context, and the
//! functions (kernels) looked up in them.
//!
//! A [`Kernel`] holds its module (an `Arc`), so a module is unloaded only after its last
//! kernel is gone; the unload first waits for the context's work, so no enqueued launch can
//! outlive its code. Launching is in [`crate::launch`].
//!
//! On the host backend nothing is compiled: a module records the kernel names its image
//! defines (PTX `.entry` names; a cubin or fatbin accepts any name), so that asking for a
//! kernel the PTX lacks is the same error as on CUDA. Kernels run there through a host
//! implementation attached with [`TypedKernel::with_host`](crate::TypedKernel::with_host).

use std::ffi::{CStr, CString, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::context::Context;
use crate::driver::check;
use crate::error::{Error, Result};
use crate::launch::{Dim3, LaunchLimits};
use crate::sys::{self, CUfunction_attribute, CUjit_option, CUresult};

/// A function attribute id (`CUfunction_attribute`).
pub use crate::sys::CUfunction_attribute as FunctionAttribute;

/// Bytes of each JIT log buffer: enough for the error log of a broken PTX file.
const JIT_LOG_BYTES: usize = 16 * 1024;

/// A loaded module (`CUmodule`). Cloning is cheap and shares the module.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
    /// How errors name the module (`Module::named`); defaults to the image kind.
    name: Arc<str>,
}

pub(crate) struct ModuleInner {
    pub(crate) ctx: Context,
    pub(crate) raw: sys::CUmodule,
    /// The kernels the image defines, when we could read them (PTX `.entry`, cubin
    /// `.text.*` sections), for "no such kernel" errors.
    entries: Vec<String>,
    /// The device's launch limits, read once at load.
    device_limits: DeviceLimits,
    /// On the host backend: whether any kernel name is accepted (cubin and fatbin images,
    /// whose kernels are not read there).
    any_name: bool,
}

// SAFETY: a CUmodule is a context-wide handle usable from any thread once the context is
// current, which every use ensures; it is unloaded once, in Drop.
unsafe impl Send for ModuleInner {}
// SAFETY: as above; lookups (`cuModuleGetFunction`) are thread-safe.
unsafe impl Sync for ModuleInner {}

/// The device half of [`LaunchLimits`].
#[derive(Clone, Copy, Debug)]
struct DeviceLimits {
    max_threads_per_block: u32,
    max_block: Dim3,
    max_grid: Dim3,
    max_shared_per_block_opt_in: u32,
}

/// What kind of image a module came from, for its default name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ImageKind {
    Ptx,
    Cubin,
    Fatbin,
}

/// Limits on the host backend: a host implementation runs once per launch, whatever the
/// geometry, so only zero extents are rejected.
const HOST_DEVICE_LIMITS: DeviceLimits = DeviceLimits {
    max_threads_per_block: u32::MAX,
    max_block: Dim3::new(u32::MAX, u32::MAX, u32::MAX),
    max_grid: Dim3::new(u32::MAX, u32::MAX, u32::MAX),
    max_shared_per_block_opt_in: u32::MAX,
};

impl ImageKind {
    fn default_name(self) -> &'static str {
        match self {
            ImageKind::Ptx => "<PTX module>",
            ImageKind::Cubin => "<cubin module>",
            ImageKind::Fatbin => "<fatbin module>",
        }
    }
}

impl Module {
    /// Loads PTX text, JIT-compiling it for the context's device. A PTX the JIT rejects is a
    /// [`Error::Driver`] from `cuModuleLoadDataEx` whose description carries the JIT's error
    /// log (line numbers and messages).
    ///
    /// ```no_run
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// let ctx = gpu_pipeline::Context::cuda(0)?;
    /// let module = gpu_pipeline::Module::load_ptx(&ctx, include_str!("../kernels/test_kernels.ptx"))?
    ///     .named("test_kernels");
    /// let saxpy = module.function("saxpy")?;
    /// # Ok(()) }
    /// ```
    pub fn load_ptx(ctx: &Context, ptx: &str) -> Result<Module> {
        let text = CString::new(ptx).map_err(|e| {
            Error::invalid(
                "Module::load_ptx",
                format!("the PTX text contains a NUL byte at {}", e.nul_position()),
            )
        })?;
        let entries = ptx_entry_names(ptx);
        // SAFETY: `text` is NUL-terminated PTX, the form the driver reads.
        unsafe { Module::load_image(ctx, text.as_ptr().cast(), ImageKind::Ptx, entries) }
    }

    /// Loads a cubin (an ELF image compiled for the device's architecture, e.g. by
    /// `nvcc -cubin -arch=sm_90`). The ELF headers are checked to lie within `image` first,
    /// since the driver reads the image by the sizes those headers claim.
    pub fn load_cubin(ctx: &Context, image: &[u8]) -> Result<Module> {
        let entries = check_cubin(image).map_err(|m| Error::invalid("Module::load_cubin", m))?;
        let aligned = AlignedImage::new(image);
        // SAFETY: a complete ELF image (checked above), 8-byte aligned.
        unsafe { Module::load_image(ctx, aligned.as_ptr(), ImageKind::Cubin, entries) }
    }

    /// Loads a fatbin (`nvcc -fatbin`): several cubins and PTX, from which the driver picks
    /// the best one for the device. The header is checked to lie within `image` first.
    pub fn load_fatbin(ctx: &Context, image: &[u8]) -> Result<Module> {
        check_fatbin(image).map_err(|m| Error::invalid("Module::load_fatbin", m))?;
        let aligned = AlignedImage::new(image);
        // SAFETY: a fatbin whose declared size lies within the image (checked above).
        unsafe { Module::load_image(ctx, aligned.as_ptr(), ImageKind::Fatbin, Vec::new()) }
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
        &self.inner.entries
    }

    /// The context the module is loaded in.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// The raw handle, owned by this module.
    pub fn handle(&self) -> sys::CUmodule {
        self.inner.raw
    }

    /// The kernel called `name` (its `extern "C"` name; a C++ kernel needs its mangled name).
    /// A missing name is an [`Error::InvalidArgument`] naming the kernel and the module and
    /// listing the kernels it has.
    pub fn function(&self, name: &str) -> Result<Kernel> {
        if self.inner.ctx.host_context().is_some() {
            return self.host_function(name);
        }
        let c = self.inner.ctx.bound_cuda("Module::function")?;
        let cname = CString::new(name).map_err(|_| {
            Error::invalid(
                "Module::function",
                format!("the kernel name {name:?} contains a NUL byte"),
            )
        })?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a live module, a NUL-terminated name and a valid out-pointer.
        let code =
            unsafe { (c.driver.cuModuleGetFunction)(&mut raw, self.inner.raw, cname.as_ptr()) };
        if code == CUresult::CUDA_ERROR_NOT_FOUND {
            return Err(Error::invalid(
                "Module::function",
                missing_kernel_message(name, &self.name, &self.inner.entries),
            ));
        }
        check("cuModuleGetFunction", code)?;
        let attribute = |a: CUfunction_attribute| -> Result<u32> {
            let mut value = 0;
            // SAFETY: a live function and a valid out-pointer.
            check("cuFuncGetAttribute", unsafe {
                (c.driver.cuFuncGetAttribute)(&mut value, a, raw)
            })?;
            Ok(value.max(0) as u32)
        };
        let function_max_threads = attribute(CUfunction_attribute::MAX_THREADS_PER_BLOCK)?;
        let static_shared = attribute(CUfunction_attribute::SHARED_SIZE_BYTES)?;
        let dynamic_shared = attribute(CUfunction_attribute::MAX_DYNAMIC_SHARED_SIZE_BYTES)?;
        let d = self.inner.device_limits;
        Ok(Kernel {
            inner: Arc::new(KernelInner {
                module: self.inner.clone(),
                module_name: self.name.clone(),
                name: Arc::from(name),
                raw,
                ctx_raw: c.raw,
                limits: LaunchLimits {
                    max_threads_per_block: d.max_threads_per_block.min(function_max_threads),
                    max_block: d.max_block,
                    max_grid: d.max_grid,
                    max_shared_per_block_opt_in: d.max_shared_per_block_opt_in,
                    static_shared_bytes: static_shared,
                },
                dynamic_shared_limit: AtomicU32::new(dynamic_shared),
                raise_lock: Mutex::new(()),
                id: next_kernel_id(),
            }),
        })
    }

    /// [`Module::function`] on the host backend: a kernel without code, checked against the
    /// names the image defines.
    fn host_function(&self, name: &str) -> Result<Kernel> {
        if !self.inner.any_name && !self.inner.entries.iter().any(|e| e == name) {
            return Err(Error::invalid(
                "Module::function",
                missing_kernel_message(name, &self.name, &self.inner.entries),
            ));
        }
        let d = self.inner.device_limits;
        Ok(Kernel {
            inner: Arc::new(KernelInner {
                module: self.inner.clone(),
                module_name: self.name.clone(),
                name: Arc::from(name),
                raw: std::ptr::null_mut(),
                ctx_raw: std::ptr::null_mut(),
                limits: LaunchLimits {
                    max_threads_per_block: d.max_threads_per_block,
                    max_block: d.max_block,
                    max_grid: d.max_grid,
                    max_shared_per_block_opt_in: d.max_shared_per_block_opt_in,
                    static_shared_bytes: 0,
                },
                dynamic_shared_limit: AtomicU32::new(u32::MAX),
                raise_lock: Mutex::new(()),
                id: next_kernel_id(),
            }),
        })
    }

    /// Loads an image through `cuModuleLoadDataEx`, collecting the JIT logs.
    ///
    /// # Safety
    /// `image` must point to a complete image of `kind` that stays valid during the call.
    unsafe fn load_image(
        ctx: &Context,
        image: *const c_void,
        kind: ImageKind,
        entries: Vec<String>,
    ) -> Result<Module> {
        if ctx.host_context().is_some() {
            return Ok(Module {
                inner: Arc::new(ModuleInner {
                    ctx: ctx.clone(),
                    raw: std::ptr::null_mut(),
                    entries,
                    device_limits: HOST_DEVICE_LIMITS,
                    any_name: kind != ImageKind::Ptx,
                }),
                name: Arc::from(kind.default_name()),
            });
        }
        let device_limits = read_device_limits(ctx)?;
        let c = ctx.bound_cuda("Module::load")?;
        let mut info_log = vec![0u8; JIT_LOG_BYTES];
        let mut error_log = vec![0u8; JIT_LOG_BYTES];
        let mut options = [
            CUjit_option::INFO_LOG_BUFFER,
            CUjit_option::INFO_LOG_BUFFER_SIZE_BYTES,
            CUjit_option::ERROR_LOG_BUFFER,
            CUjit_option::ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // Sizes travel as pointer-sized integers, and come back as the bytes written.
        let mut values: [*mut c_void; 4] = [
            info_log.as_mut_ptr().cast(),
            JIT_LOG_BYTES as *mut c_void,
            error_log.as_mut_ptr().cast(),
            JIT_LOG_BYTES as *mut c_void,
        ];
        let mut raw = std::ptr::null_mut();
        // SAFETY: the caller vouches for `image`; the option arrays have equal lengths and
        // the log buffers are as long as the sizes we state.
        let code = unsafe {
            (c.driver.cuModuleLoadDataEx)(
                &mut raw,
                image,
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        let info = log_text(&info_log, values[1] as usize);
        let error = log_text(&error_log, values[3] as usize);
        if !code.is_success() {
            let mut e = crate::driver::driver_error("cuModuleLoadDataEx", code);
            let log = if error.is_empty() { info } else { error };
            if !log.is_empty() {
                e.description = format!("{}; JIT log:\n{log}", e.description);
            }
            return Err(e.into());
        }
        if !info.is_empty() {
            tracing::debug!(kind = ?kind, log = %info, "module JIT info log");
        }
        Ok(Module {
            inner: Arc::new(ModuleInner {
                ctx: ctx.clone(),
                raw,
                entries,
                device_limits,
                any_name: false,
            }),
            name: Arc::from(kind.default_name()),
        })
    }
}

fn read_device_limits(ctx: &Context) -> Result<DeviceLimits> {
    use crate::device::DeviceAttribute as A;
    let device = ctx.device().ok_or_else(|| Error::BackendMismatch {
        call: "Module::load",
        backend: ctx.backend().name(),
        reason: "modules need a CUDA device".to_owned(),
    })?;
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

impl Drop for ModuleInner {
    fn drop(&mut self) {
        if self.ctx.host_context().is_some() {
            // Nothing to unload: host launches hold their implementation themselves.
            return;
        }
        // A launch enqueued on any stream may still run this module's code: wait for it.
        if let Err(e) = self.ctx.synchronize() {
            tracing::warn!(error = %e, "synchronizing before unloading a module failed");
        }
        let Ok(c) = self.ctx.bound_cuda("Module::drop") else {
            return;
        };
        // SAFETY: we loaded the module; no kernel handle or pending launch uses it any more.
        let code = unsafe { (c.driver.cuModuleUnload)(self.raw) };
        if !code.is_success() {
            tracing::warn!(?code, "cuModuleUnload failed while dropping a module");
        }
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("name", &self.name)
            .field("raw", &self.inner.raw)
            .finish()
    }
}

/// A kernel (`CUfunction`) of a loaded module, with the limits its launches are checked
/// against. Cloning is cheap; every clone keeps the module loaded.
///
/// Launching needs the kernel's parameter types, which the driver cannot check: declare
/// them once with [`Kernel::typed`] and launch the [`TypedKernel`](crate::TypedKernel)
/// safely, or use the unsafe [`Kernel::launch`].
#[derive(Clone)]
pub struct Kernel {
    pub(crate) inner: Arc<KernelInner>,
}

pub(crate) struct KernelInner {
    pub(crate) module: Arc<ModuleInner>,
    pub(crate) module_name: Arc<str>,
    pub(crate) name: Arc<str>,
    pub(crate) raw: sys::CUfunction,
    /// The module's context, to check that launches use a stream of the same one.
    pub(crate) ctx_raw: sys::CUcontext,
    pub(crate) limits: LaunchLimits,
    /// The kernel's current `MAX_DYNAMIC_SHARED_SIZE_BYTES`: launches above it raise it.
    pub(crate) dynamic_shared_limit: AtomicU32,
    raise_lock: Mutex<()>,
    /// A process-unique id: how host-backend graph nodes name the kernel they launch.
    pub(crate) id: u64,
}

fn next_kernel_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

// SAFETY: a CUfunction is a handle into a module usable from any thread of the process; the
// only mutation (the shared-memory attribute) is serialized by `raise_lock`.
unsafe impl Send for KernelInner {}
// SAFETY: as above.
unsafe impl Sync for KernelInner {}

/// A kernel's attributes, as the driver reports them after compilation.
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
        &self.inner.module_name
    }

    /// The raw handle, valid while this kernel (or a clone) lives. Null on the host backend.
    pub fn handle(&self) -> sys::CUfunction {
        self.inner.raw
    }

    /// The context the kernel's module is loaded in.
    pub fn context(&self) -> &Context {
        &self.inner.module.ctx
    }

    /// The limits launches are checked against (on the host backend, only zero extents are
    /// rejected).
    pub fn limits(&self) -> &LaunchLimits {
        &self.inner.limits
    }

    /// One attribute (`cuFuncGetAttribute`).
    pub fn attribute(&self, attribute: FunctionAttribute) -> Result<i32> {
        let c = self.context().bound_cuda("Kernel::attribute")?;
        let mut value = 0;
        // SAFETY: a live function and a valid out-pointer.
        check("cuFuncGetAttribute", unsafe {
            (c.driver.cuFuncGetAttribute)(&mut value, attribute, self.inner.raw)
        })?;
        Ok(value)
    }

    /// The attributes that matter for launching.
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
        let _guard = self
            .inner
            .raise_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let c = self
            .context()
            .bound_cuda("Kernel::set_max_dynamic_shared_bytes")?;
        // SAFETY: a live function; the value is within the device's limit (checked above).
        check("cuFuncSetAttribute", unsafe {
            (c.driver.cuFuncSetAttribute)(
                self.inner.raw,
                CUfunction_attribute::MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        })?;
        self.inner
            .dynamic_shared_limit
            .store(bytes, Ordering::Release);
        Ok(())
    }

    /// Raises the dynamic shared memory limit when a launch needs more than it allows now.
    /// Never lowers it: another thread's launch may rely on the higher value.
    #[inline]
    pub(crate) fn ensure_dynamic_shared(&self, bytes: u32) -> Result<()> {
        if bytes <= self.inner.dynamic_shared_limit.load(Ordering::Acquire) {
            return Ok(());
        }
        self.raise_dynamic_shared(bytes)
    }

    #[cold]
    fn raise_dynamic_shared(&self, bytes: u32) -> Result<()> {
        let _guard = self
            .inner
            .raise_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if bytes <= self.inner.dynamic_shared_limit.load(Ordering::Acquire) {
            return Ok(());
        }
        let c = self.context().bound_cuda("Kernel::launch")?;
        // SAFETY: a live function; launch validation checked `bytes` against the device.
        check("cuFuncSetAttribute", unsafe {
            (c.driver.cuFuncSetAttribute)(
                self.inner.raw,
                CUfunction_attribute::MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        })?;
        self.inner
            .dynamic_shared_limit
            .store(bytes, Ordering::Release);
        Ok(())
    }

    pub(crate) fn module_keepalive(&self) -> Arc<ModuleInner> {
        self.inner.module.clone()
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.inner.name)
            .field("module", &self.inner.module_name)
            .finish()
    }
}

/// A copy of an image at an 8-byte aligned address, when the original is not aligned
/// (`include_bytes!` gives no alignment; the driver reads ELF headers as words).
enum AlignedImage<'a> {
    Borrowed(&'a [u8]),
    Copied(Vec<u64>),
}

impl<'a> AlignedImage<'a> {
    fn new(image: &'a [u8]) -> AlignedImage<'a> {
        if (image.as_ptr() as usize).is_multiple_of(8) {
            return AlignedImage::Borrowed(image);
        }
        let mut words = vec![0u64; image.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..image.len()].copy_from_slice(image);
        AlignedImage::Copied(words)
    }

    fn as_ptr(&self) -> *const c_void {
        match self {
            AlignedImage::Borrowed(b) => b.as_ptr().cast(),
            AlignedImage::Copied(w) => w.as_ptr().cast(),
        }
    }
}

/// The text of a JIT log buffer: the bytes the driver says it wrote, up to the first NUL.
fn log_text(buffer: &[u8], written: usize) -> String {
    let bytes = &buffer[..written.min(buffer.len())];
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).trim().to_owned()
}

/// The names of the kernels a PTX file defines (`.entry name`).
pub(crate) fn ptx_entry_names(ptx: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = ptx;
    while let Some(at) = rest.find(".entry") {
        rest = &rest[at + ".entry".len()..];
        if !rest.starts_with(|c: char| c.is_whitespace()) {
            continue;
        }
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|&c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
            .collect();
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

fn missing_kernel_message(name: &str, module: &str, entries: &[String]) -> String {
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
    }
    message
}

fn read_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn read_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// `EM_CUDA`: the ELF machine of NVIDIA GPU code.
const EM_CUDA: u16 = 190;
/// `SHT_NOBITS`: a section that takes no space in the file (`.bss`-like).
const SHT_NOBITS: u32 = 8;

/// Checks that `image` is a complete 64-bit little-endian CUDA ELF: every header table and
/// section the headers describe lies within it. Returns the kernels' names (from the
/// `.text.<name>` sections).
pub(crate) fn check_cubin(image: &[u8]) -> Result<Vec<String>, String> {
    let bad = |what: &str| format!("not a complete cubin: {what}");
    if image.len() < 64 || &image[..4] != b"\x7fELF" {
        return Err(bad("no ELF header (a cubin starts with `\\x7fELF`)"));
    }
    if image[4] != 2 || image[5] != 1 {
        return Err(bad("not a 64-bit little-endian ELF"));
    }
    let machine = read_u16(image, 0x12).unwrap_or(0);
    if machine != EM_CUDA {
        return Err(bad(&format!(
            "ELF machine {machine} is not a CUDA GPU ({EM_CUDA})"
        )));
    }
    let within = |offset: u64, size: u64| {
        offset
            .checked_add(size)
            .is_some_and(|end| end <= image.len() as u64)
    };
    let table = |off_at, entsize_at, num_at| -> Option<(u64, u64, u64)> {
        Some((
            read_u64(image, off_at)?,
            u64::from(read_u16(image, entsize_at)?),
            u64::from(read_u16(image, num_at)?),
        ))
    };
    let (phoff, phentsize, phnum) = table(0x20, 0x36, 0x38).ok_or_else(|| bad("short header"))?;
    if phnum > 0 && !within(phoff, phentsize * phnum) {
        return Err(bad(
            "the program header table lies past the end of the image",
        ));
    }
    let (shoff, shentsize, shnum) = table(0x28, 0x3A, 0x3C).ok_or_else(|| bad("short header"))?;
    if shnum > 0 && (shentsize < 64 || !within(shoff, shentsize * shnum)) {
        return Err(bad(
            "the section header table lies past the end of the image",
        ));
    }
    let section = |i: u64| -> Option<(u32, u32, u64, u64)> {
        let at = (shoff + i * shentsize) as usize;
        Some((
            read_u32(image, at)?,        // sh_name
            read_u32(image, at + 4)?,    // sh_type
            read_u64(image, at + 0x18)?, // sh_offset
            read_u64(image, at + 0x20)?, // sh_size
        ))
    };
    for i in 0..shnum {
        let (_, kind, offset, size) = section(i).ok_or_else(|| bad("short section header"))?;
        if kind != SHT_NOBITS && !within(offset, size) {
            return Err(bad(&format!("section {i} lies past the end of the image")));
        }
    }
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        let (offset, size) = (
            read_u64(image, at as usize + 8).ok_or_else(|| bad("short program header"))?,
            read_u64(image, at as usize + 0x20).ok_or_else(|| bad("short program header"))?,
        );
        if !within(offset, size) {
            return Err(bad(&format!("segment {i} lies past the end of the image")));
        }
    }
    // Kernel names, from the section-name string table's `.text.<kernel>` entries.
    let mut names = Vec::new();
    let shstrndx = u64::from(read_u16(image, 0x3E).unwrap_or(0));
    if let Some((_, _, str_off, str_size)) = (shstrndx < shnum).then(|| section(shstrndx)).flatten()
    {
        let strings = usize::try_from(str_off)
            .ok()
            .zip(usize::try_from(str_size).ok())
            .and_then(|(at, size)| image.get(at..at.checked_add(size)?))
            .unwrap_or_default();
        for i in 0..shnum {
            let Some((name_at, ..)) = section(i) else {
                continue;
            };
            let Some(tail) = strings.get(name_at as usize..) else {
                continue;
            };
            let Ok(name) = CStr::from_bytes_until_nul(tail) else {
                continue;
            };
            if let Some(kernel) = name.to_str().ok().and_then(|n| n.strip_prefix(".text.")) {
                names.push(kernel.to_owned());
            }
        }
    }
    Ok(names)
}

/// `fatBinaryHeader.magic`.
const FATBIN_MAGIC: u32 = 0xBA55_ED50;

/// Checks a fatbin's header: the magic, and that the size it declares lies within `image`.
pub(crate) fn check_fatbin(image: &[u8]) -> Result<(), String> {
    let bad = |what: &str| format!("not a complete fatbin: {what}");
    if read_u32(image, 0) != Some(FATBIN_MAGIC) {
        return Err(bad("no fatbin header (magic 0xBA55ED50)"));
    }
    let header = u64::from(read_u16(image, 6).ok_or_else(|| bad("short header"))?);
    let body = read_u64(image, 8).ok_or_else(|| bad("short header"))?;
    match header.checked_add(body) {
        Some(total) if header >= 16 && total <= image.len() as u64 => Ok(()),
        _ => Err(bad(&format!(
            "it declares {header} + {body} bytes but the image has {}",
            image.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = include_str!("../kernels/test_kernels.ptx");

    #[test]
    fn ptx_entries_are_listed_in_order() {
        assert_eq!(
            ptx_entry_names(PTX),
            [
                "empty",
                "saxpy",
                "reduce_sum",
                "add_scalar",
                "write_out_of_bounds"
            ]
        );
        assert_eq!(
            ptx_entry_names(".visible .entry _Z3fooPf(\n.param .u64 p)\n.entry\tbar()"),
            ["_Z3fooPf", "bar"]
        );
        assert!(ptx_entry_names(".func helper()").is_empty());
    }

    #[test]
    fn a_missing_kernel_names_the_kernel_the_module_and_what_exists() {
        let msg = missing_kernel_message("saxpy", "test_kernels", &["saxpy".into()]);
        assert_eq!(
            msg,
            "no kernel named `saxpy` in module `test_kernels`; it defines `saxpy`"
        );
        let msg = missing_kernel_message("foo", "m", &["_Z3fooPf".into()]);
        assert!(msg.contains("extern \"C\""), "{msg}");
    }

    #[test]
    fn jit_logs_stop_at_the_written_length_and_nul() {
        assert_eq!(log_text(b"error: x\0garbage", 16), "error: x");
        assert_eq!(log_text(b"abcdef", 3), "abc");
        assert_eq!(log_text(b"abc", 100), "abc");
    }

    #[test]
    fn cubin_headers_must_lie_within_the_image() {
        assert!(check_cubin(b"not an elf").is_err());
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[0x12..0x14].copy_from_slice(&EM_CUDA.to_le_bytes());
        assert_eq!(check_cubin(&elf), Ok(vec![]));
        // A section table claimed past the end.
        elf[0x28..0x30].copy_from_slice(&64u64.to_le_bytes());
        elf[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3C..0x3E].copy_from_slice(&3u16.to_le_bytes());
        let err = check_cubin(&elf).unwrap_err();
        assert!(err.contains("section header table"), "{err}");
        // An x86 ELF is refused by machine.
        elf[0x12..0x14].copy_from_slice(&62u16.to_le_bytes());
        assert!(check_cubin(&elf).unwrap_err().contains("machine 62"));
    }

    #[test]
    fn the_committed_cubin_checks_and_lists_its_kernels() {
        let cubin = include_bytes!("../kernels/test_kernels.sm_90.cubin");
        let mut names = check_cubin(cubin).unwrap();
        names.sort();
        assert_eq!(
            names,
            [
                "add_scalar",
                "empty",
                "reduce_sum",
                "saxpy",
                "write_out_of_bounds"
            ]
        );
        // Truncated anywhere past the header, it is refused.
        assert!(check_cubin(&cubin[..cubin.len() - 1]).is_err());
    }

    #[test]
    fn fatbin_sizes_must_lie_within_the_image() {
        let mut fat = vec![0u8; 32];
        fat[..4].copy_from_slice(&FATBIN_MAGIC.to_le_bytes());
        fat[6..8].copy_from_slice(&16u16.to_le_bytes());
        fat[8..16].copy_from_slice(&16u64.to_le_bytes());
        assert_eq!(check_fatbin(&fat), Ok(()));
        fat[8..16].copy_from_slice(&17u64.to_le_bytes());
        assert!(check_fatbin(&fat).unwrap_err().contains("16 + 17 bytes"));
        assert!(check_fatbin(b"\x7fELF").is_err());
    }
}

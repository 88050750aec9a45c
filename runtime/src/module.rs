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

use std::ffi::{CString, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::context::Context;
use crate::error::{DriverError, Error, Result, check};
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
        let entries = crate::image::check_ptx(ptx)
            .map_err(|e| Error::invalid_image("Module::load_ptx", e))?;
        // `check_ptx` refused any NUL, so this cannot fail; map it rather than unwrap.
        let text = CString::new(ptx).map_err(|e| {
            Error::invalid(
                "Module::load_ptx",
                format!("the PTX text contains a NUL byte at {}", e.nul_position()),
            )
        })?;
        // SAFETY: `text` is NUL-terminated PTX that does not start like a binary image
        // (checked above), the form the driver reads.
        unsafe { Module::load_image(ctx, text.as_ptr().cast(), ImageKind::Ptx, entries) }
    }

    /// Loads a cubin (an ELF image compiled for the device's architecture, e.g. by
    /// `nvcc -cubin -arch=sm_90`). The image is checked first by
    /// [`image::check_cubin`](crate::image::check_cubin), since the driver reads it by the
    /// offsets and sizes its headers claim; a refusal is an [`Error::InvalidImage`].
    pub fn load_cubin(ctx: &Context, image: &[u8]) -> Result<Module> {
        let entries = crate::image::check_cubin(image)
            .map_err(|e| Error::invalid_image("Module::load_cubin", e))?;
        let aligned = AlignedImage::new(image);
        // SAFETY: a cubin every table and section of which lies inside it (checked above),
        // 8-byte aligned.
        unsafe { Module::load_image(ctx, aligned.as_ptr(), ImageKind::Cubin, entries) }
    }

    /// Loads a fatbin (`nvcc -fatbin -no-compress`): several cubins and PTX, from which the
    /// driver picks the best one for the device. The image and every entry in it are checked
    /// first by [`image::check_fatbin`](crate::image::check_fatbin) (compressed entries
    /// cannot be, and are refused); a refusal is an [`Error::InvalidImage`].
    pub fn load_fatbin(ctx: &Context, image: &[u8]) -> Result<Module> {
        crate::image::check_fatbin(image)
            .map_err(|e| Error::invalid_image("Module::load_fatbin", e))?;
        let aligned = AlignedImage::new(image);
        // SAFETY: a fatbin whose headers, entries and cubins lie inside it and whose PTX is
        // NUL-terminated (checked above), 8-byte aligned.
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
            let mut e = DriverError::new("cuModuleLoadDataEx", code);
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

#[cfg(test)]
mod tests {
    use super::*;

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
}

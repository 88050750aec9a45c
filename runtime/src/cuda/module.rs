//! Loaded modules (`CUmodule`) and the kernels (`CUfunction`) looked up in them.

use std::ffi::{CString, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::driver::{check, driver_error};
use crate::error::{Error, Result};
use crate::image::{check_cubin, check_fatbin};
use crate::sys::{self, CUfunction_attribute, CUjit_option, CUresult};

use super::Context;

/// Bytes of each JIT log buffer: enough for the error log of a broken PTX file.
const JIT_LOG_BYTES: usize = 16 * 1024;

/// A loaded module.
///
/// Invariant: `raw` was loaded into `ctx` by `cuModuleLoadDataEx` and is unloaded once, in
/// `Drop`, only after a context synchronize succeeded (no launch of its code can be in flight
/// then, and every [`Function`] of it holds an `Arc` of the module); otherwise it is leaked.
pub(crate) struct Module {
    ctx: Arc<Context>,
    raw: sys::CUmodule,
}

// SAFETY: a CUmodule is a context-wide handle usable from any thread once the context is
// current, which every use ensures; it is unloaded once, in Drop.
unsafe impl Send for Module {}
// SAFETY: as above; lookups (`cuModuleGetFunction`) are thread-safe.
unsafe impl Sync for Module {}

/// An image to load.
pub(crate) enum ModuleImage<'a> {
    /// PTX text (NUL-terminated by the type).
    Ptx(&'a std::ffi::CStr),
    /// A cubin: checked by `module::image::check_cubin` before the driver sees it.
    Cubin(&'a [u8]),
    /// A fatbin: checked by `module::image::check_fatbin` before the driver sees it.
    Fatbin(&'a [u8]),
}

impl Module {
    /// Loads `image`, collecting the JIT logs: a failure's description carries the error log;
    /// on success the info log is returned.
    pub(crate) fn load(ctx: &Arc<Context>, image: ModuleImage<'_>) -> Result<(Module, String)> {
        let d = ctx.bind()?;
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
        // The driver reads a binary image by the sizes its headers claim, as 8-byte words:
        // check the headers, then hand it an aligned copy.
        let aligned;
        let data: *const c_void = match image {
            ModuleImage::Ptx(text) => text.as_ptr().cast(),
            ModuleImage::Cubin(bytes) => {
                check_cubin(bytes).map_err(|e| Error::invalid_image("Module::load_cubin", e))?;
                aligned = AlignedImage::new(bytes);
                aligned.words().as_ptr().cast()
            }
            ModuleImage::Fatbin(bytes) => {
                check_fatbin(bytes).map_err(|e| Error::invalid_image("Module::load_fatbin", e))?;
                aligned = AlignedImage::new(bytes);
                aligned.words().as_ptr().cast()
            }
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: `data` is NUL-terminated PTX, or an 8-byte aligned binary image whose headers
        // were checked above to lie within it, alive for the call; the option arrays have equal
        // lengths and the log buffers are as long as the sizes stated.
        let code = unsafe {
            (d.cuModuleLoadDataEx)(
                &mut raw,
                data,
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        let info = log_text(&info_log, values[1] as usize);
        let error = log_text(&error_log, values[3] as usize);
        if !code.is_success() {
            let mut e = driver_error("cuModuleLoadDataEx", code);
            let log = if error.is_empty() { info } else { error };
            if !log.is_empty() {
                e.description = format!("{}; JIT log:\n{log}", e.description);
            }
            return Err(e.into());
        }
        Ok((
            Module {
                ctx: ctx.clone(),
                raw,
            },
            info,
        ))
    }

    /// The context.
    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The raw handle (the type's invariant keeps it loaded).
    pub(crate) fn raw(&self) -> sys::CUmodule {
        self.raw
    }

    /// The kernel called `name`, or `None` when the module has none.
    pub(crate) fn function(
        self: &Arc<Self>,
        call: &'static str,
        name: &str,
    ) -> Result<Option<Function>> {
        let d = self.ctx.bind()?;
        let cname = CString::new(name).map_err(|_| {
            Error::invalid(
                call,
                format!("the kernel name {name:?} contains a NUL byte"),
            )
        })?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a live module, a NUL-terminated name and a valid out-pointer.
        let code = unsafe { (d.cuModuleGetFunction)(&mut raw, self.raw, cname.as_ptr()) };
        if code == CUresult::CUDA_ERROR_NOT_FOUND {
            return Ok(None);
        }
        check("cuModuleGetFunction", code)?;
        let function = Function {
            module: self.clone(),
            raw,
            dynamic_shared_limit: AtomicU32::new(0),
            raise_lock: Mutex::new(()),
        };
        let limit = function.attribute(CUfunction_attribute::MAX_DYNAMIC_SHARED_SIZE_BYTES)?;
        function
            .dynamic_shared_limit
            .store(limit.max(0) as u32, Ordering::Release);
        Ok(Some(function))
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // A launch enqueued on any stream may still run this module's code: wait for it, and
        // leak the module when that wait fails (its code may still run).
        if let Err(e) = self.ctx.synchronize() {
            tracing::warn!(error = %e, "synchronizing before unloading a module failed; leaking it");
            return;
        }
        let Ok(d) = self.ctx.bind() else {
            return;
        };
        // SAFETY: we loaded the module (the type's invariant); no function handle or pending
        // launch uses it any more.
        let code = unsafe { (d.cuModuleUnload)(self.raw) };
        if !code.is_success() {
            tracing::warn!(?code, "cuModuleUnload failed while dropping a module");
        }
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::Module")
            .field("raw", &self.raw)
            .finish()
    }
}

/// A kernel of a loaded module.
///
/// Invariant: `raw` is a function of `module`, which the `Arc` keeps loaded for as long as
/// this value (and every graph node or launch that holds the module) lives.
pub(crate) struct Function {
    module: Arc<Module>,
    raw: sys::CUfunction,
    /// The kernel's current `MAX_DYNAMIC_SHARED_SIZE_BYTES`: launches above it raise it.
    dynamic_shared_limit: AtomicU32,
    raise_lock: Mutex<()>,
}

// SAFETY: a CUfunction is a handle into a module usable from any thread of the process; the
// only mutation (the shared-memory attribute) is serialized by `raise_lock`.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

/// A function's identity: its handle, only ever compared (a kernel node's function is the
/// same handle as the launch's), never called through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FunctionId(sys::CUfunction);

// SAFETY: an identifier only compared and reported, never dereferenced.
unsafe impl Send for FunctionId {}
// SAFETY: as above.
unsafe impl Sync for FunctionId {}

impl FunctionId {
    /// The identity of the function `raw`.
    pub(crate) fn of(raw: sys::CUfunction) -> FunctionId {
        FunctionId(raw)
    }

    /// The raw handle, for interop.
    pub(crate) fn raw(self) -> sys::CUfunction {
        self.0
    }
}

impl Function {
    /// The raw handle (valid while `self` lives).
    pub(crate) fn raw(&self) -> sys::CUfunction {
        self.raw
    }

    /// The function's identity, to compare with kernel nodes'.
    pub(crate) fn id(&self) -> FunctionId {
        FunctionId(self.raw)
    }

    /// The module, to keep it loaded where the function is baked into work.
    pub(crate) fn module(&self) -> &Arc<Module> {
        &self.module
    }

    /// One attribute (`cuFuncGetAttribute`).
    pub(crate) fn attribute(&self, attribute: CUfunction_attribute) -> Result<i32> {
        let d = self.module.ctx.bind()?;
        let mut value = 0;
        // SAFETY: a live function (the type's invariant) and a valid out-pointer.
        check("cuFuncGetAttribute", unsafe {
            (d.cuFuncGetAttribute)(&mut value, attribute, self.raw)
        })?;
        Ok(value)
    }

    /// Sets the dynamic shared memory launches may use; the caller checked `bytes` against
    /// the device's limit.
    pub(crate) fn set_max_dynamic_shared(&self, bytes: u32) -> Result<()> {
        let _guard = self
            .raise_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.set_under_lock(bytes)
    }

    fn set_under_lock(&self, bytes: u32) -> Result<()> {
        let d = self.module.ctx.bind()?;
        // SAFETY: a live function; the value fits in an i32 (checked by the callers against
        // the device's opt-in limit, far below 2^31).
        check("cuFuncSetAttribute", unsafe {
            (d.cuFuncSetAttribute)(
                self.raw,
                CUfunction_attribute::MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes.min(i32::MAX as u32) as i32,
            )
        })?;
        self.dynamic_shared_limit.store(bytes, Ordering::Release);
        Ok(())
    }

    /// Raises the dynamic shared memory limit when a launch needs more than it allows now.
    /// Never lowers it: another thread's launch may rely on the higher value.
    #[inline]
    pub(crate) fn ensure_dynamic_shared(&self, bytes: u32) -> Result<()> {
        if bytes <= self.dynamic_shared_limit.load(Ordering::Acquire) {
            return Ok(());
        }
        self.raise_dynamic_shared(bytes)
    }

    #[cold]
    fn raise_dynamic_shared(&self, bytes: u32) -> Result<()> {
        let _guard = self
            .raise_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if bytes <= self.dynamic_shared_limit.load(Ordering::Acquire) {
            return Ok(());
        }
        self.set_under_lock(bytes)
    }

    /// The sizes of the first `count` parameters (fewer if the kernel has fewer), from
    /// `cuFuncGetParamInfo` (CUDA 12.4; [`Error::Unsupported`] on older drivers).
    pub(crate) fn param_sizes_up_to(&self, count: usize) -> Result<Vec<usize>> {
        let d = self.module.ctx.bind()?;
        let get_info = d.optional(d.cuFuncGetParamInfo, "cuFuncGetParamInfo")?;
        let mut sizes = Vec::new();
        for index in 0..count {
            let (mut offset, mut size) = (0, 0);
            // SAFETY: a live function and valid out-pointers; an index past the last
            // parameter is CUDA_ERROR_INVALID_VALUE.
            let code = unsafe { get_info(self.raw, index, &mut offset, &mut size) };
            // Past the last parameter the driver answers INVALID_VALUE (NOT_FOUND is accepted
            // too, should a driver choose it).
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
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cuda::Function")
            .field("raw", &self.raw)
            .finish()
    }
}

/// A copy of an image at an 8-byte aligned address (`include_bytes!` gives no alignment; the
/// driver reads ELF headers as words).
struct AlignedImage(Vec<u64>);

impl AlignedImage {
    /// A copy of `image` in 8-byte words (zero-padded at the end).
    fn new(image: &[u8]) -> AlignedImage {
        let mut words = vec![0u64; image.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..image.len()].copy_from_slice(image);
        AlignedImage(words)
    }

    /// The words.
    fn words(&self) -> &[u64] {
        &self.0
    }
}

/// The text of a JIT log buffer: the bytes the driver says it wrote, up to the first NUL.
fn log_text(buffer: &[u8], written: usize) -> String {
    let bytes = &buffer[..written.min(buffer.len())];
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jit_logs_stop_at_the_written_length_and_nul() {
        assert_eq!(log_text(b"error: x\0garbage", 16), "error: x");
        assert_eq!(log_text(b"abcdef", 3), "abc");
        assert_eq!(log_text(b"abc", 100), "abc");
    }
}

//! Modules from CUDA C++ source (feature `nvrtc`): the public method over the CUDA backend's
//! NVRTC binding (`cuda/nvrtc.rs`), which knows nothing of modules.

use crate::cuda;
use crate::error::Result;

impl crate::Module {
    /// Compiles CUDA C++ `source` with NVRTC for the context's device (its compute
    /// capability, unless `options` names an architecture) and loads the PTX.
    ///
    /// On the CPU backend nothing is compiled and NVRTC is not loaded: the module records the
    /// source's `__global__` kernels, which run through their CPU implementations.
    pub fn from_cuda_source(
        ctx: &crate::Context,
        source: &str,
        options: &[&str],
    ) -> Result<crate::Module> {
        if let Some(module) = crate::Module::cpu_from_cuda_source(ctx, source) {
            return Ok(module);
        }
        let mut options: Vec<String> = options.iter().map(|o| (*o).to_owned()).collect();
        let has_arch = options
            .iter()
            .any(|o| o.starts_with("--gpu-architecture") || o.starts_with("-arch"));
        if !has_arch && let Some(device) = ctx.device() {
            let (major, minor) = device.compute_capability()?;
            options.push(format!("--gpu-architecture=compute_{major}{minor}"));
        }
        let options: Vec<&str> = options.iter().map(String::as_str).collect();
        let ptx = cuda::nvrtc::nvrtc()?.compile_ptx("source.cu", source, &options)?;
        crate::Module::load_ptx(ctx, &ptx)
    }
}

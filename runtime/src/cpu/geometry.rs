//! CPU implementations that receive the launch geometry: the opt-in form of
//! [`CpuKernel`], for implementations that loop over blocks and threads the
//! way the CUDA kernel is written (block-level reductions, tiles in dynamic shared memory,
//! grid-stride loops) rather than over the whole index range at once.
//!
//! The implementation is still called once per launch; it receives the launch's
//! [`LaunchConfig`] (grid, block, dynamic shared memory bytes) before the kernel's arguments.

use std::sync::Arc;

use super::kernel::{CpuKernel, CpuParam, KernelArg, arity};
use crate::launch::config::LaunchConfig;

/// A CPU implementation of a kernel with signature `Sig` that receives the launch geometry:
/// any `Fn` taking a [`LaunchConfig`] and then, for each parameter `P` of `Sig`, a
/// [`CpuParam::Value`] of `P` (as [`CpuKernelFn`](crate::CpuKernelFn) does).
///
/// ```
/// use gpu_pipeline::{CpuKernel, CpuKernelGeometryFn, LaunchConfig};
/// type Scale = (u32, f32, &'static mut [f32]);
/// // One "thread" per element, as `scale<<<grid, block>>>(n, a, x)` computes it.
/// fn scale(g: LaunchConfig, n: u32, a: f32, x: &mut [f32]) {
///     for block in 0..g.grid.x {
///         for thread in 0..g.block.x {
///             let i = (block * g.block.x + thread) as usize;
///             if i < n as usize {
///                 x[i] *= a;
///             }
///         }
///     }
/// }
/// fn is_geometry_impl<Sig, F: CpuKernelGeometryFn<Sig>>(_: &F) {}
/// is_geometry_impl::<Scale, _>(&scale);
/// let cpu: CpuKernel<Scale> = CpuKernel::with_geometry(scale);
/// # let _ = cpu;
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a CPU implementation of a kernel with signature `{Sig}` that \
               receives the launch geometry",
    note = "it takes the `LaunchConfig` first, then one argument per kernel parameter: the \
            scalar itself for a scalar, `&[T]` for `&[T]`, `&mut [T]` for `&mut [T]`, e.g. \
            `fn scale(g: LaunchConfig, n: u32, a: f32, x: &mut [f32])`"
)]
pub trait CpuKernelGeometryFn<Sig>: Send + Sync + 'static {
    /// Calls the implementation with the geometry and the resolved arguments.
    #[doc(hidden)]
    fn call(&self, geometry: &LaunchConfig, args: Vec<KernelArg<'_>>) -> Result<(), String>;
}

macro_rules! cpu_geometry_fns {
    ($( ($($P:ident $v:ident),*) )*) => {$(
        impl<F, $($P: CpuParam),*> CpuKernelGeometryFn<($($P,)*)> for F
        where
            F: for<'a> Fn(LaunchConfig, $($P::Value<'a>),*) + Send + Sync + 'static,
        {
            fn call(
                &self,
                geometry: &LaunchConfig,
                args: Vec<KernelArg<'_>>,
            ) -> Result<(), String> {
                const COUNT: usize = <[()]>::len(&[$(cpu_geometry_fns!(@unit $P)),*]);
                let got = args.len();
                let Ok([$($v),*]) = <[KernelArg<'_>; COUNT]>::try_from(args) else {
                    return Err(arity(COUNT, got));
                };
                $(let $v = $P::from_arg($v)?;)*
                self(*geometry, $($v),*);
                Ok(())
            }
        }
    )*};
    (@unit $P:ident) => { () };
}

cpu_geometry_fns! {
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

impl<Sig> CpuKernel<Sig> {
    /// Wraps a CPU implementation that receives the launch geometry (see
    /// [`CpuKernelGeometryFn`]): each launch passes its [`LaunchConfig`], including the one
    /// an executable graph's kernel node was last updated to.
    ///
    /// ```standalone_crate
    /// # fn main() -> gpu_pipeline::Result<()> {
    /// use gpu_pipeline::{Context, CpuKernel, DeviceBuffer, LaunchConfig, Module, Stream};
    /// /// `reduce_sum` as the CUDA kernel computes it: each block tree-reduces its slice in
    /// /// `blockDim.x` floats of dynamic shared memory, then adds its sum to `out[0]`.
    /// fn reduce_sum(g: LaunchConfig, n: u32, input: &[f32], out: &mut [f32]) {
    ///     let (threads, n) = (g.block.x as usize, n as usize);
    ///     let mut partial = vec![0.0f32; g.shared_mem_bytes as usize / 4];
    ///     for block in 0..g.grid.x as usize {
    ///         for tid in 0..threads {
    ///             let i = block * threads + tid;
    ///             partial[tid] = if i < n { input[i] } else { 0.0 };
    ///         }
    ///         let mut stride = threads / 2;
    ///         while stride > 0 {
    ///             for tid in 0..stride {
    ///                 partial[tid] += partial[tid + stride];
    ///             }
    ///             stride /= 2;
    ///         }
    ///         out[0] += partial[0];
    ///     }
    /// }
    /// let ctx = Context::cpu();
    /// let stream = Stream::new(&ctx)?;
    /// let module = Module::load_ptx(&ctx, include_str!("../../kernels/test_kernels.ptx"))?;
    /// // SAFETY: reduce_sum(unsigned n, const float* in, float* out), as compiled.
    /// let reduce = unsafe { module.function("reduce_sum")?.typed::<(u32, &[f32], &mut [f32])>()? }
    ///     .with_cpu(CpuKernel::with_geometry(reduce_sum));
    /// let input = DeviceBuffer::from_slice(&stream, &[1.0f32; 1000])?;
    /// let mut out = DeviceBuffer::<f32>::zeros(&stream, 1)?;
    /// let config = LaunchConfig::for_elements(1000, 256).with_shared_mem(256 * 4);
    /// reduce.launch(&stream, config, (1000u32, &input, &mut out))?;
    /// assert_eq!(out.to_vec(&stream)?, [1000.0]);
    /// # Ok(()) }
    /// ```
    pub fn with_geometry<F: CpuKernelGeometryFn<Sig>>(f: F) -> CpuKernel<Sig> {
        CpuKernel::from_impl(Arc::new(move |geometry: &LaunchConfig, args| {
            f.call(geometry, args)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::config::Dim3;

    type Scale = (u32, f32, &'static mut [f32]);

    #[test]
    fn the_implementation_receives_the_geometry_then_the_arguments() {
        let f = |g: LaunchConfig, n: u32, a: f32, x: &mut [f32]| {
            for block in 0..g.grid.x {
                for thread in 0..g.block.x {
                    let i = (block * g.block.x + thread) as usize;
                    if i < n as usize {
                        x[i] = a * (block * 100 + thread) as f32 + g.shared_mem_bytes as f32;
                    }
                }
            }
        };
        let n = 5u32.to_ne_bytes();
        let a = 1.0f32.to_ne_bytes();
        let mut x = [0.0f32; 6];
        let args = vec![
            KernelArg::Scalar(&n),
            KernelArg::Scalar(&a),
            KernelArg::SliceMut {
                bytes: bytemuck::cast_slice_mut(&mut x),
                elem_size: 4,
            },
        ];
        let geometry = LaunchConfig::new(Dim3::x(3), Dim3::x(2)).with_shared_mem(7);
        CpuKernelGeometryFn::<Scale>::call(&f, &geometry, args).unwrap();
        assert_eq!(x, [7.0, 8.0, 107.0, 108.0, 207.0, 0.0]);
        let err = CpuKernelGeometryFn::<Scale>::call(&f, &geometry, vec![]).unwrap_err();
        assert_eq!(err, "the kernel takes 3 arguments but the launch passed 0");
    }
}

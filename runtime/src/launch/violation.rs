//! The error value of a refused bound check: what a user reads, with every name and value,
//! and nothing the check needs. A leaf module, so the crate's error type can hold it.

use std::fmt;

/// A launch refused because a buffer is shorter than its declared bound, or because the
/// bound could not be computed ([`Error::KernelBound`](crate::Error::KernelBound)).
///
/// ```
/// use gpu_pipeline::{Bound, BoundProblem, Bounds, Context, CpuKernel, DeviceBuffer, Module, Stream};
/// let ctx = Context::cpu();
/// let ptx = ".version 8.0\n.target sm_75\n.address_size 64\n.visible .entry fill(.param .u32 n, .param .u64 y)\n{\n\tret;\n}\n";
/// let module = Module::load_ptx(&ctx, ptx)?.named("fill");
/// fn fill(n: u32, y: &mut [f32]) {
///     y[..n as usize].fill(1.0);
/// }
/// // SAFETY: `fill(n, y)` writes `y[i]` only for `i < n`, the bound declared here.
/// let kernel = unsafe {
///     module.function("fill")?.typed_with_bounds::<(u32, &'static mut [f32])>(
///         Bounds::new().names(&["n", "y"]).buffer(1, Bound::param(0)),
///     )?
/// }
/// .with_cpu(CpuKernel::new(fill));
/// let stream = Stream::new(&ctx)?;
/// let mut y = DeviceBuffer::<f32>::zeros(&stream, 4)?;
/// let err = kernel.check_bounds(&(5u32, &mut y)).unwrap_err();
/// let violation = err.kernel_bound().expect("a bound refusal");
/// assert_eq!(violation.buffer, "y");
/// assert_eq!(violation.problem, BoundProblem::TooShort { bound: 5, len: 4 });
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundViolation {
    /// The kernel's name.
    pub kernel: String,
    /// Its module's name.
    pub module: String,
    /// The bounded buffer parameter (its name, or `parameter N`).
    pub buffer: String,
    /// The bound as written: `n`, `nx * ny`, `3 * n + 1`.
    pub bound: String,
    /// Each parameter the bound multiplies, with the value passed.
    pub values: Vec<(String, i128)>,
    /// What is wrong.
    pub problem: BoundProblem,
}

/// What is wrong with one bound at one launch.
///
/// ```
/// use gpu_pipeline::{
///     Bound, BoundProblem, Bounds, Context, CpuKernel, DeviceBuffer, Module, Stream,
/// };
/// let ctx = Context::cpu();
/// let ptx = ".version 8.0\n.target sm_75\n.address_size 64\n\
///            .visible .entry fill(.param .s32 n, .param .u64 y)\n{\n\tret;\n}\n";
/// let module = Module::load_ptx(&ctx, ptx)?.named("fill");
/// fn fill(n: i32, y: &mut [f32]) {
///     y[..n.max(0) as usize].fill(1.0);
/// }
/// // SAFETY: `fill(n, y)` writes `y[i]` only for `i < n`, the bound declared here.
/// let kernel = unsafe {
///     module.function("fill")?.typed_with_bounds::<(i32, &'static mut [f32])>(
///         Bounds::new().names(&["n", "y"]).buffer(1, Bound::param(0)),
///     )?
/// }
/// .with_cpu(CpuKernel::new(fill));
/// let mut y = DeviceBuffer::<f32>::zeros(&Stream::new(&ctx)?, 4)?;
/// let mut problem = |n: i32| {
///     let err = kernel.check_bounds(&(n, &mut y)).unwrap_err();
///     err.kernel_bound().unwrap().problem.clone()
/// };
/// assert_eq!(problem(-1), BoundProblem::Negative { param: "n".into() });
/// assert_eq!(problem(8), BoundProblem::TooShort { bound: 8, len: 4 });
/// assert!(kernel.check_bounds(&(4, &mut y)).is_ok());
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BoundProblem {
    /// The bound is larger than the buffer passed: the kernel would index past its end.
    TooShort {
        /// The bound's value.
        bound: u64,
        /// The buffer's length in elements.
        len: usize,
    },
    /// A parameter the bound multiplies is negative, so it counts no elements.
    Negative {
        /// The parameter.
        param: String,
    },
    /// Computing the bound overflows a `u64`.
    Overflow,
    /// The arguments do not match the signature at this position (a scalar where the bound
    /// expects a buffer, a buffer of another element size); only arguments given to
    /// [`TypedKernel::check_bounds`](crate::TypedKernel::check_bounds) can.
    Mismatch {
        /// The parameter's position.
        param: usize,
    },
}

impl fmt::Display for BoundViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let BoundViolation {
            kernel,
            module,
            buffer,
            bound,
            values,
            problem,
        } = self;
        write!(f, "kernel `{kernel}` of module `{module}` ")?;
        let listed = || {
            values
                .iter()
                .map(|(name, value)| format!("{name} = {value}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match problem {
            BoundProblem::TooShort { bound: value, len } => {
                write!(f, "indexes `{buffer}` below `{bound}` = {value}")?;
                // `(n = 1025)` would say nothing "`n` = 1025" did not.
                let just_one_name = matches!(values.as_slice(), [(name, _)] if name == bound);
                if !values.is_empty() && !just_one_name {
                    write!(f, " ({})", listed())?;
                }
                let elements = if *len == 1 { "element" } else { "elements" };
                write!(
                    f,
                    ", but the buffer passed for `{buffer}` holds {len} {elements}; pass a \
                     longer buffer or smaller arguments"
                )
            }
            BoundProblem::Negative { param } => write!(
                f,
                "indexes `{buffer}` below `{bound}`, but `{param}` is negative ({}), which \
                 bounds no buffer",
                listed()
            ),
            BoundProblem::Overflow => write!(
                f,
                "indexes `{buffer}` below `{bound}`, which overflows a u64 ({})",
                listed()
            ),
            BoundProblem::Mismatch { param } => write!(
                f,
                "indexes `{buffer}` below `{bound}`, but argument {param} does not match the \
                 kernel's signature"
            ),
        }
    }
}

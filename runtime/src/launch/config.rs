//! Launch geometry: grid and block dimensions, dynamic shared memory, and their validation
//! against a device's (and a kernel's) limits before anything reaches the driver.

use std::fmt;

/// Three dimensions of a grid or a block. `Dim3::from(n)` is `(n, 1, 1)`.
///
/// ```
/// use gpu_pipeline::Dim3;
/// assert_eq!(Dim3::from(8), Dim3::new(8, 1, 1));
/// assert_eq!(Dim3::from((4, 2)).volume(), 8);
/// assert_eq!(Dim3::x(3).to_string(), "(3, 1, 1)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Extent along x.
    pub x: u32,
    /// Extent along y.
    pub y: u32,
    /// Extent along z.
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    pub const fn new(x: u32, y: u32, z: u32) -> Dim3 {
        Dim3 { x, y, z }
    }

    /// `(x, 1, 1)`.
    pub const fn x(x: u32) -> Dim3 {
        Dim3 { x, y: 1, z: 1 }
    }

    /// `x * y * z`, without overflow.
    pub const fn volume(&self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }

    fn axes(&self) -> [(char, u32); 3] {
        [('x', self.x), ('y', self.y), ('z', self.z)]
    }
}

impl Default for Dim3 {
    fn default() -> Dim3 {
        Dim3::new(1, 1, 1)
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Dim3 {
        Dim3::x(x)
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Dim3 {
        Dim3::new(x, y, 1)
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Dim3 {
        Dim3::new(x, y, z)
    }
}

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}

/// How a kernel is launched: grid and block dimensions and the bytes of dynamic shared
/// memory per block (what `extern __shared__` arrays get).
///
/// ```
/// use gpu_pipeline::{Dim3, LaunchConfig};
/// let tiles = LaunchConfig::new((64, 64), (16, 16)).with_shared_mem(2 * 16 * 16 * 4);
/// assert_eq!(tiles.grid, Dim3::new(64, 64, 1));
/// assert_eq!(tiles.block.volume(), 256);
/// assert_eq!(tiles.shared_mem_bytes, 2048);
/// assert_eq!(LaunchConfig::for_elements(1000, 256).grid, Dim3::x(4));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in each block.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// `self == other`, with no branch per field: a setter compares each node's geometry
    /// with the one it was built with before it updates the node.
    #[inline]
    pub(crate) fn same_as(&self, other: &LaunchConfig) -> bool {
        let (a, b) = (self, other);
        ((a.grid.x ^ b.grid.x)
            | (a.grid.y ^ b.grid.y)
            | (a.grid.z ^ b.grid.z)
            | (a.block.x ^ b.block.x)
            | (a.block.y ^ b.block.y)
            | (a.block.z ^ b.block.z)
            | (a.shared_mem_bytes ^ b.shared_mem_bytes))
            == 0
    }

    /// A launch of `grid` blocks of `block` threads, without dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> LaunchConfig {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_mem_bytes: 0,
        }
    }

    /// One thread per element: `ceil(n / block)` blocks of `block` threads along x (at least
    /// one block, so `n == 0` still launches; kernels guard with `i < n`).
    ///
    /// ```
    /// # use gpu_pipeline::{Dim3, LaunchConfig};
    /// let config = LaunchConfig::for_elements(1000, 256);
    /// assert_eq!(config.grid, Dim3::x(4));
    /// assert_eq!(config.block, Dim3::x(256));
    /// ```
    pub fn for_elements(n: u32, block: u32) -> LaunchConfig {
        let blocks = if block == 0 {
            0 // rejected by validation, which names the zero block
        } else {
            n.div_ceil(block).max(1)
        };
        LaunchConfig::new(blocks, block)
    }

    /// The same launch with `bytes` of dynamic shared memory per block.
    pub fn with_shared_mem(self, bytes: u32) -> LaunchConfig {
        LaunchConfig {
            shared_mem_bytes: bytes,
            ..self
        }
    }

    /// Checks the configuration against `limits`, as `Kernel::launch` does before every
    /// launch. Pure: no driver call.
    #[inline]
    pub fn validate(&self, limits: &LaunchLimits) -> Result<(), LaunchConfigError> {
        // Every check at once, with no branch per axis (a graph build validates each node);
        // `v - 1 < max` is `1 <= v <= max`. Only a failure asks which check it was.
        let within = |v: Dim3, max: Dim3| {
            (v.x.wrapping_sub(1) < max.x)
                & (v.y.wrapping_sub(1) < max.y)
                & (v.z.wrapping_sub(1) < max.z)
        };
        if within(self.grid, limits.max_grid)
            & within(self.block, limits.max_block)
            & (self.block.volume() <= u64::from(limits.max_threads_per_block))
            & (self.shared_mem_bytes <= limits.max_dynamic_shared_bytes())
        {
            return Ok(());
        }
        self.refusal(limits)
    }

    /// Which check `validate` failed, in the order a user fixes them.
    #[cold]
    fn refusal(&self, limits: &LaunchLimits) -> Result<(), LaunchConfigError> {
        if self.grid.volume() == 0 {
            return Err(LaunchConfigError::ZeroDimension {
                what: "grid",
                dims: self.grid,
            });
        }
        if self.block.volume() == 0 {
            return Err(LaunchConfigError::ZeroDimension {
                what: "block",
                dims: self.block,
            });
        }
        let threads = self.block.volume();
        if threads > u64::from(limits.max_threads_per_block) {
            return Err(LaunchConfigError::TooManyThreads {
                block: self.block,
                threads,
                max: limits.max_threads_per_block,
            });
        }
        for ((axis, value), (_, max)) in self.block.axes().into_iter().zip(limits.max_block.axes())
        {
            if value > max {
                return Err(LaunchConfigError::DimensionTooLarge {
                    what: "block",
                    axis,
                    value,
                    max,
                });
            }
        }
        for ((axis, value), (_, max)) in self.grid.axes().into_iter().zip(limits.max_grid.axes()) {
            if value > max {
                return Err(LaunchConfigError::DimensionTooLarge {
                    what: "grid",
                    axis,
                    value,
                    max,
                });
            }
        }
        let max_dynamic = limits.max_dynamic_shared_bytes();
        if self.shared_mem_bytes > max_dynamic {
            return Err(LaunchConfigError::SharedMemoryTooLarge {
                requested: self.shared_mem_bytes,
                max: max_dynamic,
                static_bytes: limits.static_shared_bytes,
                per_block_opt_in: limits.max_shared_per_block_opt_in,
            });
        }
        Ok(())
    }
}

/// The limits a launch is checked against: the device's, narrowed by the kernel's own
/// (its register use lowers the threads per block; its static shared memory lowers the
/// dynamic shared memory available).
///
/// [`Kernel::limits`](crate::Kernel::limits) gives a kernel's; [`LaunchConfig::validate`]
/// checks a launch against them without a driver call:
///
/// ```
/// use gpu_pipeline::{Dim3, LaunchConfig, LaunchLimits};
/// let h100 = LaunchLimits {
///     max_threads_per_block: 1024,
///     max_block: Dim3::new(1024, 1024, 64),
///     max_grid: Dim3::new(2_147_483_647, 65535, 65535),
///     max_shared_per_block_opt_in: 227 * 1024,
///     static_shared_bytes: 3 * 1024,
/// };
/// assert_eq!(h100.max_dynamic_shared_bytes(), 224 * 1024);
/// assert!(LaunchConfig::for_elements(1 << 20, 256).validate(&h100).is_ok());
/// assert!(LaunchConfig::new(1, 2048).validate(&h100).is_err()); // 2048 threads a block
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchLimits {
    /// Threads per block: the smaller of the device's and the kernel's maximum.
    pub max_threads_per_block: u32,
    /// Largest block extent along each axis.
    pub max_block: Dim3,
    /// Largest grid extent along each axis.
    pub max_grid: Dim3,
    /// Shared memory one block may use after opting in
    /// (`MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`), static and dynamic together.
    pub max_shared_per_block_opt_in: u32,
    /// The kernel's static shared memory (`__shared__` arrays of fixed size).
    pub static_shared_bytes: u32,
}

/// Dynamic shared memory a kernel may use without opting in: 48 KiB, CUDA's default cap.
pub const DEFAULT_DYNAMIC_SHARED_LIMIT: u32 = 48 * 1024;

impl LaunchLimits {
    /// The dynamic shared memory a launch may request: the opt-in maximum less the
    /// kernel's static shared memory.
    pub fn max_dynamic_shared_bytes(&self) -> u32 {
        self.max_shared_per_block_opt_in
            .saturating_sub(self.static_shared_bytes)
    }
}

/// Why a [`LaunchConfig`] was rejected, with the limit it broke.
///
/// ```
/// use gpu_pipeline::{Dim3, LaunchConfig, LaunchConfigError, LaunchLimits};
/// let h100 = LaunchLimits {
///     max_threads_per_block: 1024,
///     max_block: Dim3::new(1024, 1024, 64),
///     max_grid: Dim3::new(2_147_483_647, 65535, 65535),
///     max_shared_per_block_opt_in: 227 * 1024,
///     static_shared_bytes: 3 * 1024,
/// };
/// let err = LaunchConfig::new((4, 4), (32, 32, 2)).validate(&h100).unwrap_err();
/// assert!(matches!(err, LaunchConfigError::TooManyThreads { threads: 2048, max: 1024, .. }));
/// assert_eq!(
///     err.to_string(),
///     "the block (32, 32, 2) has 2048 threads; at most 1024 threads per block are allowed"
/// );
/// let err = LaunchConfig::new(8, 128).with_shared_mem(300 * 1024).validate(&h100).unwrap_err();
/// assert!(matches!(err, LaunchConfigError::SharedMemoryTooLarge { max: 229376, .. }), "{err}");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LaunchConfigError {
    /// A grid or block extent is zero.
    ZeroDimension {
        /// `"grid"` or `"block"`.
        what: &'static str,
        /// The dimensions given.
        dims: Dim3,
    },
    /// The block has more threads than the kernel may run per block.
    TooManyThreads {
        /// The block given.
        block: Dim3,
        /// Its thread count.
        threads: u64,
        /// The limit.
        max: u32,
    },
    /// One extent is larger than the device allows.
    DimensionTooLarge {
        /// `"grid"` or `"block"`.
        what: &'static str,
        /// `'x'`, `'y'` or `'z'`.
        axis: char,
        /// The extent given.
        value: u32,
        /// The device's maximum.
        max: u32,
    },
    /// More dynamic shared memory than a block can have.
    SharedMemoryTooLarge {
        /// Bytes requested.
        requested: u32,
        /// Bytes of dynamic shared memory allowed.
        max: u32,
        /// The kernel's static shared memory, which counts against the same budget.
        static_bytes: u32,
        /// The device's opt-in maximum per block.
        per_block_opt_in: u32,
    },
}

impl fmt::Display for LaunchConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LaunchConfigError::ZeroDimension { what, dims } => {
                write!(
                    f,
                    "the {what} {dims} has a zero extent; every extent must be at least 1"
                )
            }
            LaunchConfigError::TooManyThreads {
                block,
                threads,
                max,
            } => write!(
                f,
                "the block {block} has {threads} threads; at most {max} threads per block are allowed"
            ),
            LaunchConfigError::DimensionTooLarge {
                what,
                axis,
                value,
                max,
            } => write!(
                f,
                "the {what}'s {axis} extent {value} is above the device's maximum of {max}"
            ),
            LaunchConfigError::SharedMemoryTooLarge {
                requested,
                max,
                static_bytes,
                per_block_opt_in,
            } => write!(
                f,
                "{requested} bytes of dynamic shared memory requested; at most {max} are \
                 available ({per_block_opt_in} per block on this device, less {static_bytes} \
                 of static shared memory)"
            ),
        }
    }
}

impl std::error::Error for LaunchConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: LaunchLimits = LaunchLimits {
        max_threads_per_block: 1024,
        max_block: Dim3::new(1024, 1024, 64),
        max_grid: Dim3::new(i32::MAX as u32, 65535, 65535),
        max_shared_per_block_opt_in: 227 * 1024,
        static_shared_bytes: 1024,
    };

    #[test]
    fn same_as_is_equality_field_by_field() {
        let base = LaunchConfig::new(Dim3::new(4, 2, 3), Dim3::new(32, 4, 2)).with_shared_mem(64);
        assert!(base.same_as(&base));
        let changes: [fn(&mut LaunchConfig); 7] = [
            |c| c.grid.x += 1,
            |c| c.grid.y += 1,
            |c| c.grid.z += 1,
            |c| c.block.x += 1,
            |c| c.block.y += 1,
            |c| c.block.z += 1,
            |c| c.shared_mem_bytes += 1,
        ];
        for change in changes {
            let mut other = base;
            change(&mut other);
            assert!(!base.same_as(&other) && !other.same_as(&base), "{other:?}");
            assert_eq!(base.same_as(&other), base == other);
        }
    }

    #[test]
    fn for_elements_rounds_up_and_launches_at_least_one_block() {
        assert_eq!(LaunchConfig::for_elements(1, 256).grid, Dim3::x(1));
        assert_eq!(LaunchConfig::for_elements(256, 256).grid, Dim3::x(1));
        assert_eq!(LaunchConfig::for_elements(257, 256).grid, Dim3::x(2));
        assert_eq!(LaunchConfig::for_elements(0, 256).grid, Dim3::x(1));
        assert_eq!(
            LaunchConfig::for_elements(u32::MAX, 1024).grid,
            Dim3::x(4194304)
        );
    }

    #[test]
    fn a_zero_block_is_rejected_by_name() {
        let err = LaunchConfig::for_elements(10, 0)
            .validate(&LIMITS)
            .unwrap_err();
        assert!(matches!(
            err,
            LaunchConfigError::ZeroDimension { what: "grid", .. }
        ));
        let err = LaunchConfig::new(1, (32, 0, 1))
            .validate(&LIMITS)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the block (32, 0, 1) has a zero extent; every extent must be at least 1"
        );
    }

    /// The one-pass check accepts exactly what the check-by-check path accepts, at and
    /// around every limit.
    #[test]
    fn the_fast_check_agrees_with_the_named_one() {
        let around = |max: u32| [0, 1, 2, max.saturating_sub(1), max, max.saturating_add(1)];
        let mut checked = 0;
        for bx in around(1024) {
            for by in around(1024) {
                for bz in around(64) {
                    for gy in around(65535) {
                        for shared in [0, 226 * 1024, 226 * 1024 + 1] {
                            for gx in [0, 1, i32::MAX as u32, u32::MAX] {
                                let config = LaunchConfig::new((gx, gy, 1), (bx, by, bz))
                                    .with_shared_mem(shared);
                                assert_eq!(
                                    config.validate(&LIMITS).is_ok(),
                                    config.refusal(&LIMITS).is_ok(),
                                    "{config:?}"
                                );
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(checked, 6 * 6 * 6 * 6 * 3 * 4);
        assert_eq!(LaunchConfig::new(2, (32, 32, 1)).validate(&LIMITS), Ok(()));
    }

    #[test]
    fn shared_memory_counts_the_static_part() {
        let ok = LaunchConfig::new(1, 32).with_shared_mem(226 * 1024);
        assert_eq!(ok.validate(&LIMITS), Ok(()));
        let err = LaunchConfig::new(1, 32)
            .with_shared_mem(226 * 1024 + 1)
            .validate(&LIMITS)
            .unwrap_err();
        assert!(
            err.to_string().contains("at most 231424 are available"),
            "{err}"
        );
    }
}

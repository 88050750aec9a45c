//! Kernel bounds: which scalar arguments bound the indices a kernel uses in each buffer, and
//! the check, before every launch, that each buffer passed is that long.
//!
//! # Why bounds
//!
//! `saxpy(unsigned n, float a, const float* x, float* y)` indexes `x` and `y` with the `n` it
//! is given, not with their lengths, which it never sees. So no reader of the kernel can
//! promise that it "stays within the buffers passed": that depends on `n`, which the caller
//! picks at every launch. What a reader *can* check, by reading the kernel, is "`saxpy`
//! indexes `x` and `y` only below `n`". A bound declares exactly that, and the runtime checks
//! the rest, `n <= x.len()` and `n <= y.len()`, before anything reaches the device.
//!
//! # Semantics
//!
//! A bound `B` on buffer parameter `y` means: the kernel reads or writes `y[i]` only for
//! `i < B`, counted in elements of the signature's element type. The check is
//! `B <= len`, where `len` is the length of the buffer (or view) passed for `y`. Scalars are
//! read at their declared integer type and converted to `u64` without loss; a negative
//! scalar bounds nothing and is an error, and so is any overflow while computing `B` (the
//! product is computed left to right in `u64`). A buffer without a bound keeps the promise
//! of [`Kernel::typed`](crate::Kernel::typed): the kernel stays within the buffer passed
//! whatever the scalars are.
//!
//! # Design
//!
//! - **One shape**: `scale × p₁ × … × pₖ + offset`, with up to [`MAX_BOUND_FACTORS`] integer
//!   parameters `pᵢ`. It covers a length (`n`), a 2-D or 3-D grid (`nx * ny`,
//!   `nx * ny * nz`), interleaved components (`3 * n`) and a one-past or halo read
//!   (`n + 1`); it is monotone in every parameter and evaluates with a few checked
//!   multiplications. Anything else (a difference, a quotient, `(nx + 2) * (ny + 2)`) is best
//!   passed as a parameter of its own (the padded extent), which the kernel then indexes
//!   below.
//! - **A value, not a type.** The signature stays the plain tuple of `Kernel::typed`, and a
//!   [`Bounds`] value names parameters by position. A type-level encoding (a
//!   `Below<&mut [f32], 0>` wrapper inside the tuple) would let the compiler check it, but
//!   products and offsets would need const generics stable Rust does not have, and every
//!   signature that names a bound would become a different type. `Bounds` is built by
//!   `const fn`s (in a `const`, if you like), checked against the signature once when the
//!   kernel is declared ([`Kernel::typed_with_bounds`](crate::Kernel::typed_with_bounds)):
//!   a bound on a scalar, a factor that is not an integer parameter, a buffer bounded twice
//!   are errors there, before any launch. `gpu_pipeline!` writes the same value from the
//!   `&mut [f32; n]` in a kernel declaration, after checking it at compile time.
//! - **No allocation, little work.** A `Bounds` holds its entries inline (a signature has
//!   at most 12 parameters) and is `Copy`. A launch of a kernel without bounds pays one
//!   comparison; with bounds, the arguments are read once into an array on the stack and
//!   each bound costs its multiplications. Only a refusal allocates (its message).
//! - **Checked where memory is handed to a kernel**: [`TypedKernel::launch`] (eager
//!   launches, and launches into a capture), [`Graph::add_kernel_node`] and
//!   [`GraphExec::set_kernel_params`]; a refused call changes nothing.
//!   [`TypedKernel::check_bounds`] runs the same check without launching, for code that
//!   must know every launch of a step passes before it enqueues any (the `gpu_pipeline!`
//!   expansion does, so a refused step, capture or setter leaves nothing half done).
//!
//! [`TypedKernel::launch`]: crate::TypedKernel::launch
//! [`TypedKernel::check_bounds`]: crate::TypedKernel::check_bounds
//! [`Graph::add_kernel_node`]: crate::Graph::add_kernel_node
//! [`GraphExec::set_kernel_params`]: crate::GraphExec::set_kernel_params

use std::fmt;

use crate::launch::args::{ArgRef, KernelArgs};
use crate::launch::index::{Count, ParamKind};
use crate::launch::violation::{BoundProblem, BoundViolation};

/// The most parameters one bound multiplies (`nx * ny * nz * nw`).
pub const MAX_BOUND_FACTORS: usize = 4;

/// The most parameters a signature has, so the most buffers that take bounds.
const MAX_PARAMS: usize = 12;

/// How far below which index a kernel uses one buffer: `scale × p₁ × … × pₖ + offset`, over
/// scalar parameters given by position. Build it with [`Bound::param`] or
/// [`Bound::constant`], then [`Bound::times`], [`Bound::scaled`] and [`Bound::plus`].
///
/// ```
/// use gpu_pipeline::Bound;
/// // fn stencil(nx: u32, ny: u32, alpha: f32, src: &[f32; nx * ny], dst: &mut [f32; nx * ny])
/// const GRID: Bound = Bound::param(0).times(1);
/// // three floats per particle: `pos: &[f32; 3 * n]` with `n` at position 0
/// const XYZ: Bound = Bound::param(0).scaled(3);
/// # let _ = (GRID, XYZ);
/// ```
///
/// Misuses of the builder (a fifth factor, an overflowing constant) are recorded and
/// reported when the kernel is declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    scale: u64,
    factors: [u8; MAX_BOUND_FACTORS],
    count: u8,
    offset: u64,
    misuse: Option<Misuse>,
}

/// A builder misuse, reported by [`Kernel::typed_with_bounds`](crate::Kernel::typed_with_bounds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Misuse {
    TooManyFactors,
    IndexTooLarge(usize),
    ScaleOverflow,
    OffsetOverflow,
    BufferTwice(usize),
    TooManyBounds,
}

impl fmt::Display for Misuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Misuse::TooManyFactors => write!(
                f,
                "a bound multiplies at most {MAX_BOUND_FACTORS} parameters"
            ),
            Misuse::IndexTooLarge(index) => write!(
                f,
                "parameter {index} does not exist: a signature has at most {MAX_PARAMS}"
            ),
            Misuse::ScaleOverflow => f.write_str("a bound's constant factor overflows a u64"),
            Misuse::OffsetOverflow => f.write_str("a bound's added constant overflows a u64"),
            Misuse::BufferTwice(index) => {
                write!(f, "parameter {index} is given two bounds; keep one")
            }
            Misuse::TooManyBounds => write!(f, "more than {MAX_PARAMS} bounds"),
        }
    }
}

impl Bound {
    /// The constant `value`: the kernel indexes the buffer below `value` whatever its
    /// arguments are (`&[f32; 4]`).
    pub const fn constant(value: u64) -> Bound {
        Bound {
            scale: value,
            factors: [0; MAX_BOUND_FACTORS],
            count: 0,
            offset: 0,
            misuse: None,
        }
    }

    /// The value of the integer scalar parameter at position `index` (`&[f32; n]`).
    pub const fn param(index: usize) -> Bound {
        Bound::constant(1).times(index)
    }

    /// This bound times the integer scalar parameter at position `index` (`nx * ny`).
    pub const fn times(mut self, index: usize) -> Bound {
        if self.misuse.is_some() {
            return self;
        }
        if index >= MAX_PARAMS {
            self.misuse = Some(Misuse::IndexTooLarge(index));
        } else if self.count as usize == MAX_BOUND_FACTORS {
            self.misuse = Some(Misuse::TooManyFactors);
        } else {
            self.factors[self.count as usize] = index as u8;
            self.count += 1;
        }
        self
    }

    /// This bound times a constant (`3 * n`).
    pub const fn scaled(mut self, factor: u64) -> Bound {
        match self.scale.checked_mul(factor) {
            Some(scale) => self.scale = scale,
            None if self.misuse.is_none() => self.misuse = Some(Misuse::ScaleOverflow),
            None => {}
        }
        self
    }

    /// This bound plus a constant (`n + 1`).
    pub const fn plus(mut self, offset: u64) -> Bound {
        match self.offset.checked_add(offset) {
            Some(offset) => self.offset = offset,
            None if self.misuse.is_none() => self.misuse = Some(Misuse::OffsetOverflow),
            None => {}
        }
        self
    }

    /// The constant factor (1 unless [`Bound::scaled`] or [`Bound::constant`] set it).
    pub fn scale(&self) -> u64 {
        self.scale
    }

    /// The positions of the parameters multiplied, in order.
    pub fn factors(&self) -> impl Iterator<Item = usize> + '_ {
        self.factors[..usize::from(self.count)]
            .iter()
            .map(|&f| usize::from(f))
    }

    /// The constant added.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The bound's value for the arguments read into `slots`: the hot path's arithmetic.
    #[inline]
    fn evaluate(&self, slots: &[Slot; MAX_PARAMS]) -> Result<u64, Problem> {
        let mut value = self.scale;
        for &factor in &self.factors[..usize::from(self.count)] {
            let count = match slots[usize::from(factor)] {
                Slot::Count(Count::Value(count)) => count,
                Slot::Count(Count::Negative(_)) => return Err(Problem::Negative(factor)),
                _ => return Err(Problem::Mismatch(factor)),
            };
            value = value.checked_mul(count).ok_or(Problem::Overflow)?;
        }
        value.checked_add(self.offset).ok_or(Problem::Overflow)
    }
}

/// One bounded buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    buffer: u8,
    bound: Bound,
}

const NO_ENTRY: Entry = Entry {
    buffer: 0,
    bound: Bound::constant(0),
};

/// The bounds of one kernel's buffers, by parameter position, with the parameters' names for
/// messages. Pass it to [`Kernel::typed_with_bounds`](crate::Kernel::typed_with_bounds).
///
/// ```
/// use gpu_pipeline::{Bound, Bounds};
/// // saxpy(unsigned n, float a, const float* x, float* y) reads x and writes y below n.
/// const SAXPY: Bounds = Bounds::new()
///     .names(&["n", "a", "x", "y"])
///     .buffer(2, Bound::param(0))
///     .buffer(3, Bound::param(0));
/// assert_eq!(SAXPY.describe(3).as_deref(), Some("n"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    entries: [Entry; MAX_PARAMS],
    len: u8,
    names: Option<&'static [&'static str]>,
    misuse: Option<Misuse>,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds::new()
    }
}

impl Bounds {
    /// No bounds: every buffer is indexed within the buffer passed.
    pub const fn new() -> Bounds {
        Bounds {
            entries: [NO_ENTRY; MAX_PARAMS],
            len: 0,
            names: None,
            misuse: None,
        }
    }

    /// Declares that the kernel indexes the buffer parameter at position `index` only below
    /// `bound`.
    pub const fn buffer(mut self, index: usize, bound: Bound) -> Bounds {
        if self.misuse.is_some() {
            return self;
        }
        if bound.misuse.is_some() {
            self.misuse = bound.misuse;
            return self;
        }
        if index >= MAX_PARAMS {
            self.misuse = Some(Misuse::IndexTooLarge(index));
            return self;
        }
        let mut i = 0;
        while i < self.len as usize {
            if self.entries[i].buffer as usize == index {
                self.misuse = Some(Misuse::BufferTwice(index));
                return self;
            }
            i += 1;
        }
        if self.len as usize == MAX_PARAMS {
            self.misuse = Some(Misuse::TooManyBounds);
            return self;
        }
        self.entries[self.len as usize] = Entry {
            buffer: index as u8,
            bound,
        };
        self.len += 1;
        self
    }

    /// Names the parameters, one per parameter in order, so that refusals say `y` and `n`
    /// rather than "parameter 3" and "parameter 0".
    pub const fn names(mut self, names: &'static [&'static str]) -> Bounds {
        self.names = Some(names);
        self
    }

    /// Whether no buffer has a bound.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many buffers have a bound.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// The bound of the parameter at position `buffer`, if it has one.
    pub fn get(&self, buffer: usize) -> Option<Bound> {
        self.iter()
            .find_map(|(index, bound)| (index == buffer).then_some(bound))
    }

    /// Each bounded buffer's position with its bound, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, Bound)> + '_ {
        self.entries[..self.len()]
            .iter()
            .map(|entry| (usize::from(entry.buffer), entry.bound))
    }

    /// The bound of the parameter at position `buffer` as a person writes it: `nx * ny`,
    /// `3 * n + 1`, or `parameter 0` where no names were given.
    pub fn describe(&self, buffer: usize) -> Option<String> {
        self.get(buffer).map(|bound| self.describe_bound(&bound))
    }

    /// The name of parameter `index`, for messages.
    pub(crate) fn param_name(&self, index: usize) -> String {
        match self.names.and_then(|names| names.get(index)) {
            Some(name) => format!("`{name}`"),
            None => format!("parameter {index}"),
        }
    }

    fn bare_name(&self, index: usize) -> String {
        match self.names.and_then(|names| names.get(index)) {
            Some(name) => (*name).to_owned(),
            None => format!("parameter {index}"),
        }
    }

    fn describe_bound(&self, bound: &Bound) -> String {
        let mut terms: Vec<String> = Vec::new();
        if bound.scale != 1 || bound.count == 0 {
            terms.push(bound.scale.to_string());
        }
        terms.extend(bound.factors().map(|f| self.bare_name(f)));
        let mut text = terms.join(" * ");
        if bound.offset != 0 {
            text.push_str(&format!(" + {}", bound.offset));
        }
        text
    }

    /// Checks the declaration against a signature's parameters: each bounded parameter is a
    /// buffer, each factor an integer scalar, the names (if any) one per parameter. `Err`
    /// says what is wrong, for [`Kernel::typed_with_bounds`](crate::Kernel::typed_with_bounds).
    pub(crate) fn validate(&self, kinds: &[ParamKind]) -> Result<(), String> {
        if let Some(misuse) = self.misuse {
            return Err(misuse.to_string());
        }
        if let Some(names) = self.names
            && names.len() != kinds.len()
        {
            return Err(format!(
                "{} parameter names for a signature of {} parameters",
                names.len(),
                kinds.len()
            ));
        }
        for (buffer, bound) in self.iter() {
            match kinds.get(buffer) {
                Some(ParamKind::Buffer { .. }) => {}
                Some(ParamKind::Scalar { .. }) => {
                    return Err(format!(
                        "{} is a scalar: only buffers (`&[T]`, `&mut [T]`) take bounds",
                        self.param_name(buffer)
                    ));
                }
                None => {
                    return Err(format!(
                        "a bound for parameter {buffer}, but the signature has {} parameters",
                        kinds.len()
                    ));
                }
            }
            for factor in bound.factors() {
                let problem = match kinds.get(factor) {
                    Some(ParamKind::Scalar { index: Some(_) }) => continue,
                    Some(ParamKind::Scalar { index: None }) => "is not an integer",
                    Some(ParamKind::Buffer { .. }) => "is a buffer",
                    None => "does not exist",
                };
                return Err(format!(
                    "the bound of {} names {}, which {problem}; a bound multiplies integer \
                     scalar parameters (u8 to u64, usize, i8 to i64, isize)",
                    self.param_name(buffer),
                    self.param_name(factor),
                ));
            }
        }
        Ok(())
    }

    /// Checks every bound against one launch's arguments, read at the signature's `kinds`.
    /// No allocation: the arguments are read into an array on the stack.
    #[inline]
    pub(crate) fn check<A: KernelArgs>(
        &self,
        kinds: &[ParamKind],
        args: &A,
    ) -> Result<(), Refusal> {
        let slots = read(kinds, args);
        for (entry, Entry { buffer, bound }) in self.entries[..self.len()].iter().enumerate() {
            let len = match slots[usize::from(*buffer)] {
                Slot::Len(len) => len,
                _ => return Err(Refusal::new(entry, Problem::Mismatch(*buffer))),
            };
            match bound.evaluate(&slots) {
                Ok(value) if value <= len as u64 => {}
                Ok(value) => {
                    return Err(Refusal::new(entry, Problem::TooShort { bound: value, len }));
                }
                Err(problem) => return Err(Refusal::new(entry, problem)),
            }
        }
        Ok(())
    }

    /// The refusal of `args` as an error value, with names and the values involved (read
    /// from the arguments again: the check keeps nothing it does not need).
    #[cold]
    pub(crate) fn violation<A: KernelArgs>(
        &self,
        kernel: &str,
        module: &str,
        kinds: &[ParamKind],
        args: &A,
        refusal: &Refusal,
    ) -> BoundViolation {
        self.describe_refusal(kernel, module, &read(kinds, args), refusal)
    }

    fn describe_refusal(
        &self,
        kernel: &str,
        module: &str,
        slots: &[Slot; MAX_PARAMS],
        refusal: &Refusal,
    ) -> BoundViolation {
        let Entry { buffer, bound } = self.entries[refusal.entry];
        let values = bound
            .factors()
            .filter_map(|f| match slots[f] {
                Slot::Count(Count::Value(v)) => Some((self.bare_name(f), i128::from(v))),
                Slot::Count(Count::Negative(v)) => Some((self.bare_name(f), i128::from(v))),
                _ => None,
            })
            .collect();
        let problem = match refusal.problem {
            Problem::TooShort { bound, len } => BoundProblem::TooShort { bound, len },
            Problem::Negative(param) => BoundProblem::Negative {
                param: self.bare_name(usize::from(param)),
            },
            Problem::Overflow => BoundProblem::Overflow,
            Problem::Mismatch(param) => BoundProblem::Mismatch {
                param: usize::from(param),
            },
        };
        BoundViolation {
            kernel: kernel.to_owned(),
            module: module.to_owned(),
            buffer: self.bare_name(usize::from(buffer)),
            bound: self.describe_bound(&bound),
            values,
            problem,
        }
    }
}

/// Every argument of a launch as the check reads it, by position: what `kinds` says each is.
#[inline]
fn read<A: KernelArgs>(kinds: &[ParamKind], args: &A) -> [Slot; MAX_PARAMS] {
    let mut slots = [Slot::Other; MAX_PARAMS];
    args.visit(&mut |index, arg| {
        if let Some(slot) = slots.get_mut(index) {
            *slot = Slot::read(kinds.get(index), arg);
        }
    });
    slots
}

/// One argument as the check reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// An integer scalar.
    Count(Count),
    /// A buffer of the signature's element type, with its length in elements.
    Len(usize),
    /// Anything else: a float, a struct, an argument that does not match the signature.
    Other,
}

impl Slot {
    #[inline]
    fn read(kind: Option<&ParamKind>, arg: ArgRef<'_>) -> Slot {
        match (kind, arg) {
            (Some(ParamKind::Scalar { index: Some(ty) }), ArgRef::Scalar(bytes)) => {
                ty.read(bytes).map_or(Slot::Other, Slot::Count)
            }
            (
                Some(ParamKind::Buffer { elem_size, .. }),
                ArgRef::Buffer {
                    region,
                    elem_size: e,
                },
            ) if *elem_size == e => Slot::Len(region.len),
            _ => Slot::Other,
        }
    }
}

/// Why a check failed, before names are attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Problem {
    TooShort { bound: u64, len: usize },
    Negative(u8),
    Overflow,
    Mismatch(u8),
}

/// A failed check: which entry and why.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Refusal {
    entry: usize,
    problem: Problem,
}

impl Refusal {
    #[cold]
    fn new(entry: usize, problem: Problem) -> Refusal {
        Refusal { entry, problem }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::launch::index::IndexType;

    fn slots(values: &[Slot]) -> [Slot; MAX_PARAMS] {
        let mut slots = [Slot::Other; MAX_PARAMS];
        slots[..values.len()].copy_from_slice(values);
        slots
    }

    fn count(value: u64) -> Slot {
        Slot::Count(Count::Value(value))
    }

    const U32: ParamKind = ParamKind::Scalar {
        index: Some(IndexType::U32),
    };
    const F32: ParamKind = ParamKind::Scalar { index: None };
    const READ: ParamKind = ParamKind::Buffer {
        writes: false,
        elem_size: 4,
    };
    const WRITE: ParamKind = ParamKind::Buffer {
        writes: true,
        elem_size: 4,
    };

    #[test]
    fn bounds_evaluate_scale_times_factors_plus_offset() {
        let s = slots(&[count(3), count(5), count(7), Slot::Len(9)]);
        assert_eq!(Bound::param(0).evaluate(&s), Ok(3));
        assert_eq!(Bound::param(0).times(1).evaluate(&s), Ok(15));
        assert_eq!(
            Bound::param(1).times(2).scaled(2).plus(1).evaluate(&s),
            Ok(71)
        );
        assert_eq!(Bound::constant(4).evaluate(&s), Ok(4));
        assert_eq!(Bound::constant(0).times(0).evaluate(&s), Ok(0));
        // Negative values and non-integers bound nothing; overflow is an error.
        let s = slots(&[
            Slot::Count(Count::Negative(-1)),
            Slot::Other,
            count(u64::MAX),
        ]);
        assert_eq!(Bound::param(0).evaluate(&s), Err(Problem::Negative(0)));
        assert_eq!(Bound::param(1).evaluate(&s), Err(Problem::Mismatch(1)));
        assert_eq!(
            Bound::param(2).scaled(2).evaluate(&s),
            Err(Problem::Overflow)
        );
        assert_eq!(Bound::param(2).plus(1).evaluate(&s), Err(Problem::Overflow));
        assert_eq!(Bound::param(2).evaluate(&s), Ok(u64::MAX));
    }

    #[test]
    fn builder_misuses_are_reported_at_validation() {
        let kinds = [U32, U32, U32, U32, U32, WRITE];
        let five = Bound::param(0).times(1).times(2).times(3).times(4);
        let err = Bounds::new().buffer(5, five).validate(&kinds).unwrap_err();
        assert!(err.contains("at most 4 parameters"), "{err}");
        let err = Bounds::new()
            .buffer(5, Bound::constant(u64::MAX).scaled(2))
            .validate(&kinds)
            .unwrap_err();
        assert!(err.contains("overflows"), "{err}");
        let err = Bounds::new()
            .buffer(5, Bound::param(0))
            .buffer(5, Bound::param(1))
            .validate(&kinds)
            .unwrap_err();
        assert!(err.contains("two bounds"), "{err}");
        let err = Bounds::new()
            .buffer(5, Bound::param(40))
            .validate(&kinds)
            .unwrap_err();
        assert!(err.contains("parameter 40 does not exist"), "{err}");
    }

    #[test]
    fn validation_checks_what_each_position_is() {
        let saxpy = [U32, F32, READ, WRITE];
        let names: &'static [&'static str] = &["n", "a", "x", "y"];
        let ok = Bounds::new()
            .names(names)
            .buffer(2, Bound::param(0))
            .buffer(3, Bound::param(0));
        assert_eq!(ok.validate(&saxpy), Ok(()));
        let on_scalar = Bounds::new().names(names).buffer(0, Bound::param(0));
        assert_eq!(
            on_scalar.validate(&saxpy).unwrap_err(),
            "`n` is a scalar: only buffers (`&[T]`, `&mut [T]`) take bounds"
        );
        let by_float = Bounds::new().names(names).buffer(3, Bound::param(1));
        assert!(
            by_float
                .validate(&saxpy)
                .unwrap_err()
                .starts_with("the bound of `y` names `a`, which is not an integer"),
        );
        let by_buffer = Bounds::new().buffer(3, Bound::param(2));
        assert!(
            by_buffer
                .validate(&saxpy)
                .unwrap_err()
                .starts_with("the bound of parameter 3 names parameter 2, which is a buffer"),
        );
        let past_end = Bounds::new().buffer(7, Bound::param(0));
        assert!(
            past_end
                .validate(&saxpy)
                .unwrap_err()
                .contains("has 4 parameters")
        );
        let names_short = Bounds::new().names(&["n"]);
        assert!(names_short.validate(&saxpy).is_err());
    }

    #[test]
    fn bounds_describe_themselves_as_written() {
        let names: &'static [&'static str] = &["nx", "ny", "n", "f"];
        let b = Bounds::new()
            .names(names)
            .buffer(3, Bound::param(0).times(1).plus(2));
        assert_eq!(b.describe(3).as_deref(), Some("nx * ny + 2"));
        let b = Bounds::new().buffer(3, Bound::param(2).scaled(3));
        assert_eq!(b.describe(3).as_deref(), Some("3 * parameter 2"));
        let b = Bounds::new().buffer(3, Bound::constant(8));
        assert_eq!(b.describe(3).as_deref(), Some("8"));
        assert_eq!(b.describe(2), None);
    }

    #[test]
    fn refusals_name_the_buffer_the_bound_and_the_values() {
        let b = Bounds::new()
            .names(&["nx", "ny", "f"])
            .buffer(2, Bound::param(0).times(1));
        let refusal = Refusal::new(0, Problem::TooShort { bound: 12, len: 10 });
        let read = slots(&[count(3), count(4), Slot::Len(10)]);
        let v = b.describe_refusal("stencil", "heat", &read, &refusal);
        assert_eq!(
            v.to_string(),
            "kernel `stencil` of module `heat` indexes `f` below `nx * ny` = 12 (nx = 3, ny = 4), \
             but the buffer passed for `f` holds 10 elements; pass a longer buffer or smaller \
             arguments"
        );
        let b = Bounds::new().names(&["n", "y"]).buffer(1, Bound::param(0));
        let refusal = Refusal::new(0, Problem::TooShort { bound: 11, len: 10 });
        let read = slots(&[count(11), Slot::Len(10)]);
        assert_eq!(
            b.describe_refusal("k", "m", &read, &refusal).to_string(),
            "kernel `k` of module `m` indexes `y` below `n` = 11, but the buffer passed for `y` \
             holds 10 elements; pass a longer buffer or smaller arguments"
        );
        let refusal = Refusal::new(0, Problem::Negative(0));
        let read = slots(&[Slot::Count(Count::Negative(-2)), Slot::Len(10)]);
        let v = b.describe_refusal("k", "m", &read, &refusal);
        assert_eq!(
            v.problem,
            BoundProblem::Negative {
                param: "n".to_owned()
            }
        );
        assert_eq!(v.values, [("n".to_owned(), -2)]);
    }

    proptest! {
        /// The check agrees with exact arithmetic: a bound passes exactly when its true value
        /// (computed in u128) fits in a u64 at every step and is at most the length.
        #[test]
        fn evaluation_matches_exact_arithmetic(
            values in proptest::collection::vec(0u64..=u64::from(u32::MAX) * 4, 1..=4),
            scale in 0u64..1000,
            offset in 0u64..1000,
            len in 0usize..usize::MAX,
        ) {
            let mut bound = Bound::constant(scale).plus(offset);
            let mut cells = Vec::new();
            for (i, v) in values.iter().enumerate() {
                bound = bound.times(i);
                cells.push(count(*v));
            }
            let s = slots(&cells);
            // Left to right, as the check computes it; `None` once a step leaves u64.
            let fits = |value: u128| value <= u128::from(u64::MAX);
            let mut exact = Some(u128::from(scale));
            for v in &values {
                exact = exact.and_then(|e| e.checked_mul(u128::from(*v))).filter(|e| fits(*e));
            }
            let exact = exact.map(|e| e + u128::from(offset)).filter(|e| fits(*e));
            match (bound.evaluate(&s), exact) {
                (Ok(value), Some(exact)) => {
                    prop_assert_eq!(u128::from(value), exact);
                    prop_assert_eq!(value <= len as u64, exact <= len as u128);
                }
                (Err(problem), None) => prop_assert_eq!(problem, Problem::Overflow),
                (got, want) => prop_assert!(false, "got {:?}, want {:?}", got, want),
            }
        }
    }
}

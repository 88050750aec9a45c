//! The words of device-side control flow that both backends and the graph API share: the
//! forms a conditional node takes, the comparisons a condition makes, and the CUDA C header
//! kernels include to set one.

/// The CUDA C header a kernel includes to set a condition (`gp_condition`,
/// `gp_set_condition`): `runtime/kernels/gpu_pipeline_condition.cuh`, for CUDA C compiled at
/// run time (prepend it to the source, or give it to NVRTC as a named header).
pub const CONDITION_HEADER: &str = include_str!("../../kernels/gpu_pipeline_condition.cuh");

/// The kind of a conditional node, as CUDA's conditional node types and sizes say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// Body 0 once when the condition holds.
    If,
    /// Body 0 when the condition holds, body 1 when it does not (CUDA: IF of size 2).
    IfElse,
    /// Body 0 while the condition holds, tested before each iteration.
    While,
    /// Body 0, then again while the condition holds (CUDA: a WHILE whose handle starts each
    /// launch at 1).
    DoWhile,
    /// Body `n` when the value is `n`; none when it is not below the number of bodies.
    Switch,
    /// A loop whose body swaps buffers, unrolled by two: bodies 0 and 1 alternate (tested
    /// before each, counted each), body 2 runs once after a run of an odd count that did not
    /// stop at its maximum. The CUDA
    /// form: `WHILE(body 0 -> IF(body 1)) -> IF(body 2)`.
    PingPong,
    /// [`Form::PingPong`] whose first body runs before the first test (a do-while).
    DoPingPong,
}

/// How a condition compares its value with the threshold. NaN compares as IEEE says: every
/// comparison with it is false except `NotEqual`.
///
/// ```
/// use gpu_pipeline::Comparison;
/// assert!(Comparison::Greater.holds(0.5f32, 1e-6));
/// assert!(!Comparison::LessOrEqual.holds(2u32, 1));
/// assert!(Comparison::NotEqual.holds(f32::NAN, f32::NAN)); // IEEE: NaN equals nothing
/// assert_eq!(Comparison::GreaterOrEqual.symbol(), ">=");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Comparison {
    /// `value > threshold`.
    Greater,
    /// `value >= threshold`.
    GreaterOrEqual,
    /// `value < threshold`.
    Less,
    /// `value <= threshold`.
    LessOrEqual,
    /// `value == threshold`.
    Equal,
    /// `value != threshold`.
    NotEqual,
}

impl Comparison {
    /// The number the condition kernels (and the CPU runner) use.
    pub(crate) fn code(self) -> u32 {
        match self {
            Comparison::Greater => 0,
            Comparison::GreaterOrEqual => 1,
            Comparison::Less => 2,
            Comparison::LessOrEqual => 3,
            Comparison::Equal => 4,
            Comparison::NotEqual => 5,
        }
    }

    /// Whether `value` compares to `threshold` this way (IEEE rules for floats).
    pub fn holds<T: PartialOrd>(self, value: T, threshold: T) -> bool {
        match self {
            Comparison::Greater => value > threshold,
            Comparison::GreaterOrEqual => value >= threshold,
            Comparison::Less => value < threshold,
            Comparison::LessOrEqual => value <= threshold,
            Comparison::Equal => value == threshold,
            Comparison::NotEqual => value != threshold,
        }
    }

    /// The operator, for labels.
    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::Greater => ">",
            Comparison::GreaterOrEqual => ">=",
            Comparison::Less => "<",
            Comparison::LessOrEqual => "<=",
            Comparison::Equal => "==",
            Comparison::NotEqual => "!=",
        }
    }
}

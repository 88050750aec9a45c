//! The crate's one error type. Every variant carries its context (which call, which stage,
//! which buffer) so callers never assemble messages from strings.
//!
//! [`Error::Stage`] and [`Error::Step`] only say where an error happened, so they display
//! their context followed by the error they wrap (`pipeline `X`, stage `y`: a statement
//! failed: TypedKernel::check_bounds: kernel `k` ...`) and hand out, from
//! [`source`](std::error::Error::source), what lies *below* the wrapped error: `to_string()`
//! names the root cause, and a reporter that walks the chain still prints each message once.
//! Every other wrapping variant displays only its own layer and returns the wrapped error
//! from `source`. [`Error::report`] prints the whole chain on one line; [`Error::root`] and
//! [`Error::kernel_bound`] look through the pipeline wrappers for code that matches on the
//! cause.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use crate::image::ImageError;
use crate::sys::CUresult;

/// A `Result` whose error is [`Error`].
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, Result, Stream};
/// /// Sums a buffer on the host.
/// fn total(stream: &Stream, x: &DeviceBuffer<f64>) -> Result<f64> {
///     Ok(x.to_vec(stream)?.iter().sum())
/// }
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// assert_eq!(total(&stream, &DeviceBuffer::from_slice(&stream, &[1.0, 2.5])?)?, 3.5);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in gpu-pipeline.
///
/// Match on the variant (through [`Error::root`] for a pipeline's errors), print it with
/// `{}` (its context and, for a pipeline's, the cause), or with [`Error::report`] for every
/// source on one line.
///
/// ```
/// use gpu_pipeline::{Context, DeviceBuffer, Error, Stream};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let buffer = DeviceBuffer::<f32>::zeros(&stream, 4)?;
/// let err = buffer.slice(2..8).unwrap_err();
/// assert!(matches!(err, Error::InvalidArgument { .. }));
/// assert!(err.to_string().contains("2..8"), "{err}");
/// # Ok::<(), Error>(())
/// ```
///
/// `{:?}` prints the same line as [`Error::report`], so that `fn main() -> Result<()>`, which
/// prints an error it returns with `{:?}`, shows the message and its causes rather than the
/// variant's fields.
#[derive(Clone)]
#[non_exhaustive]
pub enum Error {
    /// No CUDA driver library could be opened. Lists every path tried and why it failed.
    DriverNotFound {
        /// Each library path tried, in order, with the loader's reason.
        tried: Vec<LibraryAttempt>,
    },

    /// The loaded driver lacks an entry point or feature this call needs.
    Unsupported {
        /// The driver entry point or feature.
        symbol: &'static str,
        /// Why it is unavailable (driver too old, device lacks the feature, ...).
        reason: String,
    },

    /// A driver call returned an error code.
    Driver(DriverError),

    /// An argument was rejected before anything was enqueued.
    InvalidArgument {
        /// The API that rejected it, e.g. `Stream::with_priority`.
        call: &'static str,
        /// What was wrong and what is accepted instead.
        message: String,
    },

    /// An image (PTX, cubin or fatbin) was refused before the driver read it: a field it
    /// would trust points outside the image, or the image uses a form that cannot be checked.
    /// The [`ImageError`] names the format, the field, its byte offset and the reason.
    InvalidImage {
        /// The API that refused it, e.g. `Module::load_cubin`.
        call: &'static str,
        /// Which field is wrong, where, and why.
        source: ImageError,
    },

    /// A host closure enqueued on a stream panicked; the panic was caught at the C boundary.
    HostPanic {
        /// The stream's id.
        stream: u64,
        /// The pipeline stage that enqueued it, where known (on the CPU backend, which knows
        /// which operation panicked).
        stage: Option<&'static str>,
        /// The panic payload, when it was a string.
        message: String,
    },

    /// An operation is not available on this context's backend.
    BackendMismatch {
        /// The API called.
        call: &'static str,
        /// The backend the context runs on (`cuda` or `cpu`).
        backend: &'static str,
        /// What to do instead.
        reason: String,
    },

    /// A statement of a pipeline stage failed where it was issued: refused before it was
    /// enqueued (eagerly) or added to a graph (when captured), or failed in the driver call
    /// that issues it.
    Stage {
        /// The pipeline's name.
        pipeline: &'static str,
        /// The stage's name.
        stage: &'static str,
        /// What failed.
        source: Box<Error>,
    },

    /// A pipeline step failed after it was enqueued: an asynchronous fault (or a host
    /// backend fault) surfaced at a wait.
    Step {
        /// The pipeline's name.
        pipeline: &'static str,
        /// The first stage, in enqueue order, that did not complete (when fault tracking is
        /// on); for a device loop that stopped at its maximum, the loop's stage.
        stage: Option<&'static str>,
        /// What failed.
        source: Box<Error>,
    },

    /// Two objects that one operation pairs (a stream and an event, a kernel and a buffer, a
    /// graph and a stream, ...) belong to different contexts, or to different backends.
    ContextMismatch {
        /// The API called.
        call: &'static str,
        /// Which objects disagree, and how.
        what: String,
    },

    /// No NCCL library could be opened, or the one found lacks an entry point we call. Lists
    /// every path tried and why it failed.
    NcclNotFound {
        /// Each library path tried, in order, with the loader's reason.
        tried: Vec<LibraryAttempt>,
    },

    /// An NCCL call returned an error code.
    Nccl {
        /// The NCCL entry point that failed, e.g. `ncclAllReduce`.
        call: &'static str,
        /// The raw `ncclResult_t`.
        code: i32,
        /// `ncclGetErrorString`'s text, and `ncclGetLastError`'s detail when it has one.
        message: String,
    },

    /// Ranks could not meet to set up a communicator.
    Rendezvous(crate::rendezvous::RendezvousError),

    /// Another library failed: one a pipeline stage `call`s (cuBLAS, NCCL through another
    /// crate, your own), or one converted from (see [`Error::external`]). The library's own
    /// error is the [`source`](std::error::Error::source), undisguised: downcast it to get
    /// its type back.
    External {
        /// The library, or the call into it, e.g. `cuBLAS` or `cublasSgemm_v2`.
        library: String,
        /// The library's error.
        source: Arc<dyn StdError + Send + Sync + 'static>,
    },

    /// A device-side `while` loop stopped at its maximum iteration count with its condition
    /// still holding: the loop did not converge (a loop never runs forever).
    IterationLimit {
        /// The loop's label (its condition, e.g. `residual > tol`).
        label: String,
        /// The maximum it reached.
        max_iterations: u32,
    },

    /// An error from the CPU backend: a failed or panicking operation, a race found by
    /// checked mode, a capture misuse.
    Cpu(crate::vocab::fault::CpuFault),

    /// A launch (or a capture, or a kernel-node update) was refused before anything was
    /// enqueued or changed: a buffer is shorter than the bound its kernel declares for it,
    /// or the bound could not be computed (a negative scalar, an overflow).
    KernelBound {
        /// The API that refused it, e.g. `TypedKernel::launch`.
        call: &'static str,
        /// The kernel, the buffer, the bound and the values.
        violation: Box<crate::launch::violation::BoundViolation>,
    },
    /// A send, receive or collective failed or did not complete within the communicator's
    /// deadline (a mismatched program, a peer that left, an NCCL error). The communicator is
    /// aborted: make a new one; the context stays usable.
    Communication(Box<crate::collective::CommFailure>),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::IterationLimit {
                label,
                max_iterations,
            } => write!(
                f,
                "the device loop `{label}` stopped after its maximum of {max_iterations} \
                 iterations with its condition still holding; raise its maximum, or find out \
                 why it does not converge"
            ),
            Error::KernelBound { call, violation } => write!(f, "{call}: {violation}"),
            Error::DriverNotFound { tried } => write!(
                f,
                "no CUDA driver library could be loaded; tried {}",
                LibraryAttempt::list(tried)
            ),
            Error::Unsupported { symbol, reason } => {
                write!(
                    f,
                    "`{symbol}` is not supported by this CUDA driver: {reason}"
                )
            }
            Error::Driver(e) => fmt::Display::fmt(e, f),
            Error::InvalidArgument { call, message } => write!(f, "{call}: {message}"),
            Error::InvalidImage { call, .. } => write!(f, "{call}: the image was refused"),
            Error::HostPanic {
                stream,
                stage: Some(stage),
                message,
            } => write!(
                f,
                "a host function of stage `{stage}` on stream {stream} panicked: {message}"
            ),
            Error::HostPanic {
                stream,
                stage: None,
                message,
            } => write!(f, "a host function on stream {stream} panicked: {message}"),
            Error::BackendMismatch {
                call,
                backend,
                reason,
            } => write!(
                f,
                "`{call}` is not available on the {backend} backend: {reason}"
            ),
            // Not a fault: the step ran, one of its loops did not converge (the same text as a
            // captured step's, below).
            Error::Stage {
                pipeline,
                stage,
                source,
            } if matches!(**source, Error::IterationLimit { .. }) => {
                write!(f, "pipeline `{pipeline}`, stage `{stage}`: {source}")
            }
            // The wrapped error's text follows: these layers only say where it happened.
            Error::Stage {
                pipeline,
                stage,
                source,
            } => write!(
                f,
                "pipeline `{pipeline}`, stage `{stage}`: a statement failed: \
                 {source}"
            ),
            // Not a fault: the step ran, one of its loops did not converge.
            Error::Step {
                pipeline,
                stage,
                source,
            } if matches!(**source, Error::IterationLimit { .. }) => match stage {
                Some(stage) => write!(f, "pipeline `{pipeline}`, stage `{stage}`: {source}"),
                None => write!(f, "pipeline `{pipeline}`: {source}"),
            },
            Error::Step {
                pipeline,
                stage: Some(stage),
                source,
            } => write!(
                f,
                "pipeline `{pipeline}`: a step failed before stage `{stage}` completed: {source}"
            ),
            // What names its stage itself (a statement's error, a communication failure of a
            // stage) needs no guess at which stage failed.
            Error::Step {
                stage: None,
                source,
                ..
            } if matches!(&**source, Error::Stage { .. })
                || matches!(&**source, Error::Communication(c) if c.stage.is_some()) =>
            {
                write!(f, "{source}")
            }
            // The CPU backend's fault names the operation and its stream itself (a race, say),
            // with or without fault tracking.
            Error::Step {
                pipeline,
                stage: None,
                source,
            } if matches!(&**source, Error::Cpu(_)) => {
                write!(f, "pipeline `{pipeline}`: a step failed: {source}")
            }
            Error::Step {
                pipeline,
                stage: None,
                source,
            } => write!(
                f,
                "pipeline `{pipeline}`: a step failed (no stage named: fault tracking is off, or \
                 every stage had completed): {source}"
            ),
            Error::ContextMismatch { call, what } => {
                write!(f, "`{call}`: {what}; create both from one `Context`")
            }
            Error::NcclNotFound { tried } => write!(
                f,
                "no usable NCCL library could be loaded; tried {}",
                LibraryAttempt::list(tried)
            ),
            Error::Nccl {
                call,
                code,
                message,
            } => write!(f, "{call} failed with NCCL error {code}: {message}"),
            Error::Rendezvous(_) => f.write_str("rendezvous failed"),
            Error::External { library, .. } => write!(f, "{library} failed"),
            Error::Cpu(fault) => write!(f, "CPU backend: {fault}"),
            Error::Communication(failure) => fmt::Display::fmt(failure, f),
        }
    }
}

impl StdError for Error {
    /// The wrapped error of the variants that wrap one, when its text is not part of this
    /// error's [`Display`](fmt::Display). [`Stage`](Error::Stage) and [`Step`](Error::Step)
    /// display the error they wrap, so their source is that error's source (use
    /// [`Error::root`] to reach the wrapped error itself). An [`External`](Error::External)
    /// error's source is the library's error itself (downcast it to its type).
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::InvalidImage { source, .. } => Some(source),
            Error::Stage { source, .. } | Error::Step { source, .. } => source.source(),
            Error::Rendezvous(e) => Some(e),
            Error::External { source, .. } => Some(&**source),
            // Displayed in full above (a driver error is this layer's own text).
            _ => None,
        }
    }
}

impl From<DriverError> for Error {
    fn from(e: DriverError) -> Self {
        Error::Driver(e)
    }
}

impl From<crate::collective::CommFailure> for Error {
    fn from(failure: crate::collective::CommFailure) -> Self {
        Error::Communication(Box::new(failure))
    }
}

impl From<crate::rendezvous::RendezvousError> for Error {
    fn from(e: crate::rendezvous::RendezvousError) -> Self {
        Error::Rendezvous(e)
    }
}

impl From<crate::vocab::fault::CpuFault> for Error {
    /// A panicking host function and a failed communication are reported as such on both
    /// backends ([`Error::HostPanic`], [`Error::Communication`]); every other fault of the
    /// CPU backend as [`Error::Cpu`].
    fn from(fault: crate::vocab::fault::CpuFault) -> Self {
        match fault {
            crate::vocab::fault::CpuFault::Communication { failure, .. } => {
                Error::Communication(failure)
            }
            crate::vocab::fault::CpuFault::HostFunctionPanicked {
                stream_id,
                stage,
                message,
                ..
            } => Error::HostPanic {
                stream: stream_id,
                stage,
                message,
            },
            other => Error::Cpu(other),
        }
    }
}

impl Error {
    /// The failed communication this error is, or wraps (through [`Error::Stage`] or
    /// [`Error::Step`]), if any.
    pub fn comm_failure(&self) -> Option<&crate::collective::CommFailure> {
        match self {
            Error::Communication(failure) => Some(failure),
            Error::Stage { source, .. } | Error::Step { source, .. } => source.comm_failure(),
            _ => None,
        }
    }

    /// The error below the pipeline wrappers: for an [`Error::Stage`] or [`Error::Step`],
    /// the error they wrap (through any number of them); for any other error, itself. Match
    /// on it to act on the cause of a failed step:
    ///
    /// ```
    /// use gpu_pipeline::Error;
    ///
    /// fn react(err: &Error) -> &'static str {
    ///     match err.root() {
    ///         Error::KernelBound { .. } => "shrink the problem",
    ///         Error::Driver(d) if d.is_sticky() => "restart the process",
    ///         _ => "give up",
    ///     }
    /// }
    /// let refused = Error::Stage {
    ///     pipeline: "Saxpy",
    ///     stage: "axpy",
    ///     source: Box::new(Error::IterationLimit { label: "r > tol".into(), max_iterations: 9 }),
    /// };
    /// assert!(matches!(refused.root(), Error::IterationLimit { .. }));
    /// assert_eq!(react(&refused), "give up");
    /// ```
    pub fn root(&self) -> &Error {
        match self {
            Error::Stage { source, .. } | Error::Step { source, .. } => source.root(),
            other => other,
        }
    }

    /// The kernel bound a launch, capture or setter was refused for, whether the error is
    /// [`Error::KernelBound`] itself or wraps one (a pipeline's [`Error::Stage`]).
    pub fn kernel_bound(&self) -> Option<&crate::launch::violation::BoundViolation> {
        match self.root() {
            Error::KernelBound { violation, .. } => Some(violation),
            _ => None,
        }
    }

    /// Whether this error refused a wait before waiting: a synchronize during a stream
    /// capture (which CUDA forbids, and which invalidates that capture) or from inside a host
    /// function. Work the wait was for may still be running. Any other error of a wait came
    /// once the work had stopped: a fault, which on CUDA stops every later launch too.
    pub fn refused_to_wait(&self) -> bool {
        use crate::vocab::fault::CpuFault;
        match self.root() {
            Error::Driver(e) => matches!(
                e.code,
                CUresult::CUDA_ERROR_NOT_PERMITTED
                    | CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                    | CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                    | CUresult::CUDA_ERROR_STREAM_CAPTURE_ISOLATION
                    | CUresult::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
                    | CUresult::CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD
                    | CUresult::CUDA_ERROR_CAPTURED_EVENT
            ),
            Error::Cpu(fault) => matches!(
                fault,
                CpuFault::NotAllowedInCapture { .. }
                    | CpuFault::CaptureInvalidated { .. }
                    | CpuFault::CaptureIsolation { .. }
                    | CpuFault::EventInCapture { .. }
                    | CpuFault::BlockingCallInsideOp { .. }
            ),
            _ => false,
        }
    }

    /// The driver status code, when this error came from a driver call (directly, or
    /// wrapped by a pipeline's [`Error::Stage`] or [`Error::Step`]).
    pub fn code(&self) -> Option<CUresult> {
        match self.root() {
            Error::Driver(e) => Some(e.code),
            _ => None,
        }
    }

    /// The error of a CUDA-only operation called on the CPU backend.
    #[cold]
    pub(crate) fn cuda_only(call: &'static str) -> Self {
        Error::BackendMismatch {
            call,
            backend: "cpu",
            reason: "it needs a CUDA context".to_owned(),
        }
    }

    /// The error of an operation pairing objects of two contexts or backends.
    #[cold]
    pub(crate) fn mismatch(call: &'static str, what: impl Into<String>) -> Self {
        Error::ContextMismatch {
            call,
            what: what.into(),
        }
    }

    /// Wraps another library's error, naming the library (or the call into it). A stage
    /// `call` can return it with `?` when its function returns `gpu_pipeline::Result`:
    ///
    /// ```
    /// use gpu_pipeline::Error;
    ///
    /// fn parse_tile(text: &str) -> gpu_pipeline::Result<u32> {
    ///     text.parse::<u32>().map_err(|e| Error::external("tile size", e))
    /// }
    ///
    /// let err = parse_tile("big").unwrap_err();
    /// assert_eq!(err.to_string(), "tile size failed");
    /// assert_eq!(err.report().to_string(), "tile size failed: invalid digit found in string");
    /// let source = std::error::Error::source(&err).unwrap();
    /// assert!(source.downcast_ref::<std::num::ParseIntError>().is_some());
    /// ```
    pub fn external(
        library: impl Into<String>,
        error: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> Self {
        Error::External {
            library: library.into(),
            source: Arc::from(error.into()),
        }
    }

    /// The error and every [`source`](std::error::Error::source) below it, on one line
    /// joined by `": "`, for printing where no error reporter walks the chain:
    /// `pipeline `Step`, stage `gemm`: a statement failed: cuBLAS failed: ...`.
    pub fn report(&self) -> ErrorReport<'_> {
        ErrorReport(self)
    }

    pub(crate) fn invalid(call: &'static str, message: impl Into<String>) -> Self {
        Error::InvalidArgument {
            call,
            message: message.into(),
        }
    }

    pub(crate) fn invalid_image(call: &'static str, source: ImageError) -> Self {
        Error::InvalidImage { call, source }
    }
}

/// The whole chain on one line (see the type's docs): what `main` prints for an error it
/// returns.
///
/// ```
/// let err = gpu_pipeline::Error::external("cuBLAS", "status 7");
/// assert_eq!(format!("{err:?}"), "cuBLAS failed: status 7");
/// ```
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.report(), f)
    }
}

/// An [`Error`] with its whole chain of sources, displayed on one line (see
/// [`Error::report`]).
///
/// ```
/// let err = gpu_pipeline::Error::external("cuBLAS", "status 7");
/// assert_eq!(err.to_string(), "cuBLAS failed");
/// assert_eq!(err.report().to_string(), "cuBLAS failed: status 7");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ErrorReport<'a>(&'a Error);

impl fmt::Display for ErrorReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

/// One library path the loader tried, with the reason it failed.
///
/// ```
/// use gpu_pipeline::{Error, LibraryAttempt};
/// let err = Error::DriverNotFound {
///     tried: vec![LibraryAttempt { path: "libcuda.so.1".into(), reason: "not found".into() }],
/// };
/// assert_eq!(
///     err.to_string(),
///     "no CUDA driver library could be loaded; tried `libcuda.so.1` (not found)"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryAttempt {
    /// The path or file name passed to the dynamic loader.
    pub path: String,
    /// The loader's message.
    pub reason: String,
}

impl LibraryAttempt {
    fn list(tried: &[LibraryAttempt]) -> String {
        tried
            .iter()
            .map(|a| format!("`{}` ({})", a.path, a.reason))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A failed driver call: which call, the code, and the driver's own name and text for it.
///
/// ```
/// use gpu_pipeline::{DriverError, Error, sys::CUresult};
/// let failed = DriverError {
///     call: "cuStreamSynchronize",
///     code: CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
///     name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
///     description: "an illegal memory access was encountered".into(),
/// };
/// assert!(failed.is_sticky()); // the process must restart to use CUDA again
/// let err = Error::from(failed);
/// assert_eq!(err.code(), Some(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct DriverError {
    /// The driver entry point that failed, e.g. `cuStreamSynchronize`.
    pub call: &'static str,
    /// The raw status code.
    pub code: CUresult,
    /// `cuGetErrorName`'s answer, e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`.
    pub name: String,
    /// `cuGetErrorString`'s answer, e.g. `an illegal memory access was encountered`.
    pub description: String,
}

impl DriverError {
    /// Whether the context is now unusable: after these codes every later call in the
    /// process fails too, and the only cure is a new process (CUDA's "sticky" errors).
    pub fn is_sticky(&self) -> bool {
        matches!(
            self.code,
            CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
                | CUresult::CUDA_ERROR_LAUNCH_FAILED
                | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
                | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
                | CUresult::CUDA_ERROR_INVALID_PC
                | CUresult::CUDA_ERROR_LAUNCH_TIMEOUT
        )
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed with {} ({}): {}",
            self.call, self.name, self.code.0, self.description
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_not_found_lists_every_path() {
        let e = Error::DriverNotFound {
            tried: vec![
                LibraryAttempt {
                    path: "libcuda.so.1".into(),
                    reason: "not found".into(),
                },
                LibraryAttempt {
                    path: "libcuda.so".into(),
                    reason: "no such file".into(),
                },
            ],
        };
        assert_eq!(
            e.to_string(),
            "no CUDA driver library could be loaded; tried `libcuda.so.1` (not found), \
             `libcuda.so` (no such file)"
        );
    }

    #[test]
    fn driver_error_names_the_call_code_and_text() {
        let e = DriverError {
            call: "cuStreamSynchronize",
            code: CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
            name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            description: "an illegal memory access was encountered".into(),
        };
        assert!(e.is_sticky());
        assert_eq!(
            Error::from(e.clone()).to_string(),
            "cuStreamSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal \
             memory access was encountered"
        );
        assert_eq!(
            Error::from(e).code(),
            Some(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS)
        );
    }

    /// Each layer of a chain displays its own context once; `source` hands out the rest.
    #[test]
    fn wrapping_errors_display_only_their_own_context() {
        let driver = DriverError {
            call: "cuLaunchKernel",
            code: CUresult::CUDA_ERROR_INVALID_VALUE,
            name: "CUDA_ERROR_INVALID_VALUE".into(),
            description: "invalid argument".into(),
        };
        let stage = Error::Stage {
            pipeline: "Heat",
            stage: "step",
            source: Box::new(Error::from(driver.clone())),
        };
        let step = Error::Step {
            pipeline: "Heat",
            stage: Some("save"),
            source: Box::new(stage.clone()),
        };
        let mut texts = Vec::new();
        let mut next: Option<&(dyn StdError + 'static)> = Some(&step);
        while let Some(e) = next {
            texts.push(e.to_string());
            next = e.source();
        }
        // The pipeline layers name the root cause in their own text, and the walker does
        // not print it again.
        assert_eq!(
            texts,
            [
                "pipeline `Heat`: a step failed before stage `save` completed: pipeline `Heat`, \
              stage `step`: a statement failed: cuLaunchKernel failed with \
              CUDA_ERROR_INVALID_VALUE (1): invalid argument"
            ]
        );
        let report = step.report().to_string();
        assert_eq!(report, texts.join(": "));
        assert_eq!(report.matches("cuLaunchKernel").count(), 1, "{report}");
        assert!(matches!(step.root(), Error::Driver(_)));
        assert_eq!(step.code(), Some(CUresult::CUDA_ERROR_INVALID_VALUE));

        // A library's error below a stage stays a source, once.
        let blas = Error::Stage {
            pipeline: "Gemm",
            stage: "gemm",
            source: Box::new(Error::external("cuBLAS", "status 7")),
        };
        assert_eq!(
            blas.to_string(),
            "pipeline `Gemm`, stage `gemm`: a statement failed: cuBLAS failed"
        );
        assert_eq!(
            blas.report().to_string(),
            "pipeline `Gemm`, stage `gemm`: a statement failed: cuBLAS failed: \
             status 7"
        );

        let image = Error::invalid_image(
            "Module::load_cubin",
            ImageError::whole(crate::image::ImageFormat::Cubin, "length", "too short"),
        );
        assert_eq!(
            image.to_string(),
            "Module::load_cubin: the image was refused"
        );
        assert!(image.source().is_some());
    }

    #[test]
    fn external_errors_keep_their_type() {
        #[derive(Debug)]
        struct BlasError(i32);
        impl fmt::Display for BlasError {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "status {}", self.0)
            }
        }
        impl StdError for BlasError {}

        let err = Error::external("cuBLAS", BlasError(7));
        assert_eq!(err.to_string(), "cuBLAS failed");
        assert_eq!(err.report().to_string(), "cuBLAS failed: status 7");
        let source = err.source().expect("the library's error is the source");
        assert_eq!(source.downcast_ref::<BlasError>().map(|b| b.0), Some(7));
        // Clone shares the library's error.
        let copy = err.clone();
        assert_eq!(copy.report().to_string(), "cuBLAS failed: status 7");
        // A string is an error too.
        let text = Error::external("tile parser", "tile size 0");
        assert_eq!(text.report().to_string(), "tile parser failed: tile size 0");
    }
}

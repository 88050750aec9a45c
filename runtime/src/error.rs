//! The crate's one error type. Every variant carries its context (which call, which stage,
//! which buffer) so callers never assemble messages from strings.

use std::fmt;

use crate::image::ImageError;
use crate::sys::CUresult;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in gpu-pipeline.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No CUDA driver library could be opened. Lists every path tried and why it failed.
    #[error("no CUDA driver library could be loaded; tried {}", LibraryAttempt::list(.tried))]
    DriverNotFound {
        /// Each library path tried, in order, with the loader's reason.
        tried: Vec<LibraryAttempt>,
    },

    /// The loaded driver lacks an entry point or feature this call needs.
    #[error("`{symbol}` is not supported by this CUDA driver: {reason}")]
    Unsupported {
        /// The driver entry point or feature.
        symbol: &'static str,
        /// Why it is unavailable (driver too old, device lacks the feature, ...).
        reason: String,
    },

    /// A driver call returned an error code.
    #[error(transparent)]
    Driver(#[from] DriverError),

    /// An argument was rejected before anything was enqueued.
    #[error("{call}: {message}")]
    InvalidArgument {
        /// The API that rejected it, e.g. `Stream::with_priority`.
        call: &'static str,
        /// What was wrong and what is accepted instead.
        message: String,
    },

    /// An image (PTX, cubin or fatbin) was refused before the driver read it: a field it
    /// would trust points outside the image, or the image uses a form that cannot be checked.
    /// The [`ImageError`] names the format, the field, its byte offset and the reason.
    #[error("{call}: {source}")]
    InvalidImage {
        /// The API that refused it, e.g. `Module::load_cubin`.
        call: &'static str,
        /// Which field is wrong, where, and why.
        source: ImageError,
    },

    /// A host closure enqueued on a stream panicked; the panic was caught at the C boundary.
    #[error("a host function on stream {stream} panicked: {message}")]
    HostPanic {
        /// The stream's id.
        stream: u64,
        /// The panic payload, when it was a string.
        message: String,
    },

    /// An operation is not available on this context's backend.
    #[error("`{call}` is not available on the {backend} backend: {reason}")]
    BackendMismatch {
        /// The API called.
        call: &'static str,
        /// The backend the context runs on (`cuda` or `cpu`).
        backend: &'static str,
        /// What to do instead.
        reason: String,
    },

    /// A statement of a pipeline stage could not be enqueued.
    #[error("pipeline `{pipeline}`, stage `{stage}`: {source}")]
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
    #[error(
        "pipeline `{pipeline}`: a step failed{}: {source}",
        .stage.map_or_else(
            || " (no stage named: fault tracking is off, or every stage had completed)".to_owned(),
            |s| format!(" before stage `{s}` completed")
        )
    )]
    Step {
        /// The pipeline's name.
        pipeline: &'static str,
        /// The first stage, in enqueue order, that did not complete (when fault tracking is on).
        stage: Option<&'static str>,
        /// What failed.
        source: Box<Error>,
    },

    /// Two objects that one operation pairs (a stream and an event, a kernel and a buffer, a
    /// graph and a stream, ...) belong to different contexts, or to different backends.
    #[error("`{call}`: {what}; create both from one `Context`")]
    ContextMismatch {
        /// The API called.
        call: &'static str,
        /// Which objects disagree, and how.
        what: String,
    },

    /// No NCCL library could be opened, or the one found lacks an entry point we call. Lists
    /// every path tried and why it failed.
    #[error("no usable NCCL library could be loaded; tried {}", LibraryAttempt::list(.tried))]
    NcclNotFound {
        /// Each library path tried, in order, with the loader's reason.
        tried: Vec<LibraryAttempt>,
    },

    /// An NCCL call returned an error code.
    #[error("{call} failed with NCCL error {code}: {message}")]
    Nccl {
        /// The NCCL entry point that failed, e.g. `ncclAllReduce`.
        call: &'static str,
        /// The raw `ncclResult_t`.
        code: i32,
        /// `ncclGetErrorString`'s text, and `ncclGetLastError`'s detail when it has one.
        message: String,
    },

    /// Ranks could not meet to set up a communicator.
    #[error("rendezvous: {0}")]
    Rendezvous(#[from] crate::rendezvous::RendezvousError),

    /// An error from the CPU backend: a failed or panicking operation, a race found by
    /// checked mode, a capture misuse.
    #[error("CPU backend: {0}")]
    Cpu(crate::cpu::CpuFault),
}

impl From<crate::cpu::CpuFault> for Error {
    /// A panicking host function is reported as one on both backends; every other fault of
    /// the CPU backend as [`Error::Cpu`].
    fn from(fault: crate::cpu::CpuFault) -> Self {
        match fault {
            crate::cpu::CpuFault::HostFunctionPanicked {
                stream_id, message, ..
            } => Error::HostPanic {
                stream: stream_id,
                message,
            },
            other => Error::Cpu(other),
        }
    }
}

impl Error {
    /// The driver status code, when this error came from a driver call.
    pub fn code(&self) -> Option<CUresult> {
        match self {
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

/// One library path the loader tried, with the reason it failed.
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
}

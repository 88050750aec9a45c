//! The backend interface: what every backend offers on its streams and events, one trait per
//! kind of object, so that `cuda/` and `cpu/` keep their method lists in step (the role of
//! wgpu-hal's `Api` and candle's `BackendStorage`, `../shared/STYLE.md`). A backend that lacks
//! one of these methods does not compile.
//!
//! Static dispatch only: a public type holds one backend value (`StreamBackend`,
//! `EventBackend`) and calls the same trait method in each arm of one `match`, which the
//! compiler resolves and inlines; nothing here allocates or goes through a vtable. Each
//! backend implements the traits in one file (`cuda/backend.rs`, `cpu/backend.rs`) over its
//! own methods, turning its errors into the crate's [`Error`](crate::error::Error).

use crate::error::Result;

/// A stream of a backend: an ordered queue of work on one context.
pub(crate) trait BackendStream {
    /// A process-unique id, never reused.
    fn id(&self) -> u64;
    /// The priority the stream runs at (lower runs first), after any clamping.
    fn priority(&self) -> Result<i32>;
    /// Whether all work enqueued so far has completed.
    fn is_complete(&self) -> Result<bool>;
    /// Blocks until all enqueued work has completed, reporting a fault of that work.
    fn synchronize(&self) -> Result<()>;
}

/// An event of a backend: a point in a stream's work that the host or another stream waits
/// for.
pub(crate) trait BackendEvent: Sized {
    /// Whether the work before the most recent record has completed.
    fn is_complete(&self) -> Result<bool>;
    /// Blocks until the work before the most recent record has completed.
    fn synchronize(&self) -> Result<()>;
    /// Milliseconds between two recorded, completed events of this backend.
    fn elapsed_ms(start: &Self, end: &Self) -> Result<f32>;
}

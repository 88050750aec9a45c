//! The CUDA backend's side of the backend interface (`vocab/backend.rs`), over the methods of
//! its stream and event types.

use super::{Event, Stream};
use crate::error::Result;
use crate::vocab::backend::{BackendEvent, BackendStream};

impl BackendStream for Stream {
    fn id(&self) -> u64 {
        Stream::id(self)
    }

    fn priority(&self) -> Result<i32> {
        Stream::priority(self)
    }

    fn is_complete(&self) -> Result<bool> {
        Stream::query(self)
    }

    fn synchronize(&self) -> Result<()> {
        Stream::synchronize(self)
    }
}

impl BackendEvent for Event {
    fn is_complete(&self) -> Result<bool> {
        Event::query(self)
    }

    fn synchronize(&self) -> Result<()> {
        Event::synchronize(self)
    }

    fn elapsed_ms(start: &Event, end: &Event) -> Result<f32> {
        Event::elapsed(start, end)
    }
}

//! The CPU backend's side of the backend interface (`vocab/backend.rs`), over the methods of
//! its stream and event types; its faults become the crate's `Error` here.

use super::{Event, Stream};
use crate::error::Result;
use crate::vocab::backend::{BackendEvent, BackendStream};

impl BackendStream for Stream {
    fn id(&self) -> u64 {
        Stream::id(self)
    }

    fn priority(&self) -> Result<i32> {
        Ok(Stream::priority(self))
    }

    fn is_complete(&self) -> Result<bool> {
        Ok(Stream::query(self))
    }

    fn synchronize(&self) -> Result<()> {
        Ok(Stream::synchronize(self)?)
    }
}

impl BackendEvent for Event {
    fn is_complete(&self) -> Result<bool> {
        Ok(Event::query(self))
    }

    fn synchronize(&self) -> Result<()> {
        Ok(Event::synchronize(self)?)
    }

    fn elapsed_ms(start: &Event, end: &Event) -> Result<f32> {
        Ok(Event::elapsed_time(start, end)?)
    }
}

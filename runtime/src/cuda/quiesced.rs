//! One context synchronize for everything a captured step frees when it is dropped.
//!
//! Each object that work may still use waits for its whole context before it is freed (an
//! executable graph that was launched, device memory, a flag word): dropping a captured step
//! with a `while` and an `if` waited for the context eight times, on a context that was idle
//! after the first. A [`Quiesced`] scope synchronizes the context once; while it lives, what
//! the dropping thread frees of that context *and nobody else can reach* skips its own
//! synchronize: memory and flag words made private to one graph (condition words, loop
//! counters, loop states: only graphs' nodes use them, so only launches of executable graphs
//! that hold them could have used them; memory a stream ever used, through a condition
//! handle's `word()`, is not covered). Everything else still waits for itself; executable
//! graphs in particular: the scope's owner marks its own, which it holds by value and nobody
//! launched since its synchronize, idle (`drop_captured`), but the drops in the scope run user
//! code (what host closures capture), which may launch an executable graph of its own and
//! drop it there, and that drop must wait (and thereby covers the private memory and flag
//! words that graph held).

use std::cell::Cell;

use crate::error::Result;

use super::Context;

thread_local! {
    /// The context (its raw handle) that the innermost live [`Quiesced`] of this thread
    /// synchronized, or 0.
    static SYNCHRONIZED: Cell<usize> = const { Cell::new(0) };
}

/// A context synchronized by the current thread, which stays so for what the thread drops
/// while this value lives (see the module).
pub(crate) struct Quiesced {
    previous: usize,
}

impl Quiesced {
    /// Synchronizes `ctx`. On error no scope is entered, and each object waits for itself.
    pub(crate) fn enter(ctx: &Context) -> Result<Quiesced> {
        ctx.synchronize()?;
        Ok(Quiesced {
            previous: SYNCHRONIZED.replace(ctx.raw() as usize),
        })
    }
}

impl Drop for Quiesced {
    fn drop(&mut self) {
        SYNCHRONIZED.set(self.previous);
    }
}

/// Whether a [`Quiesced`] scope of `ctx` is live on this thread: work enqueued before it
/// began has finished, and an object only its owner can reach, dropped now, needs no wait
/// of its own.
pub(crate) fn covers(ctx: &Context) -> bool {
    SYNCHRONIZED.get() == ctx.raw() as usize
}

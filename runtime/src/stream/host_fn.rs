//! Host work on a stream: Rust closures run in stream order (on CUDA, by the driver's callback
//! thread; on the CPU backend, by the stream's worker).
//!
//! A panic inside a closure is caught before it reaches the C boundary (or the worker) and
//! reported at the next synchronize of the stream that ran it: for a closure captured into a
//! graph, the stream that launched the graph. Host functions must not call CUDA themselves (a
//! driver rule).

use std::sync::Arc;

use super::{Stream, StreamBackend};
use crate::cpu;
use crate::error::{Error, Result};

impl Stream {
    /// Enqueues a one-shot Rust closure (`cuLaunchHostFunc`): it runs after all earlier work
    /// on the stream, and later work waits for it.
    ///
    /// Rejected while the stream is capturing: a graph may be launched many times, and a
    /// `FnOnce` can run only once. Use [`Stream::launch_host_fn`] inside captures. The check
    /// and the enqueue are one step with respect to captures begun on other threads.
    pub fn launch_host_func<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce() + Send + 'static,
    {
        match &self.backend {
            StreamBackend::Cuda(s) => s.launch_once(Box::new(f)),
            StreamBackend::Cpu(s) => {
                // The engine refuses one-shot work in a capture atomically with the enqueue.
                s.host_fn_once(Box::new(f)).map_err(|e| match e {
                    cpu::CpuFault::OneShotInCapture { .. } => Error::invalid(
                        "Stream::launch_host_func",
                        "the stream is capturing and a `FnOnce` cannot be replayed; use \
                             `launch_host_fn` with an `Arc<dyn Fn() + Send + Sync>`",
                    ),
                    other => other.into(),
                })
            }
        }
    }

    /// Enqueues a repeatable Rust closure. Outside a capture it runs once; inside one it
    /// becomes a host node that runs at every launch of the graph, which keeps the closure
    /// alive for its whole life.
    pub fn launch_host_fn(&self, f: Arc<dyn Fn() + Send + Sync>) -> Result<()> {
        match &self.backend {
            StreamBackend::Cuda(s) => s.launch_repeat(f),
            StreamBackend::Cpu(s) => Ok(s.host_fn(f)?),
        }
    }

    /// Enqueues a legacy stream callback (`cuStreamAddCallback`), which receives the stream's
    /// status: `Err` if earlier work on the stream failed. Not capturable; prefer
    /// [`Stream::launch_host_func`]. On the CPU backend the queue keeps running after a failed
    /// operation, as CUDA's callbacks do, and the callback receives `Ok`; the failure itself is
    /// reported by the next synchronize.
    pub fn add_callback<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        match &self.backend {
            StreamBackend::Cuda(s) => s.add_callback(Box::new(f)),
            StreamBackend::Cpu(_) => self.launch_host_func(move || f(Ok(()))),
        }
    }
}

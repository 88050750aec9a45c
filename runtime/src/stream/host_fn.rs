//! Host work on a stream: Rust closures run by the driver's callback thread.
//!
//! A panic inside a closure is caught before it reaches the C boundary and reported at the
//! stream's next `synchronize`. Host functions must not call CUDA themselves (a driver rule).

use std::any::Any;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use super::Stream;
use super::capture::register_capture_keepalive;
use crate::driver::check;
use crate::error::{Error, Result};
use crate::host::HostOp;
use crate::memory::alloc::KeepAlive;
use crate::sys::{self, CUresult};

type PanicLog = Arc<Mutex<Vec<String>>>;

/// A one-shot closure and where to report its panic.
struct OnceCall {
    f: Box<dyn FnOnce() + Send>,
    panics: PanicLog,
}

/// A repeatable closure (graph replays call it once per launch).
struct RepeatCall {
    f: Arc<dyn Fn() + Send + Sync>,
    panics: PanicLog,
}

/// A legacy callback, which receives the stream's status.
struct StatusCall {
    f: Box<dyn FnOnce(Result<()>) + Send>,
    panics: PanicLog,
}

fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(s) => (*s).to_owned(),
            Err(_) => "a panic with a non-string payload".to_owned(),
        },
    }
}

fn record_panic(panics: &PanicLog, payload: Box<dyn Any + Send>) {
    panics
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(panic_message(payload));
}

unsafe extern "C" fn run_once(data: *mut c_void) {
    // SAFETY: `data` is the `Box<OnceCall>` leaked by `launch_host_func`, which is never
    // enqueued during a capture, so the driver calls this exactly once.
    let call = unsafe { Box::from_raw(data.cast::<OnceCall>()) };
    let OnceCall { f, panics } = *call;
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        record_panic(&panics, payload);
    }
}

unsafe extern "C" fn run_repeat_once(data: *mut c_void) {
    // SAFETY: `data` is a `Box<RepeatCall>` leaked by `launch_host_fn` outside a capture;
    // called exactly once.
    let call = unsafe { Box::from_raw(data.cast::<RepeatCall>()) };
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| (call.f)())) {
        record_panic(&call.panics, payload);
    }
}

unsafe extern "C" fn run_repeat_captured(data: *mut c_void) {
    // SAFETY: `data` points into an `Arc<RepeatCall>` that the captured graph keeps alive
    // (see `register_capture_keepalive`) for as long as it can be launched.
    let call = unsafe { &*data.cast::<RepeatCall>() };
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| (call.f)())) {
        record_panic(&call.panics, payload);
    }
}

unsafe extern "C" fn run_status(_stream: sys::CUstream, status: CUresult, data: *mut c_void) {
    // SAFETY: `data` is the `Box<StatusCall>` leaked by `add_callback`; the driver calls a
    // stream callback exactly once (callbacks cannot be captured).
    let call = unsafe { Box::from_raw(data.cast::<StatusCall>()) };
    let StatusCall { f, panics } = *call;
    let status = check("stream callback status", status);
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| f(status))) {
        record_panic(&panics, payload);
    }
}

impl Stream {
    /// Enqueues a one-shot Rust closure (`cuLaunchHostFunc`): it runs after all earlier work
    /// on the stream, and later work waits for it.
    ///
    /// Rejected while the stream is capturing: a graph may be launched many times, and a
    /// `FnOnce` can run only once. Use [`Stream::launch_host_fn`] inside captures.
    pub fn launch_host_func<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce() + Send + 'static,
    {
        // Refused before anything is enqueued, so the capture stays valid on both backends.
        if self.is_capturing()? {
            return Err(Error::invalid(
                "Stream::launch_host_func",
                "the stream is capturing and a `FnOnce` cannot be replayed; use `launch_host_fn` \
                 with an `Arc<dyn Fn() + Send + Sync>`",
            ));
        }
        if let Some(h) = &self.host {
            let panics = self.panics.clone();
            let op = HostOp::once("host function", move || {
                if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
                    record_panic(&panics, payload);
                }
                Ok(())
            });
            return Ok(h.enqueue(op)?);
        }
        let (c, raw) = self.cuda("Stream::launch_host_func")?;
        let data = Box::into_raw(Box::new(OnceCall {
            f: Box::new(f),
            panics: self.panics.clone(),
        }));
        // SAFETY: `run_once` matches CUhostFn and takes ownership of `data` when called.
        let code = unsafe { (c.driver.cuLaunchHostFunc)(raw, Some(run_once), data.cast()) };
        if !code.is_success() {
            // SAFETY: the driver refused the call, so it will never run `run_once`.
            drop(unsafe { Box::from_raw(data) });
        }
        check("cuLaunchHostFunc", code)
    }

    /// Enqueues a repeatable Rust closure. Outside a capture it runs once; inside one it
    /// becomes a host node that runs at every launch of the graph, which keeps the closure
    /// alive for its whole life.
    pub fn launch_host_fn(&self, f: Arc<dyn Fn() + Send + Sync>) -> Result<()> {
        let call = RepeatCall {
            f,
            panics: self.panics.clone(),
        };
        if let Some(h) = &self.host {
            let op = HostOp::replayable("host function", move || {
                if let Err(payload) = catch_unwind(AssertUnwindSafe(|| (call.f)())) {
                    record_panic(&call.panics, payload);
                }
                Ok(())
            });
            return Ok(h.enqueue(op)?);
        }
        let capture_id = self.capture_id()?;
        let (c, raw) = self.cuda("Stream::launch_host_fn")?;
        match capture_id {
            None => {
                let data = Box::into_raw(Box::new(call));
                // SAFETY: `run_repeat_once` matches CUhostFn and owns `data` when called.
                let code =
                    unsafe { (c.driver.cuLaunchHostFunc)(raw, Some(run_repeat_once), data.cast()) };
                if !code.is_success() {
                    // SAFETY: refused, so never called.
                    drop(unsafe { Box::from_raw(data) });
                }
                check("cuLaunchHostFunc", code)
            }
            Some(id) => {
                let call = Arc::new(call);
                let data = Arc::as_ptr(&call) as *mut c_void;
                // SAFETY: `run_repeat_captured` only borrows `data`, which the keepalive
                // registered below (moved into the graph at end_capture) keeps alive.
                let code =
                    unsafe { (c.driver.cuLaunchHostFunc)(raw, Some(run_repeat_captured), data) };
                check("cuLaunchHostFunc", code)?;
                register_capture_keepalive(id, KeepAlive::Object(call));
                Ok(())
            }
        }
    }

    /// Enqueues a legacy stream callback (`cuStreamAddCallback`), which receives the stream's
    /// status: `Err` if earlier work on the stream failed. Not capturable; prefer
    /// [`Stream::launch_host_func`].
    pub fn add_callback<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        if self.host.is_some() {
            // The host queue keeps running after a failed op, as CUDA's callbacks do; the
            // failure itself is reported by the next synchronize.
            return self.launch_host_func(move || f(Ok(())));
        }
        let (c, raw) = self.cuda("Stream::add_callback")?;
        let data = Box::into_raw(Box::new(StatusCall {
            f: Box::new(f),
            panics: self.panics.clone(),
        }));
        // SAFETY: `run_status` matches CUstreamCallback and owns `data` when called; flags 0.
        let code = unsafe { (c.driver.cuStreamAddCallback)(raw, Some(run_status), data.cast(), 0) };
        if !code.is_success() {
            // SAFETY: refused, so never called.
            drop(unsafe { Box::from_raw(data) });
        }
        check("cuStreamAddCallback", code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_messages_are_kept() {
        let log: PanicLog = Arc::default();
        record_panic(&log, Box::new("static str"));
        record_panic(&log, Box::new(String::from("owned")));
        record_panic(&log, Box::new(42_u8));
        assert_eq!(
            *log.lock().unwrap(),
            ["static str", "owned", "a panic with a non-string payload"]
        );
    }

    #[test]
    fn a_panicking_closure_is_caught_by_the_trampoline() {
        let panics: PanicLog = Arc::default();
        let data = Box::into_raw(Box::new(OnceCall {
            f: Box::new(|| panic!("boom")),
            panics: panics.clone(),
        }));
        // SAFETY: as the driver would: one call with the leaked box.
        unsafe { run_once(data.cast()) };
        assert_eq!(*panics.lock().unwrap(), ["boom"]);
    }
}

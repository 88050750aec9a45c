//! Host work on a stream: Rust closures run by the driver's callback thread.
//!
//! A panic inside a closure is caught before it reaches the C boundary and reported at the
//! next synchronize of the stream that ran it (for a captured closure, the stream that
//! launched the graph). Host functions must not call CUDA themselves (a driver rule).

use std::ffi::c_void;
use std::sync::Arc;

use crate::driver::check;
use crate::error::{Error, Result};
use crate::panic_log::PanicLog;
use crate::sys::{self, CUresult};

use super::Stream;
use super::context::HostFnScope;
use super::keep::{self, Keep};

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

unsafe extern "C" fn run_once(data: *mut c_void) {
    let _scope = HostFnScope::enter();
    // SAFETY: `data` is the `Box<OnceCall>` leaked by `launch_once`, which enqueued it outside
    // any capture (checked under the stream's gate, which beginning or joining a capture takes
    // exclusively, so no capture can begin in between), and work enqueued outside a capture
    // runs once, so the driver calls this exactly once with it.
    let call = unsafe { Box::from_raw(data.cast::<OnceCall>()) };
    let OnceCall { f, panics } = *call;
    // The closure is moved into the guarded call: its drop (user code) is guarded too.
    panics.run(f);
}

unsafe extern "C" fn run_repeat_once(data: *mut c_void) {
    let _scope = HostFnScope::enter();
    // SAFETY: `data` is a `Box<RepeatCall>` leaked by `launch_repeat` outside a capture;
    // called exactly once, as in `run_once`.
    let call = unsafe { Box::from_raw(data.cast::<RepeatCall>()) };
    let RepeatCall { f, panics } = *call;
    // `f` may be the last handle of the closure: it is dropped inside the guarded call, so a
    // panicking drop of what the closure captured is caught too instead of unwinding into
    // the driver (which aborts the process).
    panics.run(move || {
        f();
        drop(f);
    });
}

unsafe extern "C" fn run_repeat_captured(data: *mut c_void) {
    let _scope = HostFnScope::enter();
    // SAFETY: `data` points into an `Arc<RepeatCall>` that the capture record, then the
    // captured graph and every executable graph made from it, keep alive (`Keep::Object`) for
    // as long as a launch of it can run (an executable graph's drop waits for its launches, or
    // leaks what it keeps).
    let call = unsafe { &*data.cast::<RepeatCall>() };
    call.panics.run(|| (call.f)());
}

unsafe extern "C" fn run_status(_stream: sys::CUstream, status: CUresult, data: *mut c_void) {
    let _scope = HostFnScope::enter();
    // SAFETY: `data` is the `Box<StatusCall>` leaked by `add_callback` outside a capture
    // (checked under the gate, as in `launch_once`); the driver calls a stream callback
    // exactly once.
    let call = unsafe { Box::from_raw(data.cast::<StatusCall>()) };
    let StatusCall { f, panics } = *call;
    let status = check("stream callback status", status);
    panics.run(move || f(status));
}

/// A host node running `f` at every launch of its graph: the node's parameters, and what the
/// graph must keep alive for as long as it (or an executable graph made from it) can run:
/// the closure, and the panic log a launch makes its stream report.
pub(crate) fn host_node_params(
    f: Arc<dyn Fn() + Send + Sync>,
) -> (sys::CUDA_HOST_NODE_PARAMS, [Keep; 2]) {
    let panics = PanicLog::default();
    let call = Arc::new(RepeatCall {
        f,
        panics: panics.clone(),
    });
    let params = sys::CUDA_HOST_NODE_PARAMS {
        fn_: Some(run_repeat_captured),
        userData: Arc::as_ptr(&call) as *mut c_void,
    };
    (params, [Keep::Object(call), Keep::Panics(panics)])
}

/// What an enqueue the driver refused hands back, to drop past the stream's gate: dropping a
/// closure runs user code, which may enqueue on this very stream (the gate is never taken
/// twice by one thread).
pub(super) type Refused = Option<Box<dyn Send>>;

impl Stream {
    /// Enqueues a one-shot closure (`cuLaunchHostFunc`). Refused while the handle captures:
    /// a graph may be launched many times, and a `FnOnce` can run only once.
    pub(crate) fn launch_once(&self, f: Box<dyn FnOnce() + Send>) -> Result<()> {
        let mut refused = None;
        let result = self.launch_once_gated(f, &mut refused);
        drop(refused);
        result
    }

    fn launch_once_gated(&self, f: Box<dyn FnOnce() + Send>, refused: &mut Refused) -> Result<()> {
        let _gate = self.gate();
        if self.capture_now()?.is_some() {
            // `f` is a parameter: it drops after the gate.
            return Err(Error::invalid(
                "Stream::launch_host_func",
                "the stream is capturing and a `FnOnce` cannot be replayed; use `launch_host_fn` \
                 with an `Arc<dyn Fn() + Send + Sync>`",
            ));
        }
        let d = self.bind()?;
        let data = Box::into_raw(Box::new(OnceCall {
            f,
            panics: self.panic_log().clone(),
        }));
        // SAFETY: `run_once` matches CUhostFn and takes ownership of `data` when called.
        let code = unsafe { (d.cuLaunchHostFunc)(self.raw(), Some(run_once), data.cast()) };
        if !code.is_success() {
            // SAFETY: the driver refused the call, so it will never run `run_once`.
            *refused = Some(unsafe { Box::from_raw(data) });
        }
        check("cuLaunchHostFunc", code)
    }

    /// Enqueues a repeatable closure. Outside a capture it runs once; inside one it becomes a
    /// host node that runs at every launch of the graph, which keeps the closure alive for its
    /// whole life and reports its panics on the stream that launched it.
    pub(crate) fn launch_repeat(&self, f: Arc<dyn Fn() + Send + Sync>) -> Result<()> {
        let mut refused = None;
        let result = self.launch_repeat_gated(f, &mut refused);
        drop(refused);
        result
    }

    fn launch_repeat_gated(
        &self,
        f: Arc<dyn Fn() + Send + Sync>,
        refused: &mut Refused,
    ) -> Result<()> {
        let _gate = self.gate();
        let capture = self.capture_now()?;
        self.launch_repeat_held(f, capture, refused)
    }

    /// [`Stream::launch_repeat`] for a caller that holds the stream's gate and asked
    /// `capture_now`, which returned `capture`; what the driver refused goes to `refused`, for
    /// the caller to drop past the gate.
    pub(super) fn launch_repeat_held(
        &self,
        f: Arc<dyn Fn() + Send + Sync>,
        capture: Option<u64>,
        refused: &mut Refused,
    ) -> Result<()> {
        let d = self.bind()?;
        match capture {
            None => {
                let data = Box::into_raw(Box::new(RepeatCall {
                    f,
                    panics: self.panic_log().clone(),
                }));
                // SAFETY: `run_repeat_once` matches CUhostFn and owns `data` when called.
                let code =
                    unsafe { (d.cuLaunchHostFunc)(self.raw(), Some(run_repeat_once), data.cast()) };
                if !code.is_success() {
                    // SAFETY: refused, so never called.
                    *refused = Some(unsafe { Box::from_raw(data) });
                }
                check("cuLaunchHostFunc", code)
            }
            Some(id) => {
                // Its own log: the graph's launches, not this stream, report what it caught.
                let panics = PanicLog::default();
                let call = Arc::new(RepeatCall {
                    f,
                    panics: panics.clone(),
                });
                let data = Arc::as_ptr(&call) as *mut c_void;
                // SAFETY: `run_repeat_captured` only borrows `data`, which the capture keeps
                // alive (registered below, under the gate, so before the capture can end and
                // anything launch its graph).
                let code =
                    unsafe { (d.cuLaunchHostFunc)(self.raw(), Some(run_repeat_captured), data) };
                if !code.is_success() {
                    *refused = Some(Box::new(call));
                    return check("cuLaunchHostFunc", code);
                }
                keep::keep(id, Keep::Object(call));
                keep::keep(id, Keep::Panics(panics));
                Ok(())
            }
        }
    }

    /// Enqueues a legacy stream callback (`cuStreamAddCallback`), which receives the stream's
    /// status. Not capturable.
    pub(crate) fn add_callback(&self, f: Box<dyn FnOnce(Result<()>) + Send>) -> Result<()> {
        let mut refused = None;
        let result = self.add_callback_gated(f, &mut refused);
        drop(refused);
        result
    }

    fn add_callback_gated(
        &self,
        f: Box<dyn FnOnce(Result<()>) + Send>,
        refused: &mut Refused,
    ) -> Result<()> {
        let _gate = self.gate();
        if self.capture_now()?.is_some() {
            return Err(Error::invalid(
                "Stream::add_callback",
                "the stream is capturing, and stream callbacks cannot be captured; use \
                 `launch_host_fn`",
            ));
        }
        let d = self.bind()?;
        let data = Box::into_raw(Box::new(StatusCall {
            f,
            panics: self.panic_log().clone(),
        }));
        // SAFETY: `run_status` matches CUstreamCallback and owns `data` when called; flags 0.
        let code = unsafe { (d.cuStreamAddCallback)(self.raw(), Some(run_status), data.cast(), 0) };
        if !code.is_success() {
            // SAFETY: refused, so never called.
            *refused = Some(unsafe { Box::from_raw(data) });
        }
        check("cuStreamAddCallback", code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_closure_is_caught_by_the_trampoline() {
        let panics = PanicLog::default();
        let data = Box::into_raw(Box::new(OnceCall {
            f: Box::new(|| panic!("boom")),
            panics: panics.clone(),
        }));
        // SAFETY: as the driver would: one call with the leaked box.
        unsafe { run_once(data.cast()) };
        assert_eq!(panics.take().as_deref(), Some("boom"));
    }

    struct PanicsOnDrop;

    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("dropped");
        }
    }

    #[test]
    fn a_closure_whose_captures_panic_when_dropped_is_caught_by_the_trampoline() {
        // The trampoline holds the closure's last handle: dropping it drops `bomb`, which
        // used to unwind out of the `extern "C"` function (a process abort).
        let panics = PanicLog::default();
        let bomb = PanicsOnDrop;
        let data = Box::into_raw(Box::new(RepeatCall {
            f: Arc::new(move || {
                let _ = &bomb;
            }),
            panics: panics.clone(),
        }));
        // SAFETY: as the driver would: one call with the leaked box.
        unsafe { run_repeat_once(data.cast()) };
        assert_eq!(panics.take().as_deref(), Some("dropped"));
    }

    #[test]
    fn host_functions_run_marked_so_driver_calls_are_refused() {
        use crate::cuda::context::in_host_function;
        let panics = PanicLog::default();
        let seen = Arc::new(std::sync::Mutex::new(None));
        let inside = seen.clone();
        let data = Box::into_raw(Box::new(OnceCall {
            f: Box::new(move || *inside.lock().unwrap() = Some(in_host_function())),
            panics: panics.clone(),
        }));
        assert!(!in_host_function());
        // SAFETY: as the driver would: one call with the leaked box.
        unsafe { run_once(data.cast()) };
        assert_eq!(*seen.lock().unwrap(), Some(true));
        assert!(!in_host_function());
        assert_eq!(panics.take(), None);
    }
}

//! The operations generated stages call: copies between any pair of buffer kinds, fills,
//! flag waits and writes, host closures, scratch buffers, and error context.

use std::sync::Arc;

use bytemuck::Pod;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::event::{Event, EventFlags};
use crate::graph::GraphExec;
use crate::memory::{DeviceBuffer, DeviceDest, FlagCell, PinnedBuffer};
use crate::pipeline::{Progress, StageSite};
use crate::stream::{Stream, WaitCondition};

/// A copy from `Self` into `D`, asynchronous on a stream: device→pinned, pinned→device and
/// device→device. Pinned→pinned is plain host memory: copy it on the host instead.
#[diagnostic::on_unimplemented(
    message = "a pipeline cannot `copy` a `{Self}` into a `{D}`",
    note = "copies go device -> pinned, pinned -> device or device -> device, with the same \
            element type on both sides"
)]
pub trait CopyInto<D> {
    /// Enqueues the copy.
    fn copy_into(&self, stream: &Stream, dst: &mut D) -> Result<()>;
}

impl<T: Pod> CopyInto<PinnedBuffer<T>> for DeviceBuffer<T> {
    fn copy_into(&self, stream: &Stream, dst: &mut PinnedBuffer<T>) -> Result<()> {
        stream.copy_dtoh(self, dst)
    }
}

impl<T: Pod> CopyInto<DeviceBuffer<T>> for DeviceBuffer<T> {
    fn copy_into(&self, stream: &Stream, dst: &mut DeviceBuffer<T>) -> Result<()> {
        // Between two devices a peer copy; within one, a device-to-device copy.
        stream.copy_peer(self, dst)
    }
}

impl<T: Pod> CopyInto<DeviceBuffer<T>> for PinnedBuffer<T> {
    fn copy_into(&self, stream: &Stream, dst: &mut DeviceBuffer<T>) -> Result<()> {
        stream.copy_htod(self, dst)
    }
}

/// `copy src -> dst;`.
pub fn copy<S: CopyInto<D> + ?Sized, D>(stream: &Stream, src: &S, dst: &mut D) -> Result<()> {
    src.copy_into(stream, dst)
}

/// The bytes of `value` when they are all equal, so a byte memset writes it.
fn repeated_byte<T: Pod>(value: &T) -> Option<u8> {
    let bytes = bytemuck::bytes_of(value);
    let first = *bytes.first()?;
    bytes.iter().all(|&b| b == first).then_some(first)
}

/// `fill dst = value;`: every element set to `value`, with a 1- or 4-byte memset. An element
/// of another size works when all the bytes of `value` are equal (zero, or `-1` as bits);
/// anything else is an error that says so.
pub fn fill<T: Pod>(stream: &Stream, dst: &mut DeviceBuffer<T>, value: T) -> Result<()> {
    fill_dest(stream, dst, value)
}

/// [`fill`] on any device destination (a buffer or a view of one).
pub(crate) fn fill_dest<T: Pod, D: DeviceDest<T>>(
    stream: &Stream,
    dst: &mut D,
    value: T,
) -> Result<()> {
    match std::mem::size_of::<T>() {
        4 => stream.memset_u32(
            dst,
            bytemuck::cast_slice::<T, u32>(std::slice::from_ref(&value))[0],
        ),
        _ => match repeated_byte(&value) {
            Some(byte) => stream.memset_u8(dst, byte),
            None => Err(Error::invalid(
                "fill",
                format!(
                    "a {}-byte element whose bytes differ cannot be set with a memset; fill with \
                     a value whose bytes are all equal (such as zero), or launch a kernel",
                    std::mem::size_of::<T>()
                ),
            )),
        },
    }
}

/// The flag words a pipeline can wait on and write.
pub trait PipelineFlagWord: crate::memory::FlagWord {
    /// `wait flag <cond> value;`.
    fn wait(
        stream: &Stream,
        flag: &FlagCell<Self>,
        condition: WaitCondition,
        value: Self,
    ) -> Result<()>;
    /// `write flag = value;`.
    fn write(stream: &Stream, flag: &FlagCell<Self>, value: Self) -> Result<()>;
}

impl PipelineFlagWord for u32 {
    fn wait(
        stream: &Stream,
        flag: &FlagCell<u32>,
        condition: WaitCondition,
        value: u32,
    ) -> Result<()> {
        stream.wait_value_32(flag, condition, value)
    }
    fn write(stream: &Stream, flag: &FlagCell<u32>, value: u32) -> Result<()> {
        stream.write_value_32(flag, value)
    }
}

impl PipelineFlagWord for u64 {
    fn wait(
        stream: &Stream,
        flag: &FlagCell<u64>,
        condition: WaitCondition,
        value: u64,
    ) -> Result<()> {
        stream.wait_value_64(flag, condition, value)
    }
    fn write(stream: &Stream, flag: &FlagCell<u64>, value: u64) -> Result<()> {
        stream.write_value_64(flag, value)
    }
}

/// `wait flag <cond> value;`.
pub fn wait_flag<W: PipelineFlagWord>(
    stream: &Stream,
    flag: &FlagCell<W>,
    condition: WaitCondition,
    value: W,
) -> Result<()> {
    W::wait(stream, flag, condition, value)
}

/// `write flag = value;`.
pub fn write_flag<W: PipelineFlagWord>(
    stream: &Stream,
    flag: &FlagCell<W>,
    value: W,
) -> Result<()> {
    W::write(stream, flag, value)
}

/// `host closure;`: runs in stream order at every eager step and every graph launch.
pub fn host_closure<F: Fn() + Send + Sync + 'static>(stream: &Stream, f: F) -> Result<()> {
    stream.launch_host_fn(Arc::new(f))
}

/// A pipeline-owned buffer, allocated before the first step and again when its size changes.
pub trait ScratchBuffer: Sized {
    /// Its length in elements.
    fn scratch_len(&self) -> usize;
    /// A new one of `len` elements (contents unspecified).
    fn scratch_alloc(ctx: &Context, len: usize) -> Result<Self>;
}

impl<T: Pod> ScratchBuffer for DeviceBuffer<T> {
    fn scratch_len(&self) -> usize {
        self.len()
    }
    fn scratch_alloc(ctx: &Context, len: usize) -> Result<Self> {
        DeviceBuffer::alloc(ctx, len)
    }
}

impl<T: Pod> ScratchBuffer for PinnedBuffer<T> {
    fn scratch_len(&self) -> usize {
        self.len()
    }
    fn scratch_alloc(ctx: &Context, len: usize) -> Result<Self> {
        PinnedBuffer::zeros(ctx, len)
    }
}

/// Makes `slot` hold a buffer of `len` elements.
pub fn ensure_scratch<B: ScratchBuffer>(
    slot: &mut Option<B>,
    ctx: &Context,
    len: usize,
    epoch: &mut u64,
) -> Result<()> {
    if slot.as_ref().map(ScratchBuffer::scratch_len) == Some(len) {
        return Ok(());
    }
    // Counted before the old buffer goes, so that an instantiation built with it is never
    // taken for one built with what follows (the allocation may fail, or unwind).
    *epoch = epoch.wrapping_add(1);
    // The old buffer (if any) is dropped first, which waits for work that uses it.
    *slot = None;
    *slot = Some(B::scratch_alloc(ctx, len)?);
    Ok(())
}

/// The scratch buffer `name`, allocated by `ensure_scratch` before the step.
pub fn scratch<'a, B>(slot: Option<&'a mut B>, name: &'static str) -> Result<&'a mut B> {
    slot.ok_or_else(|| {
        Error::invalid(
            "pipeline step",
            format!("scratch buffer `{name}` is not allocated"),
        )
    })
}

/// `N` ordering events (no timing).
pub fn events<const N: usize>(ctx: &Context) -> Result<[Event; N]> {
    let events = (0..N)
        .map(|_| Event::with_flags(ctx, EventFlags::ORDERING))
        .collect::<Result<Vec<_>>>()?;
    events
        .try_into()
        .map_err(|_| Error::invalid("pipeline", "event count mismatch"))
}

/// `N` ordering events, event `i` on device `devices[i]` (the device of the stream that
/// records it).
pub fn events_on<const N: usize>(devices: [&Context; N]) -> Result<[Event; N]> {
    let events = devices
        .iter()
        .map(|ctx| Event::with_flags(ctx, EventFlags::ORDERING))
        .collect::<Result<Vec<_>>>()?;
    events
        .try_into()
        .map_err(|_| Error::invalid("pipeline", "event count mismatch"))
}

/// The devices of a multi-device pipeline, checked: one backend (CPU-backend devices made
/// together by `Context::cpu_devices`).
pub fn check_devices(devices: &[&Context]) -> Result<()> {
    match devices.split_first() {
        Some((first, rest)) if !rest.iter().all(|d| first.same_machine(d)) => Err(Error::invalid(
            "pipeline devices",
            "the devices are of different backends (or CPU-backend devices not made together \
             by `Context::cpu_devices`)",
        )),
        _ => Ok(()),
    }
}

/// Enables peer access both ways between two devices a pipeline copies between, where the
/// topology allows it (elsewhere the driver stages the copies through host memory).
pub fn enable_peer_access(a: &Context, b: &Context) -> Result<()> {
    a.enable_peer_access(b)?;
    b.enable_peer_access(a)?;
    Ok(())
}

/// Enables peer access both ways between every two of a pipeline's devices where the
/// topology allows it (a pipeline whose kernels touch a peer's memory; the pairs a step
/// needs are checked where they are known, [`require_peer_access`] and
/// [`check_launch_devices`]).
pub fn enable_all_peer_access(devices: &[&Context]) -> Result<()> {
    for (i, a) in devices.iter().enumerate() {
        for b in &devices[i + 1..] {
            enable_peer_access(a, b)?;
        }
    }
    Ok(())
}

/// Enables the peer access a launch declared `peer(..)` needs, from the device `from` (named
/// `from_name` in the pipeline) to `to`'s memory; refused, naming both devices, where the
/// topology has no direct path between them.
pub fn require_peer_access(
    pipeline: &'static str,
    from: &Context,
    from_name: &str,
    to: &Context,
    to_name: &str,
) -> Result<()> {
    if from.enable_peer_access(to)? {
        return Ok(());
    }
    Err(Error::mismatch(
        "pipeline peer access",
        format!(
            "pipeline `{pipeline}`: a kernel on device `{from_name}` (device {}) touches memory of \
             device `{to_name}` (device {}), but the topology has no peer access between them \
             (no NVLink or PCIe peer path); copy the data with `copy` instead, which the driver \
             stages through host memory",
            from.device_index(),
            to.device_index()
        ),
    ))
}

/// Checks, before a launch of a pipeline over several devices, that every buffer argument
/// lives on the stream's device, or, for an argument the launch declares `peer(..)`
/// (`peers[i]` for argument `i`), on a device whose memory the stream's device has peer
/// access to. `names[i]` names argument `i` in the message.
pub fn check_launch_devices<A: crate::launch::KernelArgs>(
    stream: &Stream,
    args: &A,
    peers: &[bool],
    names: &[&'static str],
) -> Result<()> {
    const CALL: &str = "pipeline launch";
    let ctx = stream.context();
    let mut error = None;
    args.visit(&mut |index, arg| {
        let crate::launch::ArgRef::Buffer { region, .. } = arg else {
            return;
        };
        let owner = &region.alloc.ctx;
        if error.is_some() || owner.shares_memory_with(ctx) {
            return;
        }
        let name = names.get(index).copied().unwrap_or("?");
        let (here, there) = (ctx.device_index(), owner.device_index());
        if !peers.get(index).copied().unwrap_or(false) {
            error = Some(Error::mismatch(
                CALL,
                format!(
                    "`{name}` lives on device {there}, but the kernel runs on device {here}: a \
                     kernel reaches another device's memory only where its launch declares \
                     `peer({name})`"
                ),
            ));
        } else if !ctx.peer_access_enabled(owner) {
            error = Some(Error::mismatch(
                CALL,
                format!(
                    "`{name}` lives on device {there} and the kernel on device {here} declares \
                     `peer({name})`, but device {here} has no peer access to device {there} \
                     (the topology has no direct path between them); copy it with `copy` \
                     instead"
                ),
            ));
        }
    });
    error.map_or(Ok(()), Err)
}

/// Gives an enqueue error its stage.
pub fn stage_error(pipeline: &'static str, stage: &'static str, error: Error) -> Error {
    Error::Stage {
        pipeline,
        stage,
        source: Box::new(error),
    }
}

/// Gives a failure at a wait (an asynchronous fault) its pipeline.
pub fn step_error(pipeline: &'static str, error: Error) -> Error {
    match error {
        already @ (Error::Step { .. } | Error::Stage { .. }) => already,
        error => Error::Step {
            pipeline,
            stage: None,
            source: Box::new(error),
        },
    }
}

/// After a captured step's launches completed: the first device loop of `execs` (its
/// instantiations) that stopped at its maximum since the last check, an
/// [`Error::IterationLimit`] in an [`Error::Step`] that names the loop's stage. Every loop's
/// mark is cleared, so a later check does not report one again.
pub fn check_graph_loops<'e>(
    pipeline: &'static str,
    execs: impl IntoIterator<Item = &'e GraphExec>,
) -> Result<()> {
    let mut first = None;
    for state in execs.into_iter().flat_map(GraphExec::loops) {
        if let Err(e) = state.check() {
            first.get_or_insert((state.stage(), e));
        }
    }
    match first {
        None => Ok(()),
        Some((stage, e)) => Err(Error::Step {
            pipeline,
            stage,
            source: Box::new(e),
        }),
    }
}

/// Gives a failure to replay a captured step its pipeline: a refusal (the launch was not
/// made: a host slice of its memory alive, a stream of another context) says so, and keeps
/// its own kind; anything else (a fault of earlier work the launch surfaced) is a step error.
pub fn replay_error(pipeline: &'static str, error: Error) -> Error {
    match error {
        Error::InvalidArgument { call, message } => Error::InvalidArgument {
            call,
            message: format!("pipeline `{pipeline}` did not replay its step: {message}"),
        },
        refused @ (Error::ContextMismatch { .. } | Error::BackendMismatch { .. }) => refused,
        error => step_error(pipeline, error),
    }
}

/// Gives a failure at a wait its pipeline and the first stage that did not complete.
pub fn step_error_at(
    pipeline: &'static str,
    progress: &Progress,
    stages: &[StageSite],
    error: Error,
) -> Error {
    match error {
        already @ (Error::Step { .. } | Error::Stage { .. }) => already,
        error => Error::Step {
            pipeline,
            // On the CPU backend the failed operation names its stage itself.
            stage: progress.first_incomplete(stages).or_else(|| match &error {
                Error::Cpu(fault) => fault.stage(),
                Error::HostPanic { stage, .. } => *stage,
                _ => None,
            }),
            source: Box::new(error),
        },
    }
}

/// Logs an error a `Drop` could not return.
pub fn log_unobserved_error(pipeline: &'static str, error: &Error) {
    tracing::error!(pipeline, error = %error.report(), "a pipeline step failed and nobody waited on it");
}

/// A wait that must finish before the params' borrows end (a graph's or a step guard's drop, a
/// failed step's settling) failed with `error`. Where the wait was refused before it waited
/// ([`Error::refused_to_wait`]: a capture open, a host function), the step's work may still
/// use the borrowed buffers and nothing can wait for it here, so the process aborts rather
/// than let safe code touch them; any other failure came once the work stopped, and is logged.
pub fn settle_failed_wait(pipeline: &'static str, error: &Error) {
    if error.refused_to_wait() {
        eprintln!(
            "gpu-pipeline: pipeline `{pipeline}` could not wait for its work before releasing \
             its buffers ({}); aborting, since its device work may still be using them. \
             Wait for that work first (the graph's `synchronize`, the stream its instantiation \
             was launched on, the step's `wait`), then begin the capture or drop it, and never \
             drop it inside a host function.",
            error.report()
        );
        std::process::abort();
    }
    log_unobserved_error(pipeline, error);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_patterns_that_a_memset_can_write() {
        assert_eq!(repeated_byte(&0_u64), Some(0));
        assert_eq!(repeated_byte(&-1_i16), Some(0xff));
        assert_eq!(repeated_byte(&1.0_f64), None);
        assert_eq!(repeated_byte(&0x0101_u16), Some(1));
    }

    #[test]
    fn a_refused_replay_is_not_a_failed_step() {
        let refused = replay_error("P", Error::invalid("GraphExec::launch", "a slice is alive"));
        assert!(
            matches!(
                &refused,
                Error::InvalidArgument {
                    call: "GraphExec::launch",
                    ..
                }
            ),
            "{refused:?}"
        );
        assert_eq!(
            refused.to_string(),
            "GraphExec::launch: pipeline `P` did not replay its step: a slice is alive"
        );
        let fault = replay_error(
            "P",
            Error::IterationLimit {
                label: "r > tol".to_owned(),
                max_iterations: 3,
            },
        );
        assert!(
            matches!(fault, Error::Step { pipeline: "P", .. }),
            "{fault:?}"
        );
    }

    #[test]
    fn a_step_error_over_a_stages_communication_failure_names_no_other_stage() {
        let failure = crate::collective::CommFailure {
            rank: 1,
            pipeline: Some("P"),
            stage: Some("exchange"),
            operation: "recv u[0..1] from rank 0".into(),
            peer: Some(0),
            deadline: std::time::Duration::from_secs(3),
            cause: crate::collective::CommCause::PeerGone { peer: 0 },
        };
        let err = step_error("P", Error::Communication(Box::new(failure)));
        assert!(
            err.to_string().starts_with(
                "rank 1, pipeline `P`, stage `exchange`: recv u[0..1] from rank 0 failed: rank \
                 0 left (its communicator was dropped or aborted); the communicator is aborted"
            ),
            "{err}"
        );
    }

    #[test]
    fn step_errors_wrap_once() {
        let inner = Error::invalid("x", "y");
        let once = step_error("P", inner);
        let twice = step_error("P", once);
        assert!(
            matches!(&twice, Error::Step { source, .. } if matches!(**source, Error::InvalidArgument { .. }))
        );
        assert_eq!(
            twice.to_string(),
            "pipeline `P`: a step failed (no stage named: fault tracking is off, or every stage \
             had completed): x: y"
        );
        assert_eq!(
            twice.report().to_string(),
            "pipeline `P`: a step failed (no stage named: fault tracking is off, or every stage \
             had completed): x: y"
        );
    }
}

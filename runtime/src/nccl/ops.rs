//! The safe level: NCCL operations on the crate's [`Stream`]s and device buffers or views.
//!
//! What each method checks before anything is enqueued: the stream is a CUDA stream of the
//! communicator's context; every buffer is CUDA memory of that context; lengths agree with
//! the operation (`all_gather`'s output is `size` times its input, ...); peers and roots are
//! ranks; `avg` reduces floats.
//!
//! What keeps the memory valid for as long as NCCL may use it:
//! - sources are borrowed `&` and destinations `&mut` for the enqueue call (for a
//!   [`Group`], until the group ends, since NCCL enqueues a group's operations only then), so
//!   a destination cannot alias any other buffer of the operation;
//! - afterwards the allocation's own rule applies: device memory is freed only after a
//!   context synchronize, or in stream order on a stream every recorded use precedes (each
//!   operation records its use on the stream, like a copy does);
//! - in a capture, the graph keeps every buffer and the communicator alive (`adapt` hands
//!   them to the runtime's capture keep-alive). As for every other stream operation, the
//!   stream's gate is held from the capture check to the NCCL call that enqueues (for a
//!   [`Group`], the gates of all its streams around `ncclGroupEnd`), so a capture another
//!   thread begins or ends on the stream cannot fall between them.
//!
//! What the types cannot check: the *other ranks*. NCCL requires every rank to issue the
//! same collectives in the same order, and each send to meet a recv of the same count and
//! type; a mismatch can hang, or leave wrong data in the destination. (The buffers are still
//! only written within their bounds on this rank: every count passed is this rank's own.)
//! `gpu_pipeline!` is to guarantee the match by construction; code calling these methods
//! by hand must keep it.
//!
//! NCCL groups are per thread and hold their operations until the group ends, so while a
//! [`Communicator::group`] closure runs, the ungrouped methods and a nested `group` refuse
//! (a buffer they borrowed would be released before NCCL used it).

use std::marker::PhantomData;
use std::sync::Arc;

use super::adapt::{self, Span};
use super::comm::{Communicator, refuse_in_group, set_in_group};
use super::sys;
use super::watchdog::{self, Captured, What};
use crate::collective::op::{self, Op};
use crate::collective::{Element, ElementKind, Names, ReduceOp};
use crate::error::{Error, Result};
use crate::memory::{DeviceDest, DeviceSource};
use crate::stream::Stream;

/// One checked operation, ready for its raw call.
struct Prepared {
    op: Op<Span>,
    kind: ElementKind,
    stream: sys::cudaStream_t,
}

impl Prepared {
    /// The operation in words, for a failure's report.
    fn describe(&self) -> String {
        self.op.describe(self.kind, |span| span.len)
    }
}

/// A group's operations in words, and their one peer if they have one, for the watchdog.
fn group_what(pending: &[Pending<'_>]) -> What {
    let operation: Vec<&str> = pending.iter().map(|p| p.what.as_str()).collect();
    let mut peers = pending.iter().filter_map(|p| p.peer);
    let first = peers.next();
    What {
        names: Names::default(),
        operation: format!("group: {}", operation.join("; ")),
        peer: first.filter(|&p| peers.all(|q| q == p)),
    }
}

impl Communicator {
    /// Watches one ungrouped operation against the communicator's deadline, as a stage's
    /// group is (`watchdog.rs`): captured, from each launch of the graph; eagerly, from now.
    fn watch_one(
        &self,
        gate: adapt::Enqueue<'_>,
        stream: &Stream,
        p: &Prepared,
        issued: Result<()>,
    ) -> Result<()> {
        let what = What {
            names: Names::default(),
            operation: p.describe(),
            peer: p.op.peer(),
        };
        let capturing = gate.is_capturing();
        if capturing && issued.is_ok() {
            gate.keep(Arc::new(Captured {
                handle: self.shared(),
                what: what.clone(),
            }));
        }
        // The event that marks the operation's end is recorded past the gate.
        drop(gate);
        issued?;
        if !capturing {
            watchdog::watch(&self.shared(), stream, what)?;
        }
        Ok(())
    }

    /// Checks `op` by the rules both backends share (`collective/op.rs`: peers and roots are
    /// ranks, lengths agree with the operation, `avg` reduces floats) and the stream against
    /// the communicator's context.
    fn prepare(
        &self,
        call: &'static str,
        stream: &Stream,
        kind: ElementKind,
        op: Op<Span>,
    ) -> Result<Prepared> {
        op.check(kind, self.size(), Some(self.rank()), op::BUFFERS, |span| {
            span.len
        })
        .map_err(|m| Error::invalid(call, m))?;
        Ok(Prepared {
            stream: adapt::raw_stream(call, stream, self.context())?,
            op,
            kind,
        })
    }

    /// Enters `stream`'s gate for one enqueue: notes the uses of `memory`, keeps it and the
    /// communicator alive in the graph being captured, if any. Hold the result across the
    /// NCCL call.
    fn enter<'s>(
        &self,
        call: &'static str,
        stream: &'s Stream,
        note: impl FnOnce(&adapt::Enqueue<'s>),
    ) -> Result<adapt::Enqueue<'s>> {
        let enqueue = adapt::Enqueue::begin(call, stream)?;
        note(&enqueue);
        enqueue.keep(self.shared());
        Ok(enqueue)
    }

    /// Makes the raw call of a prepared operation.
    ///
    /// # Safety
    /// The spans' memory and the stream must satisfy the raw level's contract (see
    /// `raw.rs`) from now until the work completes: the callers below hold the borrows for
    /// the enqueue (or the group) and record the uses under the stream's gate
    /// (`adapt::Enqueue`), held across the call.
    unsafe fn issue(&self, call: &'static str, p: &Prepared) -> Result<()> {
        // SAFETY: the caller's contract, passed on; the spans and counts were checked
        // against each other and the communicator's size in `prepare`.
        unsafe { self.raw_enqueue(call, &p.op, p.kind, p.stream) }
    }

    /// One ungrouped operation: refused while a group is open, its spans built by `build`,
    /// checked, enqueued under the stream's gate with its uses noted by `note`, and watched.
    ///
    /// # Safety
    /// The spans `build` returns are of buffers the caller holds borrowed for this call
    /// (`&` those read, `&mut` those written, so a written one aliases nothing else of the
    /// operation), and `note` notes every one of them.
    unsafe fn one<'s>(
        &self,
        call: &'static str,
        stream: &'s Stream,
        kind: ElementKind,
        build: impl FnOnce() -> Result<Op<Span>>,
        note: impl FnOnce(&adapt::Enqueue<'s>),
    ) -> Result<()> {
        refuse_in_group(call)?;
        let p = self.prepare(call, stream, kind, build()?)?;
        let gate = self.enter(call, stream, note)?;
        // SAFETY: the buffers are borrowed for this call and checked to be CUDA memory of
        // the stream's context; their uses are recorded (and kept by a capture) under the
        // gate held across this call, so the allocations outlive the work (see the module
        // docs); no group is open, so NCCL enqueues it now.
        let issued = unsafe { self.issue(call, &p) };
        self.watch_one(gate, stream, &p, issued)
    }

    // ---- ungrouped operations --------------------------------------------------------------

    /// Sends `data` to `peer` (`ncclSend`), in `stream`'s order. The peer must post the
    /// matching [`recv`](Self::recv) with the same length and type. Blocking for the GPU
    /// until then: two ranks sending to each other at once need a [`group`](Self::group).
    pub fn send<T: Element, S: DeviceSource<T> + ?Sized>(
        &self,
        stream: &Stream,
        data: &S,
        peer: usize,
    ) -> Result<()> {
        const CALL: &str = "Communicator::send";
        let build = || {
            let data = adapt::span(CALL, "send", data, stream)?;
            Ok(Op::Send { data, peer })
        };
        // SAFETY: `data` is borrowed for this call and noted.
        unsafe { self.one(CALL, stream, T::KIND, build, |e| e.note(data)) }
    }

    /// Receives from `peer` into `data` (`ncclRecv`), in `stream`'s order.
    pub fn recv<T: Element, D: DeviceDest<T> + ?Sized>(
        &self,
        stream: &Stream,
        data: &mut D,
        peer: usize,
    ) -> Result<()> {
        const CALL: &str = "Communicator::recv";
        let data = &*data;
        let build = || {
            let data = adapt::span(CALL, "receive", data, stream)?;
            Ok(Op::Recv { data, peer })
        };
        // SAFETY: `data` is borrowed `&mut` for this call and noted.
        unsafe { self.one(CALL, stream, T::KIND, build, |e| e.note(data)) }
    }

    /// Reduces `send` over all ranks with `op` into every rank's `recv` (`ncclAllReduce`).
    pub fn all_reduce<T: Element, S: DeviceSource<T> + ?Sized, D: DeviceDest<T> + ?Sized>(
        &self,
        stream: &Stream,
        send: &S,
        recv: &mut D,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "Communicator::all_reduce";
        let recv = &*recv;
        let build = || {
            let recv = adapt::span(CALL, "receive", recv, stream)?;
            let send = Some(adapt::span(CALL, "send", send, stream)?);
            Ok(Op::AllReduce { send, recv, op })
        };
        let note = |e: &adapt::Enqueue<'_>| {
            e.note(send);
            e.note(recv);
        };
        // SAFETY: `send` and `recv` are borrowed for this call (they cannot alias: `&` and
        // `&mut`) and noted.
        unsafe { self.one(CALL, stream, T::KIND, build, note) }
    }

    /// [`all_reduce`](Self::all_reduce) with `data` as input and output.
    pub fn all_reduce_in_place<T: Element, D: DeviceDest<T> + ?Sized>(
        &self,
        stream: &Stream,
        data: &mut D,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "Communicator::all_reduce_in_place";
        let data = &*data;
        let build = || {
            let recv = adapt::span(CALL, "receive", data, stream)?;
            Ok(Op::AllReduce {
                send: None,
                recv,
                op,
            })
        };
        // SAFETY: as in `recv` (NCCL reads and writes the one buffer, in place).
        unsafe { self.one(CALL, stream, T::KIND, build, |e| e.note(data)) }
    }

    /// Copies `root`'s `data` into every other rank's `data` (`ncclBroadcast` in place).
    pub fn broadcast<T: Element, D: DeviceDest<T> + ?Sized>(
        &self,
        stream: &Stream,
        data: &mut D,
        root: usize,
    ) -> Result<()> {
        const CALL: &str = "Communicator::broadcast";
        let data = &*data;
        let build = || {
            let recv = adapt::span(CALL, "receive", data, stream)?;
            Ok(Op::Broadcast {
                send: None,
                recv,
                root,
            })
        };
        // SAFETY: as in `recv`.
        unsafe { self.one(CALL, stream, T::KIND, build, |e| e.note(data)) }
    }

    /// Copies `root`'s `send` into every rank's `recv` (`ncclBroadcast`; `send` is read on
    /// the root only, but checked everywhere).
    pub fn broadcast_from<T: Element, S: DeviceSource<T> + ?Sized, D: DeviceDest<T> + ?Sized>(
        &self,
        stream: &Stream,
        send: &S,
        recv: &mut D,
        root: usize,
    ) -> Result<()> {
        const CALL: &str = "Communicator::broadcast_from";
        let recv = &*recv;
        let build = || {
            let recv = adapt::span(CALL, "receive", recv, stream)?;
            let send = Some(adapt::span(CALL, "send", send, stream)?);
            Ok(Op::Broadcast { send, recv, root })
        };
        let note = |e: &adapt::Enqueue<'_>| {
            e.note(send);
            e.note(recv);
        };
        // SAFETY: as in `all_reduce`.
        unsafe { self.one(CALL, stream, T::KIND, build, note) }
    }

    /// Gathers every rank's `send` into every rank's `recv` in rank order
    /// (`ncclAllGather`): `recv.len() == send.len() * size`.
    pub fn all_gather<T: Element, S: DeviceSource<T> + ?Sized, D: DeviceDest<T> + ?Sized>(
        &self,
        stream: &Stream,
        send: &S,
        recv: &mut D,
    ) -> Result<()> {
        const CALL: &str = "Communicator::all_gather";
        let recv = &*recv;
        let build = || {
            let recv = adapt::span(CALL, "receive", recv, stream)?;
            let send = adapt::span(CALL, "send", send, stream)?;
            Ok(Op::AllGather { send, recv })
        };
        let note = |e: &adapt::Enqueue<'_>| {
            e.note(send);
            e.note(recv);
        };
        // SAFETY: as in `all_reduce`; `recv` holds `size` times `send`'s elements (checked).
        unsafe { self.one(CALL, stream, T::KIND, build, note) }
    }

    /// Reduces `send` over all ranks with `op`, leaving rank `r`'s block of `recv.len()`
    /// elements in rank `r`'s `recv` (`ncclReduceScatter`): `send.len() == recv.len() * size`.
    pub fn reduce_scatter<T: Element, S: DeviceSource<T> + ?Sized, D: DeviceDest<T> + ?Sized>(
        &self,
        stream: &Stream,
        send: &S,
        recv: &mut D,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "Communicator::reduce_scatter";
        let recv = &*recv;
        let build = || {
            let recv = adapt::span(CALL, "receive", recv, stream)?;
            let send = adapt::span(CALL, "send", send, stream)?;
            Ok(Op::ReduceScatter { send, recv, op })
        };
        let note = |e: &adapt::Enqueue<'_>| {
            e.note(send);
            e.note(recv);
        };
        // SAFETY: as in `all_reduce`; `send` holds `size` times `recv`'s elements (checked).
        unsafe { self.one(CALL, stream, T::KIND, build, note) }
    }

    // ---- groups ------------------------------------------------------------------------------

    /// Runs the operations `f` records on the [`Group`] as one NCCL group
    /// (`ncclGroupStart` ... `ncclGroupEnd`): they progress together, so a halo exchange's
    /// sends and recvs can come in any order. The buffers and streams given to the group are
    /// borrowed until it ends, when NCCL enqueues everything. The operations `f` recorded are
    /// enqueued even when it returns an error or panics (NCCL cannot drop a group's
    /// operations); `f`'s error is returned after.
    ///
    /// ```no_run
    /// # use gpu_pipeline::{nccl::Communicator, DeviceBuffer, Stream};
    /// # fn halo(comm: &Communicator, stream: &Stream, field: &mut DeviceBuffer<f32>, nx: usize) -> gpu_pipeline::Result<()> {
    /// let (rank, size) = (comm.rank(), comm.size());
    /// let (up, down) = ((rank + size - 1) % size, (rank + 1) % size);
    /// let rows = field.len() / nx;
    /// // Rows 0 and rows-1 are halos; 1 and rows-2 the first and last interior rows.
    /// let (mut top_halo, rest) = field.split_at_mut(nx)?;
    /// let (interior, mut bottom_halo) = rest.split_at_mut((rows - 2) * nx)?;
    /// let first = interior.slice(..nx)?;
    /// let last = interior.slice((rows - 3) * nx..)?;
    /// comm.group(|g| {
    ///     g.recv(stream, &mut top_halo, up)?;
    ///     g.send(stream, &last, down)?;
    ///     g.recv(stream, &mut bottom_halo, down)?;
    ///     g.send(stream, &first, up)
    /// })
    /// # }
    /// ```
    pub fn group<'a, R>(&'a self, f: impl FnOnce(&mut Group<'a>) -> Result<R>) -> Result<R> {
        refuse_in_group("Communicator::group")?;
        self.raw_group_start()?;
        set_in_group(true);
        let mut group = Group {
            comm: self,
            pending: Vec::new(),
            open: true,
            _not_send: PhantomData,
        };
        // On a panic in `f`, `group`'s drop ends the group while the borrowed buffers (owned
        // by our callers' frames) are still alive.
        let value = f(&mut group);
        let ended = group.end();
        let value = value?;
        ended.map(|()| value)
    }
}

/// The operations of one [`Communicator::group`]: the communicator's methods, with the
/// buffers and streams borrowed until the group ends (NCCL enqueues them only then).
///
/// A buffer that would be gone by then is refused at compile time:
///
/// ```compile_fail
/// # use gpu_pipeline::{nccl::Communicator, DeviceBuffer, Stream};
/// # fn f(comm: &Communicator, stream: &Stream) -> gpu_pipeline::Result<()> {
/// comm.group(|g| {
///     let local = DeviceBuffer::<f32>::alloc(stream.context(), 4)?;
///     g.send(stream, &local, 1) // error: `local` does not live long enough
/// })
/// # }
/// ```
///
/// and so is sharing one communicator between threads:
///
/// ```compile_fail
/// fn shared<T: Sync>() {}
/// shared::<gpu_pipeline::nccl::Communicator>();
/// ```
pub struct Group<'a> {
    comm: &'a Communicator,
    /// Records the uses of the group's buffers right before NCCL enqueues them, under the
    /// gate of the stream each was given (so a capture begun after an operation was
    /// recorded still keeps its buffers alive).
    pending: Vec<Pending<'a>>,
    open: bool,
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for Group<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("rank", &self.comm.rank())
            .field("operations", &self.pending.len())
            .finish()
    }
}

impl Drop for Group<'_> {
    fn drop(&mut self) {
        if self.open
            && let Err(e) = self.end()
        {
            tracing::warn!(error = %e, "ending an NCCL group on unwind failed");
        }
    }
}

/// The bookkeeping of one operation of a group, run at the group's end under the gate of
/// its stream.
struct Pending<'a> {
    stream: &'a Stream,
    /// The operation in words, and its peer, for the watchdog.
    what: String,
    peer: Option<usize>,
    track: Box<dyn FnOnce(&adapt::Enqueue<'_>) + 'a>,
}

impl<'a> Group<'a> {
    /// Records the uses of an operation NCCL accepted into the group.
    fn record(
        &mut self,
        stream: &'a Stream,
        p: &Prepared,
        track: impl FnOnce(&adapt::Enqueue<'_>) + 'a,
    ) {
        self.pending.push(Pending {
            stream,
            what: p.describe(),
            peer: p.op.peer(),
            track: Box::new(track),
        });
    }

    /// Adds one operation to the group: checked, handed to NCCL (which holds it until the
    /// group ends), its uses recorded by `track` at the end.
    ///
    /// # Safety
    /// The spans of `op` are of buffers borrowed for `'a` (`&` those read, `&mut` those
    /// written), and `track` notes every one of them.
    unsafe fn add(
        &mut self,
        call: &'static str,
        stream: &'a Stream,
        kind: ElementKind,
        op: Op<Span>,
        track: impl FnOnce(&adapt::Enqueue<'_>) + 'a,
    ) -> Result<()> {
        let p = self.comm.prepare(call, stream, kind, op)?;
        // SAFETY: NCCL holds the operation until the group ends; see `end`.
        unsafe { self.comm.issue(call, &p)? };
        self.record(stream, &p, track);
        Ok(())
    }

    /// Enqueues everything recorded (`ncclGroupEnd`), holding the gate of every stream of
    /// the group (each handle once, in one order) from the capture checks to the end.
    fn end(&mut self) -> Result<()> {
        self.open = false;
        set_in_group(false);
        let pending: Vec<Pending<'a>> = self.pending.drain(..).collect();
        let what = group_what(&pending);
        let mut streams: Vec<(&'a Stream, (usize, usize))> = pending
            .iter()
            .filter_map(|p| Some((p.stream, adapt::Enqueue::key(p.stream)?)))
            .collect();
        streams.sort_by_key(|&(_, key)| key);
        streams.dedup_by_key(|&mut (_, key)| key);
        let mut gates = Vec::with_capacity(streams.len());
        let mut entered = Ok(());
        for &(stream, key) in &streams {
            match adapt::Enqueue::begin("Group::end", stream) {
                Ok(gate) => gates.push((key, gate)),
                Err(e) => {
                    entered = Err(e);
                    break;
                }
            }
        }
        for p in pending {
            let key = adapt::Enqueue::key(p.stream);
            if let Some((_, gate)) = gates.iter().find(|(k, _)| Some(*k) == key) {
                (p.track)(gate);
                gate.keep(self.comm.shared());
            }
        }
        // NCCL cannot drop a group's operations: it is ended even when a gate could not be
        // entered (a foreign capture), and that error reported after.
        // SAFETY: every buffer and stream of the group's operations is borrowed for `'a`,
        // which outlives the group, and was checked when recorded; their uses are recorded
        // (and kept by a capture) under the gates held across this call; from here on the
        // allocation rules keep them valid (module docs).
        let ended = unsafe { self.comm.raw_group_end() };
        // Watched like a stage's group on each of its streams: captured, from each launch of
        // the graph; eagerly, from now.
        let mut eager = Vec::new();
        for (stream, _) in &streams {
            let key = adapt::Enqueue::key(stream);
            match gates.iter().find(|(k, _)| Some(*k) == key) {
                Some((_, gate)) if gate.is_capturing() => gate.keep(Arc::new(Captured {
                    handle: self.comm.shared(),
                    what: what.clone(),
                })),
                _ => eager.push(*stream),
            }
        }
        drop(gates);
        entered.and(ended)?;
        for stream in eager {
            watchdog::watch(&self.comm.shared(), stream, what.clone())?;
        }
        Ok(())
    }

    /// [`Communicator::send`] in the group.
    pub fn send<T: Element, S: DeviceSource<T> + ?Sized>(
        &mut self,
        stream: &'a Stream,
        data: &'a S,
        peer: usize,
    ) -> Result<()> {
        const CALL: &str = "Group::send";
        let op = Op::Send {
            data: adapt::span(CALL, "send", data, stream)?,
            peer,
        };
        // SAFETY: `data` is borrowed for the group and noted.
        unsafe { self.add(CALL, stream, T::KIND, op, move |e| e.note(data)) }
    }

    /// [`Communicator::recv`] in the group.
    pub fn recv<T: Element, D: DeviceDest<T> + ?Sized>(
        &mut self,
        stream: &'a Stream,
        data: &'a mut D,
        peer: usize,
    ) -> Result<()> {
        const CALL: &str = "Group::recv";
        let op = Op::Recv {
            data: adapt::span(CALL, "receive", &*data, stream)?,
            peer,
        };
        // SAFETY: `data` is borrowed `&mut` for the group and noted.
        unsafe { self.add(CALL, stream, T::KIND, op, move |e| e.note(data)) }
    }

    /// [`Communicator::all_reduce`] in the group.
    pub fn all_reduce<T: Element, S: DeviceSource<T> + ?Sized, D: DeviceDest<T> + ?Sized>(
        &mut self,
        stream: &'a Stream,
        send: &'a S,
        recv: &'a mut D,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "Group::all_reduce";
        let op = Op::AllReduce {
            recv: adapt::span(CALL, "receive", &*recv, stream)?,
            send: Some(adapt::span(CALL, "send", send, stream)?),
            op,
        };
        let track = move |e: &adapt::Enqueue<'_>| {
            e.note(send);
            e.note(recv);
        };
        // SAFETY: as in `send`.
        unsafe { self.add(CALL, stream, T::KIND, op, track) }
    }

    /// [`Communicator::all_reduce_in_place`] in the group.
    pub fn all_reduce_in_place<T: Element, D: DeviceDest<T> + ?Sized>(
        &mut self,
        stream: &'a Stream,
        data: &'a mut D,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "Group::all_reduce_in_place";
        let op = Op::AllReduce {
            send: None,
            recv: adapt::span(CALL, "receive", &*data, stream)?,
            op,
        };
        // SAFETY: as in `recv`.
        unsafe { self.add(CALL, stream, T::KIND, op, move |e| e.note(data)) }
    }

    /// [`Communicator::broadcast`] in the group.
    pub fn broadcast<T: Element, D: DeviceDest<T> + ?Sized>(
        &mut self,
        stream: &'a Stream,
        data: &'a mut D,
        root: usize,
    ) -> Result<()> {
        const CALL: &str = "Group::broadcast";
        let op = Op::Broadcast {
            send: None,
            recv: adapt::span(CALL, "receive", &*data, stream)?,
            root,
        };
        // SAFETY: as in `recv`.
        unsafe { self.add(CALL, stream, T::KIND, op, move |e| e.note(data)) }
    }

    /// [`Communicator::all_gather`] in the group.
    pub fn all_gather<T: Element, S: DeviceSource<T> + ?Sized, D: DeviceDest<T> + ?Sized>(
        &mut self,
        stream: &'a Stream,
        send: &'a S,
        recv: &'a mut D,
    ) -> Result<()> {
        const CALL: &str = "Group::all_gather";
        let op = Op::AllGather {
            recv: adapt::span(CALL, "receive", &*recv, stream)?,
            send: adapt::span(CALL, "send", send, stream)?,
        };
        let track = move |e: &adapt::Enqueue<'_>| {
            e.note(send);
            e.note(recv);
        };
        // SAFETY: as in `send`.
        unsafe { self.add(CALL, stream, T::KIND, op, track) }
    }

    /// [`Communicator::reduce_scatter`] in the group.
    pub fn reduce_scatter<T: Element, S: DeviceSource<T> + ?Sized, D: DeviceDest<T> + ?Sized>(
        &mut self,
        stream: &'a Stream,
        send: &'a S,
        recv: &'a mut D,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "Group::reduce_scatter";
        let op = Op::ReduceScatter {
            recv: adapt::span(CALL, "receive", &*recv, stream)?,
            send: adapt::span(CALL, "send", send, stream)?,
            op,
        };
        let track = move |e: &adapt::Enqueue<'_>| {
            e.note(send);
            e.note(recv);
        };
        // SAFETY: as in `send`.
        unsafe { self.add(CALL, stream, T::KIND, op, track) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ungrouped_operations_refuse_while_a_group_is_open_on_the_thread() {
        assert!(refuse_in_group("Communicator::send").is_ok());
        set_in_group(true);
        let err = refuse_in_group("Communicator::send")
            .unwrap_err()
            .to_string();
        set_in_group(false);
        assert!(
            err.starts_with("Communicator::send: a `Communicator::group` is open"),
            "{err}"
        );
        // Another thread has its own NCCL group state.
        set_in_group(true);
        std::thread::spawn(|| assert!(refuse_in_group("Communicator::recv").is_ok()))
            .join()
            .unwrap();
        set_in_group(false);
    }
}

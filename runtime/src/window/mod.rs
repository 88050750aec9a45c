//! One-sided halo exchange between ranks: a [`Window`] is device memory every rank of a
//! communicator allocates together and exports to its neighbours, so that a kernel on one rank
//! stores straight into a neighbour's memory (its halo rows), as NVIDIA's
//! `multi_threaded_p2p_opt` and NVSHMEM variants do, with signals that order the exchange.
//!
//! # The mechanism: CUDA IPC handles, exchanged through the communicator
//!
//! Each rank allocates its window with `cuMemAlloc`, takes its IPC handle
//! (`cuIpcGetMemHandle`) and all-gathers it through the communicator (an NCCL all-gather on
//! the given stream, so the handles travel the way everything else of the job does, with its
//! deadline); each rank then opens its neighbours' handles (`cuIpcOpenMemHandle` with lazy peer
//! access). Why this and not the alternatives:
//! - VMM handles (`cuMemCreate` + `cuMemExportToShareableHandle`) need POSIX file descriptors
//!   passed between processes over a Unix socket (`SCM_RIGHTS`): a second channel beside the
//!   rendezvous, with its own authentication. Their refcounted physical memory would spare the
//!   teardown handshake below, but the mapping a kernel stores through is the same NVLink (or
//!   PCIe P2P) path, so a halo store costs the same;
//! - NCCL 2.28's symmetric memory windows (`ncclCommWindowRegister`) tie the memory to one
//!   communicator and to NCCL's device API for the stores; they reach across hosts only with
//!   NCCL's own transports, and need NCCL 2.28 where the rest of the crate needs any NCCL 2.
//!
//! IPC handles reach the GPUs of one host (like peer access in one process): between hosts,
//! exchange with NCCL `send`/`recv`. `Window::new` refuses ranks of different hosts, and ranks
//! of one process (a CUDA IPC handle cannot be opened by the process that made it; several
//! devices of one process use `peer(..)` launches instead).
//!
//! # Signals: the protocol
//!
//! Every pair of neighbours `w` (writes into the window of) `r` has two 32-bit words, in
//! device memory of the rank that waits on each:
//! - `ready[w]` in `r`'s window: `w` wrote (`signal_written`); `r` waits for it before
//!   reading what `w` wrote, then clears it (`wait_written` = wait `== 1`, write `0`);
//! - `free[r]` in `w`'s window: `r` has read (`signal_read`); `w` waits for it before writing
//!   into `r`'s window again, then clears it (`wait_read` = wait `== 1`, write `0`). It starts
//!   at 1: the first write needs no read before it.
//!
//! Posts are `cuStreamWriteValue32` through the mapping, with the default memory fence, so the
//! data the stream wrote before is visible to the neighbour before the word; waits are
//! `cuStreamWaitValue32` on the rank's own memory. Both are captured as memory-operation
//! nodes with constant values, and the values never change between replays (each wait
//! resets its own word; a word is written again only after the reset, since the writer waits
//! for the other word in between), so the exchange replays inside the step's graph as often
//! as the step does, and `run_ahead` only queues more of the same alternation: a writer can
//! never run two writes ahead of its reader's reads, whatever the host enqueues.
//!
//! # Lifetimes and early exit
//!
//! A window owns its memory and its mappings of the neighbours' windows; dropping it first
//! unmaps the neighbours (each mapping waits for this context's work, then writes this rank's
//! *detach word* into the neighbour's window and closes the handle), then releases its own
//! memory, which is freed only once every neighbour detached from it: a neighbour that still
//! runs (or dropped late) keeps it allocated, up to the communicator's deadline, after which
//! the memory is leaked rather than freed under a writer. Graphs that captured work on a
//! window's buffers hold them, so the memory outlives the graphs too. What a window cannot
//! do is make a neighbour that stopped signal: a rank that exits (or fails) while its
//! neighbours' streams wait on its signals leaves those waits blocked on the device until the
//! job ends (`gpu-pipeline-launch` kills every rank when one fails; `srun` and `mpirun` do the
//! same). Exchange the same number of times on every rank, as with NCCL.
//!
//! # The CPU backend
//!
//! Simulated ranks (threads with [`Communicator::cpu_ranks`]) on devices made together
//! ([`Context::cpu_checked_devices`], one device per rank) share windows through the process:
//! a neighbour's window is the same allocation, and each signal is an ordering both in
//! execution (the k-th wait waits for the k-th post) and for the race detector (like an event
//! record and wait across the ranks' streams). A kernel writing into a neighbour's window
//! with no signal ordering the neighbour's read is reported as a race naming the window.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytemuck::Pod;

use crate::communicator::Communicator;
use crate::context::{Context, ContextBackend};
use crate::cpu;
use crate::cuda;
use crate::error::{Error, Result};
use crate::memory::DeviceBuffer;
use crate::memory::alloc::{DeviceAlloc, DeviceMemory};
use crate::pipeline::TypedStream;
use crate::stream::{Stream, StreamBackend};

mod batch;
pub(crate) mod pipeline_ops;
mod record;

use record::{Record, all_gather, all_gather_bytes, detach_word, free_word, host_id, ready_word};

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::Stream {}
    impl<M> Sealed for crate::TypedStream<'_, M> {}
}

/// A stream a [`Window`]'s signals are enqueued on: a [`Stream`], or the [`TypedStream`] a
/// `gpu_pipeline!` `call` statement receives (the signals are stream memory operations, which
/// a captured step replays), so a called function can wait, store and signal inside a step.
///
/// Two simulated ranks exchange through their windows inside a `gpu_pipeline!` step: the
/// `call`'s function signals on the step's own stream, so the captured step replays the
/// signals with the rest of the step.
///
/// ```
/// use std::thread;
/// use gpu_pipeline::{
///     Communicator, Context, DeviceBuffer, Result, Stream, TypedStream, Window, gpu_pipeline,
/// };
///
/// gpu_pipeline! {
///     /// One exchange with the neighbour `other`: store `value` into its window, then
///     /// copy what it stored into ours to `seen`.
///     pipeline Exchange {
///         streams { main }
///         params {
///             window: &mut Window<f32>,
///             other: usize,
///             value: f32,
///             seen: &mut DeviceBuffer<f32>,
///         }
///         stage swap on main {
///             call hand_over(window, other, value, seen) writes(window, seen);
///         }
///     }
/// }
///
/// // The `call`'s function: the step's stream comes first, a `TypedStream`.
/// fn hand_over(
///     stream: &TypedStream<'_, ExchangeMain>,
///     window: &mut Window<f32>,
///     other: usize,
///     value: f32,
///     seen: &mut DeviceBuffer<f32>,
/// ) -> Result<()> {
///     window.wait_read(stream, other)?; // it has read what we stored last time
///     stream.memset_u32(window.peer_mut(other)?, value.to_bits())?;
///     window.signal_written(stream, other)?;
///     window.wait_written(stream, other)?; // it has stored into ours
///     stream.copy_dtod(window.local(), seen)?;
///     window.signal_read(stream, other)
/// }
///
/// # fn main() -> Result<()> {
/// let devices = Context::cpu_checked_devices(2);
/// let comms = Communicator::cpu_ranks(2)?;
/// let ranks: Vec<_> = comms.into_iter().zip(devices).map(|(comm, ctx)| {
///     thread::spawn(move || -> Result<(Vec<f32>, Context)> {
///         let (me, other) = (comm.rank(), 1 - comm.rank());
///         let mut pipeline = Exchange::new(&ctx)?;
///         let stream = Stream::new(&ctx)?;
///         let mut window = Window::<f32>::new(&comm, &stream, 4, &[other])?;
///         let mut seen = DeviceBuffer::<f32>::zeros(&stream, 4)?;
///         stream.synchronize()?;
///         {
///             let mut graph = pipeline.capture(ExchangeParams {
///                 window: &mut window,
///                 other,
///                 value: me as f32 + 1.0,
///                 seen: &mut seen,
///             })?;
///             for _ in 0..3 {
///                 graph.launch()?; // the signals alternate: no replay overtakes a read
///             }
///             graph.synchronize()?;
///         }
///         Ok((seen.to_vec(&stream)?, ctx))
///     })
/// }).collect();
/// for (rank, handle) in ranks.into_iter().enumerate() {
///     let (seen, ctx) = handle.join().unwrap()?;
///     assert_eq!(seen, vec![(1 - rank) as f32 + 1.0; 4]); // what the other rank stored
///     assert!(ctx.races().is_empty(), "{:?}", ctx.races()); // every store ordered
/// }
/// # Ok(()) }
/// ```
pub trait SignalStream: sealed::Sealed {
    /// The stream.
    #[doc(hidden)]
    fn signal_stream(&self) -> &Stream;
}

impl SignalStream for Stream {
    fn signal_stream(&self) -> &Stream {
        self
    }
}

impl<M> SignalStream for TypedStream<'_, M> {
    fn signal_stream(&self) -> &Stream {
        self.stream()
    }
}

/// The most neighbours one rank's window may have.
pub const MAX_WINDOW_PEERS: usize = 8;

/// Device memory of every rank of a communicator, exported to each rank's neighbours: a
/// kernel on this rank may store into a neighbour's window ([`Window::peer_mut`]) while the
/// neighbour's kernels read it, ordered by the window's signals. See the module
/// documentation for the protocol and the lifetimes.
///
/// ```
/// use std::thread;
/// use gpu_pipeline::{Communicator, Context, Stream, Window};
///
/// // Two simulated ranks, each on its own simulated device (one race detector for both).
/// let devices = Context::cpu_checked_devices(2);
/// let comms = Communicator::cpu_ranks(2).unwrap();
/// let ranks: Vec<_> = comms.into_iter().zip(devices).map(|(comm, ctx)| {
///     thread::spawn(move || -> gpu_pipeline::Result<Vec<f32>> {
///         let stream = Stream::new(&ctx)?;
///         let (me, other) = (comm.rank(), 1 - comm.rank());
///         let mut window = Window::<f32>::new(&comm, &stream, 4, &[other])?;
///         // Write into the neighbour's window, then tell it.
///         window.wait_read(&stream, other)?;
///         stream.memset_u32(window.peer_mut(other)?, (me as f32 + 1.0).to_bits())?;
///         window.signal_written(&stream, other)?;
///         // Read what the neighbour wrote into ours once it says so, then say we read it.
///         window.wait_written(&stream, other)?;
///         let got = window.local().to_vec(&stream)?;
///         window.signal_read(&stream, other)?;
///         stream.synchronize()?;
///         Ok(got)
///     })
/// }).collect();
/// let got: Vec<Vec<f32>> = ranks.into_iter().map(|t| t.join().unwrap().unwrap()).collect();
/// assert_eq!(got, [vec![2.0; 4], vec![1.0; 4]]);
/// ```
pub struct Window<T: Pod> {
    // Dropped first: unmapping the neighbours detaches from their memory.
    peers: Vec<PeerWindow<T>>,
    local: DeviceBuffer<T>,
    signals: LocalSignals,
    rank: usize,
    size: usize,
    /// [`Window::mark_written`] ran: steps read the window before they write it.
    marked: std::sync::atomic::AtomicBool,
}

/// A neighbour's window, mapped into this rank's context.
struct PeerWindow<T: Pod> {
    rank: usize,
    buffer: DeviceBuffer<T>,
    signals: PeerSignals,
}

/// This rank's own signal words.
enum LocalSignals {
    /// `3 * size` words: `ready[size]`, `free[size]`, `detach[size]`.
    Cuda(Arc<cuda::DeviceMemory>),
    Cpu(Arc<CpuWindow>),
}

/// A neighbour's signal words, as this rank writes them.
enum PeerSignals {
    Cuda(Arc<cuda::DeviceMemory>),
    Cpu(Arc<CpuWindow>),
}

/// One simulated rank's window, shared by the process's ranks.
struct CpuWindow {
    memory: Arc<cpu::Memory>,
    ctx: Context,
    /// `ready[w]`: rank `w` wrote into this window.
    ready: Vec<Arc<cpu::Signal>>,
    /// `free[r]`: rank `r` has read what this rank wrote into `r`'s window.
    free: Vec<Arc<cpu::Signal>>,
}

/// The windows of the process's simulated ranks, by id, while they live.
static CPU_WINDOWS: Mutex<Option<HashMap<u64, Weak<CpuWindow>>>> = Mutex::new(None);

fn cpu_windows() -> std::sync::MutexGuard<'static, Option<HashMap<u64, Weak<CpuWindow>>>> {
    CPU_WINDOWS.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T: Pod> Window<T> {
    /// Allocates `len` elements on this rank and maps the windows of `peers` (at most
    /// [`MAX_WINDOW_PEERS`] other ranks, each of which must list this rank in turn). A
    /// collective: every rank of `comm` calls it, in the same order as its other
    /// communication, with the same `len`; `stream` (of this rank's device) carries the
    /// all-gather of the handles and is synchronized before it returns. The window starts
    /// zeroed.
    pub fn new(
        comm: &Communicator,
        stream: &Stream,
        len: usize,
        peers: &[usize],
    ) -> Result<Window<T>> {
        const CALL: &str = "Window::new";
        let (rank, size) = (comm.rank(), comm.size());
        if peers.len() > MAX_WINDOW_PEERS {
            return Err(Error::invalid(
                CALL,
                format!(
                    "{} peers; a window has at most {MAX_WINDOW_PEERS}",
                    peers.len()
                ),
            ));
        }
        for (i, &p) in peers.iter().enumerate() {
            if p >= size || p == rank || peers[..i].contains(&p) {
                return Err(Error::invalid(
                    CALL,
                    format!(
                        "peer {p} is not another rank of the communicator's {size} (rank {rank} \
                         lists {peers:?}; each other rank once)"
                    ),
                ));
            }
        }
        let elem = std::mem::size_of::<T>();
        let data_bytes = len
            .checked_mul(elem)
            .and_then(|b| b.checked_next_multiple_of(256))
            .ok_or_else(|| Error::invalid(CALL, format!("{len} elements overflow")))?;
        let signal_bytes = size
            .checked_mul(12)
            .ok_or_else(|| Error::invalid(CALL, "too many ranks"))?;
        let ctx = stream.context().clone();
        let deadline = comm.timeout();
        let mut record = Record {
            handle: [0; 64],
            pid: std::process::id(),
            host: host_id(),
            peers: [0; MAX_WINDOW_PEERS],
            npeers: peers.len() as u32,
            len: len as u64,
            elem: elem as u32,
        };
        for (slot, &p) in record.peers.iter_mut().zip(peers) {
            *slot = p as u32;
        }
        // This rank's memory, initialised before the handle leaves (the all-gather is ordered
        // after the initialisation on `stream`).
        let (local, signals, exported) = match ctx.kind() {
            ContextBackend::Cuda(c) => {
                let total = data_bytes
                    .checked_add(signal_bytes)
                    .ok_or_else(|| Error::invalid(CALL, "the window is too large"))?;
                let exported = cuda::Exported::alloc(
                    c,
                    total,
                    data_bytes + detach_word(size, 0),
                    size,
                    deadline,
                )?;
                record.handle = exported.handle()?;
                let data = Arc::new(exported.memory(0, len * elem)?);
                let words = Arc::new(exported.memory(data_bytes, signal_bytes)?);
                let local = buffer::<T>(&ctx, DeviceMemory::Cuda(data), len);
                let mut free = buffer::<u32>(&ctx, DeviceMemory::Cuda(words.clone()), 3 * size);
                stream.memset_u32(&mut free.slice_mut(size..2 * size)?, 1)?;
                (local, LocalSignals::Cuda(words), Some(exported))
            }
            ContextBackend::Cpu(c) => {
                let memory = cpu::Memory::new(c.shared(), len * elem, cpu::MemoryKind::Device)
                    .map_err(|m| Error::invalid(CALL, m))?;
                memory.set_name(&format!("window of rank {rank}"));
                let signal = |what: &str, other: usize, initial: u64| {
                    cpu::Signal::new(
                        format!("{what} of rank {rank}'s window for rank {other}"),
                        initial,
                        deadline,
                    )
                };
                let shared = Arc::new(CpuWindow {
                    memory: memory.clone(),
                    ctx: ctx.clone(),
                    ready: (0..size).map(|w| signal("ready", w, 0)).collect(),
                    free: (0..size).map(|r| signal("free", r, 1)).collect(),
                });
                let id = {
                    static NEXT: std::sync::atomic::AtomicU64 =
                        std::sync::atomic::AtomicU64::new(1);
                    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                };
                let mut windows = cpu_windows();
                let map = windows.get_or_insert_with(HashMap::new);
                map.retain(|_, w| w.strong_count() > 0);
                map.insert(id, Arc::downgrade(&shared));
                drop(windows);
                record.handle[..8].copy_from_slice(&id.to_le_bytes());
                let local = buffer::<T>(&ctx, DeviceMemory::Cpu(memory), len);
                (local, LocalSignals::Cpu(shared), None)
            }
        };
        let records = all_gather(comm, stream, &record)?;
        for (r, other) in records.iter().enumerate() {
            if (other.len, other.elem) != (record.len, record.elem) {
                return Err(Error::invalid(
                    CALL,
                    format!(
                        "rank {r} made its window of {} elements of {} bytes and rank {rank} of \
                         {len} of {elem}; every rank passes the same length and type",
                        other.len, other.elem
                    ),
                ));
            }
        }
        // Every rank checks every pair, so all refuse together (none waits for a rank that
        // gave up).
        for (a, record_a) in records.iter().enumerate() {
            for &b in record_a.peer_list() {
                let listed = records
                    .get(b as usize)
                    .is_some_and(|r| r.peer_list().contains(&(a as u32)));
                if !listed {
                    let theirs = records
                        .get(b as usize)
                        .map(Record::peer_list)
                        .unwrap_or(&[]);
                    return Err(Error::invalid(
                        CALL,
                        format!(
                            "rank {a} lists rank {b} as a peer, but rank {b} lists {theirs:?}; \
                             neighbours must list each other"
                        ),
                    ));
                }
            }
        }
        if let Some(exported) = &exported {
            exported.set_importers(peers.to_vec());
        }
        let map = || -> Result<Vec<PeerWindow<T>>> {
            let mut mapped = Vec::with_capacity(peers.len());
            for &p in peers {
                let other = &records[p];
                let peer = match ctx.kind() {
                    ContextBackend::Cuda(c) => {
                        if other.host != record.host {
                            return Err(Error::invalid(
                                CALL,
                                format!(
                                    "rank {p} runs on another host than rank {rank}: a window maps \
                                     memory of the GPUs of one host; exchange with `send`/`recv` \
                                     between hosts"
                                ),
                            ));
                        }
                        if other.pid == record.pid {
                            return Err(Error::invalid(
                                CALL,
                                format!(
                                    "ranks {rank} and {p} are one process: CUDA IPC maps memory of \
                                     other processes only; several devices of one process reach \
                                     each other with `peer(..)` launches"
                                ),
                            ));
                        }
                        let mapping = cuda::Mapping::open(
                            c,
                            &other.handle,
                            data_bytes + signal_bytes,
                            data_bytes + detach_word(size, rank),
                        )?;
                        let data = Arc::new(mapping.memory(0, len * elem)?);
                        let words = Arc::new(mapping.memory(data_bytes, signal_bytes)?);
                        PeerWindow {
                            rank: p,
                            buffer: buffer::<T>(&ctx, DeviceMemory::Cuda(data), len),
                            signals: PeerSignals::Cuda(words),
                        }
                    }
                    ContextBackend::Cpu(_) => {
                        let mut id = [0u8; 8];
                        id.copy_from_slice(&other.handle[..8]);
                        let id = u64::from_le_bytes(id);
                        let found = cpu_windows()
                            .as_ref()
                            .and_then(|m| m.get(&id))
                            .and_then(Weak::upgrade);
                        let Some(shared) = found.filter(|_| other.pid == record.pid) else {
                            return Err(Error::invalid(
                                CALL,
                                format!(
                                    "rank {p}'s window is not a simulated rank of this process"
                                ),
                            ));
                        };
                        if !shared.ctx.same_machine(&ctx) {
                            return Err(Error::mismatch(
                                CALL,
                                "simulated ranks that share windows must run on CPU-backend devices \
                                 made together (`Context::cpu_devices(n)` or \
                                 `Context::cpu_checked_devices(n)`, one device per rank)",
                            ));
                        }
                        PeerWindow {
                            rank: p,
                            buffer: buffer::<T>(
                                &ctx,
                                DeviceMemory::Cpu(shared.memory.clone()),
                                len,
                            ),
                            signals: PeerSignals::Cpu(shared),
                        }
                    }
                };
                mapped.push(peer);
            }
            Ok(mapped)
        };
        let mapped = map();
        // Every rank holds its window until every rank mapped its neighbours', and learns
        // whether all did (so none waits for one that gave up).
        let done = all_gather_bytes(comm, stream, &[u8::from(mapped.is_ok())])?;
        if let Some(exported) = &exported {
            // A rank that failed closed what it had mapped before it said so: only the ranks
            // that succeeded still map this window, and its free waits for them alone.
            let holding = peers
                .iter()
                .copied()
                .filter(|&p| done[p].first() == Some(&1));
            exported.set_importers(holding.collect());
        }
        let mapped = mapped?;
        if let Some(r) = done.iter().position(|d| d.first() != Some(&1)) {
            return Err(Error::invalid(
                CALL,
                format!("rank {r} could not map its neighbours' windows (its own error says why)"),
            ));
        }
        Ok(Window {
            peers: mapped,
            local,
            signals,
            rank,
            size,
            marked: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks of the communicator the window was made with.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The ranks whose windows this rank mapped, in the order given to [`Window::new`].
    pub fn peers(&self) -> Vec<usize> {
        self.peers.iter().map(|p| p.rank).collect()
    }

    /// This rank's window: what its neighbours write, and what its own kernels read (or
    /// write: its interior).
    pub fn local(&self) -> &DeviceBuffer<T> {
        &self.local
    }

    /// This rank's window, to write.
    pub fn local_mut(&mut self) -> &mut DeviceBuffer<T> {
        &mut self.local
    }

    /// `rank`'s window mapped here: a buffer of this rank's context that kernels and copies
    /// of this rank may read and write, and that is `rank`'s memory.
    pub fn peer(&self, rank: usize) -> Result<&DeviceBuffer<T>> {
        let i = self.index("Window::peer", rank)?;
        Ok(&self.peers[i].buffer)
    }

    /// `rank`'s window mapped here, to write (after [`Window::wait_read`]).
    pub fn peer_mut(&mut self, rank: usize) -> Result<&mut DeviceBuffer<T>> {
        let i = self.index("Window::peer_mut", rank)?;
        Ok(&mut self.peers[i].buffer)
    }

    /// This rank's window and every neighbour's, at once (one kernel reads its window and
    /// stores into both neighbours'): the neighbours' in [`Window::peers`] order.
    pub fn split_mut(&mut self) -> (&mut DeviceBuffer<T>, Vec<&mut DeviceBuffer<T>>) {
        let peers = self.peers.iter_mut().map(|p| &mut p.buffer).collect();
        (&mut self.local, peers)
    }

    fn index(&self, call: &'static str, rank: usize) -> Result<usize> {
        self.peers
            .iter()
            .position(|p| p.rank == rank)
            .ok_or_else(|| {
                Error::invalid(
                    call,
                    format!(
                        "rank {rank} is not one of rank {}'s window peers {:?}",
                        self.rank,
                        self.peers()
                    ),
                )
            })
    }

    fn check_stream(&self, call: &'static str, stream: &Stream) -> Result<()> {
        if self.local.context().shares_memory_with(stream.context()) {
            Ok(())
        } else {
            Err(Error::mismatch(
                call,
                "the stream belongs to another device than this rank's window",
            ))
        }
    }

    /// Tells `to` that this rank wrote into `to`'s window, once the work enqueued on
    /// `stream` so far completes (a write of `to`'s `ready` word through the mapping, after a
    /// memory fence).
    pub fn signal_written(&self, stream: &impl SignalStream, to: usize) -> Result<()> {
        const CALL: &str = "Window::signal_written";
        let stream = stream.signal_stream();
        self.check_stream(CALL, stream)?;
        let peer = &self.peers[self.index(CALL, to)?];
        let (me, size) = (self.rank, self.size);
        match (&peer.signals, stream.kind()) {
            (PeerSignals::Cuda(words), StreamBackend::Cuda(s)) => {
                s.signal_ops(&[cuda::SignalOp::Write {
                    memory: words,
                    offset: ready_word(me),
                    value: 1,
                }])
            }
            (PeerSignals::Cpu(w), StreamBackend::Cpu(s)) => {
                let label = format!("signal_written rank {me} -> rank {to}");
                Ok(s.post_signal(&w.ready[me], label)?)
            }
            _ => Err(mixed(CALL, size)),
        }
    }

    /// Makes later work on `stream` wait until `from` signalled that it wrote into this
    /// rank's window, then clears the signal for the next exchange.
    pub fn wait_written(&self, stream: &impl SignalStream, from: usize) -> Result<()> {
        const CALL: &str = "Window::wait_written";
        let stream = stream.signal_stream();
        self.check_stream(CALL, stream)?;
        self.index(CALL, from)?;
        let at = ready_word(from);
        match (&self.signals, stream.kind()) {
            (LocalSignals::Cuda(words), StreamBackend::Cuda(s)) => s.signal_ops(&[
                cuda::SignalOp::WaitEq {
                    memory: words,
                    offset: at,
                    value: 1,
                },
                cuda::SignalOp::Write {
                    memory: words,
                    offset: at,
                    value: 0,
                },
            ]),
            (LocalSignals::Cpu(w), StreamBackend::Cpu(s)) => {
                let label = format!("wait_written rank {} <- rank {from}", self.rank);
                Ok(s.wait_signal(&w.ready[from], label)?)
            }
            _ => Err(mixed(CALL, self.size)),
        }
    }

    /// Tells `to` that this rank has read what `to` wrote into this rank's window (so `to`
    /// may write it again), once the work enqueued on `stream` so far completes.
    pub fn signal_read(&self, stream: &impl SignalStream, to: usize) -> Result<()> {
        const CALL: &str = "Window::signal_read";
        let stream = stream.signal_stream();
        self.check_stream(CALL, stream)?;
        let peer = &self.peers[self.index(CALL, to)?];
        let (me, size) = (self.rank, self.size);
        match (&peer.signals, stream.kind()) {
            (PeerSignals::Cuda(words), StreamBackend::Cuda(s)) => {
                s.signal_ops(&[cuda::SignalOp::Write {
                    memory: words,
                    offset: free_word(size, me),
                    value: 1,
                }])
            }
            (PeerSignals::Cpu(w), StreamBackend::Cpu(s)) => {
                let label = format!("signal_read rank {me} -> rank {to}");
                Ok(s.post_signal(&w.free[me], label)?)
            }
            _ => Err(mixed(CALL, size)),
        }
    }

    /// Makes later work on `stream` wait until `peer` has read what this rank last wrote
    /// into `peer`'s window (at once the first time), then clears the signal.
    pub fn wait_read(&self, stream: &impl SignalStream, peer: usize) -> Result<()> {
        const CALL: &str = "Window::wait_read";
        let stream = stream.signal_stream();
        self.check_stream(CALL, stream)?;
        self.index(CALL, peer)?;
        let at = free_word(self.size, peer);
        match (&self.signals, stream.kind()) {
            (LocalSignals::Cuda(words), StreamBackend::Cuda(s)) => s.signal_ops(&[
                cuda::SignalOp::WaitEq {
                    memory: words,
                    offset: at,
                    value: 1,
                },
                cuda::SignalOp::Write {
                    memory: words,
                    offset: at,
                    value: 0,
                },
            ]),
            (LocalSignals::Cpu(w), StreamBackend::Cpu(s)) => {
                let label = format!("wait_read rank {} <- rank {peer}", self.rank);
                Ok(s.wait_signal(&w.free[peer], label)?)
            }
            _ => Err(mixed(CALL, self.size)),
        }
    }
}

impl<T: Pod> Window<T> {
    /// Counts what this rank put in its own window (its initial halos, say) as written by
    /// its neighbours, so that a step that reads the window before it writes the neighbours'
    /// (a `gpu_pipeline!` step whose first launch naming the window reads it) finds it
    /// written: for each neighbour, this rank waits until the neighbour may be written and
    /// tells it that it was. A collective of the window's ranks: every rank calls it once,
    /// before the first such step and after it set its own part, on a stream of its device.
    /// A step that writes before it reads needs no such call (and must not follow one).
    /// Calling it a second time is an error (its wait would be for a read that never comes).
    pub fn mark_written(&self, stream: &impl SignalStream) -> Result<()> {
        use std::sync::atomic::Ordering;
        if self.marked.swap(true, Ordering::Relaxed) {
            return Err(Error::invalid(
                "Window::mark_written",
                format!(
                    "rank {}'s window is marked written already: mark it once, before the first \
                     step",
                    self.rank
                ),
            ));
        }
        for p in self.peers() {
            self.wait_read(stream, p)?;
            self.signal_written(stream, p)?;
        }
        Ok(())
    }
}

impl<T: Pod> Window<T> {
    /// Whether [`Window::mark_written`] ran.
    pub(crate) fn marked(&self) -> bool {
        self.marked.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl<T: Pod> std::fmt::Debug for Window<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("len", &self.local.len())
            .field("peers", &self.peers())
            .finish()
    }
}

fn mixed(call: &'static str, _size: usize) -> Error {
    Error::mismatch(
        call,
        "the stream and the window belong to different backends",
    )
}

/// A buffer of `len` elements over `memory`, as memory of `ctx`.
fn buffer<E: Pod>(ctx: &Context, memory: DeviceMemory, len: usize) -> DeviceBuffer<E> {
    DeviceBuffer::from_alloc(
        DeviceAlloc {
            ctx: ctx.clone(),
            memory,
        },
        len,
    )
}

//! Flag cells: one 32- or 64-bit word that streams write and wait on with the stream memory
//! operations, and that the host can read and write while streams wait on it.
//!
//! On CUDA the word lives in page-locked host memory mapped into the device's address space
//! (`cuda/flag.rs`), so the host reads and writes it with plain atomics (no copy, no stream,
//! no deadlock with a stream that is waiting on it). On the CPU backend it is an atomic that
//! the operations touching it hold.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::context::{Context, ContextBackend};
use crate::cuda;
use crate::error::Result;
use crate::sys;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// The word behind a flag cell, on one backend.
#[derive(Clone, Debug)]
pub(crate) enum FlagStorage {
    /// A device-mapped host word.
    Cuda(Arc<cuda::FlagWord>),
    /// An atomic on the CPU backend.
    Cpu(Arc<AtomicU64>),
}

/// The word types a [`FlagCell`] can hold: `u32` and `u64`.
///
/// ```
/// use gpu_pipeline::{Context, FlagCell, Stream, WaitCondition};
/// let ctx = Context::cpu();
/// let stream = Stream::new(&ctx)?;
/// let epoch = FlagCell::<u64>::new(&ctx, 0)?; // a 64-bit word
/// stream.write_value_64(&epoch, 1 << 40)?;
/// stream.wait_value_64(&epoch, WaitCondition::GreaterOrEqual, 1 << 40)?;
/// stream.synchronize()?;
/// assert_eq!(epoch.load(), 1 << 40);
/// # Ok::<(), gpu_pipeline::Error>(())
/// ```
pub trait FlagWord: sealed::Sealed + Copy + Send + Sync + std::fmt::Debug + 'static {
    /// The width in bits.
    #[doc(hidden)]
    const BITS: u32;
    /// The value from the low `BITS` bits of a word.
    #[doc(hidden)]
    fn from_bits(bits: u64) -> Self;
    /// The value as a 64-bit word, as the stream memory operations take it.
    #[doc(hidden)]
    fn widen(self) -> u64;
}

impl FlagWord for u32 {
    const BITS: u32 = 32;
    fn from_bits(bits: u64) -> Self {
        bits as u32
    }
    fn widen(self) -> u64 {
        u64::from(self)
    }
}

impl FlagWord for u64 {
    const BITS: u32 = 64;
    fn from_bits(bits: u64) -> Self {
        bits
    }
    fn widen(self) -> u64 {
        self
    }
}

impl FlagStorage {
    /// Reads a `W`.
    fn load<W: FlagWord>(&self) -> W {
        W::from_bits(match self {
            FlagStorage::Cuda(w) if W::BITS == 32 => u64::from(w.load_u32()),
            FlagStorage::Cuda(w) => w.load_u64(),
            FlagStorage::Cpu(w) => w.load(Ordering::Acquire),
        })
    }

    /// Writes a `W` (a 32-bit cell keeps its value in the low half).
    fn store<W: FlagWord>(&self, value: W) {
        match self {
            FlagStorage::Cuda(w) if W::BITS == 32 => w.store_u32(value.widen() as u32),
            FlagStorage::Cuda(w) => w.store_u64(value.widen()),
            FlagStorage::Cpu(w) => w.store(value.widen(), Ordering::Release),
        }
    }
}

/// A word streams signal and wait on ([`Stream::write_value_32`](crate::Stream::write_value_32),
/// [`Stream::wait_value_32`](crate::Stream::wait_value_32) and the 64-bit forms).
///
/// The word is shared: a captured graph that writes or waits on it keeps it alive. When the
/// last holder drops on CUDA, the context is synchronized first, so no enqueued operation can
/// touch the word after it is freed (and when that synchronize fails, the word is leaked). A
/// stream waiting on a value nobody will write blocks that drop, as it would block any
/// synchronize.
///
/// **Write before you drop.** On CUDA every drop that frees device or pinned memory, a
/// module, a flag cell or a launched graph waits for the whole context first (the driver
/// cannot tell which work still uses what it frees). So while a stream waits for a value the
/// host has yet to store, a thread that drops one of those before storing it waits for the
/// stream, which waits for that thread: store first, then drop. (The CPU backend's drops wait
/// only for the work that used what they free.)
///
/// ```
/// # fn main() -> gpu_pipeline::Result<()> {
/// use gpu_pipeline::{Context, FlagCell, Stream, WaitCondition};
/// let ctx = Context::cpu();
/// let stream = Stream::non_blocking(&ctx)?;
/// let go = FlagCell::<u32>::new(&ctx, 0)?;
/// stream.wait_value_32(&go, WaitCondition::GreaterOrEqual, 1)?; // the stream waits...
/// go.store(1); // ...until the host writes
/// stream.synchronize()?;
/// # Ok(()) }
/// ```
pub struct FlagCell<W: FlagWord = u32> {
    ctx: Context,
    word: FlagStorage,
    _word: PhantomData<W>,
}

impl<W: FlagWord> FlagCell<W> {
    /// A new cell holding `initial`.
    pub fn new(ctx: &Context, initial: W) -> Result<FlagCell<W>> {
        FlagCell::made(ctx, initial, false)
    }

    /// A new cell holding `initial` that only one graph's nodes will use (a loop's state):
    /// dropped where the graph's owner just synchronized the context, it need not wait.
    pub(crate) fn new_private(ctx: &Context, initial: W) -> Result<FlagCell<W>> {
        FlagCell::made(ctx, initial, true)
    }

    fn made(ctx: &Context, initial: W, private: bool) -> Result<FlagCell<W>> {
        let word = match ctx.kind() {
            ContextBackend::Cuda(c) if private => {
                FlagStorage::Cuda(Arc::new(cuda::FlagWord::new_private(c)?))
            }
            ContextBackend::Cuda(c) => FlagStorage::Cuda(Arc::new(cuda::FlagWord::new(c)?)),
            ContextBackend::Cpu(_) => FlagStorage::Cpu(Arc::new(AtomicU64::new(0))),
        };
        word.store(initial);
        Ok(FlagCell {
            ctx: ctx.clone(),
            word,
            _word: PhantomData,
        })
    }

    /// The current value, as the host sees it now.
    pub fn load(&self) -> W {
        self.word.load()
    }

    /// Writes a value from the host; a stream waiting on the cell sees it.
    pub fn store(&self, value: W) {
        self.word.store(value)
    }

    /// The device address of the word, for kernels and interop; `None` on the CPU backend.
    pub fn device_address(&self) -> Option<sys::CUdeviceptr> {
        match &self.word {
            FlagStorage::Cuda(w) => Some(w.device_address()),
            FlagStorage::Cpu(_) => None,
        }
    }

    /// The context the cell belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The word, for operations that must keep it alive.
    pub(crate) fn storage(&self) -> &FlagStorage {
        &self.word
    }
}

impl<W: FlagWord> std::fmt::Debug for FlagCell<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlagCell")
            .field("value", &self.load())
            .field("device", &self.device_address())
            .finish()
    }
}

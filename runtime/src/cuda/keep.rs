//! What captured graphs keep alive: every enqueue that bakes a pointer into work hands what
//! the pointer points at to the capture it is recorded in ([`keep`]), by the capture id the
//! handle's state tracks (see `stream.rs`); ending the capture moves that list into the
//! graph, which holds it for its whole life, and every executable graph instantiated from it
//! holds it too.

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::panic_log::PanicLog;
use crate::sys::{self, CUstreamCaptureStatus};

use super::{DeviceMemory, PinnedMemory, Stream};

/// Something a graph's nodes point at, kept alive by the graph for as long as it can be
/// launched.
#[derive(Clone)]
pub(crate) enum Keep {
    /// Device memory a node reads or writes (managed memory also gates launches).
    Device(Arc<DeviceMemory>),
    /// Pinned memory a node copies from or to: each launch fences it, and host slices of it
    /// block launches.
    Pinned(Arc<PinnedMemory>),
    /// The panic log of a host node: a launch makes its stream report the node's panics.
    Panics(PanicLog),
    /// Anything else a node needs alive (a host closure, a loaded module, a flag word, an
    /// executable graph launched inside the capture); held, never looked into.
    Object(Arc<dyn Any + Send + Sync>),
}

impl Keep {
    /// The identity of what is kept, for de-duplication.
    pub(crate) fn key(&self) -> usize {
        match self {
            Keep::Device(a) => key_of(a),
            Keep::Pinned(a) => key_of(a),
            Keep::Panics(log) => log.key(),
            Keep::Object(a) => key_of(a),
        }
    }
}

/// The key ([`Keep::key`]) that keeping `shared` would have: its address.
pub(crate) fn key_of<T: ?Sized>(shared: &Arc<T>) -> usize {
    Arc::as_ptr(shared) as *const () as usize
}

/// How many keys a [`Checked`] remembers; past that its owner asks the graph's [`KeySet`],
/// which costs a hash per lookup but stays correct. Kept small: it is scanned, not hashed.
const REMEMBERED: usize = 16;

/// The keys of modules and buffers already checked against a graph (kept by it, of its
/// context), by address: a fixed array scanned first, so the nodes after the first that
/// name the same kernel and buffers cost a comparison each instead of a hash and a context
/// check. An address stays a sound key while the graph keeps what it names, since nothing it
/// keeps is freed (and its address reused) before the graph goes.
pub(crate) struct Checked {
    keys: [usize; REMEMBERED],
    len: usize,
}

impl Checked {
    /// None yet (allocates nothing).
    pub(crate) const fn new() -> Checked {
        Checked {
            keys: [0; REMEMBERED],
            len: 0,
        }
    }

    /// Whether `key` was remembered.
    #[inline]
    pub(crate) fn contains(&self, key: usize) -> bool {
        self.keys[..self.len].contains(&key)
    }

    /// Remembers `key` while there is room; past that, lookups fall back to the graph's set
    /// (see [`REMEMBERED`]).
    #[inline]
    pub(crate) fn remember(&mut self, key: usize) {
        if let Some(slot) = self.keys.get_mut(self.len) {
            *slot = key;
            self.len += 1;
        }
    }

    /// Where [`Checked::forget_back_to`] goes back to.
    #[inline]
    pub(crate) fn mark(&self) -> usize {
        self.len
    }

    /// Forgets what was remembered since `mark`: for a call that fails part-way, whose keys
    /// may not be kept after all.
    pub(crate) fn forget_back_to(&mut self, mark: usize) {
        self.len = self.len.min(mark);
    }
}

/// The keys of what a graph keeps ([`Keep::key`]): addresses, hashed by one multiply
/// instead of SipHash, since every node added to a graph looks its module and buffers up here
/// (no key comes from outside the process, so there is nothing to defend against).
pub(crate) type KeySet = HashSet<usize, BuildHasherDefault<AddressHasher>>;

/// Hashes one address: its bits times an odd constant (Fibonacci hashing), whose high bits,
/// which the table uses, depend on every bit of the address.
#[derive(Default)]
pub(crate) struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_usize(&mut self, value: usize) {
        self.write_u64(value as u64);
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0 ^ value).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl std::fmt::Debug for Keep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Keep::Device(a) => f.debug_tuple("Device").field(a).finish(),
            Keep::Pinned(a) => f.debug_tuple("Pinned").field(a).finish(),
            Keep::Panics(_) => f.write_str("Panics"),
            Keep::Object(_) => f.write_str("Object"),
        }
    }
}

/// What one capture collected: what its nodes point at, and its kernel nodes in launch order.
#[derive(Debug, Default)]
pub(crate) struct CaptureRecord {
    /// Kept alive by the graph.
    pub(crate) keep: Vec<Keep>,
    /// The kernel node each of our launches added, in launch order.
    pub(crate) kernel_nodes: Vec<sys::CUgraphNode>,
    /// Cleared when a launch's node could not be identified.
    pub(crate) kernel_nodes_complete: bool,
}

// SAFETY: node handles are identifiers only compared, never dereferenced, here.
unsafe impl Send for CaptureRecord {}

/// The record of each capture in progress, by capture id.
static CAPTURES: Mutex<Option<HashMap<u64, CaptureRecord>>> = Mutex::new(None);

pub(super) fn records() -> MutexGuard<'static, Option<HashMap<u64, CaptureRecord>>> {
    CAPTURES.lock().unwrap_or_else(PoisonError::into_inner)
}

fn with_record<R>(capture: u64, f: impl FnOnce(&mut CaptureRecord) -> R) -> R {
    let mut map = records();
    let record = map
        .get_or_insert_with(HashMap::new)
        .entry(capture)
        .or_insert_with(|| CaptureRecord {
            kernel_nodes_complete: true,
            ..CaptureRecord::default()
        });
    f(record)
}

/// Hands `item` to capture `capture`: the graph it ends in keeps it alive.
pub(crate) fn keep(capture: u64, item: Keep) {
    with_record(capture, |record| record.keep.push(item));
}

/// Records the kernel node a launch just added to capture `capture` on `stream` (call under
/// the stream's gate held exclusively, right after the launch): the stream's capture
/// dependencies right after a kernel launch are exactly that node, and no other thread can
/// enqueue on the handle in between. A launch made by code a pipeline's `call` ran is that
/// code's, like a library's, and is not recorded (see `call_scope`).
pub(crate) fn note_kernel_node(stream: &Stream, capture: u64) {
    if crate::call_scope::in_call() {
        return;
    }
    let node = captured_leaf(stream, capture);
    with_record(capture, |record| match node {
        Some(node) => record.kernel_nodes.push(node),
        None => record.kernel_nodes_complete = false,
    });
}

/// The one node the capture on `stream` would make the next work depend on, if the driver
/// reports exactly one for the capture `capture`.
fn captured_leaf(stream: &Stream, capture: u64) -> Option<sys::CUgraphNode> {
    let d = stream.bind().ok()?;
    let mut status = CUstreamCaptureStatus::NONE;
    let mut id = 0;
    let mut deps: *const sys::CUgraphNode = std::ptr::null();
    let mut count = 0;
    // SAFETY: a live stream (Stream's invariant) and valid out-pointers; the graph output is
    // not wanted (null). The caller holds the handle's gate exclusively, so no other thread
    // changes the capture's dependencies (which would free the array `deps` points at) until
    // it is read below.
    let code = unsafe {
        (d.cuStreamGetCaptureInfo)(
            stream.raw(),
            &mut status,
            &mut id,
            std::ptr::null_mut(),
            &mut deps,
            &mut count,
        )
    };
    if !code.is_success()
        || status != CUstreamCaptureStatus::ACTIVE
        || id != capture
        || count != 1
        || deps.is_null()
    {
        return None;
    }
    // SAFETY: the driver reports `count == 1` node at `deps`, valid until the next capture
    // call on the stream, which no thread can make before this read (exclusive gate, above).
    Some(unsafe { *deps })
}

#[cfg(test)]
mod tests {
    use super::{Checked, KeySet, REMEMBERED};

    /// Neighbouring and far-apart addresses are told apart, and each is kept once.
    #[test]
    fn key_sets_keep_each_address_once() {
        let mut keys = KeySet::default();
        let addresses: Vec<usize> = (0..1000).map(|i| 0x7f00_0000_0000 + i * 16).collect();
        for &a in &addresses {
            assert!(keys.insert(a));
        }
        for &a in &addresses {
            assert!(!keys.insert(a), "{a:#x} twice");
            assert!(keys.contains(&a));
        }
        assert!(!keys.contains(&(0x7f00_0000_0000 + 8)));
        assert_eq!(keys.len(), addresses.len());
    }

    #[test]
    fn remembers_what_fits_and_forgets_back_to_a_mark() {
        let mut checked = Checked::new();
        assert!(!checked.contains(8));
        for key in 1..=REMEMBERED + 3 {
            checked.remember(key * 8);
        }
        // The first `REMEMBERED` are remembered; the rest are asked of the graph's set.
        assert!((1..=REMEMBERED).all(|key| checked.contains(key * 8)));
        assert!(!checked.contains((REMEMBERED + 1) * 8));
        // A failed call goes back to the length it started from.
        checked.forget_back_to(2);
        assert_eq!(checked.mark(), 2);
        assert!(checked.contains(16) && !checked.contains(24));
    }
}

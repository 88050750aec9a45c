//! The simulated topology of CPU-backend devices made together: which pairs may address
//! each other's memory (peer access), and which pairs have enabled it.
//!
//! By default every pair may (as on an NVLink machine); a pair marked without peer access
//! (`Context::cpu_devices_without_peer_access`) behaves as two GPUs on different PCIe root
//! complexes: peer copies between them are still staged, but a kernel on one may never touch
//! the other's memory, so CI can test what a pipeline does where the topology refuses.

use std::collections::HashSet;
use std::sync::Mutex;

use super::shared::lock;

/// The topology of one set of simulated devices.
#[derive(Debug, Default)]
pub(crate) struct PeerTable {
    /// Unordered pairs (lower device first) with no direct path.
    without: HashSet<(usize, usize)>,
    /// Ordered pairs (from, to) whose peer access `from` has enabled.
    enabled: Mutex<HashSet<(usize, usize)>>,
}

impl PeerTable {
    /// A topology where the pairs in `without` (either order) have no peer access.
    pub(crate) fn without(pairs: &[(usize, usize)]) -> Self {
        PeerTable {
            without: pairs.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect(),
            enabled: Mutex::default(),
        }
    }

    /// Whether `from` can address `to`'s memory directly once peer access is enabled.
    pub(crate) fn can_access(&self, from: usize, to: usize) -> bool {
        from == to || !self.without.contains(&(from.min(to), from.max(to)))
    }

    /// Enables `from`'s access to `to`'s memory where the topology allows it; whether it is
    /// enabled now.
    pub(crate) fn enable(&self, from: usize, to: usize) -> bool {
        if !self.can_access(from, to) {
            return false;
        }
        lock(&self.enabled).insert((from, to));
        true
    }

    /// Whether `from`'s work may touch `to`'s memory now: the same device, or peer access
    /// enabled.
    pub(crate) fn enabled(&self, from: usize, to: usize) -> bool {
        from == to || lock(&self.enabled).contains(&(from, to))
    }
}

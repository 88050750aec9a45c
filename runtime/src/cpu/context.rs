//! The CPU-backend context: creates streams and events, names buffers, and owns the race detector.

#[cfg(test)]
use std::borrow::Cow;
use std::sync::{Arc, Mutex, Weak};

use super::event::{Event, EventOptions};
use super::peer::PeerTable;
use super::shared::{ContextShared, lock, on_worker_thread};
use super::stream::{Stream, StreamOptions, StreamShared};
#[cfg(test)]
use crate::vocab::access::BufferId;
use crate::vocab::attribute::SyncPolicy;
use crate::vocab::fault::{CpuFault, RaceReport};

/// Stream priorities as CUDA reports them: (least, greatest); lower numbers are higher.
const PRIORITY_RANGE: (i32, i32) = (0, -5);

/// Options of a new host context.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ContextOptions {
    /// Record every buffer access with vector clocks and report races.
    pub(crate) checked: bool,
}

/// A CPU-backend context: one simulated device. Cloning shares it; streams and events keep
/// it alive, so dropping the last handle while work is in flight is fine.
///
/// Simulated devices made together ([`Context::devices`]) share one race detector (so it
/// sees races between devices, and events of one device order streams of another, as CUDA
/// events do across devices) but not their memory: each buffer belongs to one device.
#[derive(Clone, Debug)]
pub(crate) struct Context {
    shared: Arc<ContextShared>,
    /// Which simulated device of `shared` this is.
    device: usize,
    /// The topology of the devices made together with this one.
    peers: Arc<PeerTable>,
    /// Weak, so streams own the context and not the other way round.
    streams: Arc<Mutex<Vec<Weak<StreamShared>>>>,
    /// The scheduling policy asked for: recorded, with no effect (waits always block).
    sync_policy: SyncPolicy,
}

impl Context {
    /// A context; `options.checked` turns the race detector on.
    pub(crate) fn new(options: ContextOptions) -> Self {
        Context::devices(options, 1).remove(0)
    }

    /// `count` simulated devices sharing one race detector (at least one).
    pub(crate) fn devices(options: ContextOptions, count: usize) -> Vec<Self> {
        Context::devices_without_peer_access(options, count, &[])
    }

    /// `count` simulated devices (at least one) where the pairs in `without` have no peer
    /// access.
    pub(crate) fn devices_without_peer_access(
        options: ContextOptions,
        count: usize,
        without: &[(usize, usize)],
    ) -> Vec<Self> {
        let shared = ContextShared::new(options.checked);
        let peers = Arc::new(PeerTable::without(without));
        (0..count.max(1))
            .map(|device| Context {
                shared: shared.clone(),
                device,
                peers: peers.clone(),
                streams: Arc::default(),
                sync_policy: SyncPolicy::Auto,
            })
            .collect()
    }

    /// The same context, recording `policy` as its scheduling policy.
    pub(crate) fn with_sync_policy(self, policy: SyncPolicy) -> Self {
        Context {
            sync_policy: policy,
            ..self
        }
    }

    /// The scheduling policy it was created with.
    pub(crate) fn sync_policy(&self) -> SyncPolicy {
        self.sync_policy
    }

    /// Whether `other` is a handle to this very context (device).
    pub(crate) fn same_as(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared) && self.device == other.device
    }

    /// Whether `other` is a device made together with this one (or this one): events and
    /// peer copies work between them.
    pub(crate) fn same_machine(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Whether this device can address `peer`'s memory once peer access is enabled: devices
    /// made together, on a pair the topology does not mark without it.
    pub(crate) fn can_access_peer(&self, peer: &Context) -> bool {
        self.same_machine(peer) && self.peers.can_access(self.device, peer.device)
    }

    /// Enables this device's access to `peer`'s memory where the topology allows it; whether
    /// it is enabled now.
    pub(crate) fn enable_peer_access(&self, peer: &Context) -> bool {
        self.same_machine(peer) && self.peers.enable(self.device, peer.device)
    }

    /// Whether this device's work may touch `peer`'s memory now (the same device, or peer
    /// access enabled).
    pub(crate) fn peer_access_enabled(&self, peer: &Context) -> bool {
        self.same_machine(peer) && self.peers.enabled(self.device, peer.device)
    }

    /// The simulated device's index among those made together.
    pub(crate) fn device(&self) -> usize {
        self.device
    }

    /// Whether the race detector is on.
    pub(crate) fn is_checked(&self) -> bool {
        self.shared.checked
    }

    /// (least, greatest) stream priority, as `cuCtxGetStreamPriorityRange` reports them.
    pub(crate) fn priority_range(&self) -> (i32, i32) {
        PRIORITY_RANGE
    }

    /// A new stream with its own worker thread.
    pub(crate) fn create_stream(&self, options: StreamOptions) -> Result<Stream, CpuFault> {
        let (least, greatest) = PRIORITY_RANGE;
        let priority = options.priority.clamp(greatest, least);
        let timeline = self.shared.detector().add_stream();
        let stream = Stream::spawn(self.shared.clone(), timeline, options, priority)?;
        let mut streams = lock(&self.streams);
        streams.retain(|s| s.strong_count() > 0);
        streams.push(Arc::downgrade(&stream.shared));
        Ok(stream)
    }

    /// A new event.
    pub(crate) fn create_event(&self, options: EventOptions) -> Event {
        Event::new(self.shared.clone(), options)
    }

    /// The state allocations share with the context's streams.
    pub(crate) fn shared(&self) -> &Arc<ContextShared> {
        &self.shared
    }

    /// A new buffer id, named `name` in race reports.
    #[cfg(test)]
    pub(crate) fn register_buffer(&self, name: impl Into<Cow<'static, str>>) -> BufferId {
        self.shared.register_buffer(name)
    }

    /// Reports that the host itself reads or writes buffers now (see
    /// `ContextShared::host_access`).
    #[cfg(test)]
    pub(crate) fn host_access(
        &self,
        label: impl Into<Cow<'static, str>>,
        accesses: &[(BufferId, crate::vocab::access::Access)],
    ) -> Result<(), CpuFault> {
        let whole: Vec<crate::vocab::access::Touch> = accesses
            .iter()
            .map(|&(buffer, access)| (buffer, access, crate::vocab::access::Span::ALL))
            .collect();
        self.shared.host_access(label, &whole)
    }

    /// Synchronizes every live stream of the context; returns the first fault.
    pub(crate) fn synchronize(&self) -> Result<(), CpuFault> {
        let streams: Vec<Arc<StreamShared>> = lock(&self.streams)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut first = Ok(());
        for stream in streams {
            let result = stream.synchronize();
            if first.is_ok() {
                first = result;
            }
        }
        first
    }

    /// Waits for the work queued on every live stream so far, leaving faults for the next
    /// synchronize to report: what freeing memory waits for. Returns `false` without waiting
    /// when called from inside an operation (a stream worker cannot wait for itself).
    pub(crate) fn wait_idle(&self) -> bool {
        if on_worker_thread() {
            return false;
        }
        let streams: Vec<Arc<StreamShared>> = lock(&self.streams)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for stream in streams {
            stream.drain();
        }
        true
    }

    /// Every race found so far (in checked mode), oldest first.
    pub(crate) fn races(&self) -> Vec<RaceReport> {
        self.shared.detector().races().to_vec()
    }

    /// Races found past the report limit, counted but not kept.
    pub(crate) fn dropped_races(&self) -> usize {
        self.shared.detector().dropped_races()
    }
}

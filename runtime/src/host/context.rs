//! The host context: creates streams and events, names buffers, and owns the race detector.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::error::{HostFault, RaceReport};
use super::event::{EventOptions, HostEvent};
use super::lock;
use super::op::{Access, BufferId};
use super::race::Detector;
use super::stream::{HostStream, StreamOptions, StreamShared};

/// Stream priorities as CUDA reports them: (least, greatest); lower numbers are higher.
const PRIORITY_RANGE: (i32, i32) = (0, -5);

/// Options of a new host context.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HostContextOptions {
    /// Record every buffer access with vector clocks and report races.
    pub(crate) checked: bool,
}

/// The state every stream and event of a context shares.
#[derive(Debug)]
pub(super) struct ContextShared {
    pub(super) checked: bool,
    detector: Mutex<Detector>,
    /// Weak, so streams own the context and not the other way round.
    streams: Mutex<Vec<Weak<StreamShared>>>,
}

impl ContextShared {
    /// The race detector (also holds buffer names in unchecked mode).
    pub(super) fn detector(&self) -> MutexGuard<'_, Detector> {
        lock(&self.detector)
    }
}

/// A host-backend context. Cloning shares it; streams and events keep it alive, so dropping
/// the last handle while work is in flight is fine.
#[derive(Clone, Debug)]
pub(crate) struct HostContext {
    shared: Arc<ContextShared>,
}

impl HostContext {
    /// A context; `options.checked` turns the race detector on.
    pub(crate) fn new(options: HostContextOptions) -> Self {
        HostContext {
            shared: Arc::new(ContextShared {
                checked: options.checked,
                detector: Mutex::new(Detector::default()),
                streams: Mutex::new(Vec::new()),
            }),
        }
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
    pub(crate) fn create_stream(&self, options: StreamOptions) -> Result<HostStream, HostFault> {
        let (least, greatest) = PRIORITY_RANGE;
        let priority = options.priority.clamp(greatest, least);
        let timeline = self.shared.detector().add_stream();
        let stream = HostStream::spawn(self.shared.clone(), timeline, options, priority)?;
        let mut streams = lock(&self.shared.streams);
        streams.retain(|s| s.strong_count() > 0);
        streams.push(Arc::downgrade(&stream.shared));
        Ok(stream)
    }

    /// A new event.
    pub(crate) fn create_event(&self, options: EventOptions) -> HostEvent {
        HostEvent::new(self.shared.clone(), options)
    }

    /// A new buffer id, named `name` in race reports.
    pub(crate) fn register_buffer(&self, name: impl Into<Cow<'static, str>>) -> BufferId {
        let id = BufferId::fresh();
        let name: Arc<str> = Arc::from(name.into().as_ref());
        self.shared.detector().register_buffer(id, name);
        id
    }

    /// Renames a registered buffer in later race reports.
    pub(crate) fn name_buffer(&self, buffer: BufferId, name: impl Into<Cow<'static, str>>) {
        let name: Arc<str> = Arc::from(name.into().as_ref());
        self.shared.detector().register_buffer(buffer, name);
    }

    /// Forgets a freed buffer (its name and access history).
    pub(crate) fn release_buffer(&self, buffer: BufferId) {
        self.shared.detector().release_buffer(buffer);
    }

    /// Reports that the host itself reads or writes buffers now (pinned memory). In checked
    /// mode an access that races with enqueued work returns the first race (all are kept in
    /// [`HostContext::races`]); the host is ordered after work only by synchronizes and by
    /// queries that returned complete.
    pub(crate) fn host_access(
        &self,
        label: impl Into<Cow<'static, str>>,
        accesses: &[(BufferId, Access)],
    ) -> Result<(), HostFault> {
        if !self.shared.checked {
            return Ok(());
        }
        let label: Arc<str> = Arc::from(label.into().as_ref());
        let accesses = super::op::effective_accesses(accesses, &[]);
        let races = self.shared.detector().host_access(label, &accesses);
        match races.into_iter().next() {
            Some(race) => Err(HostFault::Race(Box::new(race))),
            None => Ok(()),
        }
    }

    /// Synchronizes every live stream of the context; returns the first fault.
    pub(crate) fn synchronize(&self) -> Result<(), HostFault> {
        let streams: Vec<Arc<StreamShared>> = lock(&self.shared.streams)
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
        if super::stream::on_worker_thread() {
            return false;
        }
        let streams: Vec<Arc<StreamShared>> = lock(&self.shared.streams)
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

//! Tests of the host backend. Every test body runs under [`bounded`], so a deadlock fails the
//! test instead of hanging the suite.

mod capture;
mod oracle;
mod races;
mod streams;

use std::panic;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::{Context, ContextOptions, Op, Stream, StreamOptions};

/// The public wrappers will share these across threads.
#[test]
fn engine_types_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Context>();
    assert_send_sync::<Stream>();
    assert_send_sync::<super::Event>();
    assert_send_sync::<super::Graph>();
    assert_send_sync::<super::GraphExec>();
    assert_send_sync::<super::CpuFault>();
    assert_send_sync::<super::RaceReport>();
    fn assert_send<T: Send>() {}
    assert_send::<Op>();
}

/// How long any one test may take.
const LIMIT: Duration = Duration::from_secs(10);

/// Runs `body` on its own thread and fails if it panics or takes longer than [`LIMIT`].
fn bounded(body: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let runner = thread::spawn(move || {
        body();
        let _ = done.send(());
    });
    match finished.recv_timeout(LIMIT) {
        // Disconnected: the body panicked before sending; join to get the panic.
        Ok(()) | Err(RecvTimeoutError::Disconnected) => {
            if let Err(payload) = runner.join() {
                panic::resume_unwind(payload);
            }
        }
        Err(RecvTimeoutError::Timeout) => panic!("test did not finish within {LIMIT:?}"),
    }
}

fn context(checked: bool) -> Context {
    Context::new(ContextOptions { checked })
}

fn stream(ctx: &Context, name: &'static str) -> Stream {
    let options = StreamOptions {
        name: Some(name.into()),
        ..StreamOptions::default()
    };
    ctx.create_stream(options).expect("spawn a stream worker")
}

/// A shared, ordered record of which operations ran.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, entry: impl Into<String>) {
        self.0.lock().expect("log lock").push(entry.into());
    }

    fn entries(&self) -> Vec<String> {
        self.0.lock().expect("log lock").clone()
    }

    /// A replayable op that appends `entry` after sleeping `sleep_ms`.
    fn op(&self, entry: &'static str, sleep_ms: u64) -> Op {
        let log = self.clone();
        Op::replayable(entry, move || {
            thread::sleep(Duration::from_millis(sleep_ms));
            log.push(entry);
            Ok(())
        })
    }
}

/// A gate that holds a stream's worker until opened, making "not yet run" deterministic.
struct Gate {
    open: mpsc::Sender<()>,
    op: Option<Op>,
}

impl Gate {
    fn new() -> Self {
        let (open, opened) = mpsc::channel::<()>();
        let opened = Mutex::new(opened);
        let op = Op::replayable("gate", move || {
            let _ = opened.lock().map_err(|e| e.to_string())?.recv();
            Ok(())
        });
        Gate { open, op: Some(op) }
    }

    /// The op to enqueue (once).
    fn op(&mut self) -> Op {
        self.op.take().expect("gate op taken once")
    }

    fn open(&self) {
        let _ = self.open.send(());
    }
}

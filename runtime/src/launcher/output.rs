//! Each rank's output, forwarded line by line with a `[rank N] ` prefix and kept on request.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long output may trail a rank's exit: a process the rank started may hold its pipe
/// open (one that left the rank's process group), and the launch must not wait for it.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// A forwarding thread's end and the lines it kept.
pub(super) struct Forward {
    /// Closed when the pipe reaches its end.
    done: Receiver<()>,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Forward {
    /// Waits a little for the output to end and returns the kept lines.
    pub(super) fn finish(self) -> Vec<String> {
        // A disconnect means the forwarding thread finished; a timeout leaves it to drain
        // whatever the rank's leftovers still print.
        let _ = self.done.recv_timeout(OUTPUT_GRACE);
        std::mem::take(&mut *self.lines.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Copies `pipe` line by line to our stdout (or stderr) with `prefix`, keeping the lines
/// when `capture` is on.
pub(super) fn forward(
    pipe: impl Read + Send + 'static,
    prefix: String,
    to_stderr: bool,
    capture: bool,
) -> Forward {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let kept = lines.clone();
    let (done_tx, done) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let _done = done_tx;
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&buf);
            let line = line.trim_end_matches(['\n', '\r']);
            // One write per line under the lock, so ranks' lines never interleave.
            let text = format!("{prefix}{line}\n");
            if to_stderr {
                let _ = std::io::stderr().lock().write_all(text.as_bytes());
            } else {
                let _ = std::io::stdout().lock().write_all(text.as_bytes());
            }
            if capture {
                kept.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line.to_owned());
            }
        }
    });
    Forward { done, lines }
}

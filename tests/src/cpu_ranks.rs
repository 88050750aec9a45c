//! Ranks as threads of one process, on the CPU backend's communicator: what the
//! communication tests that need no GPU run their ranks with.

use std::time::Duration;

use gpu_pipeline::Communicator;

/// How long a rank's collective waits for the others before it fails (instead of hanging the
/// test): far more than any of these tests takes.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `rank` on `size` CPU ranks, one thread each, and returns what each returned, in rank
/// order. A rank that panics fails the caller with its panic.
pub fn on_cpu_ranks<T: Send>(
    size: usize,
    rank: impl Fn(usize, &Communicator) -> T + Sync,
) -> Vec<T> {
    let comms = Communicator::cpu_ranks_with_timeout(size, TIMEOUT)
        .expect("the CPU backend makes communicators for any number of ranks");
    std::thread::scope(|scope| {
        let handles: Vec<_> = comms
            .into_iter()
            .enumerate()
            .map(|(r, comm)| {
                let rank = &rank;
                scope.spawn(move || rank(r, &comm))
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

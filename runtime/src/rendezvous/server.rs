//! The TCP store's server: rank 0 (mpirun, srun) or the launcher.
//!
//! An accept loop hands each connection to a greeter thread of its own (at most
//! [`MAX_PENDING`] at once; more are closed at once), which runs the server's side of the
//! handshake under its own deadline. Only a rank that proved it knows the secret reaches
//! the round, which waits until every rank has joined, sends each the payload and waits for
//! every acknowledgement. A stranger (a bad frame, an impossible rank or world size, a
//! failed proof, silence) is refused and logged, and never fails the job. An authenticated
//! rank whose slot is taken is refused too (the first keeps the slot): the duplicate fails
//! on its own side, which is where the mistake is.

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::Scope;
use std::time::{Duration, Instant};

use super::secret::nonce;
use super::tcp::{ServedBy, TcpStore};
use super::wire::{self, FrameError, Hello, Kind, Role, Session, Wait};
use super::{MAX_WORLD_SIZE, RendezvousError, Result, io_error, remaining};

/// How many connections may be in their handshake at once; more are closed unanswered.
pub const MAX_PENDING: usize = 64;
/// How long a connection has to greet and prove itself.
pub const GREETING_TIMEOUT: Duration = Duration::from_secs(5);

/// A rank that proved it belongs to the job, waiting for the payload.
struct Joined {
    session: Session,
    stream: TcpStream,
    peer: SocketAddr,
    /// What it published (rank 0 to the launcher's store), else empty.
    payload: Vec<u8>,
}

impl Joined {
    fn rank(&self) -> usize {
        self.session.hello.rank as usize
    }
}

impl TcpStore {
    /// Rank 0 of a job without our launcher: listens on exactly `host:port` and serves
    /// `payload` to the `world_size - 1` other ranks. Another program on the port is an
    /// error naming it.
    pub fn serve(&self, world_size: usize, payload: &[u8]) -> Result<()> {
        let mut last = None;
        for addr in self.resolve()? {
            match TcpListener::bind(addr) {
                Ok(listener) => return self.serve_on(&listener, world_size, payload),
                Err(e) => last = Some(io_error("listen on", addr, &e)),
            }
        }
        Err(last.unwrap_or_else(|| RendezvousError::Usage("no address to listen on".into())))
    }

    /// [`serve`](Self::serve) on a listener the caller bound. Returns once every rank has
    /// received the payload, or at the timeout.
    pub fn serve_on(
        &self,
        listener: &TcpListener,
        world_size: usize,
        payload: &[u8],
    ) -> Result<()> {
        check_world(world_size)?;
        let deadline = Instant::now() + self.timeout;
        self.with_greeters(listener, world_size, None, |joins| {
            self.round(
                listener,
                joins,
                world_size,
                Some(payload),
                Some(deadline),
                None,
            )
        })?
    }

    /// The launcher's server: round after round (a program may share more than once), rank
    /// 0 publishes and the others fetch, until `stop` is set. A failed round is logged; its
    /// ranks see their connection close and fail with their own error.
    pub fn serve_job(
        &self,
        listener: &TcpListener,
        world_size: usize,
        stop: &AtomicBool,
    ) -> Result<()> {
        check_world(world_size)?;
        self.with_greeters(listener, world_size, Some(stop), |joins| {
            while !stop.load(Ordering::Relaxed) {
                match self.round(listener, joins, world_size, None, None, Some(stop)) {
                    Ok(()) => {}
                    Err(e) if stop.load(Ordering::Relaxed) => {
                        tracing::debug!(error = %e, "rendezvous stopped");
                    }
                    Err(e) => tracing::warn!(error = %e, "a rendezvous round failed"),
                }
            }
        })
    }

    /// Runs `body` while an accept loop feeds it the ranks that proved themselves.
    fn with_greeters<T>(
        &self,
        listener: &TcpListener,
        world_size: usize,
        stop: Option<&AtomicBool>,
        body: impl FnOnce(&Receiver<Joined>) -> T,
    ) -> Result<T> {
        let here = self.here(listener);
        listener
            .set_nonblocking(true)
            .map_err(|e| io_error("listen on", &here, &e))?;
        let done = AtomicBool::new(false);
        let pending = AtomicUsize::new(0);
        let (tx, rx) = mpsc::channel();
        Ok(std::thread::scope(|s| {
            let done = &done;
            let pending = &pending;
            s.spawn(move || self.accept_loop(s, listener, world_size, tx, done, stop, pending));
            let out = body(&rx);
            done.store(true, Ordering::Relaxed);
            out
        }))
    }

    #[allow(clippy::too_many_arguments)]
    fn accept_loop<'s>(
        &'s self,
        s: &'s Scope<'s, '_>,
        listener: &TcpListener,
        world_size: usize,
        tx: Sender<Joined>,
        done: &'s AtomicBool,
        stop: Option<&AtomicBool>,
        pending: &'s AtomicUsize,
    ) {
        let ended =
            || done.load(Ordering::Relaxed) || stop.is_some_and(|s| s.load(Ordering::Relaxed));
        while !ended() {
            match listener.accept() {
                Ok((stream, peer)) => {
                    if pending.load(Ordering::Relaxed) >= MAX_PENDING {
                        // Closed unanswered; a real rank retries.
                        drop(stream);
                        tracing::warn!(%peer, MAX_PENDING, "rendezvous: too many greetings");
                        continue;
                    }
                    pending.fetch_add(1, Ordering::Relaxed);
                    let tx = tx.clone();
                    s.spawn(move || {
                        let joined = self.greet(stream, peer, world_size, done);
                        pending.fetch_sub(1, Ordering::Relaxed);
                        if let Some(joined) = joined {
                            let _ = tx.send(joined);
                        }
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // E.g. out of file descriptors: keep serving the connections we have.
                    tracing::warn!(error = %e, "rendezvous could not accept a connection");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }

    /// The server's side of one handshake; `None` for a stranger (refused and logged).
    fn greet(
        &self,
        mut stream: TcpStream,
        peer: SocketAddr,
        world_size: usize,
        done: &AtomicBool,
    ) -> Option<Joined> {
        let wait = Wait {
            deadline: Instant::now() + GREETING_TIMEOUT,
            cancel: Some(done),
        };
        let refuse = |stream: &mut TcpStream, reason: String| {
            wire::refuse(stream, &reason, wait);
            tracing::warn!(%peer, %reason, "rendezvous refused a connection");
            None
        };
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_nodelay(true);
        let hello = match wire::read_frame(&mut stream, &[Kind::Hello], wait) {
            Ok((_, body)) => match Hello::decode(&body) {
                Ok(hello) => hello,
                Err(reason) => return refuse(&mut stream, reason),
            },
            Err(FrameError::Timeout) if done.load(Ordering::Relaxed) => return None,
            Err(FrameError::Timeout) => {
                return refuse(
                    &mut stream,
                    format!("it sent no greeting within {GREETING_TIMEOUT:?}"),
                );
            }
            Err(e) => return refuse(&mut stream, e.to_string()),
        };
        if let Err(reason) = self.admissible(&hello, world_size) {
            return refuse(&mut stream, reason);
        }
        let session = Session {
            hello,
            server_nonce: nonce().ok()?,
        };
        wire::write_frame(
            &mut stream,
            Kind::Challenge,
            &session.challenge(&self.auth),
            wait,
        )
        .ok()?;
        let payload = match wire::read_frame(&mut stream, &[Kind::Proof], wait) {
            Ok((_, body)) => session.open(&self.auth, false, &body),
            Err(e) => return refuse(&mut stream, format!("no proof: {e}")),
        };
        let Some(payload) = payload else {
            return refuse(
                &mut stream,
                "it failed to prove it knows the job's secret".to_owned(),
            );
        };
        if session.hello.role == Role::Fetch && !payload.is_empty() {
            return refuse(&mut stream, "a fetching rank sent a payload".to_owned());
        }
        Some(Joined {
            session,
            stream,
            peer,
            payload,
        })
    }

    /// Whether a greeting could be one of this job's ranks (checked before the proof, so an
    /// impossible claim costs nothing; only the proof makes it count).
    fn admissible(&self, hello: &Hello, world_size: usize) -> std::result::Result<(), String> {
        let rank = hello.rank as usize;
        if hello.world_size as usize != world_size {
            return Err(format!(
                "rank {rank} says the world has {} ranks; this job has {world_size}",
                hello.world_size
            ));
        }
        match (hello.role, self.served_by) {
            (Role::Fetch, _) if (1..world_size).contains(&rank) => Ok(()),
            (Role::Fetch, _) => Err(format!(
                "it claims rank {rank}, which is not one of 1..{world_size}"
            )),
            (Role::Publish, ServedBy::Launcher) if rank == 0 => Ok(()),
            (Role::Publish, _) => Err(format!("rank {rank} may not publish to this store")),
        }
    }

    /// One rendezvous: waits for every rank (and rank 0's payload when `own` is `None`),
    /// then hands the payload out and collects the acknowledgements.
    fn round(
        &self,
        listener: &TcpListener,
        joins: &Receiver<Joined>,
        world_size: usize,
        own: Option<&[u8]>,
        deadline: Option<Instant>,
        stop: Option<&AtomicBool>,
    ) -> Result<()> {
        let start = Instant::now();
        let first = usize::from(own.is_some());
        let mut joined: BTreeMap<usize, Joined> = BTreeMap::new();
        while joined.len() < world_size - first {
            let timed_out = deadline.is_some_and(|d| remaining(d).is_none());
            if timed_out || stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                let missing: Vec<usize> = (first..world_size)
                    .filter(|r| !joined.contains_key(r))
                    .collect();
                return Err(RendezvousError::Timeout {
                    rank: 0,
                    waiting_for: format!("ranks {missing:?} to connect to {}", self.here(listener)),
                    waited: start.elapsed(),
                });
            }
            match joins.recv_timeout(Duration::from_millis(50)) {
                Ok(mut j) => {
                    if let Some(taken) = joined.get(&j.rank()) {
                        let reason =
                            format!("rank {} already joined from {}", j.rank(), taken.peer);
                        wire::refuse(
                            &mut j.stream,
                            &reason,
                            self.wait(Instant::now() + GREETING_TIMEOUT),
                        );
                        let peer = j.peer;
                        tracing::warn!(%peer, %reason, "rendezvous refused a duplicate rank");
                    } else {
                        joined.insert(j.rank(), j);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(RendezvousError::Usage(
                        "the rendezvous accept loop ended".into(),
                    ));
                }
            }
        }
        let payload = match own {
            Some(payload) => payload.to_vec(),
            None => joined
                .get(&0)
                .map(|j| j.payload.clone())
                .unwrap_or_default(),
        };
        let wait = self.wait(deadline.unwrap_or_else(|| Instant::now() + self.timeout));
        // Rank 0 (when it published) hears last: its `share` returns after everyone's.
        let others: Vec<usize> = joined.keys().copied().filter(|&r| r != 0).collect();
        for rank in &others {
            self.send_payload(&mut joined, *rank, &payload, wait)?;
        }
        for rank in &others {
            self.read_ack(&mut joined, *rank, wait, start)?;
        }
        if joined.contains_key(&0) {
            self.send_payload(&mut joined, 0, &payload, wait)?;
            self.read_ack(&mut joined, 0, wait, start)?;
        }
        Ok(())
    }

    fn send_payload(
        &self,
        joined: &mut BTreeMap<usize, Joined>,
        rank: usize,
        payload: &[u8],
        wait: Wait<'_>,
    ) -> Result<()> {
        let Some(j) = joined.get_mut(&rank) else {
            return Ok(());
        };
        let body = j.session.sealed(&self.auth, true, payload);
        wire::write_frame(&mut j.stream, Kind::Payload, &body, wait).map_err(|e| {
            RendezvousError::Peer {
                peer: j.peer.to_string(),
                reason: format!("rank {rank} could not be sent the payload: {e}"),
            }
        })
    }

    fn read_ack(
        &self,
        joined: &mut BTreeMap<usize, Joined>,
        rank: usize,
        wait: Wait<'_>,
        start: Instant,
    ) -> Result<()> {
        let Some(j) = joined.get_mut(&rank) else {
            return Ok(());
        };
        let peer = j.peer.to_string();
        match wire::read_frame(&mut j.stream, &[Kind::Ack], wait) {
            Ok((_, body)) if j.session.check_ack(&self.auth, &body) => Ok(()),
            Ok(_) => Err(RendezvousError::Peer {
                peer,
                reason: format!("rank {rank}'s acknowledgement does not hold"),
            }),
            Err(FrameError::Timeout) => Err(RendezvousError::Timeout {
                rank: 0,
                waiting_for: format!("rank {rank} to acknowledge the payload"),
                waited: start.elapsed(),
            }),
            Err(e) => Err(RendezvousError::Peer {
                peer,
                reason: format!("rank {rank} did not acknowledge: {e}"),
            }),
        }
    }

    fn wait(&self, deadline: Instant) -> Wait<'static> {
        Wait {
            deadline,
            cancel: None,
        }
    }

    fn here(&self, listener: &TcpListener) -> String {
        listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| self.target())
    }
}

fn check_world(world_size: usize) -> Result<()> {
    if world_size == 0 || world_size > MAX_WORLD_SIZE {
        return Err(RendezvousError::Usage(format!(
            "a rendezvous serves 1..={MAX_WORLD_SIZE} ranks, not {world_size}"
        )));
    }
    Ok(())
}

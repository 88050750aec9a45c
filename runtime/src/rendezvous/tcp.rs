//! The TCP store as a rank sees it: where the server is, and the rank's side of the
//! handshake (see [`wire`]).

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::secret::{Auth, Secret, nonce};
use super::wire::{self, FrameError, Hello, Kind, Role, Session, Wait};
use super::{DEFAULT_TIMEOUT, MAX_WORLD_SIZE, RendezvousError, Result, io_error, remaining};

/// Who listens for the ranks of a [`TcpStore`].
///
/// ```
/// use gpu_pipeline::rendezvous::{Rendezvous, ServedBy};
/// let launched = |name: &str| match name {
///     "GPU_PIPELINE_MASTER_ADDR" => Some("127.0.0.1".to_owned()),
///     "GPU_PIPELINE_MASTER_PORT" => Some("29500".to_owned()),
///     "GPU_PIPELINE_RENDEZVOUS_SECRET" => Some("0123456789abcdef0123456789abcdef".to_owned()),
///     // what gpu-pipeline-launch sets
///     "GPU_PIPELINE_RENDEZVOUS_SERVER" => Some("launcher".to_owned()),
///     _ => None,
/// };
/// let Rendezvous::Tcp(store) = Rendezvous::from_vars(launched)? else { unreachable!() };
/// assert_eq!(store.served_by, ServedBy::Launcher);
/// # Ok::<(), gpu_pipeline::rendezvous::RendezvousError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServedBy {
    /// Rank 0 binds `host:port` itself (mpirun, srun): a bind failure is its error.
    RankZero,
    /// `gpu-pipeline-launch` bound the port before starting the ranks and serves the store;
    /// rank 0 publishes its payload to it like any other client.
    Launcher,
}

/// A store on `host:port`; the ranks connect and prove they know the job's secret (see the
/// module docs).
///
/// Two ranks meeting on this host, each on its own thread (each in its own process in a
/// real job):
///
/// ```
/// use std::time::Duration;
/// use gpu_pipeline::rendezvous::{RankInfo, Rendezvous, Secret, TcpStore};
/// // A free port, for the example.
/// let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
/// let mut store = TcpStore::new("127.0.0.1", port, Secret::generate()?);
/// store.timeout = Duration::from_secs(20);
/// let rank = |rank| RankInfo {
///     rank,
///     world_size: 2,
///     local_rank: rank,
///     local_world_size: Some(2),
///     source: "example",
/// };
/// let other = store.clone();
/// let rank1 = std::thread::spawn(move || other.fetch(1, 2));
/// // Rank 0 serves (`ServedBy::RankZero`) and returns once rank 1 has the payload.
/// let shared = Rendezvous::Tcp(store).share(&rank(0), Some(b"nccl unique id"))?;
/// assert_eq!(shared, b"nccl unique id");
/// assert_eq!(rank1.join().unwrap()?, b"nccl unique id");
/// # Ok::<(), gpu_pipeline::rendezvous::RendezvousError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpStore {
    /// The host the server listens on and the ranks connect to (name or address).
    pub host: String,
    /// The port.
    pub port: u16,
    /// How long to wait for the other ranks.
    pub timeout: Duration,
    /// How peers prove they belong to the job.
    pub auth: Auth,
    /// Who serves the store.
    pub served_by: ServedBy,
}

impl TcpStore {
    /// A store at `host:port` served by rank 0, with the [`DEFAULT_TIMEOUT`].
    pub fn new(host: impl Into<String>, port: u16, secret: Secret) -> TcpStore {
        TcpStore {
            host: host.into(),
            port,
            timeout: DEFAULT_TIMEOUT,
            auth: Auth::Secret(secret),
            served_by: ServedBy::RankZero,
        }
    }

    pub(crate) fn target(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    pub(crate) fn resolve(&self) -> Result<Vec<SocketAddr>> {
        let addrs: Vec<SocketAddr> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| io_error("resolve", self.target(), &e))?
            .collect();
        if addrs.is_empty() {
            return Err(RendezvousError::Io {
                action: "resolve",
                target: self.target(),
                message: "the name has no address".to_owned(),
            });
        }
        Ok(addrs)
    }

    /// Rank `rank` (not 0): connects to the server, retrying until it listens, and returns
    /// the payload once every rank has joined.
    pub fn fetch(&self, rank: usize, world_size: usize) -> Result<Vec<u8>> {
        if rank == 0 || rank >= world_size || world_size > MAX_WORLD_SIZE {
            return Err(RendezvousError::Usage(format!(
                "TcpStore::fetch is for ranks 1..{world_size} of at most {MAX_WORLD_SIZE}, \
                 not rank {rank}"
            )));
        }
        self.exchange(Role::Fetch, rank, world_size, &[])
    }

    /// Rank 0 of a job whose launcher serves the store ([`ServedBy::Launcher`]): hands
    /// `payload` to the server and returns once every rank has it.
    pub fn publish(&self, world_size: usize, payload: &[u8]) -> Result<()> {
        if world_size > MAX_WORLD_SIZE {
            return Err(RendezvousError::Usage(format!(
                "a job has at most {MAX_WORLD_SIZE} ranks, not {world_size}"
            )));
        }
        let echoed = self.exchange(Role::Publish, 0, world_size, payload)?;
        if echoed != payload {
            return Err(RendezvousError::Peer {
                peer: self.target(),
                reason: "the server handed back another payload than rank 0 published".into(),
            });
        }
        Ok(())
    }

    /// The rank's side of the rendezvous: connects and runs the handshake, again while the
    /// server closes the connection before its challenge (it has [`MAX_PENDING`] greetings
    /// already, or is a stale one going away).
    ///
    /// [`MAX_PENDING`]: super::MAX_PENDING
    fn exchange(&self, role: Role, rank: usize, world_size: usize, out: &[u8]) -> Result<Vec<u8>> {
        let start = Instant::now();
        let deadline = start + self.timeout;
        let mut backoff = Duration::from_millis(10);
        loop {
            let stream = self.connect(rank, start, deadline)?;
            match self.handshake(stream, role, rank, world_size, out, start, deadline) {
                Ok(payload) => return Ok(payload),
                Err(Step::Fail(e)) => return Err(e),
                Err(Step::Closed(reason)) => {
                    let Some(left) = remaining(deadline) else {
                        return Err(RendezvousError::Timeout {
                            rank,
                            waiting_for: format!(
                                "the server at {} to answer ({reason})",
                                self.target()
                            ),
                            waited: start.elapsed(),
                        });
                    };
                    std::thread::sleep(backoff.min(left));
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn handshake(
        &self,
        mut stream: TcpStream,
        role: Role,
        rank: usize,
        world_size: usize,
        out: &[u8],
        start: Instant,
        deadline: Instant,
    ) -> std::result::Result<Vec<u8>, Step> {
        let wait = Wait {
            deadline,
            cancel: None,
        };
        let target = self.target();
        let timeout = |what: &str| {
            Step::Fail(RendezvousError::Timeout {
                rank,
                waiting_for: what.to_owned(),
                waited: start.elapsed(),
            })
        };
        let bad = |reason: String| {
            Step::Fail(RendezvousError::Peer {
                peer: target.clone(),
                reason,
            })
        };
        let _ = stream.set_nodelay(true);
        let hello = Hello {
            role,
            rank: rank as u32,
            world_size: world_size as u32,
            nonce: nonce().map_err(Step::Fail)?,
        };
        wire::write_frame(&mut stream, Kind::Hello, &hello.encode(), wait)
            .map_err(|e| Step::Closed(format!("the greeting could not be sent: {e}")))?;
        let body = match wire::read_frame(&mut stream, &[Kind::Challenge, Kind::Refused], wait) {
            Ok((Kind::Refused, reason)) => return Err(refused(&bad, rank, &reason)),
            Ok((_, body)) => body,
            Err(FrameError::Timeout) => return Err(timeout("the server's challenge")),
            Err(FrameError::Io(e)) => return Err(Step::Closed(format!("it hung up: {e}"))),
            Err(FrameError::Malformed(reason)) => return Err(bad(reason)),
        };
        let Some(session) = Session::accept_challenge(&hello, &self.auth, &body) else {
            return Err(bad(
                "the server failed to prove it knows the job's secret: it is not this job's \
                 rendezvous (another program or another job on the port?); this rank told \
                 it nothing"
                    .to_owned(),
            ));
        };
        let proof = session.sealed(&self.auth, false, out);
        wire::write_frame(&mut stream, Kind::Proof, &proof, wait)
            .map_err(|e| bad(format!("the server hung up before the proof was sent: {e}")))?;
        let waiting = "the payload (the other ranks have not all joined)";
        let body = match wire::read_frame(&mut stream, &[Kind::Payload, Kind::Refused], wait) {
            Ok((Kind::Refused, reason)) => return Err(refused(&bad, rank, &reason)),
            Ok((_, body)) => body,
            Err(FrameError::Timeout) => return Err(timeout(waiting)),
            Err(FrameError::Io(e)) => {
                return Err(bad(format!(
                    "the server hung up while this rank waited for {waiting} ({e}); its own \
                     error says why"
                )));
            }
            Err(FrameError::Malformed(reason)) => return Err(bad(reason)),
        };
        let payload = session
            .open(&self.auth, true, &body)
            .ok_or_else(|| bad("the payload's tag does not hold: it was altered".to_owned()))?;
        wire::write_frame(&mut stream, Kind::Ack, &session.ack(&self.auth), wait).map_err(|e| {
            bad(format!(
                "the server hung up before the acknowledgement: {e}"
            ))
        })?;
        Ok(payload)
    }

    /// Connects, retrying with a growing pause until the server listens or the deadline.
    fn connect(&self, rank: usize, start: Instant, deadline: Instant) -> Result<TcpStream> {
        let addrs = self.resolve()?;
        let mut backoff = Duration::from_millis(10);
        loop {
            let mut last_error = String::new();
            for addr in &addrs {
                let Some(left) = remaining(deadline) else {
                    break;
                };
                match TcpStream::connect_timeout(addr, left.min(Duration::from_secs(2))) {
                    Ok(stream) => return Ok(stream),
                    Err(e) => last_error = e.to_string(),
                }
            }
            let Some(left) = remaining(deadline) else {
                return Err(RendezvousError::Timeout {
                    rank,
                    waiting_for: format!(
                        "the rendezvous server to listen on {} (last attempt: {last_error})",
                        self.target()
                    ),
                    waited: start.elapsed(),
                });
            };
            std::thread::sleep(backoff.min(left));
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }
}

/// How one handshake ended, short of the payload.
enum Step {
    /// The server closed the connection before its challenge: try again.
    Closed(String),
    /// A final error.
    Fail(RendezvousError),
}

fn refused(bad: &impl Fn(String) -> Step, rank: usize, reason: &[u8]) -> Step {
    bad(format!(
        "the server refused rank {rank}: {}",
        String::from_utf8_lossy(reason)
    ))
}

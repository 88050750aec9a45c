//! How ranks meet: which rank this process is, and a store through which rank 0 hands every
//! other rank a few bytes (NCCL's unique id) before they build a communicator.
//!
//! - [`RankInfo::from_env`] reads the rank from the variables a launcher sets: ours and
//!   torchrun's (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`), Open MPI's (`OMPI_COMM_WORLD_*`), MPICH's
//!   (`PMI_RANK`, ...) and Slurm's (`SLURM_PROCID`, ...).
//! - [`TcpStore`]: rank 0 listens on `GPU_PIPELINE_MASTER_ADDR:GPU_PIPELINE_MASTER_PORT`
//!   (or `MASTER_ADDR:MASTER_PORT`); every other rank connects, retrying until rank 0 is up,
//!   and says who it is; once all have joined, rank 0 sends each the payload. So `share`
//!   returns on every rank only after all ranks arrived: a barrier too.
//! - [`FileStore`]: rank 0 writes the payload to a file on a shared file system (atomically,
//!   by rename); the others poll for it and acknowledge with a file each.
//!
//! Nothing waits forever: every wait ends at the store's timeout with
//! [`RendezvousError::Timeout`]. A connection that is not one of this job's ranks (another
//! program, or another job's key: `GPU_PIPELINE_RENDEZVOUS_KEY`, which our launcher sets at
//! random) is refused and told why, while rank 0 goes on waiting for its own ranks; one of
//! this job's ranks with a wrong world size, an impossible or a duplicate rank fails the job
//! with [`RendezvousError::Peer`]. The key also keeps a stale file of an earlier run from
//! being read as this run's.
//!
//! ```no_run
//! use gpu_pipeline::rendezvous::{RankInfo, Rendezvous};
//! # fn main() -> Result<(), gpu_pipeline::rendezvous::RendezvousError> {
//! let me = RankInfo::from_env()?;
//! let store = Rendezvous::from_env()?;
//! let token = if me.is_root() { Some(&b"hello"[..]) } else { None };
//! let shared = store.share(&me, token)?;
//! assert_eq!(shared, b"hello");
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// This process's rank (`RANK`), read by [`RankInfo::from_env`].
pub const RANK_ENV: &str = "RANK";
/// The number of ranks (`WORLD_SIZE`).
pub const WORLD_SIZE_ENV: &str = "WORLD_SIZE";
/// This process's rank among those of its host (`LOCAL_RANK`): which GPU it drives.
pub const LOCAL_RANK_ENV: &str = "LOCAL_RANK";
/// The number of ranks on this host (`LOCAL_WORLD_SIZE`).
pub const LOCAL_WORLD_SIZE_ENV: &str = "LOCAL_WORLD_SIZE";
/// The host rank 0 listens on for [`TcpStore`] (falls back to `MASTER_ADDR`).
pub const MASTER_ADDR_ENV: &str = "GPU_PIPELINE_MASTER_ADDR";
/// The port rank 0 listens on for [`TcpStore`] (falls back to `MASTER_PORT`).
pub const MASTER_PORT_ENV: &str = "GPU_PIPELINE_MASTER_PORT";
/// A file path for [`FileStore`]; when set, [`Rendezvous::from_env`] prefers it to TCP.
pub const RENDEZVOUS_FILE_ENV: &str = "GPU_PIPELINE_RENDEZVOUS_FILE";
/// A number every rank of one job shares (decimal or `0x` hex); ranks of other jobs are
/// refused. Unset: 0.
pub const RENDEZVOUS_KEY_ENV: &str = "GPU_PIPELINE_RENDEZVOUS_KEY";
/// How long to wait for the other ranks, in seconds (fractions allowed).
pub const RENDEZVOUS_TIMEOUT_ENV: &str = "GPU_PIPELINE_RENDEZVOUS_TIMEOUT";

/// How long a store waits for the other ranks by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The largest payload a store carries (NCCL's id is 128 bytes).
pub const MAX_PAYLOAD: usize = 64 * 1024;

/// Why ranks could not meet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RendezvousError {
    /// The environment does not say who this rank is or where to meet, or says it wrongly.
    #[error("{message}")]
    Environment {
        /// What is missing or wrong, naming the variables.
        message: String,
    },
    /// A socket or file operation failed.
    #[error("could not {action} `{target}`: {message}")]
    Io {
        /// What was being done, e.g. `listen on`.
        action: &'static str,
        /// The address or path.
        target: String,
        /// The operating system's message.
        message: String,
    },
    /// The other ranks did not arrive in time.
    #[error("rank {rank} gave up after {waited:?} waiting for {waiting_for}")]
    Timeout {
        /// The rank that gave up.
        rank: usize,
        /// What it was waiting for, e.g. `ranks [2, 3] to connect to 10.0.0.1:29500`.
        waiting_for: String,
        /// How long it waited.
        waited: Duration,
    },
    /// A peer broke the protocol: another program, another job, a duplicate or out-of-range
    /// rank, a different world size, or rank 0 refusing or hanging up.
    #[error("rendezvous peer `{peer}`: {reason}")]
    Peer {
        /// The peer's address (or the file).
        peer: String,
        /// What was wrong.
        reason: String,
    },
    /// The API was called wrongly (e.g. rank 0 without a payload).
    #[error("{0}")]
    Usage(String),
}

/// Results of this module.
pub type Result<T, E = RendezvousError> = std::result::Result<T, E>;

fn env_error(message: impl Into<String>) -> RendezvousError {
    RendezvousError::Environment {
        message: message.into(),
    }
}

fn io_error(action: &'static str, target: impl fmt::Display, e: &io::Error) -> RendezvousError {
    RendezvousError::Io {
        action,
        target: target.to_string(),
        message: e.to_string(),
    }
}

// ---- who am I ---------------------------------------------------------------------------------

/// Where a launcher put the rank: one family of variables, read together.
struct Family {
    name: &'static str,
    rank: &'static str,
    size: &'static str,
    local_rank: &'static str,
    local_size: Option<&'static str>,
}

/// Tried in this order; the first whose rank variable is set is used, alone.
const FAMILIES: [Family; 4] = [
    Family {
        name: "gpu-pipeline-launch / torchrun",
        rank: RANK_ENV,
        size: WORLD_SIZE_ENV,
        local_rank: LOCAL_RANK_ENV,
        local_size: Some(LOCAL_WORLD_SIZE_ENV),
    },
    Family {
        name: "Open MPI",
        rank: "OMPI_COMM_WORLD_RANK",
        size: "OMPI_COMM_WORLD_SIZE",
        local_rank: "OMPI_COMM_WORLD_LOCAL_RANK",
        local_size: Some("OMPI_COMM_WORLD_LOCAL_SIZE"),
    },
    Family {
        name: "MPICH / Intel MPI",
        rank: "PMI_RANK",
        size: "PMI_SIZE",
        local_rank: "MPI_LOCALRANKID",
        local_size: Some("MPI_LOCALNRANKS"),
    },
    Family {
        name: "Slurm",
        rank: "SLURM_PROCID",
        size: "SLURM_NTASKS",
        local_rank: "SLURM_LOCALID",
        local_size: None,
    },
];

/// Which rank this process is, of how many, and which on its host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankInfo {
    /// This rank, `0..world_size`.
    pub rank: usize,
    /// The number of ranks.
    pub world_size: usize,
    /// The rank among this host's ranks: the GPU ordinal to use.
    pub local_rank: usize,
    /// The number of ranks on this host, when the launcher says.
    pub local_world_size: Option<usize>,
    /// Which launcher's variables it came from, e.g. `Slurm`.
    pub source: &'static str,
}

impl RankInfo {
    /// Rank 0 of 1: a program run without a launcher.
    pub fn single() -> RankInfo {
        RankInfo {
            rank: 0,
            world_size: 1,
            local_rank: 0,
            local_world_size: Some(1),
            source: "single process",
        }
    }

    /// Reads the rank from the environment (see the module docs for the variables).
    pub fn from_env() -> Result<RankInfo> {
        RankInfo::from_vars(|name| std::env::var(name).ok())
    }

    /// [`RankInfo::from_env`], or [`RankInfo::single`] when no launcher variable is set at all
    /// (a malformed one is still an error).
    pub fn from_env_or_single() -> Result<RankInfo> {
        let get = |name: &str| std::env::var(name).ok();
        if FAMILIES.iter().all(|f| get(f.rank).is_none()) {
            return Ok(RankInfo::single());
        }
        RankInfo::from_vars(get)
    }

    /// [`RankInfo::from_env`] over any variable lookup (for tests and embedding).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<RankInfo> {
        let Some(family) = FAMILIES.iter().find(|f| get(f.rank).is_some()) else {
            let names: Vec<&str> = FAMILIES.iter().map(|f| f.rank).collect();
            return Err(env_error(format!(
                "no rank in the environment: none of {} is set; start the program with \
                 `gpu-pipeline-launch -n N -- PROGRAM`, mpirun or srun",
                names.join(", ")
            )));
        };
        let number = |name: &str| -> Result<Option<usize>> {
            match get(name) {
                None => Ok(None),
                Some(value) => value.trim().parse().map(Some).map_err(|_| {
                    env_error(format!(
                        "{name}={value:?} is not a non-negative integer ({} launcher variables)",
                        family.name
                    ))
                }),
            }
        };
        let rank = number(family.rank)?.unwrap_or_default();
        let world_size = number(family.size)?.ok_or_else(|| {
            env_error(format!(
                "{} is set but {} is not; set both",
                family.rank, family.size
            ))
        })?;
        // Without a local rank, assume one host: the rank is the GPU ordinal.
        let local_rank = number(family.local_rank)?.unwrap_or(rank);
        let local_world_size = match family.local_size {
            Some(name) => number(name)?,
            None => None,
        };
        if rank >= world_size {
            return Err(env_error(format!(
                "{}={rank} is not below {}={world_size}",
                family.rank, family.size
            )));
        }
        if let Some(local) = local_world_size
            && local_rank >= local
        {
            return Err(env_error(format!(
                "the local rank {local_rank} is not below the local world size {local}"
            )));
        }
        Ok(RankInfo {
            rank,
            world_size,
            local_rank,
            local_world_size,
            source: family.name,
        })
    }

    /// Whether this is rank 0, which creates and shares the id.
    pub fn is_root(&self) -> bool {
        self.rank == 0
    }
}

// ---- stores -------------------------------------------------------------------------------------

/// A store ranks meet through, chosen from the environment by [`Rendezvous::from_env`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rendezvous {
    /// Rank 0 serves the payload over TCP.
    Tcp(TcpStore),
    /// Rank 0 writes the payload to a shared file.
    File(FileStore),
}

impl Rendezvous {
    /// [`FileStore`] when `GPU_PIPELINE_RENDEZVOUS_FILE` is set, else [`TcpStore`] at
    /// `GPU_PIPELINE_MASTER_ADDR` / `GPU_PIPELINE_MASTER_PORT` (or `MASTER_ADDR` /
    /// `MASTER_PORT`); the key and timeout from their variables.
    pub fn from_env() -> Result<Rendezvous> {
        Rendezvous::from_vars(|name| std::env::var(name).ok())
    }

    /// [`Rendezvous::from_env`] over any variable lookup.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Rendezvous> {
        let key = match get(RENDEZVOUS_KEY_ENV) {
            None => 0,
            Some(text) => parse_key(&text).ok_or_else(|| {
                env_error(format!(
                    "{RENDEZVOUS_KEY_ENV}={text:?} is not a 64-bit number (decimal or 0x hex)"
                ))
            })?,
        };
        let timeout = match get(RENDEZVOUS_TIMEOUT_ENV) {
            None => DEFAULT_TIMEOUT,
            Some(text) => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .ok_or_else(|| {
                    env_error(format!(
                        "{RENDEZVOUS_TIMEOUT_ENV}={text:?} is not a number of seconds"
                    ))
                })?,
        };
        if let Some(path) = get(RENDEZVOUS_FILE_ENV).filter(|p| !p.is_empty()) {
            return Ok(Rendezvous::File(FileStore {
                path: PathBuf::from(path),
                timeout,
                key,
            }));
        }
        let either = |ours: &str, theirs: &str| get(ours).or_else(|| get(theirs));
        let (Some(host), Some(port)) = (
            either(MASTER_ADDR_ENV, "MASTER_ADDR"),
            either(MASTER_PORT_ENV, "MASTER_PORT"),
        ) else {
            return Err(env_error(format!(
                "no rendezvous in the environment: set {MASTER_ADDR_ENV} and {MASTER_PORT_ENV} \
                 (or MASTER_ADDR and MASTER_PORT) for TCP, or {RENDEZVOUS_FILE_ENV} for a shared \
                 file"
            )));
        };
        let port = port
            .trim()
            .parse::<u16>()
            .map_err(|_| env_error(format!("the rendezvous port {port:?} is not a port number")))?;
        Ok(Rendezvous::Tcp(TcpStore {
            host,
            port,
            timeout,
            key,
        }))
    }

    /// Hands rank 0's `payload` to every rank: rank 0 passes `Some`, the others `None`; every
    /// rank returns the payload once all ranks have it (rank 0 waits for all of them).
    pub fn share(&self, me: &RankInfo, payload: Option<&[u8]>) -> Result<Vec<u8>> {
        match (me.is_root(), payload) {
            (true, Some(payload)) => {
                if payload.len() > MAX_PAYLOAD {
                    return Err(RendezvousError::Usage(format!(
                        "a rendezvous payload has at most {MAX_PAYLOAD} bytes, not {}",
                        payload.len()
                    )));
                }
                if me.world_size > 1 {
                    match self {
                        Rendezvous::Tcp(store) => store.serve(me.world_size, payload)?,
                        Rendezvous::File(store) => store.publish(me.world_size, payload)?,
                    }
                }
                Ok(payload.to_vec())
            }
            (false, None) => match self {
                Rendezvous::Tcp(store) => store.fetch(me.rank, me.world_size),
                Rendezvous::File(store) => store.fetch(me.rank, me.world_size),
            },
            (true, None) => Err(RendezvousError::Usage(
                "rank 0 must pass the payload to share".to_owned(),
            )),
            (false, Some(_)) => Err(RendezvousError::Usage(format!(
                "only rank 0 passes a payload, and this is rank {}",
                me.rank
            ))),
        }
    }
}

fn parse_key(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The time left before `deadline`, or `None` once it has passed.
fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

// ---- TCP ------------------------------------------------------------------------------------------

const MAGIC: [u8; 4] = *b"GPRV";
const PROTOCOL: u8 = 1;
const HELLO_LEN: usize = 4 + 1 + 4 + 4 + 8;
const STATUS_OK: u8 = 0;
const STATUS_REFUSED: u8 = 1;
const ACK: u8 = 0x06;
/// How long rank 0 waits for a connection's greeting before refusing it.
const GREETING_TIMEOUT: Duration = Duration::from_secs(5);

/// What rank 0 makes of a connection.
enum Verdict {
    /// One of this job's ranks.
    Join(usize),
    /// Not this job's (another program, another job's key): refused, and rank 0 goes on.
    Stranger(String),
    /// This job's key, but a rank or world size that cannot be: the job fails.
    Misconfigured(String),
}

/// Rank 0 serves the payload on `host:port`; the other ranks connect (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpStore {
    /// The host rank 0 listens on and the others connect to (name or address).
    pub host: String,
    /// The port.
    pub port: u16,
    /// How long to wait for the other ranks.
    pub timeout: Duration,
    /// The job key every rank must present.
    pub key: u64,
}

/// The first message of a connecting rank.
struct Hello {
    rank: usize,
    world_size: usize,
    key: u64,
}

impl Hello {
    fn encode(&self) -> [u8; HELLO_LEN] {
        let mut out = [0u8; HELLO_LEN];
        out[..4].copy_from_slice(&MAGIC);
        out[4] = PROTOCOL;
        out[5..9].copy_from_slice(&(self.rank as u32).to_le_bytes());
        out[9..13].copy_from_slice(&(self.world_size as u32).to_le_bytes());
        out[13..21].copy_from_slice(&self.key.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8; HELLO_LEN]) -> std::result::Result<Hello, String> {
        if bytes[..4] != MAGIC {
            return Err("it does not speak the gpu-pipeline rendezvous protocol".to_owned());
        }
        if bytes[4] != PROTOCOL {
            return Err(format!(
                "it speaks rendezvous protocol {}, this rank {PROTOCOL}",
                bytes[4]
            ));
        }
        let u32_at =
            |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let mut key = [0u8; 8];
        key.copy_from_slice(&bytes[13..21]);
        Ok(Hello {
            rank: u32_at(5) as usize,
            world_size: u32_at(9) as usize,
            key: u64::from_le_bytes(key),
        })
    }
}

/// Reads exactly `buf.len()` bytes before `deadline`; `Ok(false)` when the time ran out.
fn read_before(stream: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> io::Result<bool> {
    let mut filled = 0;
    while filled < buf.len() {
        let Some(left) = remaining(deadline) else {
            return Ok(false);
        };
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf[filled..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Writes all of `data`, giving up at `deadline`.
fn write_before(stream: &mut TcpStream, data: &[u8], deadline: Instant) -> io::Result<()> {
    let left = remaining(deadline).unwrap_or(Duration::from_millis(1));
    stream.set_write_timeout(Some(left))?;
    stream.write_all(data)?;
    stream.flush()
}

fn reply(status: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + body.len());
    out.extend_from_slice(&MAGIC);
    out.push(status);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    out
}

impl TcpStore {
    /// A store at `host:port` with the [`DEFAULT_TIMEOUT`] and key 0.
    pub fn new(host: impl Into<String>, port: u16) -> TcpStore {
        TcpStore {
            host: host.into(),
            port,
            timeout: DEFAULT_TIMEOUT,
            key: 0,
        }
    }

    fn target(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    fn resolve(&self) -> Result<Vec<SocketAddr>> {
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

    /// Rank 0: listens on `host:port` and serves `payload` to the `world_size - 1` other ranks.
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

    /// [`serve`](Self::serve) on a listener the caller bound (e.g. to port 0, whose number it
    /// then tells the other ranks). Returns once every rank has received the payload.
    pub fn serve_on(
        &self,
        listener: &TcpListener,
        world_size: usize,
        payload: &[u8],
    ) -> Result<()> {
        let here = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| self.target());
        let start = Instant::now();
        let deadline = start + self.timeout;
        listener
            .set_nonblocking(true)
            .map_err(|e| io_error("listen on", &here, &e))?;
        let mut peers: Vec<Option<(TcpStream, SocketAddr)>> =
            (0..world_size).map(|_| None).collect();
        let mut joined = 1;
        while joined < world_size {
            let (mut stream, addr) = match listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let Some(left) = remaining(deadline) else {
                        let missing: Vec<usize> =
                            (1..world_size).filter(|&r| peers[r].is_none()).collect();
                        return Err(RendezvousError::Timeout {
                            rank: 0,
                            waiting_for: format!("ranks {missing:?} to connect to {here}"),
                            waited: start.elapsed(),
                        });
                    };
                    std::thread::sleep(left.min(Duration::from_millis(5)));
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_error("accept a rank on", &here, &e)),
            };
            let peer = addr.to_string();
            let bad = |reason: String| RendezvousError::Peer {
                peer: peer.clone(),
                reason,
            };
            stream
                .set_nonblocking(false)
                .map_err(|e| io_error("talk to", &peer, &e))?;
            // A rank greets as soon as it connects; anything slower is not one of ours.
            let greeting_deadline = deadline.min(Instant::now() + GREETING_TIMEOUT);
            let mut hello = [0u8; HELLO_LEN];
            let verdict = match read_before(&mut stream, &mut hello, greeting_deadline) {
                Ok(true) => match Hello::decode(&hello) {
                    Ok(h) => self.judge(&h, world_size, &peers),
                    Err(reason) => Verdict::Stranger(reason),
                },
                Ok(false) => Verdict::Stranger(format!(
                    "it connected but sent no greeting within {GREETING_TIMEOUT:?}"
                )),
                Err(e) => Verdict::Stranger(format!("it hung up before greeting: {e}")),
            };
            match verdict {
                Verdict::Join(rank) => {
                    peers[rank] = Some((stream, addr));
                    joined += 1;
                }
                // Not this job's: refuse it and keep waiting for our ranks.
                Verdict::Stranger(reason) => {
                    let _ = write_before(
                        &mut stream,
                        &reply(STATUS_REFUSED, reason.as_bytes()),
                        greeting_deadline,
                    );
                    tracing::warn!(peer = %peer, %reason, "rendezvous refused a connection");
                }
                // This job's, but inconsistent: the job cannot succeed.
                Verdict::Misconfigured(reason) => {
                    let _ = write_before(
                        &mut stream,
                        &reply(STATUS_REFUSED, reason.as_bytes()),
                        greeting_deadline,
                    );
                    return Err(bad(reason));
                }
            }
        }
        let message = reply(STATUS_OK, payload);
        for (rank, (stream, addr)) in peers
            .iter_mut()
            .enumerate()
            .filter_map(|(r, p)| p.as_mut().map(|p| (r, p)))
        {
            write_before(stream, &message, deadline).map_err(|e| RendezvousError::Peer {
                peer: addr.to_string(),
                reason: format!("rank {rank} could not be sent the payload: {e}"),
            })?;
        }
        for (rank, (stream, addr)) in peers
            .iter_mut()
            .enumerate()
            .filter_map(|(r, p)| p.as_mut().map(|p| (r, p)))
        {
            let mut ack = [0u8; 1];
            match read_before(stream, &mut ack, deadline) {
                Ok(true) if ack[0] == ACK => {}
                Ok(true) => {
                    return Err(RendezvousError::Peer {
                        peer: addr.to_string(),
                        reason: format!("rank {rank} acknowledged with byte {:#x}", ack[0]),
                    });
                }
                Ok(false) => {
                    return Err(RendezvousError::Timeout {
                        rank: 0,
                        waiting_for: format!("rank {rank} to acknowledge the payload"),
                        waited: start.elapsed(),
                    });
                }
                Err(e) => {
                    return Err(RendezvousError::Peer {
                        peer: addr.to_string(),
                        reason: format!("rank {rank} hung up before acknowledging: {e}"),
                    });
                }
            }
        }
        Ok(())
    }

    /// Whether a greeting rank may join: another job's key makes it a stranger (refused,
    /// while rank 0 goes on waiting); a wrong world size, rank or a duplicate, with this
    /// job's key, means the job is misconfigured (an error for every rank).
    fn judge(
        &self,
        h: &Hello,
        world_size: usize,
        peers: &[Option<(TcpStream, SocketAddr)>],
    ) -> Verdict {
        if h.key != self.key {
            Verdict::Stranger(format!(
                "it belongs to another job (key {:#x}, this job's is {:#x})",
                h.key, self.key
            ))
        } else if h.world_size != world_size {
            Verdict::Misconfigured(format!(
                "rank {} says the world has {} ranks; rank 0 says {world_size}",
                h.rank, h.world_size
            ))
        } else if h.rank == 0 || h.rank >= world_size {
            Verdict::Misconfigured(format!(
                "it claims rank {}, which is not one of 1..{world_size}",
                h.rank
            ))
        } else if let Some((_, first)) = &peers[h.rank] {
            Verdict::Misconfigured(format!("rank {} already joined from {first}", h.rank))
        } else {
            Verdict::Join(h.rank)
        }
    }

    /// Rank `rank` (not 0): connects to rank 0, retrying until it listens, and returns the
    /// payload once every rank has joined.
    pub fn fetch(&self, rank: usize, world_size: usize) -> Result<Vec<u8>> {
        if rank == 0 || rank >= world_size || world_size > u32::MAX as usize {
            return Err(RendezvousError::Usage(format!(
                "TcpStore::fetch is for ranks 1..{world_size}, not rank {rank}"
            )));
        }
        let target = self.target();
        let addrs = self.resolve()?;
        let start = Instant::now();
        let deadline = start + self.timeout;
        let timeout = |what: String| RendezvousError::Timeout {
            rank,
            waiting_for: what,
            waited: start.elapsed(),
        };
        let mut backoff = Duration::from_millis(10);
        let mut stream = 'connect: loop {
            let mut last_error = String::new();
            for addr in &addrs {
                let Some(left) = remaining(deadline) else {
                    break;
                };
                match TcpStream::connect_timeout(addr, left.min(Duration::from_secs(2))) {
                    Ok(stream) => break 'connect stream,
                    Err(e) => last_error = e.to_string(),
                }
            }
            let Some(left) = remaining(deadline) else {
                return Err(timeout(format!(
                    "rank 0 to listen on {target} (last attempt: {last_error})"
                )));
            };
            std::thread::sleep(backoff.min(left));
            backoff = (backoff * 2).min(Duration::from_millis(500));
        };
        let peer = target.clone();
        let bad = |reason: String| RendezvousError::Peer {
            peer: peer.clone(),
            reason,
        };
        let _ = stream.set_nodelay(true);
        let hello = Hello {
            rank,
            world_size,
            key: self.key,
        };
        write_before(&mut stream, &hello.encode(), deadline)
            .map_err(|e| bad(format!("rank 0 hung up before the greeting was sent: {e}")))?;
        let mut header = [0u8; 9];
        let waiting = "rank 0 to send the payload (the other ranks have not all joined)";
        match read_before(&mut stream, &mut header, deadline) {
            Ok(true) => {}
            Ok(false) => return Err(timeout(waiting.to_owned())),
            Err(e) => {
                return Err(bad(format!(
                    "rank 0 hung up before sending the payload ({e}); its own error says why"
                )));
            }
        }
        if header[..4] != MAGIC {
            return Err(bad(
                "it does not speak the gpu-pipeline rendezvous protocol".to_owned(),
            ));
        }
        let len = u32::from_le_bytes([header[5], header[6], header[7], header[8]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(bad(format!(
                "it announced {len} bytes, more than the {MAX_PAYLOAD} a rendezvous carries"
            )));
        }
        let mut body = vec![0u8; len];
        match read_before(&mut stream, &mut body, deadline) {
            Ok(true) => {}
            Ok(false) => return Err(timeout(waiting.to_owned())),
            Err(e) => return Err(bad(format!("rank 0 hung up mid-message: {e}"))),
        }
        match header[4] {
            STATUS_OK => {}
            STATUS_REFUSED => {
                return Err(bad(format!(
                    "rank 0 refused rank {rank}: {}",
                    String::from_utf8_lossy(&body)
                )));
            }
            other => return Err(bad(format!("unknown reply status {other}"))),
        }
        write_before(&mut stream, &[ACK], deadline)
            .map_err(|e| bad(format!("rank 0 hung up before the acknowledgement: {e}")))?;
        Ok(body)
    }
}

// ---- shared file ----------------------------------------------------------------------------------

const FILE_MAGIC: [u8; 4] = *b"GPRF";
const FILE_HEADER: usize = 4 + 1 + 8 + 4 + 4;

/// Rank 0 writes the payload to `path` (through a temporary file and a rename, so readers
/// never see half a file); rank `r` reads it and writes `path.ack.r`; rank 0 waits for every
/// acknowledgement and removes the files.
///
/// The path must be on a file system every rank sees, and fresh for each job (or the key
/// must differ): a rank that finds a file with another key takes it for a stale one and
/// keeps waiting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStore {
    /// The file rank 0 writes.
    pub path: PathBuf,
    /// How long to wait for the other ranks.
    pub timeout: Duration,
    /// The job key every rank must present.
    pub key: u64,
}

impl FileStore {
    /// A store at `path` with the [`DEFAULT_TIMEOUT`] and key 0.
    pub fn new(path: impl Into<PathBuf>) -> FileStore {
        FileStore {
            path: path.into(),
            timeout: DEFAULT_TIMEOUT,
            key: 0,
        }
    }

    fn ack_path(&self, rank: usize) -> PathBuf {
        with_suffix(&self.path, &format!(".ack.{rank}"))
    }

    /// Writes `data` to `path` atomically: a temporary file beside it, then a rename.
    fn write_atomically(path: &Path, data: &[u8]) -> Result<()> {
        let tmp = with_suffix(path, &format!(".tmp.{}", std::process::id()));
        std::fs::write(&tmp, data).map_err(|e| io_error("write", tmp.display(), &e))?;
        std::fs::rename(&tmp, path).map_err(|e| io_error("rename into", path.display(), &e))
    }

    /// Rank 0: publishes `payload` and waits until the `world_size - 1` other ranks read it.
    pub fn publish(&self, world_size: usize, payload: &[u8]) -> Result<()> {
        let start = Instant::now();
        let deadline = start + self.timeout;
        for rank in 1..world_size {
            let _ = std::fs::remove_file(self.ack_path(rank));
        }
        let mut data = Vec::with_capacity(FILE_HEADER + payload.len());
        data.extend_from_slice(&FILE_MAGIC);
        data.push(PROTOCOL);
        data.extend_from_slice(&self.key.to_le_bytes());
        data.extend_from_slice(&(world_size as u32).to_le_bytes());
        data.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        data.extend_from_slice(payload);
        FileStore::write_atomically(&self.path, &data)?;
        let key = self.key.to_le_bytes();
        let mut missing: Vec<usize> = (1..world_size).collect();
        loop {
            missing
                .retain(|&rank| std::fs::read(self.ack_path(rank)).map_or(true, |ack| ack != key));
            if missing.is_empty() {
                break;
            }
            let Some(left) = remaining(deadline) else {
                let _ = std::fs::remove_file(&self.path);
                return Err(RendezvousError::Timeout {
                    rank: 0,
                    waiting_for: format!("ranks {missing:?} to read {}", self.path.display()),
                    waited: start.elapsed(),
                });
            };
            std::thread::sleep(left.min(Duration::from_millis(10)));
        }
        for rank in 1..world_size {
            let _ = std::fs::remove_file(self.ack_path(rank));
        }
        let _ = std::fs::remove_file(&self.path);
        Ok(())
    }

    /// Rank `rank` (not 0): waits for rank 0's file, reads it and acknowledges.
    pub fn fetch(&self, rank: usize, world_size: usize) -> Result<Vec<u8>> {
        if rank == 0 || rank >= world_size {
            return Err(RendezvousError::Usage(format!(
                "FileStore::fetch is for ranks 1..{world_size}, not rank {rank}"
            )));
        }
        let start = Instant::now();
        let deadline = start + self.timeout;
        let shown = self.path.display().to_string();
        let payload = loop {
            if let Ok(data) = std::fs::read(&self.path) {
                match self.parse(&data, world_size) {
                    Ok(Some(payload)) => break payload,
                    Ok(None) => {} // another job's file: wait for ours
                    Err(reason) => {
                        return Err(RendezvousError::Peer {
                            peer: shown,
                            reason,
                        });
                    }
                }
            }
            let Some(left) = remaining(deadline) else {
                return Err(RendezvousError::Timeout {
                    rank,
                    waiting_for: format!("rank 0 to write {shown}"),
                    waited: start.elapsed(),
                });
            };
            std::thread::sleep(left.min(Duration::from_millis(10)));
        };
        FileStore::write_atomically(&self.ack_path(rank), &self.key.to_le_bytes())?;
        Ok(payload)
    }

    /// The payload of a file written by rank 0 of this job, `None` for another job's file.
    fn parse(
        &self,
        data: &[u8],
        world_size: usize,
    ) -> std::result::Result<Option<Vec<u8>>, String> {
        if data.len() < FILE_HEADER || data[..4] != FILE_MAGIC {
            return Err("it is not a gpu-pipeline rendezvous file".to_owned());
        }
        if data[4] != PROTOCOL {
            return Err(format!(
                "it has format {}, this rank reads {PROTOCOL}",
                data[4]
            ));
        }
        let mut key = [0u8; 8];
        key.copy_from_slice(&data[5..13]);
        if u64::from_le_bytes(key) != self.key {
            return Ok(None);
        }
        let u32_at = |i: usize| {
            u32::from_le_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]) as usize
        };
        let (world, len) = (u32_at(13), u32_at(17));
        if world != world_size {
            return Err(format!(
                "rank 0 wrote it for {world} ranks; this rank expects {world_size}"
            ));
        }
        if data.len() != FILE_HEADER + len {
            return Err(format!(
                "it announces {len} payload bytes but holds {}",
                data.len() - FILE_HEADER
            ));
        }
        Ok(Some(data[FILE_HEADER..].to_vec()))
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn each_launchers_variables_give_the_rank() {
        let ours = RankInfo::from_vars(vars(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "1"),
            ("LOCAL_WORLD_SIZE", "2"),
            ("SLURM_PROCID", "0"),
        ]))
        .unwrap();
        assert_eq!(
            ours,
            RankInfo {
                rank: 3,
                world_size: 4,
                local_rank: 1,
                local_world_size: Some(2),
                source: "gpu-pipeline-launch / torchrun"
            }
        );
        let mpi = RankInfo::from_vars(vars(&[
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
        ]))
        .unwrap();
        assert_eq!((mpi.rank, mpi.world_size, mpi.local_rank), (5, 8, 1));
        assert_eq!(mpi.source, "Open MPI");
        let mpich = RankInfo::from_vars(vars(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")])).unwrap();
        assert_eq!((mpich.rank, mpich.local_rank), (1, 1));
        let slurm = RankInfo::from_vars(vars(&[
            ("SLURM_PROCID", "6"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_LOCALID", "2"),
        ]))
        .unwrap();
        assert_eq!(
            (slurm.rank, slurm.local_rank, slurm.local_world_size),
            (6, 2, None)
        );
        assert!(RankInfo::single().is_root());
    }

    #[test]
    fn a_missing_or_malformed_rank_is_an_error_naming_the_variables() {
        let none = RankInfo::from_vars(vars(&[])).unwrap_err().to_string();
        assert!(
            none.contains("RANK") && none.contains("SLURM_PROCID"),
            "{none}"
        );
        let cases = [
            (vec![("RANK", "1")], "WORLD_SIZE is not"),
            (vec![("RANK", "x"), ("WORLD_SIZE", "2")], "RANK=\"x\""),
            (
                vec![("RANK", "2"), ("WORLD_SIZE", "2")],
                "not below WORLD_SIZE=2",
            ),
            (
                vec![
                    ("RANK", "1"),
                    ("WORLD_SIZE", "4"),
                    ("LOCAL_RANK", "2"),
                    ("LOCAL_WORLD_SIZE", "2"),
                ],
                "local rank 2",
            ),
        ];
        for (pairs, needle) in cases {
            let err = RankInfo::from_vars(vars(&pairs)).unwrap_err().to_string();
            assert!(err.contains(needle), "{err} lacks {needle}");
        }
    }

    #[test]
    fn the_store_comes_from_the_environment() {
        let tcp = Rendezvous::from_vars(vars(&[
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "1234"),
            (MASTER_PORT_ENV, "29500"),
            (RENDEZVOUS_KEY_ENV, "0xff"),
            (RENDEZVOUS_TIMEOUT_ENV, "2.5"),
        ]))
        .unwrap();
        assert_eq!(
            tcp,
            Rendezvous::Tcp(TcpStore {
                host: "10.0.0.1".into(),
                port: 29500,
                timeout: Duration::from_millis(2500),
                key: 255
            })
        );
        let file = Rendezvous::from_vars(vars(&[
            (RENDEZVOUS_FILE_ENV, "/shared/job.id"),
            (MASTER_ADDR_ENV, "h"),
            (MASTER_PORT_ENV, "1"),
        ]))
        .unwrap();
        assert_eq!(file, Rendezvous::File(FileStore::new("/shared/job.id")));
        for (pairs, needle) in [
            (vec![], "no rendezvous"),
            (
                vec![(MASTER_ADDR_ENV, "h"), (MASTER_PORT_ENV, "70000")],
                "not a port",
            ),
            (vec![(RENDEZVOUS_KEY_ENV, "abc")], "not a 64-bit number"),
            (
                vec![(RENDEZVOUS_TIMEOUT_ENV, "-1")],
                "not a number of seconds",
            ),
        ] {
            let err = Rendezvous::from_vars(vars(&pairs)).unwrap_err().to_string();
            assert!(err.contains(needle), "{err} lacks {needle}");
        }
    }

    fn local_store(listener: &TcpListener, timeout: Duration, key: u64) -> TcpStore {
        TcpStore {
            host: "127.0.0.1".into(),
            port: listener.local_addr().unwrap().port(),
            timeout,
            key,
        }
    }

    #[test]
    fn four_ranks_meet_over_loopback() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let store = local_store(&listener, Duration::from_secs(30), 7);
        let payload: Vec<u8> = (0..128).collect();
        std::thread::scope(|s| {
            let clients: Vec<_> = (1..4)
                .map(|rank| {
                    let store = store.clone();
                    s.spawn(move || store.fetch(rank, 4))
                })
                .collect();
            store.serve_on(&listener, 4, &payload).unwrap();
            for c in clients {
                assert_eq!(c.join().unwrap().unwrap(), payload);
            }
        });
    }

    #[test]
    fn share_with_one_rank_needs_no_store() {
        let store = Rendezvous::Tcp(TcpStore::new("unresolvable.invalid", 1));
        assert_eq!(
            store.share(&RankInfo::single(), Some(b"id")).unwrap(),
            b"id"
        );
        let usage = store.share(&RankInfo::single(), None).unwrap_err();
        assert!(matches!(usage, RendezvousError::Usage(_)));
    }

    #[test]
    fn share_through_a_free_port() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let store = Rendezvous::Tcp(TcpStore {
            timeout: Duration::from_secs(30),
            ..TcpStore::new("127.0.0.1", port)
        });
        let info = |rank| RankInfo {
            rank,
            world_size: 2,
            local_rank: rank,
            local_world_size: None,
            source: "test",
        };
        std::thread::scope(|s| {
            let client = s.spawn(|| store.share(&info(1), None));
            assert_eq!(store.share(&info(0), Some(b"abc")).unwrap(), b"abc");
            assert_eq!(client.join().unwrap().unwrap(), b"abc");
        });
    }

    #[test]
    fn a_rank_with_no_rank_zero_times_out_naming_the_address() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let store = TcpStore {
            timeout: Duration::from_millis(300),
            ..TcpStore::new("127.0.0.1", port)
        };
        let err = store.fetch(1, 2).unwrap_err();
        assert!(
            matches!(err, RendezvousError::Timeout { rank: 1, .. }),
            "{err:?}"
        );
        assert!(
            err.to_string().contains(&format!("127.0.0.1:{port}")),
            "{err}"
        );
    }

    #[test]
    fn rank_zero_times_out_listing_the_missing_ranks() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let store = local_store(&listener, Duration::from_millis(500), 0);
        std::thread::scope(|s| {
            let client = {
                let store = store.clone();
                s.spawn(move || store.fetch(2, 3))
            };
            let err = store.serve_on(&listener, 3, b"x").unwrap_err();
            assert!(err.to_string().contains("ranks [1] to connect"), "{err}");
            // Rank 2 connected and then saw rank 0 give up: an error, not a hang.
            assert!(client.join().unwrap().is_err());
        });
    }

    #[test]
    fn strangers_are_refused_and_told_why_while_the_job_goes_on() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let store = local_store(&listener, Duration::from_secs(30), 1);
        let stranger = TcpStore {
            key: 2,
            ..store.clone()
        };
        let port = store.port;
        std::thread::scope(|s| {
            let server = s.spawn(|| store.serve_on(&listener, 2, b"ok"));
            let other_job = s.spawn(move || stranger.fetch(1, 2));
            let http = s.spawn(move || {
                let mut raw = TcpStream::connect(("127.0.0.1", port)).unwrap();
                let _ = raw.write_all(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n");
                let mut answer = Vec::new();
                let _ = raw.read_to_end(&mut answer);
                String::from_utf8_lossy(&answer).into_owned()
            });
            // Both strangers are turned away before rank 1 arrives...
            let told = other_job.join().unwrap().unwrap_err().to_string();
            assert!(
                told.contains("refused rank 1") && told.contains("another job"),
                "{told}"
            );
            let answer = http.join().unwrap();
            assert!(answer.contains("does not speak"), "{answer}");
            // ...and rank 0 is still there for it.
            assert_eq!(store.fetch(1, 2).unwrap(), b"ok");
            server.join().unwrap().unwrap();
        });
    }

    #[test]
    fn wrong_world_sizes_and_duplicate_ranks_fail_the_job() {
        type Peer = Box<dyn Fn(TcpStore) + Send>;
        let cases: Vec<(Peer, &str)> = vec![
            (
                Box::new(|store: TcpStore| {
                    let _ = store.fetch(1, 5);
                }),
                "the world has 5 ranks",
            ),
            (
                Box::new(|store: TcpStore| {
                    std::thread::scope(|s| {
                        let a = store.clone();
                        s.spawn(move || a.fetch(1, 3));
                        std::thread::sleep(Duration::from_millis(100));
                        let _ = store.fetch(1, 3);
                    });
                }),
                "rank 1 already joined",
            ),
        ];
        for (peer, needle) in cases {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let store = local_store(&listener, Duration::from_secs(5), 0);
            std::thread::scope(|s| {
                let client = store.clone();
                s.spawn(move || peer(client));
                let err = store.serve_on(&listener, 3, b"x").unwrap_err();
                assert!(matches!(err, RendezvousError::Peer { .. }), "{err:?}");
                assert!(err.to_string().contains(needle), "{err} lacks {needle}");
            });
        }
    }

    #[test]
    fn a_server_that_is_no_rendezvous_is_an_error_for_the_rank() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let store = local_store(&listener, Duration::from_secs(5), 0);
        std::thread::scope(|s| {
            s.spawn(|| {
                let (mut stream, _) = listener.accept().unwrap();
                let _ = stream.read(&mut [0u8; HELLO_LEN]);
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n");
            });
            let err = store.fetch(1, 2).unwrap_err().to_string();
            assert!(err.contains("does not speak"), "{err}");
        });
    }

    fn temp_path(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "gpu-pipeline-rendezvous-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("id")
    }

    #[test]
    fn three_ranks_meet_through_a_file_and_it_is_removed_after() {
        let path = temp_path("three");
        let store = FileStore {
            path: path.clone(),
            timeout: Duration::from_secs(30),
            key: 9,
        };
        std::thread::scope(|s| {
            let readers: Vec<_> = (1..3)
                .map(|rank| {
                    let store = store.clone();
                    s.spawn(move || store.fetch(rank, 3))
                })
                .collect();
            std::thread::sleep(Duration::from_millis(50));
            store.publish(3, b"nccl id").unwrap();
            for r in readers {
                assert_eq!(r.join().unwrap().unwrap(), b"nccl id");
            }
        });
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_stale_file_of_another_job_is_ignored_and_a_missing_reader_times_out() {
        let path = temp_path("stale");
        let old = FileStore {
            path: path.clone(),
            timeout: Duration::from_millis(300),
            key: 1,
        };
        // An earlier job's file, never cleaned up.
        let _ = FileStore::write_atomically(&path, &{
            let mut d = FILE_MAGIC.to_vec();
            d.push(PROTOCOL);
            d.extend_from_slice(&1u64.to_le_bytes());
            d.extend_from_slice(&2u32.to_le_bytes());
            d.extend_from_slice(&3u32.to_le_bytes());
            d.extend_from_slice(b"old");
            d
        });
        let new = FileStore {
            key: 2,
            ..old.clone()
        };
        let err = new.fetch(1, 2).unwrap_err();
        assert!(err.to_string().contains("rank 0 to write"), "{err}");
        assert_eq!(old.fetch(1, 2).unwrap(), b"old");
        let err = new.publish(3, b"x").unwrap_err().to_string();
        assert!(err.contains("ranks [1, 2] to read"), "{err}");
        let garbage = FileStore::new(&path);
        std::fs::write(&path, b"garbage").unwrap();
        let err = garbage.fetch(1, 2).unwrap_err().to_string();
        assert!(err.contains("not a gpu-pipeline rendezvous file"), "{err}");
    }
}

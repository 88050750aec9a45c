//! How ranks meet: which rank this process is, and a store through which rank 0 hands every
//! other rank a few bytes (NCCL's unique id) before they build a communicator.
//!
//! - [`RankInfo::from_env`] reads the rank from the variables a launcher sets: ours and
//!   torchrun's (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`), Open MPI's (`OMPI_COMM_WORLD_*`), MPICH's
//!   (`PMI_RANK`, ...) and Slurm's (`SLURM_PROCID`, ...). A job has at most
//!   [`MAX_WORLD_SIZE`] ranks.
//! - [`TcpStore`]: a server on `GPU_PIPELINE_MASTER_ADDR:GPU_PIPELINE_MASTER_PORT` (or
//!   `MASTER_ADDR:MASTER_PORT`) waits until every rank has joined, then hands each the payload:
//!   `share` is a barrier too. Under `gpu-pipeline-launch` the launcher serves (it bound the
//!   port before starting the ranks and keeps it, so no other process can take it) and rank 0
//!   publishes its payload to it; under mpirun or srun rank 0 binds exactly the address given
//!   and serves.
//! - [`FileStore`]: rank 0 writes the payload to a file on a shared file system, in a
//!   directory only this user can write; the others poll for it and acknowledge.
//!
//! Every rank proves it knows the job's secret, and so does the server, with HMAC-SHA256 over
//! fresh nonces; the secret never crosses the wire (docs/MULTI_GPU.md, "Failures and
//! security", has the protocol). The launcher makes a random secret per job
//! (`GPU_PIPELINE_RENDEZVOUS_SECRET`); under mpirun or srun give one in that variable or in a
//! file only you can read (`GPU_PIPELINE_RENDEZVOUS_SECRET_FILE`).
//! Without one, a store is an error unless `GPU_PIPELINE_RENDEZVOUS_INSECURE=1` says to meet
//! without authentication, loopback included (other users of the host can reach it too).
//! A stranger (another program, another job, a bad message, a failed proof) is refused and
//! logged while the store goes on waiting for the job's own ranks.
//!
//! Nothing waits forever: every wait ends at the store's timeout with
//! [`RendezvousError::Timeout`].
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

mod file;
mod rank;
mod secret;
mod server;
mod tcp;
mod wire;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_tcp;

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use file::FileStore;
pub use rank::RankInfo;
pub use secret::{Auth, Secret};
pub use server::{GREETING_TIMEOUT, MAX_PENDING};
pub use tcp::{ServedBy, TcpStore};

/// This process's rank (`RANK`), read by [`RankInfo::from_env`].
pub const RANK_ENV: &str = "RANK";
/// The number of ranks (`WORLD_SIZE`).
pub const WORLD_SIZE_ENV: &str = "WORLD_SIZE";
/// This process's rank among those of its host (`LOCAL_RANK`): which GPU it drives.
pub const LOCAL_RANK_ENV: &str = "LOCAL_RANK";
/// The number of ranks on this host (`LOCAL_WORLD_SIZE`).
pub const LOCAL_WORLD_SIZE_ENV: &str = "LOCAL_WORLD_SIZE";
/// The host the [`TcpStore`] server listens on (falls back to `MASTER_ADDR`).
pub const MASTER_ADDR_ENV: &str = "GPU_PIPELINE_MASTER_ADDR";
/// Its port (falls back to `MASTER_PORT`).
pub const MASTER_PORT_ENV: &str = "GPU_PIPELINE_MASTER_PORT";
/// A file path for [`FileStore`]; when set, [`Rendezvous::from_env`] prefers it to TCP.
pub const RENDEZVOUS_FILE_ENV: &str = "GPU_PIPELINE_RENDEZVOUS_FILE";
/// The job's secret (at least [`Secret::MIN_LEN`] characters); the launcher sets a random one.
pub const RENDEZVOUS_SECRET_ENV: &str = "GPU_PIPELINE_RENDEZVOUS_SECRET";
/// A file holding the job's secret, readable by its owner alone (mode 0600 or stricter).
pub const RENDEZVOUS_SECRET_FILE_ENV: &str = "GPU_PIPELINE_RENDEZVOUS_SECRET_FILE";
/// `1`: meet without a secret (anybody who reaches the store can join or forge it).
pub const RENDEZVOUS_INSECURE_ENV: &str = "GPU_PIPELINE_RENDEZVOUS_INSECURE";
/// Who serves the [`TcpStore`]: `rank0` (the default) or `launcher` (set by our launcher).
pub const RENDEZVOUS_SERVER_ENV: &str = "GPU_PIPELINE_RENDEZVOUS_SERVER";
/// How long to wait for the other ranks, in seconds (fractions allowed).
pub const RENDEZVOUS_TIMEOUT_ENV: &str = "GPU_PIPELINE_RENDEZVOUS_TIMEOUT";
/// The variable of the clear-text key that the secret replaced; a set one is an error that
/// says so.
const OLD_KEY_ENV: &str = "GPU_PIPELINE_RENDEZVOUS_KEY";

/// How long a store waits for the other ranks by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The largest payload a store carries (NCCL's id is 128 bytes).
pub const MAX_PAYLOAD: usize = 64 * 1024;

/// The most ranks a job may have; larger world sizes are refused before anything is
/// allocated for them.
pub const MAX_WORLD_SIZE: usize = 65_536;

/// Why ranks could not meet.
///
/// ```
/// use gpu_pipeline::rendezvous::{Rendezvous, RendezvousError};
/// // Nowhere to meet: the error names the variables to set.
/// let err = Rendezvous::from_vars(|name| {
///     (name == "GPU_PIPELINE_RENDEZVOUS_INSECURE").then(|| "1".to_owned())
/// })
/// .unwrap_err();
/// assert!(matches!(err, RendezvousError::Environment { .. }));
/// assert!(err.to_string().contains("GPU_PIPELINE_MASTER_ADDR"), "{err}");
/// // No secret and no opt-out: refused too, saying how to make one.
/// let err = Rendezvous::from_vars(|_| None).unwrap_err();
/// assert!(err.to_string().contains("openssl rand -hex 32"), "{err}");
/// ```
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
    /// A peer broke the protocol: a server that cannot prove it knows the secret, a refusal,
    /// a different world size, or a peer hanging up.
    #[error("rendezvous peer `{peer}`: {reason}")]
    Peer {
        /// The peer's address (or the file).
        peer: String,
        /// What was wrong.
        reason: String,
    },
    /// A secret, a secret file or a rendezvous directory others could read or write.
    #[error("refusing {what}: {reason}")]
    Insecure {
        /// What was refused, e.g. "the secret file `/home/me/secret`".
        what: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// The API was called wrongly (e.g. rank 0 without a payload).
    #[error("{0}")]
    Usage(String),
}

/// Results of this module.
///
/// ```
/// use gpu_pipeline::rendezvous::{RankInfo, Result};
/// /// The GPU this rank drives: its rank among the host's ranks.
/// fn my_gpu() -> Result<usize> {
///     Ok(RankInfo::from_env_or_single()?.local_rank)
/// }
/// # if std::env::var_os("RANK").is_none() { assert_eq!(my_gpu().unwrap(), 0); }
/// ```
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

/// The time left before `deadline`, or `None` once it has passed.
fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

/// A store ranks meet through, chosen from the environment by [`Rendezvous::from_env`].
///
/// ```
/// use std::time::Duration;
/// use gpu_pipeline::rendezvous::{Auth, Rendezvous};
/// use std::collections::HashMap;
/// let vars = |pairs: &[(&str, &str)]| {
///     let map: HashMap<String, String> =
///         pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
///     move |name: &str| map.get(name).cloned()
/// };
/// let secret = "0123456789abcdef0123456789abcdef";
/// let store = Rendezvous::from_vars(vars(&[
///     ("MASTER_ADDR", "10.0.0.1"), // torchrun's names work too
///     ("MASTER_PORT", "29500"),
///     ("GPU_PIPELINE_RENDEZVOUS_SECRET", secret),
///     ("GPU_PIPELINE_RENDEZVOUS_TIMEOUT", "30"),
/// ]))?;
/// let Rendezvous::Tcp(tcp) = &store else { panic!("{store:?}") };
/// assert_eq!((tcp.host.as_str(), tcp.port), ("10.0.0.1", 29500));
/// assert_eq!(tcp.timeout, Duration::from_secs(30));
/// assert!(matches!(&tcp.auth, Auth::Secret(s) if s.expose() == secret.as_bytes()));
/// // A shared file instead of a server:
/// let store = Rendezvous::from_vars(vars(&[
///     ("GPU_PIPELINE_RENDEZVOUS_FILE", "/shared/job-17/rendezvous"),
///     ("GPU_PIPELINE_RENDEZVOUS_SECRET", secret),
/// ]))?;
/// assert!(matches!(store, Rendezvous::File(_)));
/// # Ok::<(), gpu_pipeline::rendezvous::RendezvousError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rendezvous {
    /// A server (rank 0 or the launcher) hands out the payload over TCP.
    Tcp(TcpStore),
    /// Rank 0 writes the payload to a shared file.
    File(FileStore),
}

impl Rendezvous {
    /// [`FileStore`] when `GPU_PIPELINE_RENDEZVOUS_FILE` is set, else [`TcpStore`] at
    /// `GPU_PIPELINE_MASTER_ADDR` / `GPU_PIPELINE_MASTER_PORT` (or `MASTER_ADDR` /
    /// `MASTER_PORT`); the secret, server and timeout from their variables.
    ///
    /// ```
    /// use gpu_pipeline::rendezvous::Rendezvous;
    /// let set = |name| std::env::var_os(name).is_some();
    /// let launched = set("GPU_PIPELINE_MASTER_ADDR") || set("MASTER_ADDR");
    /// if !launched && !set("GPU_PIPELINE_RENDEZVOUS_FILE") {
    ///     // Not started by a launcher: the error says what to set.
    ///     let err = Rendezvous::from_env().unwrap_err();
    ///     assert!(err.to_string().contains("set"), "{err}");
    /// }
    /// ```
    pub fn from_env() -> Result<Rendezvous> {
        Rendezvous::from_vars(|name| std::env::var(name).ok())
    }

    /// [`Rendezvous::from_env`] over any variable lookup.
    ///
    /// ```
    /// use gpu_pipeline::rendezvous::Rendezvous;
    /// let vars = |name: &str| match name {
    ///     "GPU_PIPELINE_MASTER_ADDR" => Some("node07".to_owned()),
    ///     "GPU_PIPELINE_MASTER_PORT" => Some("29500".to_owned()),
    ///     "GPU_PIPELINE_RENDEZVOUS_SECRET" => Some("0123456789abcdef0123456789abcdef".to_owned()),
    ///     _ => None,
    /// };
    /// let Rendezvous::Tcp(store) = Rendezvous::from_vars(vars)? else { unreachable!() };
    /// assert_eq!((store.host.as_str(), store.port), ("node07", 29500));
    /// // A bad port is an error that quotes it.
    /// let bad = |name: &str| match name {
    ///     "GPU_PIPELINE_MASTER_PORT" => Some("http".to_owned()),
    ///     _ => vars(name),
    /// };
    /// assert!(Rendezvous::from_vars(bad).unwrap_err().to_string().contains("\"http\""));
    /// # Ok::<(), gpu_pipeline::rendezvous::RendezvousError>(())
    /// ```
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Rendezvous> {
        let auth = auth_from_vars(&get)?;
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
                auth,
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
        let served_by = match get(RENDEZVOUS_SERVER_ENV).as_deref().map(str::trim) {
            None | Some("" | "rank0") => ServedBy::RankZero,
            Some("launcher") => ServedBy::Launcher,
            Some(other) => {
                return Err(env_error(format!(
                    "{RENDEZVOUS_SERVER_ENV}={other:?}: expected `rank0` or `launcher`"
                )));
            }
        };
        Ok(Rendezvous::Tcp(TcpStore {
            host,
            port,
            timeout,
            auth,
            served_by,
        }))
    }

    /// Hands rank 0's `payload` to every rank: rank 0 passes `Some`, the others `None`; every
    /// rank returns the payload once all ranks have it.
    ///
    /// ```
    /// use std::os::unix::fs::DirBuilderExt;
    /// use std::time::Duration;
    /// use gpu_pipeline::rendezvous::{FileStore, RankInfo, Rendezvous, Secret};
    /// let dir = std::env::temp_dir().join(format!("gpu-pipeline-share-{}", std::process::id()));
    /// std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    /// let mut store = FileStore::new(dir.join("id"), Secret::generate()?);
    /// store.timeout = Duration::from_secs(20);
    /// let store = Rendezvous::File(store);
    /// let rank = |rank| RankInfo {
    ///     rank,
    ///     world_size: 2,
    ///     local_rank: rank,
    ///     local_world_size: Some(2),
    ///     source: "example",
    /// };
    /// let other = store.clone();
    /// let rank1 = std::thread::spawn(move || other.share(&rank(1), None));
    /// assert_eq!(store.share(&rank(0), Some(b"id from rank 0"))?, b"id from rank 0");
    /// assert_eq!(rank1.join().unwrap()?, b"id from rank 0");
    /// // Rank 0 must bring the payload.
    /// assert!(store.share(&rank(0), None).is_err());
    /// std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), gpu_pipeline::rendezvous::RendezvousError>(())
    /// ```
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
                        Rendezvous::Tcp(store) if store.served_by == ServedBy::Launcher => {
                            store.publish(me.world_size, payload)?;
                        }
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

/// The secret from `GPU_PIPELINE_RENDEZVOUS_SECRET` or `..._SECRET_FILE`, or no
/// authentication when `GPU_PIPELINE_RENDEZVOUS_INSECURE=1` says so; neither is an error.
fn auth_from_vars(get: &impl Fn(&str) -> Option<String>) -> Result<Auth> {
    let text = get(RENDEZVOUS_SECRET_ENV).filter(|t| !t.trim().is_empty());
    let file = get(RENDEZVOUS_SECRET_FILE_ENV).filter(|t| !t.is_empty());
    let insecure = get(RENDEZVOUS_INSECURE_ENV).is_some_and(|v| v.trim() == "1");
    match (text, file) {
        (Some(_), Some(_)) => Err(env_error(format!(
            "both {RENDEZVOUS_SECRET_ENV} and {RENDEZVOUS_SECRET_FILE_ENV} are set; set one"
        ))),
        (Some(text), None) => Ok(Auth::Secret(Secret::new(text)?)),
        (None, Some(path)) => Ok(Auth::Secret(Secret::from_file(path.as_ref())?)),
        (None, None) if insecure => Ok(Auth::Insecure),
        (None, None) => {
            let old = if get(OLD_KEY_ENV).is_some() {
                format!(" ({OLD_KEY_ENV}, a key sent in clear, is no longer read)")
            } else {
                String::new()
            };
            Err(env_error(format!(
                "no rendezvous secret: set {RENDEZVOUS_SECRET_ENV} (e.g. `openssl rand -hex 32`, \
                 the same for every rank) or {RENDEZVOUS_SECRET_FILE_ENV} (a file only you can \
                 read), or {RENDEZVOUS_INSECURE_ENV}=1 to meet without authentication{old}; \
                 gpu-pipeline-launch sets a secret itself"
            )))
        }
    }
}

//! The shared-file store: rank 0 writes the payload to a file, the others read it and
//! acknowledge with a file each.
//!
//! The directory must be one only this user can write (its owner, no group or other write
//! bit), so nobody else can plant a link or a file there. Files are created exclusively
//! (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600) under a random name and renamed into place, so
//! readers never see half a file and no link is followed; they are opened with
//! `O_NONBLOCK|O_NOFOLLOW` and anything but a regular file is refused (a FIFO cannot block
//! a rank). Each file carries the job's identity (`HMAC(secret, "file-job")`), rank 0's nonce
//! and an HMAC tag over its content: a stale file of another job, a forged or a torn one is
//! recognised, logged and waited past until the deadline.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::secret::{Auth, Secret, TAG_LEN, Tag, hex, nonce};
use super::{
    DEFAULT_TIMEOUT, MAX_PAYLOAD, MAX_WORLD_SIZE, RendezvousError, Result, io_error, remaining,
};

const FILE_MAGIC: [u8; 4] = *b"GPRF";
/// Version 1 carried a key in clear; version 2 the job id, a nonce and a tag.
const FILE_VERSION: u8 = 2;
const FILE_HEADER: usize = 4 + 1 + TAG_LEN + TAG_LEN + 4 + 4;
pub(super) const JOB_LABEL: &str = "gpu-pipeline/rendezvous/2/file-job";
const PAYLOAD_LABEL: &str = "gpu-pipeline/rendezvous/2/file-payload";
const ACK_LABEL: &str = "gpu-pipeline/rendezvous/2/file-ack";

/// Rank 0 writes the payload to `path`; rank `r` reads it and writes `path.ack.r`; rank 0
/// waits for every acknowledgement and removes the files (see the module docs).
///
/// ```
/// use std::os::unix::fs::DirBuilderExt;
/// use std::time::Duration;
/// use gpu_pipeline::rendezvous::{FileStore, Secret};
/// // A directory only this user can write (on a shared file system, in a real job).
/// let dir = std::env::temp_dir().join(format!("gpu-pipeline-doc-{}", std::process::id()));
/// std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
/// let mut store = FileStore::new(dir.join("rendezvous"), Secret::generate()?);
/// store.timeout = Duration::from_secs(20);
/// let readers: Vec<_> = (1..3)
///     .map(|rank| {
///         let store = store.clone();
///         std::thread::spawn(move || store.fetch(rank, 3))
///     })
///     .collect();
/// store.publish(3, b"payload")?; // returns once ranks 1 and 2 have read it
/// for reader in readers {
///     assert_eq!(reader.join().unwrap()?, b"payload");
/// }
/// std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), gpu_pipeline::rendezvous::RendezvousError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStore {
    /// The file rank 0 writes, in a directory only this user can write.
    pub path: PathBuf,
    /// How long to wait for the other ranks.
    pub timeout: Duration,
    /// How the files are tied to the job.
    pub auth: Auth,
}

/// What rank 0 wrote, once its tag holds.
struct Published {
    nonce: Tag,
    world_size: usize,
    payload: Vec<u8>,
}

impl FileStore {
    /// A store at `path` with the [`DEFAULT_TIMEOUT`].
    pub fn new(path: impl Into<PathBuf>, secret: Secret) -> FileStore {
        FileStore {
            path: path.into(),
            timeout: DEFAULT_TIMEOUT,
            auth: Auth::Secret(secret),
        }
    }

    fn ack_path(&self, rank: usize) -> PathBuf {
        with_suffix(&self.path, &format!(".ack.{rank}"))
    }

    fn job_id(&self) -> Tag {
        self.auth.tag(JOB_LABEL, &[])
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }

    /// Rank 0: publishes `payload` and waits until the `world_size - 1` other ranks read it.
    pub fn publish(&self, world_size: usize, payload: &[u8]) -> Result<()> {
        if world_size == 0 || world_size > MAX_WORLD_SIZE || payload.len() > MAX_PAYLOAD {
            return Err(RendezvousError::Usage(format!(
                "FileStore::publish takes 1..={MAX_WORLD_SIZE} ranks and {MAX_PAYLOAD} bytes, \
                 not {world_size} and {}",
                payload.len()
            )));
        }
        check_dir(&self.path)?;
        let start = Instant::now();
        let deadline = start + self.timeout;
        let nonce = nonce()?;
        let job = self.job_id();
        let size = (world_size as u32).to_le_bytes();
        let len = (payload.len() as u32).to_le_bytes();
        let mut data = Vec::with_capacity(FILE_HEADER + payload.len() + TAG_LEN);
        for part in [
            &FILE_MAGIC[..],
            &[FILE_VERSION],
            &job,
            &nonce,
            &size,
            &len,
            payload,
        ] {
            data.extend_from_slice(part);
        }
        data.extend_from_slice(
            &self
                .auth
                .tag(PAYLOAD_LABEL, &[&job, &nonce, &size, payload]),
        );
        write_atomically(&self.path, &data)?;
        let mut missing: Vec<usize> = (1..world_size).collect();
        loop {
            missing.retain(|&rank| !self.acknowledged(rank, &nonce));
            if missing.is_empty() {
                break;
            }
            let Some(left) = remaining(deadline) else {
                let _ = std::fs::remove_file(&self.path);
                return Err(RendezvousError::Timeout {
                    rank: 0,
                    waiting_for: format!("ranks {missing:?} to read {}", self.shown()),
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

    /// Whether rank `rank` acknowledged the file with this `nonce` (a stale acknowledgement
    /// of an earlier run does not count).
    fn acknowledged(&self, rank: usize, nonce: &Tag) -> bool {
        let rank_bytes = (rank as u64).to_le_bytes();
        matches!(read_regular(&self.ack_path(rank), TAG_LEN), Ok(Some(ack))
            if self.auth.verify(ACK_LABEL, &[&self.job_id(), nonce, &rank_bytes], &ack))
    }

    /// Rank `rank` (not 0): waits for this job's file, reads it and acknowledges.
    pub fn fetch(&self, rank: usize, world_size: usize) -> Result<Vec<u8>> {
        if rank == 0 || rank >= world_size || world_size > MAX_WORLD_SIZE {
            return Err(RendezvousError::Usage(format!(
                "FileStore::fetch is for ranks 1..{world_size} of at most {MAX_WORLD_SIZE}, \
                 not rank {rank}"
            )));
        }
        check_dir(&self.path)?;
        let start = Instant::now();
        let deadline = start + self.timeout;
        let mut last_seen = "no file".to_owned();
        let published = loop {
            match read_regular(&self.path, FILE_HEADER + MAX_PAYLOAD + TAG_LEN) {
                Ok(None) => {}
                Ok(Some(data)) => match self.parse(&data) {
                    Ok(published) => break published,
                    Err(reason) => {
                        if reason != last_seen {
                            let path = self.shown();
                            tracing::warn!(%path, %reason, "rendezvous file ignored");
                        }
                        last_seen = reason;
                    }
                },
                Err(e) => return Err(e),
            }
            let Some(left) = remaining(deadline) else {
                return Err(RendezvousError::Timeout {
                    rank,
                    waiting_for: format!(
                        "rank 0 to write {} (last seen: {last_seen})",
                        self.shown()
                    ),
                    waited: start.elapsed(),
                });
            };
            std::thread::sleep(left.min(Duration::from_millis(10)));
        };
        if published.world_size != world_size {
            return Err(RendezvousError::Peer {
                peer: self.shown(),
                reason: format!(
                    "rank 0 wrote it for {} ranks; this rank expects {world_size}",
                    published.world_size
                ),
            });
        }
        let rank_bytes = (rank as u64).to_le_bytes();
        let ack = self
            .auth
            .tag(ACK_LABEL, &[&self.job_id(), &published.nonce, &rank_bytes]);
        write_atomically(&self.ack_path(rank), &ack)?;
        Ok(published.payload)
    }

    /// This job's payload from `data`, or why the file is not (another job's, forged, torn).
    fn parse(&self, data: &[u8]) -> std::result::Result<Published, String> {
        if data.len() < FILE_HEADER + TAG_LEN || data[..4] != FILE_MAGIC {
            return Err("a file that is not a gpu-pipeline rendezvous file".to_owned());
        }
        if data[4] != FILE_VERSION {
            return Err(format!("a file of format {}, not {FILE_VERSION}", data[4]));
        }
        let job = &data[5..5 + TAG_LEN];
        if job != self.job_id() {
            return Err("another job's file (a stale one, or another secret)".to_owned());
        }
        let at = 5 + 2 * TAG_LEN;
        let nonce = &data[5 + TAG_LEN..at];
        let size = &data[at..at + 4];
        let len = u32::from_le_bytes([data[at + 4], data[at + 5], data[at + 6], data[at + 7]]);
        let body = &data[FILE_HEADER..];
        if body.len() != len as usize + TAG_LEN {
            return Err(format!(
                "a file announcing {len} bytes that holds {}",
                body.len()
            ));
        }
        let (payload, tag) = body.split_at(len as usize);
        if !self
            .auth
            .verify(PAYLOAD_LABEL, &[job, nonce, size, payload], tag)
        {
            return Err(
                "this job's id with a tag that does not hold (forged or altered)".to_owned(),
            );
        }
        let mut n = [0u8; TAG_LEN];
        n.copy_from_slice(nonce);
        Ok(Published {
            nonce: n,
            world_size: u32::from_le_bytes([size[0], size[1], size[2], size[3]]) as usize,
            payload: payload.to_vec(),
        })
    }
}

/// Refuses a directory that anybody but this user can write: they could replace the files.
fn check_dir(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let shown = dir.display().to_string();
    let meta = std::fs::metadata(dir).map_err(|e| io_error("inspect the directory", &shown, &e))?;
    let me = nix::unistd::geteuid().as_raw();
    let reason = if !meta.is_dir() {
        Some("it is not a directory".to_owned())
    } else if meta.uid() != me {
        Some(format!(
            "it belongs to user {}, not to this user ({me})",
            meta.uid()
        ))
    } else if meta.mode() & 0o022 != 0 {
        Some(format!(
            "others can write it (mode {:o})",
            meta.mode() & 0o7777
        ))
    } else {
        None
    };
    match reason {
        None => Ok(()),
        Some(reason) => Err(RendezvousError::Insecure {
            what: format!("the rendezvous directory `{shown}`"),
            reason: format!(
                "{reason}; put the rendezvous file in a directory only you can write \
                 (`mkdir -m 700 DIR`)"
            ),
        }),
    }
}

/// The content of `path` when it is a regular file (at most `max` bytes), `None` when there
/// is none; a link, a FIFO or anything else is an error.
fn read_regular(path: &Path, max: usize) -> Result<Option<Vec<u8>>> {
    let shown = path.display().to_string();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(path);
    let mut file = match file {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(RendezvousError::Insecure {
                what: format!("`{shown}`"),
                reason: "it is a symbolic link; the rendezvous never follows one".to_owned(),
            });
        }
        Err(e) => return Err(io_error("open", &shown, &e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| io_error("inspect", &shown, &e))?;
    if !meta.is_file() {
        return Err(RendezvousError::Insecure {
            what: format!("`{shown}`"),
            reason: format!("it is a {:?}, not a regular file", meta.file_type()),
        });
    }
    let mut data = Vec::new();
    Read::take(&mut file, max as u64 + 1)
        .read_to_end(&mut data)
        .map_err(|e| io_error("read", &shown, &e))?;
    Ok(Some(data))
}

/// Writes `data` to `path` atomically: a new file under a random name beside it (created
/// exclusively, never through a link, readable by this user alone), then a rename.
fn write_atomically(path: &Path, data: &[u8]) -> Result<()> {
    let tmp = with_suffix(path, &format!(".tmp.{}", hex(&nonce()?[..8])));
    let shown = tmp.display().to_string();
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&tmp)
        .and_then(|mut file| file.write_all(data));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_error("write", &shown, &e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_error("rename into", path.display(), &e)
    })
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

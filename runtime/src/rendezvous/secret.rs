//! The job's secret and what is computed from it: HMAC-SHA256 tags that prove, without
//! sending it, that a peer knows the secret.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::{RendezvousError, Result};

/// The length of every tag and nonce, in bytes.
pub(crate) const TAG_LEN: usize = 32;

/// A tag or a nonce.
pub(crate) type Tag = [u8; TAG_LEN];

/// A secret every rank of one job shares and nobody else knows; it never crosses the wire.
///
/// Its text is the key (so `openssl rand -hex 32` makes a good one); it has at least
/// [`Secret::MIN_LEN`] characters. `Debug` does not show it.
///
/// ```
/// use gpu_pipeline::rendezvous::{RendezvousError, Secret};
/// let secret = Secret::generate()?; // what the launcher makes for each job
/// assert_eq!(secret.expose().len(), 64);
/// assert_eq!(format!("{secret:?}"), "Secret(..)"); // never printed
/// let err = Secret::new("hunter2").unwrap_err();
/// assert!(matches!(err, RendezvousError::Insecure { .. }), "{err}");
/// assert!(Secret::new(" 0123456789abcdef0123456789abcdef \n").is_ok()); // white space trimmed
/// # Ok::<(), RendezvousError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// How a store proves that its peers belong to the job.
///
/// ```
/// use gpu_pipeline::rendezvous::{Auth, Rendezvous};
/// use std::collections::HashMap;
/// let vars = |pairs: &[(&str, &str)]| {
///     let map: HashMap<String, String> =
///         pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
///     move |name: &str| map.get(name).cloned()
/// };
/// let open = vars(&[
///     ("GPU_PIPELINE_MASTER_ADDR", "127.0.0.1"),
///     ("GPU_PIPELINE_MASTER_PORT", "29500"),
///     ("GPU_PIPELINE_RENDEZVOUS_INSECURE", "1"), // a deliberate opt-out
/// ]);
/// let Rendezvous::Tcp(store) = Rendezvous::from_vars(open)? else { unreachable!() };
/// assert_eq!(store.auth, Auth::Insecure);
/// # Ok::<(), gpu_pipeline::rendezvous::RendezvousError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// Every message is tied to this secret by HMAC-SHA256 (the default and only safe choice).
    Secret(Secret),
    /// No secret (`GPU_PIPELINE_RENDEZVOUS_INSECURE=1`): anybody who can reach the port or
    /// the file can join, read the payload or forge it. Same protocol, an empty key.
    Insecure,
}

impl Auth {
    fn key(&self) -> &[u8] {
        match self {
            Auth::Secret(secret) => &secret.0,
            Auth::Insecure => &[],
        }
    }

    /// HMAC-SHA256 of `label` and each of `parts` (each length-prefixed, so no two lists of
    /// parts give the same message).
    pub(crate) fn tag(&self, label: &str, parts: &[&[u8]]) -> Tag {
        self.mac(label, parts).finalize().into_bytes().into()
    }

    /// Whether `tag` is [`Auth::tag`] of `label` and `parts`, compared in constant time.
    pub(crate) fn verify(&self, label: &str, parts: &[&[u8]], tag: &[u8]) -> bool {
        self.mac(label, parts).verify_slice(tag).is_ok()
    }

    fn mac(&self, label: &str, parts: &[&[u8]]) -> Hmac<Sha256> {
        // HMAC takes keys of any length, the empty one included.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(self.key())
            .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
        for part in std::iter::once(label.as_bytes()).chain(parts.iter().copied()) {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        mac
    }
}

/// `TAG_LEN` bytes from the operating system's random source.
pub(crate) fn nonce() -> Result<Tag> {
    let mut out = [0u8; TAG_LEN];
    getrandom::fill(&mut out).map_err(|e| RendezvousError::Io {
        action: "draw random bytes from",
        target: "the operating system".to_owned(),
        message: e.to_string(),
    })?;
    Ok(out)
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Secret {
    /// The fewest characters a secret may have.
    pub const MIN_LEN: usize = 32;

    /// A fresh random secret (256 bits, as 64 hex characters), as the launcher makes per job.
    pub fn generate() -> Result<Secret> {
        Ok(Secret(hex(&nonce()?).into_bytes()))
    }

    /// The secret whose text is `text` (surrounding white space removed).
    pub fn new(text: impl AsRef<[u8]>) -> Result<Secret> {
        let text = text.as_ref().trim_ascii();
        if text.len() < Secret::MIN_LEN {
            return Err(RendezvousError::Insecure {
                what: "the rendezvous secret".to_owned(),
                reason: format!(
                    "it has {} characters, fewer than {}; make one with `openssl rand -hex 32`",
                    text.len(),
                    Secret::MIN_LEN
                ),
            });
        }
        Ok(Secret(text.to_vec()))
    }

    /// The secret kept in `path`, a regular file that only its owner (this user) can read.
    pub fn from_file(path: &Path) -> Result<Secret> {
        let shown = path.display().to_string();
        let refuse = |reason: String| RendezvousError::Insecure {
            what: format!("the secret file `{shown}`"),
            reason,
        };
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| super::io_error("open", &shown, &e))?;
        let meta = file
            .metadata()
            .map_err(|e| super::io_error("inspect", &shown, &e))?;
        if !meta.is_file() {
            return Err(refuse("it is not a regular file".to_owned()));
        }
        let me = nix::unistd::geteuid().as_raw();
        if meta.uid() != me {
            return Err(refuse(format!(
                "it belongs to user {}, not to this user ({me})",
                meta.uid()
            )));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(refuse(format!(
                "others can read or write it (mode {:o}); run `chmod 600 {shown}`",
                meta.mode() & 0o777
            )));
        }
        let mut text = Vec::new();
        file.by_ref()
            .take(4096)
            .read_to_end(&mut text)
            .map_err(|e| super::io_error("read", &shown, &e))?;
        Secret::new(text)
    }

    /// The secret's text, to hand to the ranks (the launcher puts it in their environment).
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_depend_on_the_key_the_label_and_how_parts_split() {
        let a = Auth::Secret(Secret::generate().unwrap());
        let b = Auth::Secret(Secret::generate().unwrap());
        let t = a.tag("x", &[b"ab", b"c"]);
        assert!(a.verify("x", &[b"ab", b"c"], &t));
        assert!(!b.verify("x", &[b"ab", b"c"], &t));
        assert!(!a.verify("y", &[b"ab", b"c"], &t));
        assert!(!a.verify("x", &[b"a", b"bc"], &t));
        assert!(!a.verify("x", &[b"ab", b"c"], &t[..31]));
        assert_eq!(format!("{a:?}"), "Secret(Secret(..))");
    }

    #[test]
    fn short_secrets_and_files_others_can_read_are_refused() {
        let err = Secret::new("short").unwrap_err().to_string();
        assert!(err.contains("fewer than 32"), "{err}");
        let dir = std::env::temp_dir().join(format!("gpr-secret-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("secret");
        std::fs::write(&path, format!("{}\n", "ab".repeat(20))).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Secret::from_file(&path).unwrap_err().to_string();
        assert!(
            err.contains("others can read") && err.contains("chmod 600"),
            "{err}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            Secret::from_file(&path).unwrap(),
            Secret::new("ab".repeat(20)).unwrap()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

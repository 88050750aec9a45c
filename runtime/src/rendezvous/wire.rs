//! The TCP rendezvous's messages and its mutual challenge-response.
//!
//! Every message is a frame: `GPRV`, the protocol version, a kind, a little-endian `u32`
//! length and that many bytes, the length checked against the kind's limit before anything
//! is allocated. A rank and the server then run:
//!
//! 1. rank → server `Hello`: role (fetch or publish), rank, world size, the rank's nonce;
//! 2. server → rank `Challenge`: the server's nonce and its proof,
//!    `HMAC(secret, "server-proof" ‖ session)`; the rank checks it before it proves
//!    anything, so a stranger on the port learns nothing;
//! 3. rank → server `Proof`: `HMAC(secret, "client-proof" ‖ session ‖ payload)` (a
//!    publishing rank 0 sends its payload with it);
//! 4. server → rank `Payload`: the payload and `HMAC(secret, "payload" ‖ session ‖ payload)`;
//! 5. rank → server `Ack`: `HMAC(secret, "ack" ‖ session)`.
//!
//! The session is the role, rank, world size and both nonces, so a proof is good for one
//! direction, one rank and one connection only: replayed or reflected, it fails. The server
//! may answer `Refused` with a reason at any step (unauthenticated: it can only end a
//! connection, which anybody on the path could do anyway).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::secret::{Auth, TAG_LEN, Tag};
use super::{MAX_PAYLOAD, remaining};

const MAGIC: [u8; 4] = *b"GPRV";
/// Version 1 sent a key in clear; version 2 is the challenge-response.
const VERSION: u8 = 2;
const HEADER_LEN: usize = 4 + 1 + 1 + 4;
/// The longest reason a refusal carries.
const MAX_REASON: usize = 1024;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Hello = 1,
    Challenge = 2,
    Proof = 3,
    Payload = 4,
    Refused = 5,
    Ack = 6,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Kind> {
        [
            Kind::Hello,
            Kind::Challenge,
            Kind::Proof,
            Kind::Payload,
            Kind::Refused,
            Kind::Ack,
        ]
        .into_iter()
        .find(|k| *k as u8 == byte)
    }

    /// The longest body of this kind.
    fn max_len(self) -> usize {
        match self {
            Kind::Hello => HELLO_LEN,
            Kind::Challenge => 2 * TAG_LEN,
            Kind::Proof | Kind::Payload => TAG_LEN + MAX_PAYLOAD,
            Kind::Refused => MAX_REASON,
            Kind::Ack => TAG_LEN,
        }
    }
}

/// Why a frame could not be read.
#[derive(Debug)]
pub(crate) enum FrameError {
    /// The deadline passed (or the wait was cancelled).
    Timeout,
    /// The peer hung up or the socket failed.
    Io(io::Error),
    /// The bytes are not a frame of this protocol; the reason says how.
    Malformed(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Timeout => f.write_str("nothing came in time"),
            FrameError::Io(e) => write!(f, "the connection failed: {e}"),
            FrameError::Malformed(reason) => f.write_str(reason),
        }
    }
}

/// A deadline, and a flag that ends the wait early (the store is done).
#[derive(Clone, Copy)]
pub(crate) struct Wait<'a> {
    pub(crate) deadline: Instant,
    pub(crate) cancel: Option<&'a AtomicBool>,
}

impl Wait<'_> {
    fn left(&self) -> Option<Duration> {
        if self.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return None;
        }
        // Wake up now and then to see the cancel flag.
        remaining(self.deadline).map(|d| d.min(Duration::from_millis(100)))
    }
}

/// Reads exactly `buf.len()` bytes before the wait ends.
fn read_exact(stream: &mut TcpStream, buf: &mut [u8], wait: Wait<'_>) -> Result<(), FrameError> {
    let mut filled = 0;
    while filled < buf.len() {
        let left = wait.left().ok_or(FrameError::Timeout)?;
        stream
            .set_read_timeout(Some(left))
            .map_err(FrameError::Io)?;
        match stream.read(&mut buf[filled..]) {
            Ok(0) => return Err(FrameError::Io(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => filled += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    Ok(())
}

/// Reads one frame of one of the `expected` kinds.
pub(crate) fn read_frame(
    stream: &mut TcpStream,
    expected: &[Kind],
    wait: Wait<'_>,
) -> Result<(Kind, Vec<u8>), FrameError> {
    let mut header = [0u8; HEADER_LEN];
    read_exact(stream, &mut header, wait)?;
    if header[..4] != MAGIC {
        return Err(FrameError::Malformed(
            "it does not speak the gpu-pipeline rendezvous protocol".to_owned(),
        ));
    }
    if header[4] != VERSION {
        return Err(FrameError::Malformed(format!(
            "it speaks rendezvous protocol {}, this process {VERSION}",
            header[4]
        )));
    }
    let kind = Kind::from_byte(header[5])
        .filter(|k| expected.contains(k))
        .ok_or_else(|| {
            FrameError::Malformed(format!(
                "it sent a message of kind {} where {expected:?} was expected",
                header[5]
            ))
        })?;
    let len = u32::from_le_bytes([header[6], header[7], header[8], header[9]]) as usize;
    if len > kind.max_len() {
        return Err(FrameError::Malformed(format!(
            "it announced a {kind:?} of {len} bytes, more than the {} one may have",
            kind.max_len()
        )));
    }
    let mut body = vec![0u8; len];
    read_exact(stream, &mut body, wait)?;
    Ok((kind, body))
}

/// Writes one frame, giving up when the wait ends.
pub(crate) fn write_frame(
    stream: &mut TcpStream,
    kind: Kind,
    body: &[u8],
    wait: Wait<'_>,
) -> io::Result<()> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(kind as u8);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    let left = remaining(wait.deadline).unwrap_or(Duration::from_millis(1));
    stream.set_write_timeout(Some(left))?;
    stream.write_all(&out)?;
    stream.flush()
}

/// Sends a refusal (best effort: the peer may be gone).
pub(crate) fn refuse(stream: &mut TcpStream, reason: &str, wait: Wait<'_>) {
    let reason = &reason.as_bytes()[..reason.len().min(MAX_REASON)];
    let _ = write_frame(stream, Kind::Refused, reason, wait);
}

/// What a rank comes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// A rank that receives the payload.
    Fetch = 0,
    /// Rank 0 handing its payload to a server it does not run (the launcher's).
    Publish = 1,
}

const HELLO_LEN: usize = 1 + 4 + 4 + TAG_LEN;

/// The first message of a rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hello {
    pub(crate) role: Role,
    pub(crate) rank: u32,
    pub(crate) world_size: u32,
    pub(crate) nonce: Tag,
}

impl Hello {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HELLO_LEN);
        out.push(self.role as u8);
        out.extend_from_slice(&self.rank.to_le_bytes());
        out.extend_from_slice(&self.world_size.to_le_bytes());
        out.extend_from_slice(&self.nonce);
        out
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Hello, String> {
        if body.len() != HELLO_LEN {
            return Err(format!(
                "its greeting has {} bytes, not {HELLO_LEN}",
                body.len()
            ));
        }
        let role = match body[0] {
            0 => Role::Fetch,
            1 => Role::Publish,
            other => return Err(format!("its greeting names an unknown role {other}")),
        };
        let u32_at =
            |i: usize| u32::from_le_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
        let mut nonce = [0u8; TAG_LEN];
        nonce.copy_from_slice(&body[9..]);
        Ok(Hello {
            role,
            rank: u32_at(1),
            world_size: u32_at(5),
            nonce,
        })
    }
}

/// Everything one connection's proofs are bound to.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    pub(crate) hello: Hello,
    pub(crate) server_nonce: Tag,
}

const SERVER_PROOF: &str = "gpu-pipeline/rendezvous/2/server-proof";
const CLIENT_PROOF: &str = "gpu-pipeline/rendezvous/2/client-proof";
const PAYLOAD: &str = "gpu-pipeline/rendezvous/2/payload";
const ACK: &str = "gpu-pipeline/rendezvous/2/ack";

impl Session {
    fn parts<'a>(&'a self, hello: &'a [u8], extra: &'a [u8]) -> [&'a [u8]; 3] {
        [hello, &self.server_nonce, extra]
    }

    fn tag(&self, auth: &Auth, label: &str, extra: &[u8]) -> Tag {
        auth.tag(label, &self.parts(&self.hello.encode(), extra))
    }

    fn verify(&self, auth: &Auth, label: &str, extra: &[u8], tag: &[u8]) -> bool {
        auth.verify(label, &self.parts(&self.hello.encode(), extra), tag)
    }

    /// The server's `Challenge` body: its nonce and its proof.
    pub(crate) fn challenge(&self, auth: &Auth) -> Vec<u8> {
        let mut out = self.server_nonce.to_vec();
        out.extend_from_slice(&self.tag(auth, SERVER_PROOF, &[]));
        out
    }

    /// The rank's side: the session a `Challenge` body opens, when its proof holds.
    pub(crate) fn accept_challenge(hello: &Hello, auth: &Auth, body: &[u8]) -> Option<Session> {
        if body.len() != 2 * TAG_LEN {
            return None;
        }
        let mut server_nonce = [0u8; TAG_LEN];
        server_nonce.copy_from_slice(&body[..TAG_LEN]);
        let session = Session {
            hello: hello.clone(),
            server_nonce,
        };
        session
            .verify(auth, SERVER_PROOF, &[], &body[TAG_LEN..])
            .then_some(session)
    }

    /// A tagged message: `tag ‖ payload`, for a `Proof` (client) or a `Payload` (server).
    pub(crate) fn sealed(&self, auth: &Auth, from_server: bool, payload: &[u8]) -> Vec<u8> {
        let label = if from_server { PAYLOAD } else { CLIENT_PROOF };
        let mut out = self.tag(auth, label, payload).to_vec();
        out.extend_from_slice(payload);
        out
    }

    /// The payload of a [`sealed`](Self::sealed) body, when its tag holds.
    pub(crate) fn open(&self, auth: &Auth, from_server: bool, body: &[u8]) -> Option<Vec<u8>> {
        let label = if from_server { PAYLOAD } else { CLIENT_PROOF };
        let (tag, payload) = body.split_at_checked(TAG_LEN)?;
        self.verify(auth, label, payload, tag)
            .then(|| payload.to_vec())
    }

    /// The rank's acknowledgement.
    pub(crate) fn ack(&self, auth: &Auth) -> Tag {
        self.tag(auth, ACK, &[])
    }

    /// Whether `body` is this session's acknowledgement.
    pub(crate) fn check_ack(&self, auth: &Auth, body: &[u8]) -> bool {
        self.verify(auth, ACK, &[], body)
    }
}

//! A hostile neighbour: while real ranks meet through a TCP store on loopback, a second
//! process (this test binary again, in the attacker role) throws random and hostile frames
//! at the store. Nothing may panic or hang, no stranger may get in or see the payload, and
//! the real ranks must meet. Bounded: a few seconds, every wait under a deadline.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpu_pipeline::rendezvous::{Secret, TcpStore};

const ROLE_ENV: &str = "GPU_PIPELINE_TEST_ROLE";
const PORT_ENV: &str = "GPU_PIPELINE_TEST_PORT";
const MARKER_ENV: &str = "GPU_PIPELINE_TEST_MARKER";
/// How long the attacker attacks.
const ATTACK: Duration = Duration::from_millis(2500);

/// A small deterministic generator (xorshift64*): reproducible, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A frame header of the rendezvous protocol (version 2), as a stranger would forge it.
fn frame(kind: u8, len: u32, body: &[u8]) -> Vec<u8> {
    let mut out = b"GPRV".to_vec();
    out.push(2);
    out.push(kind);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(body);
    out
}

fn hello(rank: u32, world: u32, nonce: &[u8]) -> Vec<u8> {
    let mut body = vec![0u8];
    body.extend_from_slice(&rank.to_le_bytes());
    body.extend_from_slice(&world.to_le_bytes());
    body.extend_from_slice(nonce);
    frame(1, body.len() as u32, &body)
}

/// One hostile exchange; returns every byte the store sent back.
fn attack_once(port: u16, rng: &mut Rng, idle: &mut Vec<TcpStream>) -> Vec<u8> {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return Vec::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
    let _ = s.set_write_timeout(Some(Duration::from_millis(300)));
    let nonce = rng.bytes(32);
    let case = rng.below(10);
    let _ = match case {
        0 => {
            let n = rng.below(200) as usize;
            s.write_all(&rng.bytes(n))
        }
        1 => s.write_all(&hello(1, 3, &nonce)[..rng.below(50) as usize]),
        2 => s.write_all(&frame(1, u32::MAX, &[])),
        3 => s.write_all(&frame(
            rng.below(256) as u8,
            rng.next() as u32,
            &rng.bytes(16),
        )),
        4 => s.write_all(&[b"XXXX".as_slice(), &hello(1, 3, &nonce)[4..]].concat()),
        5 => s.write_all(&hello(
            rng.next() as u32,
            [u32::MAX, 1 << 31, 0][rng.below(3) as usize],
            &nonce,
        )),
        6 | 7 => {
            // A well-formed greeting, then a proof: random, or the server's own reflected.
            let _ = s.write_all(&hello(1 + rng.below(2) as u32, 3, &nonce));
            let mut challenge = [0u8; 10 + 64];
            if s.read_exact(&mut challenge).is_ok() {
                let proof = if case == 6 {
                    rng.bytes(32)
                } else {
                    challenge[10 + 32..].to_vec()
                };
                s.write_all(&frame(3, 32, &proof))
            } else {
                Ok(())
            }
        }
        8 => s.write_all(&frame(3, 32, &rng.bytes(32))),
        _ => {
            if idle.len() < 8 {
                idle.push(s);
                return Vec::new();
            }
            Ok(())
        }
    };
    let mut back = Vec::new();
    let _ = s.read_to_end(&mut back);
    back
}

/// The attacker process: attacks until [`ATTACK`] has passed, then checks it never saw
/// the payload; a panic here is this process's failure, which the test sees.
fn play_attacker() {
    let port: u16 = std::env::var(PORT_ENV).unwrap().parse().unwrap();
    let marker = std::env::var(MARKER_ENV).unwrap();
    let start = Instant::now();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let marker = marker.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (t + 1));
                let mut idle = Vec::new();
                let mut tries = 0u32;
                while start.elapsed() < ATTACK {
                    let back = attack_once(port, &mut rng, &mut idle);
                    let seen = String::from_utf8_lossy(&back);
                    assert!(!seen.contains(&marker), "a stranger received the payload");
                    // A payload frame (kind 4) would mean a stranger was admitted.
                    assert!(
                        !(back.len() >= 6 && back[..4] == *b"GPRV" && back[5] == 4),
                        "a stranger was sent a payload frame"
                    );
                    tries += 1;
                }
                tries
            })
        })
        .collect();
    let tries: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    println!("attacker made {tries} attempts");
}

#[test]
fn a_hostile_neighbour_cannot_get_in_stop_the_job_or_hang_it() {
    if std::env::var(ROLE_ENV).as_deref() == Ok("attacker") {
        play_attacker();
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let store = TcpStore {
        timeout: Duration::from_secs(20),
        ..TcpStore::new("127.0.0.1", port, Secret::generate().unwrap())
    };
    let marker = format!("PAYLOAD-{}", std::process::id());
    let mut attacker = Command::new(std::env::current_exe().unwrap())
        .args([
            "a_hostile_neighbour_cannot_get_in_stop_the_job_or_hang_it",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE_ENV, "attacker")
        .env(PORT_ENV, port.to_string())
        .env(MARKER_ENV, &marker)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    std::thread::scope(|s| {
        let server = s.spawn(|| store.serve_on(&listener, 3, marker.as_bytes()));
        // The real ranks come while the attack is on.
        std::thread::sleep(ATTACK / 3);
        let ranks: Vec<_> = (1..3)
            .map(|rank| {
                let store = store.clone();
                s.spawn(move || store.fetch(rank, 3))
            })
            .collect();
        for r in ranks {
            assert_eq!(r.join().unwrap().unwrap(), marker.as_bytes());
        }
        server.join().unwrap().unwrap();
    });
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    // The attacker ends on its own, without a panic, within its bound.
    let deadline = Instant::now() + ATTACK + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = attacker.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = attacker.kill();
            let _ = attacker.wait();
            panic!("the attacker hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    let _ = attacker.stdout.take().unwrap().read_to_string(&mut out);
    assert!(status.success(), "the attacker failed: {out}");
    assert!(out.contains("attacker made"), "{out}");
}

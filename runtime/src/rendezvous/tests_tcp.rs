//! The TCP store: ranks meet, strangers do not, and nothing waits past its deadline.

use super::tests::secret;
use super::wire::{self, Hello, Kind, Role, Session, Wait};
use super::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;

fn local_store(listener: &TcpListener, timeout: Duration) -> TcpStore {
    TcpStore {
        timeout,
        ..TcpStore::new("127.0.0.1", listener.local_addr().unwrap().port(), secret())
    }
}

fn other_secret() -> Auth {
    Auth::Secret(Secret::new("x".repeat(40)).unwrap())
}

fn soon(ms: u64) -> Wait<'static> {
    Wait {
        deadline: Instant::now() + Duration::from_millis(ms),
        cancel: None,
    }
}

/// A raw connection that greets as `rank` of `world` and returns the server's answer.
fn greet(port: u16, rank: u32, world: u32) -> (TcpStream, Hello, (Kind, Vec<u8>)) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let hello = Hello {
        role: Role::Fetch,
        rank,
        world_size: world,
        nonce: super::secret::nonce().unwrap(),
    };
    wire::write_frame(&mut stream, Kind::Hello, &hello.encode(), soon(2000)).unwrap();
    let answer = wire::read_frame(&mut stream, &[Kind::Challenge, Kind::Refused], soon(3000))
        .expect("an answer");
    (stream, hello, answer)
}

/// Sends `proof` as the proof and returns the refusal's reason.
fn prove(mut stream: TcpStream, proof: &[u8]) -> String {
    wire::write_frame(&mut stream, Kind::Proof, proof, soon(2000)).unwrap();
    let (kind, body) = wire::read_frame(&mut stream, &[Kind::Refused, Kind::Payload], soon(3000))
        .expect("an answer");
    assert_eq!(kind, Kind::Refused, "a stranger was admitted");
    String::from_utf8_lossy(&body).into_owned()
}

#[test]
fn four_ranks_meet_over_loopback() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = local_store(&listener, Duration::from_secs(30));
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
fn a_launcher_serves_round_after_round_and_rank_zero_publishes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = TcpStore {
        served_by: ServedBy::Launcher,
        ..local_store(&listener, Duration::from_secs(30))
    };
    let stop = AtomicBool::new(false);
    let info = |rank| RankInfo {
        rank,
        world_size: 3,
        local_rank: rank,
        local_world_size: None,
        source: "test",
    };
    let shared = &Rendezvous::Tcp(store.clone());
    std::thread::scope(|s| {
        let server = s.spawn(|| store.serve_job(&listener, 3, &stop));
        for round in 0..2u8 {
            let others: Vec<_> = (1..3)
                .map(|r| s.spawn(move || shared.share(&info(r), None)))
                .collect();
            assert_eq!(shared.share(&info(0), Some(&[round])).unwrap(), [round]);
            for o in others {
                assert_eq!(o.join().unwrap().unwrap(), [round]);
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        server.join().unwrap().unwrap();
    });
}

#[test]
fn share_with_one_rank_needs_no_store() {
    let store = Rendezvous::Tcp(TcpStore::new("unresolvable.invalid", 1, secret()));
    assert_eq!(
        store.share(&RankInfo::single(), Some(b"id")).unwrap(),
        b"id"
    );
    let usage = store.share(&RankInfo::single(), None).unwrap_err();
    assert!(matches!(usage, RendezvousError::Usage(_)));
}

#[test]
fn a_rank_with_no_server_times_out_naming_the_address() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let store = TcpStore {
        timeout: Duration::from_millis(300),
        ..TcpStore::new("127.0.0.1", port, secret())
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
    let store = local_store(&listener, Duration::from_millis(500));
    std::thread::scope(|s| {
        let client = {
            let store = store.clone();
            s.spawn(move || store.fetch(2, 3))
        };
        let err = store.serve_on(&listener, 3, b"x").unwrap_err();
        assert!(err.to_string().contains("ranks [1] to connect"), "{err}");
        assert!(client.join().unwrap().is_err());
    });
}

#[test]
fn rank_zero_binds_exactly_the_address_given() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = local_store(&taken, Duration::from_millis(300));
    let err = store.serve(2, b"x").unwrap_err().to_string();
    assert!(
        err.contains("could not listen on") && err.contains("127.0.0.1"),
        "{err}"
    );
}

#[test]
fn a_world_of_two_to_the_forty_is_refused_before_allocating() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = local_store(&listener, Duration::from_millis(300));
    // Before, rank 0 allocated a slot per rank and aborted.
    let err = store
        .serve_on(&listener, 1 << 40, b"x")
        .unwrap_err()
        .to_string();
    assert!(err.contains("65536"), "{err}");
    assert!(store.fetch(1, 1 << 40).is_err());
}

#[test]
fn a_stranger_on_the_port_is_refused_by_the_rank_and_learns_nothing() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = local_store(&listener, Duration::from_secs(5));
    std::thread::scope(|s| {
        let fake = s.spawn(|| {
            let (mut stream, _) = listener.accept().unwrap();
            let (_, hello) = wire::read_frame(&mut stream, &[Kind::Hello], soon(3000)).unwrap();
            // A server that does not know the secret: a well-formed challenge, a wrong proof.
            let session = Session {
                hello: Hello::decode(&hello).unwrap(),
                server_nonce: [7; 32],
            };
            let challenge = session.challenge(&other_secret());
            wire::write_frame(&mut stream, Kind::Challenge, &challenge, soon(1000)).unwrap();
            let mut rest = Vec::new();
            let _ = stream.set_read_timeout(Some(Duration::from_secs(3)));
            let _ = stream.read_to_end(&mut rest);
            rest
        });
        // Before, any reply with the right magic bytes was taken for the payload.
        let err = store.fetch(1, 2).unwrap_err().to_string();
        assert!(
            err.contains("failed to prove it knows the job's secret"),
            "{err}"
        );
        assert!(
            fake.join().unwrap().is_empty(),
            "the rank sent nothing after the challenge"
        );
    });
}

#[test]
fn strangers_replays_reflections_and_impossible_worlds_are_refused_while_the_job_goes_on() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = local_store(&listener, Duration::from_secs(20));
    let port = store.port;
    // A proof a real rank made for another connection (another server nonce).
    let elsewhere = Session {
        hello: Hello {
            role: Role::Fetch,
            rank: 1,
            world_size: 3,
            nonce: [1; 32],
        },
        server_nonce: [2; 32],
    };
    let replayed = elsewhere.sealed(&store.auth, false, &[]);
    std::thread::scope(|s| {
        let server = s.spawn(|| store.serve_on(&listener, 3, b"ok"));
        // Another job's secret.
        let other = TcpStore {
            auth: other_secret(),
            ..store.clone()
        };
        let err = other.fetch(1, 3).unwrap_err().to_string();
        assert!(err.contains("failed to prove"), "{err}");
        // A replayed proof.
        let (stream, _, (kind, _)) = greet(port, 1, 3);
        assert_eq!(kind, Kind::Challenge);
        assert!(prove(stream, &replayed).contains("failed to prove"));
        // The server's own proof reflected back.
        let (stream, _, (_, challenge)) = greet(port, 1, 3);
        let mut reflected = challenge[32..].to_vec();
        assert!(prove(stream, &reflected).contains("failed to prove"));
        reflected.extend_from_slice(b"payload");
        let (stream, _, _) = greet(port, 2, 3);
        assert!(prove(stream, &reflected).contains("failed to prove"));
        // Impossible worlds and ranks: refused before any proof, the job unharmed.
        for (rank, world) in [(1, u32::MAX), (1, 0), (0, 3), (3, 3), (u32::MAX, 3)] {
            let (_, _, (kind, reason)) = greet(port, rank, world);
            assert_eq!(kind, Kind::Refused, "{rank} of {world}");
            assert!(!reason.is_empty());
        }
        // Bytes that are no frame at all.
        let mut http = TcpStream::connect(("127.0.0.1", port)).unwrap();
        http.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut answer = Vec::new();
        let _ = http.read_to_end(&mut answer);
        assert!(String::from_utf8_lossy(&answer).contains("does not speak"));
        // ...and the real ranks still meet.
        let ranks: Vec<_> = (1..3)
            .map(|rank| {
                let store = store.clone();
                s.spawn(move || store.fetch(rank, 3))
            })
            .collect();
        for r in ranks {
            assert_eq!(r.join().unwrap().unwrap(), b"ok");
        }
        server.join().unwrap().unwrap();
    });
}

#[test]
fn idle_connections_are_waited_for_side_by_side_not_one_after_another() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = local_store(&listener, Duration::from_secs(8));
    let port = store.port;
    // Before, each silent connection held the server for 5 s, one after another.
    let idle: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        let server = s.spawn(|| store.serve_on(&listener, 2, b"ok"));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(store.fetch(1, 2).unwrap(), b"ok");
        server.join().unwrap().unwrap();
    });
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    drop(idle);
}

#[test]
fn connections_beyond_the_cap_are_closed_and_ranks_get_in_once_slots_free() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = local_store(&listener, Duration::from_secs(20));
    let port = store.port;
    std::thread::scope(|s| {
        let server = s.spawn(|| store.serve_on(&listener, 2, b"ok"));
        let idle: Vec<TcpStream> = (0..MAX_PENDING)
            .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        // Once the server has accepted them all, one more is closed unanswered, at once
        // (tried a few times: a loaded machine may take a while to accept the 64).
        let closed_at_once = (0..20).any(|_| {
            let mut extra = TcpStream::connect(("127.0.0.1", port)).unwrap();
            extra
                .set_read_timeout(Some(Duration::from_secs(1)))
                .unwrap();
            matches!(extra.read(&mut [0u8; 16]), Ok(0))
        });
        assert!(closed_at_once, "connections beyond the cap are not closed");
        let rank = s.spawn(|| store.fetch(1, 2));
        std::thread::sleep(Duration::from_millis(200));
        drop(idle);
        // The rank retried past the closed connection and got in.
        assert_eq!(rank.join().unwrap().unwrap(), b"ok");
        server.join().unwrap().unwrap();
    });
}

#[test]
fn a_duplicate_authenticated_rank_is_refused_and_the_first_keeps_its_slot() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = local_store(&listener, Duration::from_secs(10));
    std::thread::scope(|s| {
        let server = s.spawn(|| store.serve_on(&listener, 3, b"ok"));
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..2 {
            let (tx, store) = (tx.clone(), store.clone());
            s.spawn(move || tx.send(store.fetch(1, 3)));
        }
        // Before, a duplicate failed the whole job. Now it alone is refused...
        let err = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
            .unwrap_err();
        assert!(err.to_string().contains("rank 1 already joined"), "{err}");
        // ...and the job goes on with the first.
        assert_eq!(store.fetch(2, 3).unwrap(), b"ok");
        let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(first.unwrap(), b"ok");
        server.join().unwrap().unwrap();
    });
}

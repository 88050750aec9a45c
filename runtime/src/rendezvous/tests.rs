//! The rank variables, the choice of store, and the file store.

use super::*;
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;

pub(super) fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

pub(super) fn secret() -> Secret {
    Secret::new("0123456789abcdef".repeat(4)).unwrap()
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
fn a_missing_malformed_or_huge_world_is_an_error_naming_the_variables() {
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
        // 2^40 ranks used to allocate a slot per rank in rank 0 and abort it.
        (
            vec![("RANK", "0"), ("WORLD_SIZE", "1099511627776")],
            "65536",
        ),
        (
            vec![("RANK", "0"), ("WORLD_SIZE", "0")],
            "at least one rank",
        ),
    ];
    for (pairs, needle) in cases {
        let err = RankInfo::from_vars(vars(&pairs)).unwrap_err().to_string();
        assert!(err.contains(needle), "{err} lacks {needle}");
    }
}

#[test]
fn the_store_comes_from_the_environment_and_needs_a_secret() {
    let text = "0123456789abcdef".repeat(4);
    let tcp = Rendezvous::from_vars(vars(&[
        ("MASTER_ADDR", "10.0.0.1"),
        ("MASTER_PORT", "1234"),
        (MASTER_PORT_ENV, "29500"),
        (RENDEZVOUS_SECRET_ENV, &text),
        (RENDEZVOUS_SERVER_ENV, "launcher"),
        (RENDEZVOUS_TIMEOUT_ENV, "2.5"),
    ]))
    .unwrap();
    assert_eq!(
        tcp,
        Rendezvous::Tcp(TcpStore {
            timeout: Duration::from_millis(2500),
            served_by: ServedBy::Launcher,
            ..TcpStore::new("10.0.0.1", 29500, secret())
        })
    );
    let insecure = Rendezvous::from_vars(vars(&[
        (RENDEZVOUS_FILE_ENV, "/shared/job.id"),
        (RENDEZVOUS_INSECURE_ENV, "1"),
    ]))
    .unwrap();
    assert!(matches!(
        insecure,
        Rendezvous::File(FileStore {
            auth: Auth::Insecure,
            ..
        })
    ));
    let addr = [(MASTER_ADDR_ENV, "h"), (MASTER_PORT_ENV, "1")];
    for (extra, needle) in [
        // Before: no key meant key 0, on any address, sent in clear.
        (vec![], "no rendezvous secret"),
        (vec![("GPU_PIPELINE_RENDEZVOUS_KEY", "7")], "no longer read"),
        (vec![(RENDEZVOUS_SECRET_ENV, "short")], "fewer than 32"),
        (
            vec![(RENDEZVOUS_SECRET_ENV, &text), (MASTER_PORT_ENV, "70000")],
            "not a port",
        ),
        (
            vec![
                (RENDEZVOUS_SECRET_ENV, &text),
                (RENDEZVOUS_SERVER_ENV, "me"),
            ],
            "`launcher`",
        ),
        (
            vec![(RENDEZVOUS_SECRET_FILE_ENV, "/nonexistent/secret")],
            "could not open",
        ),
    ] {
        let mut pairs = addr.to_vec();
        pairs.retain(|(k, _)| !extra.iter().any(|(e, _)| e == k));
        pairs.extend(extra);
        let err = Rendezvous::from_vars(vars(&pairs)).unwrap_err().to_string();
        assert!(err.contains(needle), "{err} lacks {needle}");
    }
}

/// A fresh directory only this user can write.
pub(super) fn private_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpr-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

fn file_store(path: &std::path::Path, timeout_ms: u64) -> FileStore {
    FileStore {
        timeout: Duration::from_millis(timeout_ms),
        ..FileStore::new(path, secret())
    }
}

#[test]
fn three_ranks_meet_through_a_file_and_it_is_removed_after() {
    let dir = private_dir("three");
    let store = file_store(&dir.join("id"), 30_000);
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
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_directory_others_can_write_is_refused() {
    let dir = private_dir("shared-dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let store = file_store(&dir.join("id"), 200);
    for err in [
        store.publish(2, b"x").unwrap_err(),
        store.fetch(1, 2).unwrap_err(),
    ] {
        let text = err.to_string();
        assert!(matches!(err, RendezvousError::Insecure { .. }), "{err:?}");
        assert!(
            text.contains("others can write it") && text.contains("mkdir -m 700"),
            "{text}"
        );
    }
}

#[test]
fn a_link_at_the_old_temporary_name_does_not_redirect_the_write() {
    let dir = private_dir("link");
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let path = dir.join("id");
    // Before, rank 0 wrote `id.tmp.<pid>` through whatever link stood there.
    std::os::unix::fs::symlink(&victim, dir.join(format!("id.tmp.{}", std::process::id())))
        .unwrap();
    let store = file_store(&path, 200);
    assert!(store.publish(2, b"x").is_err(), "nobody acknowledges");
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    // A link at the path itself is refused by readers, never followed.
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    let err = store.fetch(1, 2).unwrap_err().to_string();
    assert!(err.contains("symbolic link"), "{err}");
}

#[test]
fn a_fifo_at_the_path_is_refused_at_once() {
    let dir = private_dir("fifo");
    let path = dir.join("id");
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let store = file_store(&path, 20_000);
    let start = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(store.fetch(1, 2)));
    // Before, the read blocked on the FIFO past any timeout.
    let result = rx.recv_timeout(Duration::from_secs(5)).expect("no hang");
    let err = result.unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn stale_and_forged_files_are_waited_past() {
    let dir = private_dir("stale");
    let path = dir.join("id");
    let other = FileStore {
        auth: Auth::Secret(Secret::new("f".repeat(40)).unwrap()),
        ..file_store(&path, 100)
    };
    // A crashed earlier job's file (another secret), never cleaned up.
    let _ = other.publish(2, b"old");
    let stale = std::fs::read(&path);
    assert!(stale.is_err(), "publish removes its file on timeout");
    let published = file_store(&path, 200);
    let lingering = FileStore {
        timeout: Duration::from_secs(2),
        ..other.clone()
    };
    std::thread::scope(|s| {
        s.spawn(|| lingering.publish(2, b"old"));
        let deadline = Instant::now() + Duration::from_secs(2);
        while !path.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let err = published.fetch(1, 2).unwrap_err().to_string();
        assert!(err.contains("another job's file"), "{err}");
    });
    // This job's id with a payload swapped: the tag fails.
    let store = file_store(&path, 3000);
    std::thread::scope(|s| {
        let reader = s.spawn(|| store.fetch(1, 2));
        let writer = s.spawn(|| store.publish(2, b"real"));
        assert_eq!(reader.join().unwrap().unwrap(), b"real");
        writer.join().unwrap().unwrap();
    });
    let forged = {
        let mut data = b"GPRF\x02".to_vec();
        data.extend_from_slice(&store.auth.tag(super::file::JOB_LABEL, &[]));
        data.extend_from_slice(&[0u8; 32]);
        data.extend_from_slice(&2u32.to_le_bytes());
        data.extend_from_slice(&4u32.to_le_bytes());
        data.extend_from_slice(b"evil");
        data.extend_from_slice(&[0u8; 32]);
        data
    };
    std::fs::write(&path, forged).unwrap();
    let err = file_store(&path, 200).fetch(1, 2).unwrap_err().to_string();
    assert!(err.contains("forged or altered"), "{err}");
}

//! `GPU_PIPELINE_COMM_TIMEOUT`, in a process of its own (the variable is process-wide): it
//! sets the deadline of communicators made without one, a builder value wins over it, and a
//! bad value is an error saying what to write.

use std::time::Duration;

use gpu_pipeline::Communicator;
use gpu_pipeline::collective::{COMM_TIMEOUT_ENV, DEFAULT_COMM_TIMEOUT, World};
use gpu_pipeline::nccl::CommConfig;

/// Sets (or removes) the variable.
fn set(value: Option<&str>) {
    match value {
        // SAFETY: this binary's only test runs on one thread, and nothing else of this
        // process reads or writes the environment meanwhile.
        Some(value) => unsafe { std::env::set_var(COMM_TIMEOUT_ENV, value) },
        // SAFETY: as above.
        None => unsafe { std::env::remove_var(COMM_TIMEOUT_ENV) },
    }
}

#[test]
fn the_environment_sets_the_deadline_and_bad_values_are_clear_errors() {
    set(None);
    assert_eq!(
        Communicator::cpu_ranks(2).unwrap()[0].timeout(),
        DEFAULT_COMM_TIMEOUT
    );
    assert_eq!(DEFAULT_COMM_TIMEOUT, Duration::from_secs(300));

    set(Some("2.5"));
    assert_eq!(
        Communicator::cpu_ranks(2).unwrap()[1].timeout(),
        Duration::from_millis(2500)
    );
    assert_eq!(
        CommConfig::default().deadline().unwrap(),
        Duration::from_millis(2500)
    );
    // The builder wins.
    let config = CommConfig {
        timeout: Some(Duration::from_secs(7)),
        ..CommConfig::default()
    };
    assert_eq!(config.deadline().unwrap(), Duration::from_secs(7));
    assert_eq!(
        Communicator::cpu_ranks_with_timeout(2, Duration::from_secs(9)).unwrap()[0].timeout(),
        Duration::from_secs(9)
    );

    for bad in ["soon", "-1", "0", "10s"] {
        set(Some(bad));
        for err in [
            Communicator::cpu_ranks(2).unwrap_err().to_string(),
            World::new(2).unwrap_err().to_string(),
            CommConfig::default().deadline().unwrap_err().to_string(),
        ] {
            assert!(
                err.contains(COMM_TIMEOUT_ENV)
                    && err.contains(&format!("{bad:?}"))
                    && err.contains("positive number of seconds"),
                "{bad}: {err}"
            );
        }
    }
    set(Some(""));
    assert_eq!(
        Communicator::cpu_ranks(1).unwrap()[0].timeout(),
        DEFAULT_COMM_TIMEOUT
    );
    set(None);
}

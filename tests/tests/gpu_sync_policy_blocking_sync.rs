//! A context whose waiting host threads blocks (`SyncPolicy::BlockingSync`), in a process of its
//! own: a scheduling policy is chosen while the primary context is still inactive, so this
//! binary holds this one test (see `tests::sync_policy`).

use gpu_pipeline::SyncPolicy;

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_blocking_sync_context_works_and_refuses_another_policy_while_active() {
    tests::sync_policy::check_sync_policy(SyncPolicy::BlockingSync);
}

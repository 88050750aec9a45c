//! Compile-fail and pass cases for `gpu_pipeline!` and the runtime's type-level rules.
//! Regenerate snapshots with `TRYBUILD=overwrite cargo test -p ui-tests`, then review the
//! diff as a user would (see README.md).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*/*.rs");
    t.pass("tests/pass/*.rs");
}

//! Every example at a small size on the checked host backend: its own checks pass and the
//! race detector reports nothing. Plus the flag parsing each `main` relies on.

use clap::Parser;
use examples::common::Report;
use examples::heat2d::{self, Heat2dArgs, HeatStep};
use examples::interop::{self, InteropArgs};
use examples::nbody::{self, NbodyArgs};
use examples::overlap::{self, OverlapArgs};
use gpu_pipeline::Context;

fn assert_passed(ctx: &Context, report: &Report) {
    assert!(report.passed(), "{report}");
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
    assert!(report.checks.iter().any(|c| c.name == "race detector"));
}

#[test]
fn heat2d_host_checked_matches_the_reference_and_conserves_heat() {
    let dir = std::env::temp_dir().join(format!("heat2d-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join("field.png");
    let args = Heat2dArgs::parse_from([
        "heat2d",
        "--nx",
        "24",
        "--ny",
        "17",
        "--steps",
        "40",
        "--phases",
        "3",
        "--quiet",
        "--png",
        png.to_str().unwrap(),
    ]);
    let ctx = Context::host_checked();
    let outcome = heat2d::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    assert_eq!(outcome.phase_heat.len(), 3);
    assert_eq!(outcome.field.len(), 24 * 17);
    // The PNG is there and has the grid's size.
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 24);
    assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), 17);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn heat2d_schedule_doubles_alpha_and_covers_every_step() {
    let args =
        Heat2dArgs::parse_from(["heat2d", "--steps", "22", "--phases", "3", "--alpha", "0.2"]);
    let phases = heat2d::schedule(&args);
    assert_eq!(phases.iter().map(|p| p.replays).sum::<u32>(), 11);
    assert_eq!(
        phases.iter().map(|p| p.alpha).collect::<Vec<_>>(),
        [0.05, 0.1, 0.2]
    );
}

#[test]
fn heat2d_rejects_bad_flags_with_a_reason() {
    for bad in [
        &["heat2d", "--steps", "7"][..],
        &["heat2d", "--alpha", "0.3"],
        &["heat2d", "--nx", "1"],
        &["heat2d", "--no-png", "--png", "x.png"],
        &["heat2d", "--frobnicate"],
    ] {
        let err = Heat2dArgs::try_parse_from(bad).unwrap_err();
        assert!(!err.to_string().is_empty());
    }
    let err = Heat2dArgs::try_parse_from(["heat2d", "--alpha", "0.3"]).unwrap_err();
    assert!(err.to_string().contains("unstable"), "{err}");
}

#[test]
fn heat2d_dot_names_every_stage() {
    for stage in ["forward", "save", "back"] {
        assert!(HeatStep::DOT.contains(stage), "{}", HeatStep::DOT);
    }
    assert_eq!(HeatStep::STAGES, ["forward", "save", "back"]);
}

#[test]
fn nbody_host_checked_conserves_momentum_and_matches_the_reference() {
    let args = NbodyArgs::parse_from([
        "nbody",
        "--bodies",
        "40",
        "--steps",
        "12",
        "--sample-every",
        "5",
        "--reference-steps",
        "7",
        "--quiet",
    ]);
    let ctx = Context::host_checked();
    let outcome = nbody::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    let steps: Vec<u32> = outcome.samples.iter().map(|s| s.0).collect();
    assert_eq!(steps, [5, 7, 10, 12]);
    assert!(outcome.samples.iter().all(|s| s.1.len() == 4 * 40));
}

#[test]
fn nbody_rejects_a_reference_longer_than_the_run() {
    let args = NbodyArgs::parse_from(["nbody", "--steps", "3", "--reference-steps", "5"]);
    let err = nbody::run(&Context::host(), &args).unwrap_err();
    assert!(err.to_string().contains("--reference-steps"), "{err}");
}

#[test]
fn overlap_host_checked_matches_the_reference() {
    let args = OverlapArgs::parse_from([
        "overlap",
        "--elements",
        "3000",
        "--chunks",
        "5",
        "--iters",
        "4",
        "--repeats",
        "1",
        "--quiet",
    ]);
    let ctx = Context::host_checked();
    let outcome = overlap::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
}

#[test]
fn overlap_with_one_chunk_still_runs_every_stage() {
    let args = OverlapArgs::parse_from([
        "overlap",
        "--elements",
        "100",
        "--chunks",
        "1",
        "--iters",
        "2",
        "--repeats",
        "1",
    ]);
    let ctx = Context::host_checked();
    let outcome = overlap::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
}

#[test]
fn overlap_rejects_elements_that_do_not_split_into_chunks() {
    let args = OverlapArgs::parse_from(["overlap", "--elements", "10", "--chunks", "3"]);
    let err = overlap::run(&Context::host(), &args).unwrap_err();
    assert!(err.to_string().contains("multiple"), "{err}");
}

#[test]
fn interop_host_checked_runs_the_library_call_and_skips_raw_handles() {
    let args = InteropArgs::parse_from(["interop", "--elements", "1000"]);
    let ctx = Context::host_checked();
    let outcome = interop::run(&ctx, &args).unwrap();
    assert_passed(&ctx, &outcome.report);
    assert!(!outcome.borrowed_foreign_stream);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_example_passes_on_a_gpu() {
    let ctx = Context::cuda(0).unwrap();
    let heat = Heat2dArgs::parse_from([
        "heat2d", "--nx", "300", "--ny", "200", "--steps", "200", "--no-png", "-q",
    ]);
    assert!(heat2d::run(&ctx, &heat).unwrap().report.passed());
    let nb = NbodyArgs::parse_from(["nbody", "--bodies", "1000", "--steps", "50", "-q"]);
    assert!(nbody::run(&ctx, &nb).unwrap().report.passed());
    let ov = OverlapArgs::parse_from(["overlap", "--elements", "1048576", "--chunks", "8", "-q"]);
    assert!(overlap::run(&ctx, &ov).unwrap().report.passed());
    let io = interop::run(&ctx, &InteropArgs::parse_from(["interop"])).unwrap();
    assert!(io.report.passed() && io.borrowed_foreign_stream);
}

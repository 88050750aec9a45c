//! The benchmarks' pipelines and hand-written wirings, run on the checked host backend at a
//! tiny size: every variant's output is verified and the race detector must find nothing.
//! The benches themselves (`tests/benches/overlap.rs`, `events.rs`) need a GPU for their
//! timings; this keeps their event wiring proven in CI. The same checks run with
//! `cargo bench -p tests --bench overlap -- --check-host` (and `--bench events`,
//! `--bench conditionals`). The conditionals bench's rounds against its C++ anchor, and its
//! reading of the anchor's output, are checked here with a stand-in anchor script.

#[allow(
    dead_code,
    reason = "the bench's timing and printing code, which only its own `main` uses"
)]
#[path = "../benches/events.rs"]
mod events;

#[allow(
    dead_code,
    reason = "the bench's timing and printing code, which only its own `main` uses"
)]
#[path = "../benches/conditionals.rs"]
mod conditionals;

#[test]
fn the_overlap_bench_variants_are_correct_and_race_free() {
    if let Err(e) = events::overlap::check_host() {
        panic!("{e}");
    }
}

#[test]
fn the_events_bench_variants_are_correct_and_race_free() {
    if let Err(e) = events::check_host() {
        panic!("{e}");
    }
}

#[test]
fn the_conditionals_bench_forms_are_correct_and_race_free() {
    if let Err(e) = conditionals::check_host() {
        panic!("{e}");
    }
}

/// What `benches/anchors/conditionals.cu` prints for 10 000 launches.
const ANCHOR_OUTPUT: &str = "form launches us_per_launch
if_else 10000 2.500
switch 10000 2.600
do_while 10000 9.100
kernel_while 10000 6.200
";

#[test]
fn the_conditionals_bench_reads_the_anchors_lines() {
    let us = conditionals::parse_anchor(ANCHOR_OUTPUT, 10_000).unwrap();
    assert_eq!(us, [2.5, 2.6, 9.1, 6.2]);
    // Its order does not matter; each of these does.
    let reordered =
        "form launches us_per_launch\nswitch 5 1\nif_else 5 2\nkernel_while 5 3\ndo_while 5 4\n";
    assert_eq!(
        conditionals::parse_anchor(reordered, 5).unwrap(),
        [2.0, 1.0, 4.0, 3.0]
    );
    let refused = |text: &str, launches: usize, says: &str| {
        let e = conditionals::parse_anchor(text, launches)
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{e:?} should say {says:?}");
    };
    refused(ANCHOR_OUTPUT, 100, "not 100 launches");
    refused("", 10_000, "does not start with");
    refused(
        &ANCHOR_OUTPUT.replace("kernel_while 10000 6.200\n", ""),
        10_000,
        "no line for kernel_while",
    );
    refused(
        &format!("{ANCHOR_OUTPUT}switch 10000 2.0\n"),
        10_000,
        "switch twice",
    );
    refused(
        &ANCHOR_OUTPUT.replace("switch", "case"),
        10_000,
        "unknown form",
    );
    refused(&ANCHOR_OUTPUT.replace("9.100", "nan"), 10_000, "no time");
    refused(
        &ANCHOR_OUTPUT.replace("9.100", "9.1 us"),
        10_000,
        "not `form launches us`",
    );
}

#[test]
fn the_conditionals_bench_takes_its_arguments() {
    let parse = |args: &[&str]| conditionals::parse_args(args.iter().map(|a| a.to_string()));
    let options = parse(&["--launches", "500", "--rounds", "3", "--bench"]).unwrap();
    assert_eq!(
        (options.launches, options.rounds, options.check_host),
        (500, 3, false)
    );
    assert!(parse(&["--check-host", "--bench"]).unwrap().check_host);
    assert_eq!(parse(&[]).unwrap().launches, 10_000);
    for (args, says) in [
        (&["--launches", "0"][..], "positive whole number, not `0`"),
        (
            &["--rounds", "many"][..],
            "positive whole number, not `many`",
        ),
        (&["--rounds"][..], "--rounds needs a count"),
        (&["--fast"][..], "unknown argument `--fast`"),
    ] {
        let e = parse(args).unwrap_err();
        assert!(e.contains(says), "{e:?} should say {says:?}");
    }
}

/// Rounds alternate with the anchor, a stand-in script here, whose times fill its column;
/// a failing anchor is an error that carries what it printed.
#[test]
fn the_conditionals_bench_runs_rounds_with_its_anchor() {
    use std::os::unix::fs::PermissionsExt;

    let dir = std::env::temp_dir().join(format!("conditionals-anchor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = |name: &str, body: &str| {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    // Counts its runs in a file beside it, and prints 2 µs for every form.
    let runs = dir.join("runs");
    let good = script(
        "good",
        &format!(
            "echo run >> '{}'\necho 'form launches us_per_launch'\n\
             for f in if_else switch do_while kernel_while; do echo \"$f $1 2.000\"; done",
            runs.display()
        ),
    );
    let bad = script("bad", "echo 'needs a CUDA 12.8+ driver' >&2\nexit 1");

    let ctx = gpu_pipeline::Context::cpu_checked();
    let times = conditionals::measure(&ctx, 2, 3, Some(&good)).unwrap();
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 3);
    assert_eq!(times.len(), 4);
    for (t, form) in times.iter().zip(conditionals::FORMS) {
        assert_eq!(t.form, form);
        assert_eq!((t.ours.len(), &t.anchor[..]), (3, &[2.0, 2.0, 2.0][..]));
        assert!(t.ours.iter().all(|us| us.is_finite() && *us > 0.0));
    }
    let table = conditionals::table(&times);
    assert!(table.starts_with(
        "| form | ours median µs | spread | anchor median µs | spread | ours/anchor |"
    ));
    // The header, its rule, one row per form.
    assert_eq!(table.lines().filter(|l| l.starts_with("| ")).count(), 6);
    assert!(table.contains("target: every form at most 1.05x the anchor"));

    let e = conditionals::measure(&ctx, 2, 1, Some(&bad))
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs a CUDA 12.8+ driver"), "{e}");
    let missing = dir.join("missing");
    let e = conditionals::measure(&ctx, 2, 1, Some(&missing))
        .unwrap_err()
        .to_string();
    assert!(e.contains("could not run the anchor"), "{e}");

    // Without an anchor: our column only.
    let times = conditionals::measure(&ctx, 2, 1, None).unwrap();
    assert!(
        times
            .iter()
            .all(|t| t.anchor.is_empty() && t.ours.len() == 1)
    );
    let table = conditionals::table(&times);
    assert!(table.starts_with("| form | ours median µs | spread |\n"));
    assert!(!table.contains("target:"));
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// compute-sanitizer fails a binary that never calls CUDA; this gives it one call there.
#[test]
fn instrumented_under_compute_sanitizer() {
    tests::touch_cuda_for_compute_sanitizer();
}

#[allow(
    dead_code,
    reason = "the bench's timing and printing code, which only its own `main` uses"
)]
#[path = "../benches/jacobi_graphs.rs"]
mod jacobi_graphs;

#[test]
fn the_jacobi_graphs_ports_solve_as_the_cpu_does_and_race_free() {
    match jacobi_graphs::check_host() {
        // n = 64: the sample's system converges in 304 sweeps, by every method.
        Ok(sweeps) => assert_eq!(
            sweeps,
            [("set_params", 304), ("exec_update", 304), ("stream", 304)]
        ),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_jacobi_graphs_bench_reads_the_anchors_lines() {
    let out = "set_params 2950 31.5 1.0e-3\nexec_update 2950 40.25 1.0e-3\nstream 2950 35 2e-3\n";
    let lines = jacobi_graphs::parse_anchor(out).unwrap();
    assert_eq!(
        lines.map(|l| (l.iterations, l.ms, l.error)),
        [(2950, 31.5, 1e-3), (2950, 40.25, 1e-3), (2950, 35.0, 2e-3)]
    );
    let refused = |text: &str, says: &str| {
        let e = jacobi_graphs::parse_anchor(text).unwrap_err().to_string();
        assert!(e.contains(says), "{e:?} should say {says:?}");
    };
    refused("", "no line for set_params");
    refused(
        &out.replace("stream 2950 35 2e-3\n", ""),
        "no line for stream",
    );
    refused(&format!("{out}stream 1 1 1\n"), "stream twice");
    refused(
        &out.replace("exec_update", "update"),
        "unknown method `update`",
    );
    refused(&out.replace("40.25", "nan"), "no time");
    refused(&out.replace("40.25", "0"), "no time");
    refused(&out.replace("2950 35", "many 35"), "no sweep count");
    refused(&out.replace("2e-3", "err"), "no final error");
    refused(
        &out.replace("31.5", "31.5 ms"),
        "not `method iterations ms error`",
    );
}

#[test]
fn the_jacobi_graphs_bench_takes_its_arguments() {
    let parse = |args: &[&str]| jacobi_graphs::parse_args(args.iter().map(|a| a.to_string()));
    let options = parse(&["--n", "256", "--rounds", "3", "--bench"]).unwrap();
    assert_eq!(
        (options.n, options.rounds, options.check_host),
        (256, 3, false)
    );
    assert!(parse(&["--check-host"]).unwrap().check_host);
    assert_eq!(parse(&[]).unwrap().n, 512);
    for (args, says) in [
        (&["--n", "4"][..], "from 8 to 4096, not 4"),
        (&["--n", "5000"][..], "from 8 to 4096, not 5000"),
        (&["--rounds", "0"][..], "positive whole number, not `0`"),
        (&["--rounds"][..], "--rounds needs a number"),
        (&["--fast"][..], "unknown argument `--fast`"),
    ] {
        let e = parse(args).unwrap_err();
        assert!(e.contains(says), "{e:?} should say {says:?}");
    }
}

/// Rounds alternate with the anchor (a stand-in script here) whose times fill its column; an
/// anchor whose solve disagrees with the CPU's (a sweep count off by more than one) is an error
/// naming it.
#[test]
fn the_jacobi_graphs_bench_runs_rounds_with_its_anchor_and_checks_it() {
    use std::os::unix::fs::PermissionsExt;

    let dir = std::env::temp_dir().join(format!("jacobi-graphs-anchor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = |name: &str, sweeps: usize| {
        let path = dir.join(name);
        let body = format!(
            "#!/bin/sh\ntest \"$1\" = 64 || exit 3\n\
             for m in set_params exec_update stream; do echo \"$m {sweeps} 2.0 1.0e-3\"; done\n"
        );
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    let ctx = gpu_pipeline::Context::cpu_checked();
    let times = jacobi_graphs::measure(&ctx, 64, 2, Some(&script("good", 304))).unwrap();
    for (t, method) in times.iter().zip(jacobi_graphs::METHODS) {
        assert_eq!(t.method, method);
        assert_eq!((t.ours.len(), &t.anchor[..]), (2, &[2.0, 2.0][..]));
        assert_eq!(t.iterations, [304; 4]);
    }
    let table = jacobi_graphs::table(&times);
    assert!(
        table.starts_with("| method | sweeps | ours median ms |"),
        "{table}"
    );
    assert_eq!(table.lines().filter(|l| l.starts_with("| ")).count(), 5);
    assert!(table.contains("target: every method at most 1.05x the sample's"));

    // One sweep more or fewer is the device's summation order, not a wrong solve.
    jacobi_graphs::measure(&ctx, 64, 1, Some(&script("near", 305))).unwrap();
    let e = jacobi_graphs::measure(&ctx, 64, 1, Some(&script("wrong", 300)))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the anchor's set_params: 300 sweeps, the CPU solve took 304"),
        "{e}"
    );
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[allow(
    dead_code,
    reason = "the bench's timing and printing code, which only its own `main` uses"
)]
#[path = "../benches/simple_graphs.rs"]
mod simple_graphs;

#[test]
fn the_simple_graphs_ports_sum_as_the_cpu_does_and_race_free() {
    match simple_graphs::check_host() {
        // The sample's graph: seven nodes, six edges, by either method.
        Ok(graphs) => assert_eq!(graphs, [("manual", 7, 6), ("stream_capture", 7, 6)]),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_simple_graphs_bench_reads_the_anchors_lines() {
    let out = "manual 7 6 20.5 19.25 1.5\nstream_capture 7 6 21 19.5 1.5\n";
    let lines = simple_graphs::parse_anchor(out).unwrap();
    assert_eq!(
        lines.map(|l| (l.nodes, l.callbacks, l.total_ms, l.replay_ms, l.sum)),
        [(7, 6, 20.5, 19.25, 1.5), (7, 6, 21.0, 19.5, 1.5)]
    );
    let refused = |text: &str, says: &str| {
        let e = simple_graphs::parse_anchor(text).unwrap_err().to_string();
        assert!(e.contains(says), "{e:?} should say {says:?}");
    };
    refused("", "no line for manual");
    refused(
        &out.replace("stream_capture 7 6 21 19.5 1.5\n", ""),
        "no line for stream_capture",
    );
    refused(&format!("{out}manual 7 6 1 1 1\n"), "manual twice");
    refused(
        &out.replace("stream_capture", "capture"),
        "unknown method `capture`",
    );
    refused(&out.replace("20.5", "nan"), "no time");
    refused(&out.replace("19.25", "0"), "no time");
    refused(&out.replace("manual 7", "manual seven"), "no node count");
    refused(&out.replace("7 6 21", "7 -6 21"), "no callback count");
    refused(&out.replace("19.5 1.5", "19.5 sum"), "no sum");
    refused(
        &out.replace("20.5", "20.5 ms"),
        "not `method nodes callbacks total_ms replay_ms sum`",
    );
}

#[test]
fn the_simple_graphs_bench_takes_its_arguments() {
    let parse = |args: &[&str]| simple_graphs::parse_args(args.iter().map(|a| a.to_string()));
    let options = parse(&[
        "--size",
        "4096",
        "--launches",
        "10",
        "--rounds",
        "3",
        "--bench",
    ])
    .unwrap();
    assert_eq!(
        (
            options.size,
            options.launches,
            options.rounds,
            options.check_host
        ),
        (4096, 10, 3, false)
    );
    assert!(parse(&["--check-host"]).unwrap().check_host);
    let defaults = parse(&[]).unwrap();
    assert_eq!((defaults.size, defaults.launches), (1 << 24, 3));
    for (args, says) in [
        (&["--size", "0"][..], "positive whole number, not `0`"),
        (
            &["--size", "268435457"][..],
            "at most 268435456 floats, not 268435457",
        ),
        (&["--launches", "x"][..], "positive whole number, not `x`"),
        (&["--rounds"][..], "--rounds needs a number"),
        (&["--fast"][..], "unknown argument `--fast`"),
    ] {
        let e = parse(args).unwrap_err();
        assert!(e.contains(says), "{e:?} should say {says:?}");
    }
}

/// Rounds alternate with the anchor (a stand-in script here) whose times fill its columns; an
/// anchor whose host node ran too few times, or saw another sum than the CPU's, is an error
/// naming it.
#[test]
fn the_simple_graphs_bench_runs_rounds_with_its_anchor_and_checks_it() {
    use std::os::unix::fs::PermissionsExt;

    const SIZE: usize = 4096;
    let dir = std::env::temp_dir().join(format!("simple-graphs-anchor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = |name: &str, callbacks: usize, sum: f64| {
        let path = dir.join(name);
        let body = format!(
            "#!/bin/sh\ntest \"$1\" = {SIZE} && test \"$2\" = 3 || exit 3\n\
             for m in manual stream_capture; do echo \"$m 7 {callbacks} 2.0 1.5 {sum:e}\"; done\n"
        );
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    let sum = simple_graphs::reference(SIZE);
    let ctx = gpu_pipeline::Context::cpu_checked();
    let times = simple_graphs::measure(&ctx, SIZE, 3, 2, Some(&script("good", 6, sum))).unwrap();
    for (t, method) in times.iter().zip(simple_graphs::METHODS) {
        assert_eq!(t.method, method);
        assert_eq!((t.nodes, t.edges), ((7, Some(7)), 6));
        assert_eq!((t.ours.len(), &t.anchor[..]), (2, &[2.0, 2.0][..]));
        assert_eq!(&t.anchor_replay[..], &[1.5, 1.5][..]);
        assert!(t.ours_replay.iter().zip(&t.ours).all(|(r, o)| r <= o));
    }
    let table = simple_graphs::table(&times, 3);
    assert!(
        table.starts_with("| method | nodes (ours/anchor) | ours median ms |"),
        "{table}"
    );
    assert_eq!(table.lines().filter(|l| l.starts_with("| ")).count(), 4);
    assert!(table.contains("| manual | 7/7 |"), "{table}");
    assert!(table.contains("worst ours/anchor per call"));

    let e = simple_graphs::measure(&ctx, SIZE, 3, 1, Some(&script("few", 5, sum)))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the anchor's manual: the host node ran 5 times, not 6"),
        "{e}"
    );
    let e = simple_graphs::measure(&ctx, SIZE, 3, 1, Some(&script("wrong", 6, sum * 1.01)))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the anchor's manual: the host node saw the sum"),
        "{e}"
    );

    // Without an anchor: our columns only.
    let times = simple_graphs::measure(&ctx, SIZE, 1, 1, None).unwrap();
    let table = simple_graphs::table(&times, 1);
    assert!(
        table.starts_with("| method | nodes | ours median ms |"),
        "{table}"
    );
    assert!(!table.contains("worst"));
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[allow(
    dead_code,
    reason = "the bench's timing and printing code, which only its own `main` uses"
)]
#[path = "../benches/conditional_nodes.rs"]
mod conditional_nodes;

#[test]
fn the_conditional_nodes_ports_count_as_the_sample_and_race_free() {
    match conditional_nodes::check_host() {
        // The kernel and its conditional node; the do-while's fill and WHILE node; the captured
        // while's copy, kernel, WHILE node and last kernel.
        Ok(graphs) => assert_eq!(
            graphs,
            [
                ("if", 2),
                ("do_while", 2),
                ("captured_while", 4),
                ("if_else", 2),
                ("switch", 2)
            ]
        ),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_conditional_nodes_bench_reads_the_anchors_lines() {
    let out = "if 2 200 50.5 203\ndo_while 1 200 60 4060\ncaptured_while 3 200 70 406\n\
               if_else 2 200 55 406\nswitch 2 200 80 812\n";
    let lines = conditional_nodes::parse_anchor(out).unwrap();
    assert_eq!(
        lines.map(|l| (l.nodes, l.calls, l.us_per_call, l.counted)),
        [
            (2, 200, 50.5, 203),
            (1, 200, 60.0, 4060),
            (3, 200, 70.0, 406),
            (2, 200, 55.0, 406),
            (2, 200, 80.0, 812)
        ]
    );
    let refused = |text: &str, says: &str| {
        let e = conditional_nodes::parse_anchor(text)
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{e:?} should say {says:?}");
    };
    refused("", "no line for if");
    refused(
        &out.replace("switch 2 200 80 812\n", ""),
        "no line for switch",
    );
    refused(&format!("{out}if 2 200 1 1\n"), "if twice");
    refused(&out.replace("if_else", "else"), "unknown function `else`");
    refused(&out.replace("50.5", "nan"), "no time");
    refused(&out.replace("50.5", "0"), "no time");
    refused(&out.replace("do_while 1", "do_while one"), "no node count");
    refused(&out.replace("60 4060", "60 -4"), "no count");
    refused(
        &out.replace("50.5", "50.5 us"),
        "not `function nodes calls us_per_call counted`",
    );
}

#[test]
fn the_conditional_nodes_bench_takes_its_arguments() {
    let parse = |args: &[&str]| conditional_nodes::parse_args(args.iter().map(|a| a.to_string()));
    let options = parse(&["--calls", "10", "--rounds", "3", "--bench"]).unwrap();
    assert_eq!(
        (options.calls, options.rounds, options.check_host),
        (10, 3, false)
    );
    assert!(parse(&["--check-host"]).unwrap().check_host);
    assert_eq!(parse(&[]).unwrap().calls, 200);
    for (args, says) in [
        (&["--calls", "0"][..], "positive whole number, not `0`"),
        (&["--rounds", "x"][..], "positive whole number, not `x`"),
        (&["--calls"][..], "--calls needs a number"),
        (&["--size", "4"][..], "unknown argument `--size`"),
    ] {
        let e = parse(args).unwrap_err();
        assert!(e.contains(says), "{e:?} should say {says:?}");
    }
}

/// Rounds alternate with the anchor (a stand-in script here) whose times fill its columns; an
/// anchor whose bodies counted other than the sample's, or that timed other calls than asked,
/// is an error naming the function.
#[test]
fn the_conditional_nodes_bench_runs_rounds_with_its_anchor_and_checks_it() {
    use std::os::unix::fs::PermissionsExt;

    let dir = std::env::temp_dir().join(format!("conditional-nodes-anchor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 2 timed calls after 3 untimed: 5 calls' counts.
    let script = |name: &str, if_count: u64, calls: usize| {
        let path = dir.join(name);
        let body = format!(
            "#!/bin/sh\ntest \"$1\" = 2 || exit 3\n\
             echo \"if 2 {calls} 40.0 {if_count}\"\necho \"do_while 1 {calls} 50.0 100\"\n\
             echo \"captured_while 3 {calls} 60.0 10\"\necho \"if_else 2 {calls} 45.0 10\"\n\
             echo \"switch 2 {calls} 70.0 20\"\n"
        );
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    let ctx = gpu_pipeline::Context::cpu_checked();
    let times = conditional_nodes::measure(&ctx, 2, 2, Some(&script("good", 5, 2))).unwrap();
    for (t, function) in times.iter().zip(conditional_nodes::FUNCTIONS) {
        assert_eq!(t.function, function);
        assert_eq!((t.ours.len(), t.anchor.len()), (2, 2));
    }
    assert_eq!(times[0].nodes, (2, Some(2)));
    assert_eq!(&times[4].anchor[..], &[70.0, 70.0][..]);
    let table = conditional_nodes::table(&times);
    assert!(
        table.starts_with("| function | nodes (ours/anchor) | ours median µs |"),
        "{table}"
    );
    assert_eq!(table.lines().filter(|l| l.starts_with("| ")).count(), 7);
    assert!(table.contains("| captured_while | 4/3 |"), "{table}");
    assert!(table.contains("worst ours/anchor per call"));

    let e = conditional_nodes::measure(&ctx, 2, 1, Some(&script("few", 4, 2)))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the anchor's if: its bodies counted 4 in 5 calls, expected 5"),
        "{e}"
    );
    let e = conditional_nodes::measure(&ctx, 2, 1, Some(&script("calls", 5, 3)))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the anchor's if: 3 calls timed, 2 asked for"),
        "{e}"
    );
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
    std::fs::remove_dir_all(&dir).unwrap();
}

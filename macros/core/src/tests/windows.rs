//! Window params: `on rank` parses onto its argument, the launches a window names lower to
//! whole-window accesses, and the exchange rules (`check/windows.rs`) accept the shapes that
//! pair up across ranks and refuse the others.

use super::*;
use crate::ast::{Statement, tokens_string};
use crate::lower::{StatementKind, names_window};

/// A pipeline with a window `halos` and the stages `stages`.
fn ring(stages: &str) -> String {
    format!(
        "pub pipeline Ring {{
            streams {{ main, side }}
            unsafe kernels k = ptx(\"\") {{
                fn copy(n: u32, src: &[f32; n], dst: &mut [f32; n]);
                fn copy2(n: u32, src: &[f32; n], up: &mut [f32; n], down: &mut [f32; n]);
            }}
            params {{
                n: u32, up: usize, down: usize,
                halos: &mut Window<f32>, other: &mut Window<f32>,
                base: &DeviceBuffer<f32>, seen: &mut DeviceBuffer<f32>,
            }}
            {stages}
        }}"
    )
}

const STORE: &str = "stage store on main {
    launch k::copy2(n, base, halos[n..2 * n] on rank up, halos[..n] on rank down) grid 1 block 1;
}";
const LOAD: &str = "stage load on side {
    launch k::copy(2 * n, halos, seen) grid 1 block 1;
}";

#[test]
fn on_rank_belongs_to_its_argument() {
    let input = parse(&ring(STORE)).expect("parses");
    let ast::Item::Stage(stage) = input.items.last().expect("a stage") else {
        panic!("the last item is the stage");
    };
    let Statement::Launch(launch) = &stage.statements[0] else {
        panic!("a launch");
    };
    assert_eq!(launch.args.len(), 4);
    let ranks: Vec<Option<String>> = launch
        .ranks
        .iter()
        .map(|r| r.as_ref().map(|r| tokens_string(&r.expr)))
        .collect();
    assert_eq!(ranks, [None, None, Some("up".into()), Some("down".into())]);
}

#[test]
fn a_ring_store_then_load_lowers_with_its_window_launches_marked() {
    let pipeline = lower_ok(&ring(&format!("{STORE} {LOAD}")));
    let halos = pipeline
        .buffers
        .iter()
        .position(|b| b.name == "halos")
        .unwrap();
    assert!(pipeline.buffers[halos].window);
    for stage in &pipeline.stages {
        let StatementKind::Launch { args, .. } = &stage.statements[0].kind else {
            panic!("a launch");
        };
        assert!(names_window(&pipeline.buffers, args));
        // The window is one whole access to the ordering: `load` runs after `store`.
        let touches: Vec<_> = stage.statements[0]
            .accesses
            .iter()
            .filter(|t| t.buffer.0 == halos)
            .collect();
        assert!(touches.iter().all(|t| t.subscript.is_none()), "{touches:?}");
    }
}

#[test]
fn two_windows_each_read_then_written_or_written_then_read_compile() {
    lower_ok(&ring(
        "stage a_to_b on main {
             launch k::copy2(n, halos[..n], other[n..] on rank up, other[..n] on rank down)
                 grid 1 block 1;
         }
         stage b_to_a on main {
             launch k::copy2(n, other[..n], halos[n..] on rank up, halos[..n] on rank down)
                 grid 1 block 1;
         }",
    ));
}

#[test]
fn exchanges_that_do_not_pair_up_are_refused() {
    let cases: [(String, &str); 5] = [
        (ring(STORE), "no launch of the step reads `halos` here"),
        (
            ring(LOAD),
            "no launch of the step writes it on the neighbours",
        ),
        (
            ring(&format!("{STORE} {STORE2} {LOAD}")),
            "written on the neighbours again",
        ),
        (
            ring(&format!("{STORE} {LOAD} {LOAD2}")),
            "is read here again",
        ),
        (
            ring(&format!("{STORE} {LOAD} {STORE2}")),
            "again at the end of the step",
        ),
    ];
    for (source, wanted) in cases {
        let all = errors(&source);
        assert!(
            all.len() == 1 && all[0].contains(wanted),
            "{wanted}: {all:#?}"
        );
    }
}

const STORE2: &str = "stage store2 on main {
    launch k::copy2(n, base, halos[n..2 * n] on rank up, halos[..n] on rank down) grid 1 block 1;
}";
const LOAD2: &str = "stage load2 on side {
    launch k::copy(2 * n, halos, seen) grid 1 block 1;
}";

#[test]
fn misused_window_arguments_are_refused_on_the_argument() {
    let cases: [(String, &str); 4] = [
        (
            ring(&format!(
                "{STORE} stage load on side {{ launch k::copy(n, seen, halos) grid 1 block 1; }}"
            )),
            "but `halos` here is this rank's window",
        ),
        (
            ring(&format!(
                "{STORE} stage load on side {{ launch k::copy(n, halos on rank up, seen) grid 1 block 1; }}"
            )),
            "from another rank's `halos`",
        ),
        (
            ring(&format!(
                "{STORE} {LOAD} stage more on side {{ launch k::copy(n, base, seen on rank up) grid 1 block 1; }}"
            )),
            "`on rank` names a neighbour's part of a window param",
        ),
        (
            ring(
                "stage both on main { launch k::copy2(n, halos, halos[n..] on rank up, halos[..n] on rank down) grid 1 block 1; }",
            ),
            "reads `halos` here and writes it on its neighbours",
        ),
    ];
    for (source, wanted) in cases {
        let all = errors(&source);
        assert!(
            all.len() == 1 && all[0].contains(wanted),
            "{wanted}: {all:#?}"
        );
    }
    let shared = ring(&format!("{STORE} {LOAD}")).replace("halos: &mut Window", "halos: &Window");
    let all = errors(&shared);
    assert!(
        all.iter()
            .all(|e| e.contains("declare it `&mut Window<f32>`")),
        "{all:#?}"
    );
}

/// A window in a `copy`: the message says what a window allows (launch arguments), not that
/// its type might be an alias of a buffer's.
#[test]
fn a_window_copied_is_refused_with_what_windows_allow() {
    assert_eq!(
        errors(&ring(&format!(
            "{STORE} {LOAD} stage keep on side {{ copy halos -> seen; }}"
        ))),
        [
            "`halos` is a window (`&mut Window<f32>`), which only a launch argument reads (`halos` or `halos[lo..hi]`: this rank's part) or writes (`halos on rank r`: a neighbour's part); `copy` takes `DeviceBuffer` and `PinnedBuffer` buffers: to copy this rank's part, launch a kernel that reads it (`halos` for a `&[T]` parameter) and writes a buffer"
        ],
    );
    assert_eq!(
        errors(&ring(&format!(
            "{STORE} {LOAD} stage put on side {{ copy base -> halos; }}"
        ))),
        [
            "`halos` is a window (`&mut Window<f32>`), which only a launch argument reads (`halos` or `halos[lo..hi]`: this rank's part) or writes (`halos on rank r`: a neighbour's part); `copy` takes `DeviceBuffer` and `PinnedBuffer` buffers: to write a neighbour's part, launch a kernel that writes it (`halos on rank r` for a `&mut [T]` parameter)"
        ],
    );
}

/// One launch's `on rank` parts of a window: apart (or not comparable) they compile; the same
/// range on two neighbours, ranges starting at one element, or constant ranges that overlap
/// are an error naming both (on three ranks each rank's part would be written by two
/// neighbours at once).
#[test]
fn overlapping_parts_written_on_neighbours_are_refused() {
    let launch = |up: &str, down: &str| {
        ring(&format!(
            "stage store on main {{
                launch k::copy2(n, base, {up} on rank up, {down} on rank down) grid 1 block 1;
            }}
            {LOAD}"
        ))
    };
    for (up, down) in [
        ("halos[n..2 * n]", "halos[..n]"),
        ("halos[4..8]", "halos[0..4]"),
        ("halos[4..]", "halos[..4]"),
        ("halos[n..]", "halos[3..2 * n]"),
        ("halos[..n]", "other[..n]"),
    ] {
        let all = compile(&launch(up, down)).map_or_else(|e| messages(&e), |_| Vec::new());
        assert!(
            !all.iter().any(|e| e.contains("overlap")),
            "{up}, {down}: {all:#?}"
        );
    }
    for (up, down, wanted) in [
        ("halos[..n]", "halos[..n]", "every rank runs this launch"),
        ("halos", "halos", "every rank runs this launch"),
        ("halos[0..4]", "halos[2..6]", "every rank runs this launch"),
        (
            "halos[n..]",
            "halos[n..2 * n]",
            "every rank runs this launch",
        ),
        ("halos[..4]", "halos[3..]", "every rank runs this launch"),
    ] {
        let all = errors(&launch(up, down));
        assert!(
            all.iter().any(|e| e.contains(wanted)
                && e.contains(&format!("`{up} on rank up`"))
                && e.contains(&format!("`{down} on rank down`"))),
            "{up}, {down}: {all:#?}"
        );
    }
    let same = ring(&format!(
        "stage store on main {{
            launch k::copy2(n, base, halos[..n] on rank up, halos[..n] on rank up) grid 1 block 1;
        }}
        {LOAD}"
    ));
    let all = errors(&same);
    assert!(
        all.iter()
            .any(|e| e.contains("both write rank `up`'s `halos`")),
        "{all:#?}"
    );
}

/// Two kinds of step that exchange one window in opposite phases (one reads it first, the
/// other writes it first) are refused: whichever runs after the other waits for ever. Two
/// kinds in the same phase compile.
#[test]
fn kinds_of_step_exchanging_a_window_in_opposite_phases_are_refused() {
    let read_first = "step back {
        stage load2 on side { launch k::copy(2 * n, halos, seen) grid 1 block 1; }
        stage store2 on main {
            launch k::copy2(n, base, halos[n..2 * n] on rank up, halos[..n] on rank down) grid 1 block 1;
        }
    }";
    let all = errors(&ring(&format!(
        "step forth {{ {STORE} {LOAD} }} {read_first}"
    )));
    assert!(
        all.len() == 1
            && all[0].contains("`step back` reads `halos` here first, but `step forth` writes it on the neighbours first"),
        "{all:#?}"
    );
    let write_first = "step again {
        stage store2 on main {
            launch k::copy2(n, base, halos[n..2 * n] on rank up, halos[..n] on rank down) grid 1 block 1;
        }
        stage load2 on side { launch k::copy(2 * n, halos, seen) grid 1 block 1; }
    }";
    lower_ok(&ring(&format!(
        "step forth {{ {STORE} {LOAD} }} {write_first}"
    )));
}

/// `swap(halos, other)` of two windows is one error, on the first, that says what to swap
/// instead (it was one error per window, and said only that a window is no buffer).
#[test]
fn a_swap_of_two_windows_is_one_error_saying_what_to_swap() {
    assert_error(
        &ring(&format!("swap(halos, other); {STORE} {LOAD}")),
        "`halos` is a window (`&mut Window<f32>`), which the neighbours' launches write by rank \
         whatever this rank's arrangement; `swap` exchanges two `DeviceBuffer` or two \
         `PinnedBuffer` params between replays: swap the `DeviceBuffer`s the step copies the \
         window into or out of instead",
        "halos",
    );
}

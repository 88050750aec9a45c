//! Communication statements and devices: parsing, the checks (each misuse one error, with
//! what to write), and the ordering they lower to.

use super::{assert_error, errors, lower_ok, parse, stage};
use crate::lower::{Mode, StatementKind};

/// A pipeline with a communicator and buffers of each kind, with `items` appended.
pub(super) fn comm(items: &str) -> String {
    format!(
        r#"pipeline P {{
            streams {{ s1, s2 }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn touch(buf: &mut [f32]);
                fn read(buf: &[f32]);
            }}
            params {{
                comm: &Communicator,
                nx: usize, peer: usize,
                a: &mut DeviceBuffer<f32>, b: &mut DeviceBuffer<f32>, c: &DeviceBuffer<f32>,
                i: &mut DeviceBuffer<i32>, d: &mut DeviceBuffer<f64>,
                h: &mut PinnedBuffer<f32>,
            }}
            {items}
        }}"#
    )
}

/// Two devices, a stream on each, and buffers on each.
fn two(items: &str) -> String {
    format!(
        r#"pipeline P {{
            devices {{ gpu0, gpu1 }}
            streams {{ s0, s1 on gpu1 }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn touch(buf: &mut [f32]);
                fn read(buf: &[f32]);
            }}
            params {{
                n: u32,
                x0: &mut DeviceBuffer<f32>,
                x1: &mut DeviceBuffer<f32> on gpu1,
                h0: &mut PinnedBuffer<f32>,
                h1: &mut PinnedBuffer<f32> on gpu1,
                f1: &mut FlagCell on gpu1,
            }}
            {items}
        }}"#
    )
}

#[test]
fn communication_statements_parse_with_ranges_peers_and_operators() {
    let input = parse(&comm(
        "stage x on s1 {
            send a[nx..2 * nx] to peer;
            recv a[0..nx] from (peer + 1) % comm.size();
            all_reduce(sum) c -> b;
            all_reduce(max) b[..1];
            broadcast a from 0;
            broadcast c -> b from peer;
            all_gather c -> a;
            reduce_scatter(min) c[..] -> a;
        }",
    ))
    .expect("parses");
    let stage = input.stages().next().expect("stage");
    let words: Vec<&str> = stage
        .statements
        .iter()
        .map(|s| match s {
            crate::ast::Statement::Comm(c) => c.word(),
            _ => "other",
        })
        .collect();
    assert_eq!(
        words,
        [
            "send",
            "recv",
            "all_reduce",
            "all_reduce",
            "broadcast",
            "broadcast",
            "all_gather",
            "reduce_scatter"
        ]
    );
}

#[test]
fn every_communication_stage_writes_the_communicator_so_they_run_in_program_order() {
    let pipeline = lower_ok(&comm(
        "stage x on s1 { send c to peer; recv a from peer; }
         stage y on s2 { send d[0..4] to peer; recv d[4..8] from peer; }
         stage z on s1 { launch k::touch(b) grid 1 block 1; }",
    ));
    // `y` (on s2) touches nothing `x` touches but the communicator, which both write.
    let edge = pipeline
        .edges
        .iter()
        .find(|e| e.from == stage(0) && e.to == stage(1))
        .expect("y waits for x");
    let comm = pipeline
        .buffers
        .iter()
        .position(|b| b.name == "comm")
        .unwrap();
    assert!(
        edge.reasons.iter().any(|r| matches!(r,
            crate::lower::Reason::Hazard { buffer, .. } if buffer.0 == comm)),
        "{:?}",
        edge.reasons
    );
    let x = &pipeline.stages[0].statements[0];
    assert!(matches!(x.kind, StatementKind::Comm { .. }));
    let modes: Vec<(String, Mode)> = x
        .accesses
        .iter()
        .map(|t| (t.name.to_string(), t.mode))
        .collect();
    assert_eq!(
        modes,
        [
            ("c".to_owned(), Mode::Read),
            ("comm".to_owned(), Mode::Write)
        ]
    );
    // The launch on s1 touches neither: no edge from `y` to `z`.
    assert!(!pipeline.edges.iter().any(|e| e.to == stage(2)));
}

#[test]
fn communication_needs_one_communicator() {
    assert_error(
        &super::with("stage x on s1 { send a to 0; }"),
        "`send` goes through the pipeline's communicator, but none is declared; add `comm: &Communicator` to `params { ... }` (an NCCL communicator on CUDA, a `World` rank on the CPU backend)",
        "send",
    );
    let source = comm("stage x on s1 { send a to 0; }").replace(
        "comm: &Communicator,",
        "comm: &Communicator, other: &gpu_pipeline::Communicator,",
    );
    assert_error(
        &source,
        "a pipeline communicates through one communicator, and `comm` is already one; remove `other`",
        "other",
    );
}

#[test]
fn communication_moves_writable_device_buffers() {
    assert_error(
        &comm("stage x on s1 { send h to peer; }"),
        "`h` is a `PinnedBuffer` (`&mut PinnedBuffer<f32>`); `send` moves device memory: `copy` it into a `DeviceBuffer` and use that",
        "h",
    );
    assert_error(
        &comm("stage x on s1 { recv c from peer; }"),
        "`c` is declared `&` but `recv` writes it; declare it `&mut DeviceBuffer<f32>`",
        "c",
    );
    assert_error(
        &comm("stage x on s1 { send nx to peer; }"),
        "`nx` is a scalar param; `send` moves a `DeviceBuffer`",
        "nx",
    );
    assert_error(
        &comm("stage x on s1 { all_reduce(sum) e -> a; }"),
        "unknown buffer `e`; did you mean `a`?",
        "e",
    );
}

#[test]
fn collectives_take_two_buffers_of_one_type_and_a_known_operator() {
    assert_error(
        &comm("stage x on s1 { all_reduce(sum) a -> a; }"),
        "`all_reduce` reads and writes `a` at once; for the in-place form write one operand, e.g. `all_reduce(sum) a`",
        "a",
    );
    assert_error(
        &comm("stage x on s1 { all_gather c -> d; }"),
        "`all_gather c -> d` moves `f32` into `f64`; both buffers must hold the same element type",
        "c -> d",
    );
    assert_error(
        &comm("stage x on s1 { all_reduce(mean) a; }"),
        "`all_reduce` has no operator `mean`; expected one of `sum`, `prod`, `max`, `min`, `avg`",
        "mean",
    );
    assert_error(
        &comm("stage x on s1 { all_reduce(avg) i; }"),
        "`all_reduce(avg)` needs a floating-point element type, not `i32`; reduce with `sum` and divide by the number of ranks",
        "avg",
    );
    assert_error(
        &comm("stage x on s1 { send a[3] to peer; }"),
        "`[...]` after `a` takes an element range such as `[0..n]`; for one element write `[i..i + 1]`",
        "3",
    );
}

#[test]
fn ranges_peers_and_roots_are_host_values() {
    assert_error(
        &comm("stage x on s1 { send a to b[0]; }"),
        "`b` is a buffer, used in the peer of `send`: it is computed on the host when the step is enqueued, before the stages that write `b` have run; use a scalar param, `b.len()`, or the communicator's `rank()` and `size()`",
        "b",
    );
    // Lengths and the communicator's rank and size are host values.
    lower_ok(&comm(
        "stage x on s1 { send a[..b.len() / 2] to (comm.rank() + 1) % comm.size(); recv a[a.len() / 2..] from peer; }",
    ));
}

#[test]
fn devices_are_declared_once_and_named_where_used() {
    assert_error(
        &super::with("stage x on s1 { launch k::touch(a) grid 1 block 1; }")
            .replace("streams { s1, s2 }", "streams { s1 on gpu1, s2 }"),
        "`on gpu1` names a device, but the pipeline declares none; add `devices { ... }` with `gpu1` among them (its `new` then takes one context per device)",
        "gpu1",
    );
    assert_error(
        &two("stage x on s0 { launch k::touch(x0) grid 1 block 1; }")
            .replace("s1 on gpu1", "s1 on gpu2"),
        "unknown device `gpu2`; did you mean `gpu0`?",
        "gpu2",
    );
    assert_error(
        &two("stage x on s0 { launch k::touch(x0) grid 1 block 1; }")
            .replace("n: u32,", "n: u32 on gpu1,"),
        "`n` is a scalar, copied into each step on the host; only buffers live on a device: remove `on gpu1`",
        "gpu1",
    );
    let errors = errors(
        &two("stage x on s0 { launch k::touch(x0) grid 1 block 1; }")
            .replace("devices { gpu0, gpu1 }", "devices { gpu0, gpu1, gpu0 }"),
    );
    assert_eq!(errors, ["duplicate device `gpu0`"]);
}

#[test]
fn a_kernel_reaches_only_its_own_devices_memory() {
    assert_error(
        &two("stage x on s0 { launch k::touch(x1) grid 1 block 1; }"),
        "`x1` lives on device `gpu1`, but stage `x` runs on stream `s0`, on device `gpu0`: kernel `touch` reaches only its own device's memory; copy it first, in a stage ordered before this one (`copy x1 -> x1_gpu0;` into a buffer declared `on gpu0`), run this stage on a stream `on gpu1`, or reach it through peer access: `peer(x1)` after the launch",
        "x1",
    );
    assert_error(
        &two("stage x on s1 { fill x0 = 0.0; }"),
        "`x0` lives on device `gpu0`, but stage `x` runs on stream `s1`, on device `gpu1`: a `fill` reaches only its own device's memory; run this stage on a stream `on gpu0`",
        "x0",
    );
    assert_error(
        &two("stage x on s0 { copy x1 -> h0; }"),
        "`x1` lives on device `gpu1`, but stage `x` runs on stream `s0`, on device `gpu0`: a `copy` to or from host memory reaches only its own device's memory; copy it first, in a stage ordered before this one (`copy x1 -> x1_gpu0;` into a buffer declared `on gpu0`), or run this stage on a stream `on gpu1`",
        "x1",
    );
    assert_error(
        &two("stage x on s0 { write f1 = 1; }"),
        "`f1` lives on device `gpu1`, but stage `x` runs on stream `s0`, on device `gpu0`: a `write` reaches only its own device's memory, and a flag cell is one word that its device's streams poll and write in place (`copy` does not take it); declare `f1` `on gpu0`, or run this stage on a stream `on gpu1`",
        "f1",
    );
    assert_error(
        &two("stage x on s0 { wait f1 == 1u32; }"),
        "`f1` lives on device `gpu1`, but stage `x` runs on stream `s0`, on device `gpu0`: a `wait` reaches only its own device's memory, and a flag cell is one word that its device's streams poll and write in place (`copy` does not take it); declare `f1` `on gpu0`, or run this stage on a stream `on gpu1`",
        "f1",
    );
    // Pinned memory is the host's, but pinned for one device's context: no copy advice
    // (`copy` goes between pinned memory and its own device only).
    assert_error(
        &two("stage x on s0 { host |h1: &[f32]| { let _ = h1; } reads(h1); }"),
        "`h1` lives on device `gpu1`, but stage `x` runs on stream `s0`, on device `gpu0`: a `host` closure reaches only its own device's memory, and pinned memory, though it is the host's, is allocated for one device's context: the runtime reaches and orders it through that device's streams only; declare `h1` `on gpu0`, or run this stage on a stream `on gpu1`",
        "h1",
    );
    assert_error(
        &two("stage x on s0 { copy x0 -> h1; }"),
        "`h1` lives on device `gpu1`, but stage `x` runs on stream `s0`, on device `gpu0`: a `copy` to or from host memory reaches only its own device's memory, and pinned memory, though it is the host's, is allocated for one device's context: the runtime reaches and orders it through that device's streams only; declare `h1` `on gpu0`, or run this stage on a stream `on gpu1`",
        "h1",
    );
}

#[test]
fn peer_copies_run_on_a_stream_of_either_device_and_are_ordered_across_devices() {
    let pipeline = lower_ok(&two(
        "stage grow on s1 { launch k::touch(x1) grid 1 block 1; }
         stage pull on s0 { copy x1 -> x0; }
         stage push on s1 { copy x0 -> x1; }",
    ));
    assert_eq!(pipeline.devices, ["gpu0", "gpu1"]);
    assert_eq!(pipeline.streams[1].device, 1);
    assert_eq!(pipeline.buffers[1].device, 1);
    // `pull` (device 0) reads what `grow` (device 1) wrote; `push` writes what `pull` read.
    let pairs: Vec<(usize, usize)> = pipeline.edges.iter().map(|e| (e.from.0, e.to.0)).collect();
    assert_eq!(pairs, [(0, 1), (1, 2)]);
}

#[test]
fn the_communicator_runs_on_one_device() {
    let source =
        two("stage x on s1 { send x1 to 0; }").replace("n: u32,", "n: u32, comm: &Communicator,");
    assert_error(
        &source,
        "`send` goes through `comm`, which runs on device `gpu0`, but stage `x` runs on stream `s1`, on device `gpu1`; put the stage on a stream of device `gpu0`",
        "send",
    );
    lower_ok(
        &two("stage x on s1 { send x1[0..1] to 0; recv x1[1..2] from 0; }")
            .replace("n: u32,", "n: u32, comm: &Communicator on gpu1,"),
    );
}

#[test]
fn a_swap_exchanges_buffers_of_one_device() {
    assert_error(
        &two("swap(x0, x1); stage x on s0 { fill x0 = 0.0; } stage y on s1 { fill x1 = 0.0; }"),
        "`x0` lives on device `gpu0` and `x1` on `gpu1`; `swap` gives each buffer's stages the other one, so both must be on one device: declare them `on` the same device",
        "x1",
    );
    lower_ok(
        &two("swap(x1, x2); stage y on s1 { fill x1 = 0.0; fill x2 = 0.0; }").replace(
            "f1: &mut FlagCell on gpu1,",
            "f1: &mut FlagCell on gpu1, x2: &mut DeviceBuffer<f32> on gpu1,",
        ),
    );
}

#[test]
fn stream_arrays_and_loops_run_on_their_device() {
    let pipeline = lower_ok(
        &two("for i in 0..n as usize { stage grow on work[i % 2] { launch k::touch(x1[i..i + 1]) grid 1 block 1; } }")
            .replace("streams { s0, s1 on gpu1 }", "streams { s0, s1 on gpu1, work[2] on gpu1 }"),
    );
    assert!(pipeline.dynamic);
    assert_eq!(pipeline.streams[2].device, 1);
    assert_error(
        &two("for i in 0..2 { stage grow on work[i] { launch k::touch(x1) grid 1 block 1; } }")
            .replace(
                "streams { s0, s1 on gpu1 }",
                "streams { s0, s1 on gpu1, work[2] }",
            ),
        "`x1` lives on device `gpu1`, but stage `grow` runs on stream `work[i]`, on device `gpu0`: kernel `touch` reaches only its own device's memory; copy it first, in a stage ordered before this one (`copy x1 -> x1_gpu0;` into a buffer declared `on gpu0`), run this stage on a stream `on gpu1`, or reach it through peer access: `peer(x1)` after the launch",
        "x1",
    );
}

/// A device array of three, a stream per device and buffer arrays per device.
fn ring(items: &str) -> String {
    format!(
        r#"pipeline R {{
            devices {{ gpu[3] }}
            streams {{ main on gpu[0], work[3] on gpu[..] }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn touch(buf: &mut [f32]);
                fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
            }}
            params {{
                n: u32,
                fields: &mut [DeviceBuffer<f32>] on gpu[..],
                halos: &mut [DeviceBuffer<f32>] on gpu[..],
                probe: &mut DeviceBuffer<f32> on gpu[2],
            }}
            {items}
        }}"#
    )
}

#[test]
fn device_arrays_parse_and_place_streams_and_buffers_by_element() {
    let pipeline = lower_ok(&ring(
        "for i in 0..3 { stage send on work[i] { launch k::saxpy(n, 1.0, fields[i], halos[(i + 1) % 3]) grid 1 block 1 peer(halos); } }",
    ));
    assert_eq!(pipeline.devices, ["gpu[0]", "gpu[1]", "gpu[2]"]);
    assert_eq!(
        (pipeline.streams[1].device, pipeline.streams[1].per_device),
        (0, true)
    );
    let probe = pipeline.buffers.iter().find(|b| b.name == "probe").unwrap();
    assert_eq!((probe.device, probe.per_device), (2, false));
    let halos = pipeline.buffers.iter().find(|b| b.name == "halos").unwrap();
    assert!(halos.per_device);
}

#[test]
fn a_constant_device_index_past_the_array_is_an_error_on_the_index() {
    assert_error(
        &ring("stage s on main { launch k::touch(fields[0]) grid 1 block 1; }")
            .replace("on gpu[2],", "on gpu[3],"),
        "device index 3 is past the device array `gpu` of 3 devices (`gpu[0]` to `gpu[2]`)",
        "3",
    );
    assert_error(
        &ring("stage s on work[3] { launch k::touch(fields[0]) grid 1 block 1; }"),
        "stream `work` has 3 streams, one per device of gpu; `work[3]` is past them",
        "3",
    );
    assert_error(
        &ring("stage s on work[0] { launch k::touch(fields[4]) grid 1 block 1; }"),
        "`fields` has one buffer per device of gpu, 3 in all; `fields[4]` is past them",
        "4",
    );
    assert_error(
        &ring("stage s on main { launch k::touch(fields[0]) grid 1 block 1; }")
            .replace("work[3] on gpu[..]", "work[2] on gpu[..]"),
        "a stream array `on gpu[..]` has one stream per device: declare `work[3]`, the length of `gpu`",
        "2",
    );
    assert_error(
        &ring("stage s on main { launch k::touch(fields[0]) grid 1 block 1; }")
            .replace("main on gpu[0]", "main on gpu"),
        "`gpu` is an array of 3 devices: name one, `on gpu[0]`, or put element `k` of a stream array or buffer array on `gpu[k]` with `on gpu[..]`",
        "gpu",
    );
}

#[test]
fn a_peers_buffer_needs_peer_in_the_launch() {
    assert_error(
        &ring(
            "stage s on work[0] { launch k::saxpy(n, 1.0, fields[0], halos[1]) grid 1 block 1; }",
        ),
        "`halos[1]` lives on device `gpu[1]`, but stage `s` runs on stream `work[0]`, on device `gpu[0]`: kernel `saxpy` reaches only its own device's memory; copy it first, in a stage ordered before this one (`copy halos -> halos_gpu[0];` into a buffer declared `on gpu[0]`), run this stage on a stream `on gpu[1]`, or reach it through peer access: `peer(halos)` after the launch",
        "halos",
    );
    lower_ok(&ring(
        "stage s on work[0] { launch k::saxpy(n, 1.0, fields[0], halos[1]) grid 1 block 1 peer(halos); }",
    ));
    // A lane or element the macro cannot see is checked at run time.
    lower_ok(&ring(
        "for i in 0..3 { stage s on work[i] { launch k::saxpy(n, 1.0, fields[i], halos[i]) grid 1 block 1; } }",
    ));
    assert_error(
        &ring("stage s on work[0] { launch k::touch(fields[0]) grid 1 block 1 peer(halos); }"),
        "`peer(halos)` names a buffer this launch does not pass to kernel `touch`; name only its buffer arguments that may live on another device",
        "halos",
    );
}

/// A broadcast rooted at the rank that runs the step makes every rank the root: an error on
/// the root, saying to name one rank. A root that is a param or a constant compiles.
#[test]
fn a_broadcast_from_every_rank_is_refused() {
    assert_error(
        &comm("stage x on s1 { broadcast a from comm.rank(); }"),
        "`comm.rank()` is the rank that runs the step, so every rank would be the root of this `broadcast` and none would receive; name one rank, the same on all (`from 0`, or a scalar param)",
        "comm.rank()",
    );
    lower_ok(&comm(
        "stage x on s1 { broadcast a from peer; broadcast c -> b from comm.size() - 1; }",
    ));
}

/// A `send` to the rank that runs the step pairs only with a `recv` from it in the same
/// group: alone, it is an error on the peer; paired, it compiles.
#[test]
fn a_send_to_the_own_rank_needs_its_recv_in_the_group() {
    assert_error(
        &comm("stage x on s1 { send c to comm.rank(); }"),
        "`send ... to comm.rank()` names the rank that runs the step, which pairs only with a `recv ... from comm.rank()` in the same group (the communication statements next to it); add one there, or name another rank",
        "comm.rank()",
    );
    assert_error(
        &comm("stage x on s1 { recv a from comm.rank(); }"),
        "`recv ... from comm.rank()` names the rank that runs the step, which pairs only with a `send ... to comm.rank()` in the same group (the communication statements next to it); add one there, or name another rank",
        "comm.rank()",
    );
    lower_ok(&comm(
        "stage x on s1 { send c to comm.rank(); recv a from comm.rank(); }",
    ));
}

/// Every rank runs the same groups in the same order, so a group with a `send` and no `recv`
/// (or the other way round) waits for ever: an error on the statement, saying where the other
/// half is and how to bring it into the group.
#[test]
fn a_group_with_sends_and_no_recv_is_refused() {
    let lone = |word: &str, other: &str, fix: &str| {
        format!(
            "this `{word}` has no `{other}` in its group (the communication statements next to it in its stage): every rank runs the same groups in the same order, so its peer is in this group too, with no `{other}` to pair with it, and both wait for ever; {fix}"
        )
    };
    // A statement between them splits one stage's send and recv into two groups.
    let split = errors(&comm(
        "stage x on s1 { send a[0..4] to peer; fill b = 0.0; launch k::read(c) grid 1 block 1; recv a[4..8] from peer; }",
    ));
    assert_eq!(
        split,
        [
            // One mistake, one error: the `recv`'s would say the same from the other side.
            lone(
                "send",
                "recv",
                "the `fill`, `launch` between it and the `recv` of stage `x` splits them into two groups: move the `fill`, `launch` before or after both, so that they are next to each other",
            ),
        ]
    );
    // So do two stages.
    let apart = errors(&comm(
        "stage out on s1 { send c to peer; } stage inn on s2 { recv a from peer; }",
    ));
    assert_eq!(
        apart,
        [lone(
            "send",
            "recv",
            "move the `recv` of stage `inn` into stage `out`, next to this `send` (one group, such as `send x to up; recv y from down;`)",
        ),]
    );
    // A loop with constant bounds runs as often on every rank.
    let looped = errors(&comm(
        "for j in 0..2 { stage x on s1 { send c to peer; } } stage y on s1 { recv a from peer; }",
    ));
    assert!(
        looped[0].starts_with("this `send` has no `recv`"),
        "{looped:?}"
    );
    // A statement with a mistake of its own gives that one error.
    assert_error(
        &comm("stage x on s1 { send h to peer; } stage y on s1 { recv a from peer; }"),
        "`h` is a `PinnedBuffer` (`&mut PinnedBuffer<f32>`); `send` moves device memory: `copy` it into a `DeviceBuffer` and use that",
        "h",
    );
}

/// Where ranks may run different groups, a group's other half may be elsewhere: a loop over
/// params (its count may differ from rank to rank, as in a pipeline of ranks where the first
/// receives nothing and the last sends nothing), or another kind of step. Those compile, and
/// so do groups that hold both halves, a constant loop that never runs, and collectives.
#[test]
fn groups_that_ranks_may_run_differently_are_left_to_run_time() {
    lower_ok(&comm(
        "for j in 0..nx { stage inn on s1 { recv a from peer; } }
         stage work on s1 { launch k::touch(a) grid 1 block 1; }
         for j in 0..nx { stage out on s1 { send c to peer; } }",
    ));
    lower_ok(&comm(
        "step first { stage out on s1 { send c to peer; } }
         step last { stage inn on s1 { recv a from peer; } }",
    ));
    lower_ok(&comm(
        "stage x on s1 { recv a[0..4] from peer; all_reduce(sum) b; send a[4..8] to peer; }
         for j in 0..0 { stage y on s1 { send c to peer; } }
         stage z on s2 { all_reduce(sum) d; broadcast i from 0; }",
    ));
    // A kind of step that only sends, or only receives, may be one role of several pipelines
    // on one communicator (a producer and a consumer).
    lower_ok(&comm("stage out on s1 { send c to peer; }"));
    lower_ok(&comm(
        "stage inn on s1 { recv a from peer; all_reduce(sum) b; }",
    ));
    // Another kind without the other half does not excuse a lone send in an exchange.
    assert_eq!(
        errors(&comm(
            "step first { stage out on s1 { send c to peer; } stage inn on s1 { recv a from peer; } }
             step last { stage x on s1 { all_reduce(sum) b; } }",
        ))
        .len(),
        1
    );
}

/// Every rank's sends in a group are received by the same group's receives on the peers, so
/// a group with both holds as many of each: a halo exchange that forgot one receive is an
/// error on the group's first statement of the more numerous kind.
#[test]
fn a_group_with_more_sends_than_recvs_is_refused() {
    assert_error(
        &comm("stage x on s1 { send c[0..4] to peer; send c[4..8] to nx; recv a[0..4] from nx; }"),
        "this group has 2 `send`s and 1 `recv`: every rank runs the same groups, so the sends of this group are received by the same group's receives on the peers, and as many of each are needed; add the missing `recv` (a halo exchange receives from each neighbour it sends to), or drop a `send`",
        "send peer",
    );
    assert_error(
        &comm("stage x on s1 { recv a[0..4] from peer; recv a[4..8] from nx; send c to peer; }"),
        "this group has 2 `recv`s and 1 `send`: every rank runs the same groups, so the sends of this group are received by the same group's receives on the peers, and as many of each are needed; add the missing `send` (a halo exchange receives from each neighbour it sends to), or drop a `recv`",
        "recv peer",
    );
    lower_ok(&comm(
        "stage x on s1 { send c[0..4] to peer; send c[4..8] to nx; recv a[0..4] from nx; recv a[4..8] from peer; }",
    ));
    // Extra sends may be received by another kind of step that receives, not one that sends.
    lower_ok(&comm(
        "step first { stage x on s1 { send c[0..4] to peer; send c[4..8] to nx; recv a[0..4] from nx; } }
         step last { stage y on s1 { recv a from peer; } }",
    ));
    assert_eq!(
        errors(&comm(
            "step first { stage x on s1 { send c[0..4] to peer; send c[4..8] to nx; recv a[0..4] from nx; } }
             step last { stage y on s1 { send c to peer; } }",
        ))
        .len(),
        1
    );
}

/// Every rank runs the same group, so a group's sends arrive in the peers' receives of that
/// group: where every length is known (constant ranges, scratch buffers of constant length)
/// the lengths sent must be those received, and primitive element types must agree. A
/// collective's two sides have one length. These compiled, and failed (CPU backend) or hung
/// (NCCL) at run time.
#[test]
fn a_groups_sends_carry_what_its_receives_take() {
    let cases = [
        (
            "stage x on s1 { send a[0..4] to peer; recv b[0..8] from peer; }",
            "`recv b[0..8]` takes 8 elements, but the `send`s of its group carry 4 elements: every rank runs the same group, so a peer's `send` of this group arrives in this `recv`, and a send pairs only with a receive of as many elements; receive 4 elements, or send 8",
            "b[0..8]",
        ),
        (
            "stage x on s1 { send a to peer; recv d from peer; }",
            "`recv d` takes `f64`, but the `send`s of its group carry `f32`: every rank runs the same group, so a peer's `send` of this group arrives in this `recv`, and a send pairs only with a receive of one element type; receive into a buffer of `f32`",
            "d",
        ),
        (
            "stage x on s1 { all_reduce(sum) a[0..4] -> b[0..8]; }",
            "`all_reduce(sum) a[0..4] -> b[0..8]` moves 4 elements into 8: both sides of `all_reduce` have one length; name 4 elements on both sides",
            "a[0..4] -> b",
        ),
    ];
    for (items, message, token) in cases {
        assert_error(&comm(items), message, token);
    }
    for items in [
        "stage x on s1 { send a[0..4] to peer; recv b[0..4] from peer; }",
        // As many of each length, whichever rank each goes to.
        "stage x on s1 { send a[0..4] to peer; send a[4..12] to nx; recv b[0..8] from peer; recv b[8..12] from nx; }",
        // A length known only when the step runs.
        "stage x on s1 { send a[0..4] to peer; recv b[0..nx] from peer; }",
        "stage x on s1 { broadcast a[0..4] -> b[4..8] from 0; }",
    ] {
        lower_ok(&comm(items));
    }
}

/// Lengths and overlaps over params: a halo exchange's ranges are usually offsets from a
/// param (`a[nx..nx + 4]`), and lengths or elements that differ by constants differ in every
/// step. These compiled, and failed (CPU backend) or hung (NCCL) at run time.
#[test]
fn a_groups_ranges_over_params_are_compared_as_polynomials() {
    let cases = [
        (
            "stage x on s1 { send a[0..nx] to peer; recv b[0..nx + 1] from peer; }",
            "`recv b[0..nx + 1]` takes `nx + 1` elements, but the `send`s of its group carry `nx` elements, whatever the params are: every rank runs the same group, so a peer's `send` of this group arrives in this `recv`, and a send pairs only with a receive of as many elements; receive `nx` elements, or send `nx + 1`",
            "b[0..nx + 1]",
        ),
        (
            "stage x on s1 { send a[nx..nx + 4] to peer; recv b[nx + 8..nx + 16] from peer; }",
            "`recv b[nx + 8..nx + 16]` takes 8 elements, but the `send`s of its group carry 4 elements, whatever the params are: every rank runs the same group, so a peer's `send` of this group arrives in this `recv`, and a send pairs only with a receive of as many elements; receive 4 elements, or send 8",
            "b[nx + 8..nx + 16]",
        ),
        (
            "stage x on s1 { all_reduce(sum) a[nx..nx + 4] -> b[nx..nx + 8]; }",
            "`all_reduce(sum) a[nx..nx + 4] -> b[nx..nx + 8]` moves 4 elements into 8, whatever the params are: both sides of `all_reduce` have one length; name as many elements on both sides",
            "a[nx..nx + 4] -> b",
        ),
        (
            "stage x on s1 { send a[nx..nx + 4] to peer; recv a[nx + 2..nx + 6] from peer; }",
            "`recv` of this group writes elements nx + 2..nx + 4 of `a` that its `send` also uses: a group's statements run together, in any order; name elements that do not overlap, or move one statement to a stage of its own",
            "a",
        ),
    ];
    for (items, message, token) in cases {
        assert_error(&comm(items), message, token);
    }
    for items in [
        "stage x on s1 { send a[nx..nx + 4] to peer; recv b[0..4] from peer; }",
        "stage x on s1 { send a[nx..nx + 4] to peer; recv a[nx + 4..nx + 8] from peer; }",
        // Two names that may be equal, a narrowing cast, or two lengths that pair either way.
        "stage x on s1 { send a[0..nx] to peer; recv b[0..peer] from peer; }",
        "stage x on s1 { send a[0..nx] to peer; recv b[0..(nx + 1) as u8 as usize] from peer; }",
        "stage x on s1 { send a[0..nx] to peer; send a[nx..nx + 4] to nx; recv b[0..4] from peer; recv b[4..nx + 4] from nx; }",
        "stage x on s1 { all_reduce(sum) a[nx..2 * nx] -> b[0..nx]; }",
    ] {
        lower_ok(&comm(items));
    }
}

/// An in-place `all_reduce` (or `broadcast`, on its root) reads what its buffer holds before
/// it writes it: of a scratch buffer nothing wrote, it reduces undefined contents. It
/// compiled, the operand counted as written only.
#[test]
fn an_in_place_collective_of_a_scratch_buffer_reads_it_first() {
    let scratch = |items: &str| comm(&format!("scratch {{ t: DeviceBuffer<f32> = 8 }} {items}"));
    for op in ["all_reduce(sum) t;", "broadcast t from 0;"] {
        assert_error(
            &scratch(&format!("stage x on s1 {{ {op} }}")),
            "scratch buffer `t` is read in stage `x` before anything writes it: its contents start undefined, and a later step finds what the last one left; write it first (`fill t = 0.0;`, or a kernel that writes it) in an earlier statement or in a stage `x` runs after, or make it a param if it keeps state from step to step",
            "t",
        );
    }
    for items in [
        "stage x on s1 { fill t = 0.0; all_reduce(sum) t; copy t -> h[0..8]; }",
        "stage x on s1 { all_reduce(sum) a[0..8] -> t; copy t -> h[0..8]; }",
        "stage x on s1 { broadcast a[0..8] -> t from 0; copy t -> h[0..8]; }",
    ] {
        lower_ok(&scratch(items));
    }
}

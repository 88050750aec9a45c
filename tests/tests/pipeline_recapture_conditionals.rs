//! A captured step with device conditionals, recaptured with new params: the replays after
//! the recapture run the new buffers and scalars through every conditional form, and the
//! executable graph is updated in place (`cuGraphExecUpdate`), not instantiated anew. An `if`/`else`
//! and a `switch` (one IF node with two bodies and one SWITCH node on a CUDA 12.8+ driver), a
//! `do ... while` nested in a kernel-set `while` (whose handle the graph sets to 1 before each
//! run), and a `while` whose body swaps two buffers, each followed by a setter. On the checked
//! CPU backend and, `#[ignore = "needs a CUDA GPU"]`, on a GPU.

use gpu_pipeline::{Context, DeviceBuffer, Recaptured, Result, Stream, gpu_pipeline};

use tests::condition_kernels as cpu;

gpu_pipeline! {
    /// Bumps `then` when `flag != 0`, else `other`; then bumps `cases[mode]`.
    pipeline Branches {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
        }
        params {
            flag: &DeviceBuffer<u32>,
            mode: &DeviceBuffer<u32>,
            then: &mut DeviceBuffer<u32>,
            other: &mut DeviceBuffer<u32>,
            cases: &mut [DeviceBuffer<u32>],
        }
        stage branch on main {
            if flag != 0u32 {
                launch k::gp_bump(then) grid 1u32 block 1u32;
            } else {
                launch k::gp_bump(other) grid 1u32 block 1u32;
            }
        }
        stage choose on main {
            switch mode {
                0 => { launch k::gp_bump(cases[0]) grid 1u32 block 1u32; }
                1 => { launch k::gp_bump(cases[1]) grid 1u32 block 1u32; }
                2 => { launch k::gp_bump(cases[2]) grid 1u32 block 1u32; }
            }
        }
    }
}

gpu_pipeline! {
    /// Counts `outer` down to 0 (a kernel decides the loop), and in each iteration runs a
    /// do-while whose test fails after its first run (it bumps `once` `outer - 1` times in
    /// all), then bumps `tail` once if `tail < cap`.
    pipeline Nested {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_count_down(n: &mut [u32; unbounded], go: Condition) cpu = cpu::count_down;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = cpu::step;
        }
        params {
            cap: u32,
            outer: &mut DeviceBuffer<u32>,
            three: &DeviceBuffer<u32>,
            spare: &mut DeviceBuffer<u32>,
            left: &mut DeviceBuffer<u32>,
            once: &mut DeviceBuffer<u32>,
            tail: &mut DeviceBuffer<u32>,
        }
        scratch { go: Condition }
        stage solve on main {
            launch k::gp_count_down(outer, go) grid 1u32 block 1u32;
            while go max 100u32 {
                do {
                    launch k::gp_bump(once) grid 1u32 block 1u32;
                    launch k::gp_step(three, spare, left) grid 1u32 block 1u32;
                } while left > 5u32 max 100u32;
                launch k::gp_count_down(outer, go) grid 1u32 block 1u32;
            }
            if tail < cap {
                launch k::gp_bump(tail) grid 1u32 block 1u32;
            }
        }
    }
}

gpu_pipeline! {
    /// Starts `x` at `start[0]` and steps it down by one through `y` (a ping-pong) while the
    /// value is above `tol`, counting the sweeps in `count`: `start[0] - tol` per launch.
    pipeline Sweeps {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = cpu::step;
        }
        params {
            tol: u32,
            start: &DeviceBuffer<u32>,
            x: &mut DeviceBuffer<u32>,
            y: &mut DeviceBuffer<u32>,
            r: &mut DeviceBuffer<u32>,
            count: &mut DeviceBuffer<u32>,
        }
        stage sweep on main {
            copy start -> x;
            fill r = 1000u32;
            while r > tol max 100u32 {
                launch k::gp_step(x, y, r) grid 1u32 block 1u32;
                launch k::gp_bump(count) grid 1u32 block 1u32;
                swap(x, y);
            }
        }
    }
}

fn buffer(stream: &Stream, value: u32) -> Result<DeviceBuffer<u32>> {
    let b = DeviceBuffer::from_slice(stream, &[value])?;
    stream.synchronize()?;
    Ok(b)
}

fn read(stream: &Stream, b: &DeviceBuffer<u32>) -> Result<u32> {
    Ok(b.to_vec(stream)?[0])
}

/// Checks that a recapture updated the executable graph in place: the topology is unchanged,
/// and CUDA 12.4+ drivers update conditional nodes and their bodies (driver 580 did, for
/// every recapture of this file, on an H100).
fn assert_updated(what: &str, outcome: Recaptured) {
    assert_eq!(outcome, Recaptured::Updated, "{what}");
}

/// The branches and switch cases of the replays after each recapture follow the new flag and
/// mode (one past the last case runs none), and write the new buffers.
fn if_else_and_switch_follow_the_new_params(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let (yes, no) = (buffer(&stream, 1)?, buffer(&stream, 0)?);
    let (mode0, mode2, mode7) = (
        buffer(&stream, 0)?,
        buffer(&stream, 2)?,
        buffer(&stream, 7)?,
    );
    let (mut a, mut b) = (buffer(&stream, 0)?, buffer(&stream, 0)?);
    let mut cases = vec![
        buffer(&stream, 0)?,
        buffer(&stream, 0)?,
        buffer(&stream, 0)?,
    ];
    let mut pipeline = Branches::new(ctx)?;
    let mut graph = pipeline.capture(BranchesParams {
        flag: &yes,
        mode: &mode0,
        then: &mut a,
        other: &mut b,
        cases: &mut cases,
    })?;
    graph.launch()?; // then (a), case 0
    assert_updated(
        "flag and mode",
        graph.recapture_with(|p| {
            p.flag = &no;
            p.mode = &mode2;
        })?,
    );
    graph.launch()?; // else (b), case 2
    graph.launch()?; // else (b), case 2
    assert_updated(
        "then and other exchanged",
        graph.recapture_with(|p| std::mem::swap(&mut p.then, &mut p.other))?,
    );
    graph.launch()?; // else: now `a`; case 2
    assert_updated(
        "mode past the cases",
        graph.recapture_with(|p| p.mode = &mode7)?,
    );
    graph.launch()?; // else (`a`), no case
    graph.synchronize()?;
    drop(graph);
    assert_eq!((read(&stream, &a)?, read(&stream, &b)?), (3, 2));
    let counts: Vec<u32> = cases
        .iter()
        .map(|c| read(&stream, c))
        .collect::<Result<_>>()?;
    assert_eq!(counts, [1, 0, 3]);
    Ok(())
}

/// The do-while nested in a loop runs once per outer iteration after each recapture (its
/// handle set to 1 before it in the new build too), on the new buffers; the `if` after the
/// loop follows its scalar's setter; with fault tracking on.
fn a_nested_do_while_runs_every_outer_iteration_after_a_recapture(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let three = buffer(&stream, 3)?;
    let (mut spare, mut left) = (buffer(&stream, 0)?, buffer(&stream, 0)?);
    let (mut outer_a, mut outer_b, mut outer_c) = (
        buffer(&stream, 4)?,
        buffer(&stream, 3)?,
        buffer(&stream, 6)?,
    );
    let (mut once_a, mut once_b) = (buffer(&stream, 0)?, buffer(&stream, 0)?);
    let mut tail = buffer(&stream, 0)?;
    let mut pipeline = Nested::new(ctx)?;
    // Each stage's mark is a node of the top-level graph, beside the loops' nodes.
    pipeline.set_fault_tracking(true);
    let (ob, oc, onb) = (&mut outer_b, &mut outer_c, &mut once_b);
    let mut graph = pipeline.capture(NestedParams {
        cap: 10,
        outer: &mut outer_a,
        three: &three,
        spare: &mut spare,
        left: &mut left,
        once: &mut once_a,
        tail: &mut tail,
    })?;
    graph.launch()?; // outer 4: 3 iterations into once_a; tail 1
    let mut onb = Some(onb);
    let mut ob = Some(ob);
    assert_updated(
        "outer and once replaced",
        graph.recapture_with(|p| {
            p.outer = ob.take().unwrap();
            p.once = onb.take().unwrap();
        })?,
    );
    graph.set_cap(1)?;
    graph.launch()?; // outer 3: 2 iterations into once_b; tail stays 1
    let mut oc = Some(oc);
    assert_updated(
        "outer replaced again",
        graph.recapture_with(|p| p.outer = oc.take().unwrap())?,
    );
    graph.set_cap(5)?;
    graph.launch()?; // outer 6: 5 iterations into once_b; tail 2
    graph.synchronize()?;
    drop(graph);
    assert_eq!(read(&stream, &once_a)?, 3);
    assert_eq!(read(&stream, &once_b)?, 2 + 5);
    assert_eq!(read(&stream, &tail)?, 2);
    for outer in [&outer_a, &outer_b, &outer_c] {
        assert_eq!(read(&stream, outer)?, 0);
    }
    Ok(())
}

/// A loop that swaps two buffers in its body, recaptured onto other buffers (and with the
/// pair exchanged), then given a new tolerance by its setter: each launch counts
/// `start - tol` sweeps, and the last value lands where the sweeps' parity puts it.
fn a_ping_pong_loop_follows_new_buffers_and_setters(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let (five, seven) = (buffer(&stream, 5)?, buffer(&stream, 7)?);
    let (mut x, mut y, mut r) = (
        buffer(&stream, 0)?,
        buffer(&stream, 0)?,
        buffer(&stream, 0)?,
    );
    let (mut count_a, mut count_b) = (buffer(&stream, 0)?, buffer(&stream, 0)?);
    let mut pipeline = Sweeps::new(ctx)?;
    let mut count_b_slot = Some(&mut count_b);
    let mut graph = pipeline.capture(SweepsParams {
        tol: 0,
        start: &five,
        x: &mut x,
        y: &mut y,
        r: &mut r,
        count: &mut count_a,
    })?;
    graph.launch()?; // 5 sweeps into count_a
    assert_updated(
        "start and count replaced",
        graph.recapture_with(|p| {
            p.start = &seven;
            p.count = count_b_slot.take().unwrap();
        })?,
    );
    graph.launch()?; // 7 sweeps into count_b
    graph.set_tol(3)?;
    graph.launch()?; // 4 sweeps into count_b
    assert_updated(
        "the pair exchanged",
        graph.recapture_with(|p| std::mem::swap(&mut p.x, &mut p.y))?,
    );
    graph.launch()?; // 4 sweeps again: tol stays 3
    graph.synchronize()?;
    drop(graph);
    assert_eq!(read(&stream, &count_a)?, 5);
    assert_eq!(read(&stream, &count_b)?, 7 + 4 + 4);
    // The last launch stepped 7 down to 3 in four sweeps, starting from `y` (the pair
    // exchanged): an even count leaves the last value in the buffer it started in.
    assert_eq!(read(&stream, &r)?, 3);
    assert_eq!(read(&stream, &y)?, 3);
    Ok(())
}

tests::on_both_backends_race_free!(
    if_else_and_switch_follow_the_new_params,
    a_nested_do_while_runs_every_outer_iteration_after_a_recapture,
    a_ping_pong_loop_follows_new_buffers_and_setters,
);

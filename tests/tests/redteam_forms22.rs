//! Red team (pass 22): the forms beyond one straight-line step combined with each other:
//! conditionals nested in a swapping loop's body, a `do ... while` inside an `if` inside a
//! loop, a `switch` whose value the host writes out of range between replays, host writes
//! into ranges that only a conditional's body writes, host writes after a lent launch and on
//! a clone, host writes that follow a pipeline-level swap, kernel-set conditions nested in a
//! swapping body, and every conditional form run ahead, profiled and replayed. Each runs on the checked CPU
//! backend (zero races) and, ignored here, on CUDA.

use gpu_pipeline::{Context, DeviceBuffer, PinnedBuffer, Result, Stream, gpu_pipeline};

// The kernels' CPU twins.
use tests::condition_kernels as cpu;

tests::on_both_backends_race_free!(
    conditionals_in_a_swapping_body_test_the_swapped_buffers,
    a_do_while_in_an_if_in_a_loop_runs_at_every_outer_iteration,
    a_switch_value_written_past_the_cases_runs_no_case,
    host_writes_into_ranges_only_a_body_writes_are_refused,
    a_host_write_after_a_lent_launch_and_on_a_clone_is_ordered,
    host_write_refusals_follow_the_swapped_arrangement,
    a_host_write_source_dropped_at_once_is_copied_whole,
    kernel_set_conditions_in_a_swapping_body_agree_eagerly_and_replayed,
    a_loop_swap_of_unequal_buffers_is_refused_by_every_path,
    steps_ahead_profiled_and_replayed_decide_alike,
    a_forgotten_graph_fences_the_pinned_buffers_its_loop_body_copies,
);

fn word(stream: &Stream, value: u32) -> Result<DeviceBuffer<u32>> {
    let buffer = DeviceBuffer::from_slice(stream, &[value])?;
    stream.synchronize()?;
    Ok(buffer)
}

fn read(stream: &Stream, buffer: &DeviceBuffer<u32>) -> Result<Vec<u32>> {
    buffer.to_vec(stream)
}

gpu_pipeline! {
    /// A ping-pong of `p` and `q` down to 0, with an `if` on the swapped `q` and an `if` whose
    /// body reads the swapped `q`: each half must test and read the buffer that half calls `q`.
    pipeline SwapNested {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = cpu::step;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
        }
        params {
            p: &mut DeviceBuffer<u32>,
            q: &mut DeviceBuffer<u32>,
            pr: &mut DeviceBuffer<u32>,
            flag: &DeviceBuffer<u32>,
            hits: &mut DeviceBuffer<u32>,
            log: &mut DeviceBuffer<u32>,
            lr: &mut DeviceBuffer<u32>,
        }
        stage solve on main {
            while pr > 0u32 max 100u32 {
                launch k::gp_step(p, q, pr) grid 1u32 block 1u32;
                if q > 2u32 {
                    launch k::gp_bump(hits) grid 1u32 block 1u32;
                }
                if flag != 0u32 {
                    launch k::gp_step(q, log, lr) grid 1u32 block 1u32;
                }
                swap(p, q);
            }
        }
    }
}

/// From `p = 4`: four iterations write 3, 2, 1, 0 alternately into `q` and `p`. Only the
/// first sees its `q` above 2 (the second's `q` is the buffer passed as `p`, holding 2), and
/// the last logs its `q` (0, in the buffer passed as `p`) minus one, wrapping. A nested
/// conditional built for one arrangement only would count 2 and log 0.
fn conditionals_in_a_swapping_body_test_the_swapped_buffers(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut pipeline = SwapNested::new(ctx)?;
    for graph in [false, true] {
        let (mut p, mut q, mut pr) = (word(&stream, 4)?, word(&stream, 0)?, word(&stream, 4)?);
        let flag = word(&stream, 1)?;
        let (mut hits, mut log, mut lr) = (word(&stream, 0)?, word(&stream, 7)?, word(&stream, 0)?);
        let params = SwapNestedParams {
            p: &mut p,
            q: &mut q,
            pr: &mut pr,
            flag: &flag,
            hits: &mut hits,
            log: &mut log,
            lr: &mut lr,
        };
        if graph {
            let mut graph = pipeline.capture(params)?;
            graph.launch()?;
            graph.synchronize()?;
        } else {
            pipeline.run(params)?.wait()?;
        }
        let what = if graph { "graph" } else { "eager" };
        assert_eq!(read(&stream, &p)?, [0], "{what}");
        assert_eq!(read(&stream, &q)?, [1], "{what}");
        assert_eq!(
            read(&stream, &hits)?,
            [1],
            "{what}: `if q > 2` on each half's `q`"
        );
        assert_eq!(
            read(&stream, &log)?,
            [u32::MAX],
            "{what}: the last half's `q` read"
        );
    }
    Ok(())
}

gpu_pipeline! {
    /// An outer loop of `outer - 1` iterations whose body holds an `if` that holds two
    /// do-whiles whose tests fail after their first iteration (one a kernel decides, one a
    /// comparison).
    pipeline IfDoWhile {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_count_down(n: &mut [u32; unbounded], go: Condition) cpu = cpu::count_down;
            fn gp_set_to(value: &[u32; unbounded], go: Condition) cpu = cpu::set_to;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = cpu::step;
        }
        params {
            outer: &mut DeviceBuffer<u32>,
            flag: &DeviceBuffer<u32>,
            zero: &DeviceBuffer<u32>,
            three: &DeviceBuffer<u32>,
            spare: &mut DeviceBuffer<u32>,
            left: &mut DeviceBuffer<u32>,
            set: &mut DeviceBuffer<u32>,
            compared: &mut DeviceBuffer<u32>,
        }
        scratch { go: Condition, again: Condition }
        stage solve on main {
            launch k::gp_count_down(outer, go) grid 1u32 block 1u32;
            while go max 100u32 {
                if flag != 0u32 {
                    do {
                        launch k::gp_bump(set) grid 1u32 block 1u32;
                        launch k::gp_set_to(zero, again) grid 1u32 block 1u32;
                    } while again max 100u32;
                    do {
                        launch k::gp_bump(compared) grid 1u32 block 1u32;
                        launch k::gp_step(three, spare, left) grid 1u32 block 1u32;
                    } while left > 5u32 max 100u32;
                }
                launch k::gp_count_down(outer, go) grid 1u32 block 1u32;
            }
        }
    }
}

/// From `outer = 4` the outer loop runs 3 times, and each do-while once in each, eagerly and
/// in each of two graphs (a kernel writes `outer`, so each graph gets a fresh one).
fn a_do_while_in_an_if_in_a_loop_runs_at_every_outer_iteration(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let (mut outer, flag, zero, three) = (
        word(&stream, 4)?,
        word(&stream, 1)?,
        word(&stream, 0)?,
        word(&stream, 3)?,
    );
    let (mut spare, mut left, mut set, mut compared) = (
        word(&stream, 0)?,
        word(&stream, 0)?,
        word(&stream, 0)?,
        word(&stream, 0)?,
    );
    let mut pipeline = IfDoWhile::new(ctx)?;
    macro_rules! params {
        () => {
            IfDoWhileParams {
                outer: &mut outer,
                flag: &flag,
                zero: &zero,
                three: &three,
                spare: &mut spare,
                left: &mut left,
                set: &mut set,
                compared: &mut compared,
            }
        };
    }
    pipeline.run(params!())?.wait()?;
    assert_eq!(read(&stream, &set)?, [3], "eager");
    assert_eq!(read(&stream, &compared)?, [3], "eager");
    for launch in 1..=2u32 {
        outer = word(&stream, 4)?;
        let mut graph = pipeline.capture(params!())?;
        graph.launch()?;
        graph.synchronize()?;
        drop(graph);
        let want = 3 + 3 * launch;
        assert_eq!(
            read(&stream, &set)?,
            [want],
            "replay {launch}: kernel-set do-while"
        );
        assert_eq!(
            read(&stream, &compared)?,
            [want],
            "replay {launch}: compared"
        );
    }
    Ok(())
}

gpu_pipeline! {
    /// A two-case `switch` on `mode`, which only the host writes (between replays), and one
    /// on a condition a kernel sets from `pick`.
    pipeline Modes {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_set_to(value: &[u32; unbounded], go: Condition) cpu = cpu::set_to;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
        }
        params {
            mode: &mut DeviceBuffer<u32>,
            pick: &mut DeviceBuffer<u32>,
            zero: &mut DeviceBuffer<u32>,
            one: &mut DeviceBuffer<u32>,
            two: &mut DeviceBuffer<u32>,
            three: &mut DeviceBuffer<u32>,
        }
        scratch { chosen: Condition }
        stage decide on main {
            switch mode {
                1 => { launch k::gp_bump(one) grid 1u32 block 1u32; }
                0 => { launch k::gp_bump(zero) grid 1u32 block 1u32; }
            }
            launch k::gp_set_to(pick, chosen) grid 1u32 block 1u32;
            switch chosen {
                0 => { launch k::gp_bump(two) grid 1u32 block 1u32; }
                1 => { launch k::gp_bump(three) grid 1u32 block 1u32; }
            }
        }
    }
}

/// Values 0, 1, 2, `u32::MAX`, 1 written between replays: the two past the cases run none
/// (as CUDA's SWITCH node does), and the graph goes on replaying.
fn a_switch_value_written_past_the_cases_runs_no_case(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let (mut mode, mut pick) = (word(&stream, 0)?, word(&stream, 0)?);
    let (mut zero, mut one, mut two, mut three) = (
        word(&stream, 0)?,
        word(&stream, 0)?,
        word(&stream, 0)?,
        word(&stream, 0)?,
    );
    let mut pipeline = Modes::new(ctx)?;
    let mut graph = pipeline.capture(ModesParams {
        mode: &mut mode,
        pick: &mut pick,
        zero: &mut zero,
        one: &mut one,
        two: &mut two,
        three: &mut three,
    })?;
    for value in [0, 1, 2, u32::MAX, 1] {
        graph.write_mode()?.fill(value)?;
        graph.write_pick()?.fill(value)?;
        graph.launch()?;
    }
    graph.synchronize()?;
    drop(graph);
    assert_eq!(read(&stream, &zero)?, [1]);
    assert_eq!(read(&stream, &one)?, [2]);
    assert_eq!(read(&stream, &two)?, [1]);
    assert_eq!(read(&stream, &three)?, [2]);
    // Eagerly too: the value past the cases runs none.
    let mut mode = word(&stream, 5)?;
    let mut pick = word(&stream, 9)?;
    pipeline
        .run(ModesParams {
            mode: &mut mode,
            pick: &mut pick,
            zero: &mut zero,
            one: &mut one,
            two: &mut two,
            three: &mut three,
        })?
        .wait()?;
    for (buffer, want) in [(&zero, 1), (&one, 2), (&two, 1), (&three, 2)] {
        assert_eq!(read(&stream, buffer)?, [want]);
    }
    Ok(())
}

gpu_pipeline! {
    /// Ranges written only inside a conditional's body: `x[0..1]` in an `if`, `y[1..2]` in a
    /// case of a `switch`, `w[1..2]` in a `do ... while`.
    pipeline BodyRanges {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = cpu::step;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
        }
        params {
            flag: &mut DeviceBuffer<u32>,
            mode: &mut DeviceBuffer<u32>,
            three: &DeviceBuffer<u32>,
            r: &mut DeviceBuffer<u32>,
            x: &mut DeviceBuffer<u32>,
            y: &mut DeviceBuffer<u32>,
            w: &mut DeviceBuffer<u32>,
            sum: &mut DeviceBuffer<u32>,
        }
        stage s on main {
            if flag != 0u32 {
                launch k::gp_bump(x[0..1]) grid 1u32 block 1u32;
            }
            switch mode {
                0 => { launch k::gp_bump(y[1..2]) grid 1u32 block 1u32; }
                1 => {}
            }
            do {
                launch k::gp_step(three, w[1..2], r) grid 1u32 block 1u32;
            } while r > 5u32 max 10u32;
            launch k::gp_step(x[1..2], sum, r) grid 1u32 block 1u32;
            launch k::gp_step(y[0..1], sum, r) grid 1u32 block 1u32;
            launch k::gp_step(w[0..1], sum, r) grid 1u32 block 1u32;
        }
    }
}

/// A host write into the element a body writes is refused, naming the stage; one into an
/// element the step only reads goes through.
fn host_writes_into_ranges_only_a_body_writes_are_refused(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let pair = || -> Result<DeviceBuffer<u32>> {
        let buffer = DeviceBuffer::from_slice(&stream, &[0u32, 0])?;
        stream.synchronize()?;
        Ok(buffer)
    };
    let (mut flag, mut mode, three, mut r) = (
        word(&stream, 1)?,
        word(&stream, 0)?,
        word(&stream, 3)?,
        word(&stream, 0)?,
    );
    let (mut x, mut y, mut w, mut sum) = (pair()?, pair()?, pair()?, word(&stream, 0)?);
    let mut pipeline = BodyRanges::new(ctx)?;
    let mut graph = pipeline.capture(BodyRangesParams {
        flag: &mut flag,
        mode: &mut mode,
        three: &three,
        r: &mut r,
        x: &mut x,
        y: &mut y,
        w: &mut w,
        sum: &mut sum,
    })?;
    let refusals = [
        graph.write_x()?.fill_range(0..1, 9),
        graph.write_y()?.fill_range(1..2, 9),
        graph.write_w()?.fill_range(1..2, 9),
        graph.write_x()?.fill(9),
    ];
    for refused in refusals {
        let message = refused.expect_err("a body writes it").to_string();
        assert!(message.contains("stage `s` may write"), "{message}");
    }
    graph.write_x()?.fill_range(1..2, 5)?;
    graph.write_y()?.fill_range(0..1, 6)?;
    graph.write_w()?.fill_range(0..1, 7)?;
    graph.launch()?;
    graph.synchronize()?;
    drop(graph);
    assert_eq!(read(&stream, &x)?, [1, 5]);
    assert_eq!(read(&stream, &y)?, [6, 1]);
    assert_eq!(read(&stream, &w)?, [7, 2]);
    assert_eq!(read(&stream, &sum)?, [6]);
    Ok(())
}

gpu_pipeline! {
    /// `out = input - 1`.
    pipeline Echo {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = cpu::step;
        }
        params {
            input: &mut DeviceBuffer<u32>,
            out: &mut DeviceBuffer<u32>,
            r: &mut DeviceBuffer<u32>,
        }
        stage s on main {
            launch k::gp_step(input, out, r) grid 1u32 block 1u32;
        }
    }
}

/// A lent instantiation launched on a stream of the caller's, then at once a host write of
/// the input it reads: the write waits for the lent launch. Then a clone writes the input
/// while the original's launch may still run, and the original writes it after the clone.
fn a_host_write_after_a_lent_launch_and_on_a_clone_is_ordered(ctx: &Context) -> Result<()> {
    const N: usize = 1 << 14;
    let stream = Stream::new(ctx)?;
    let foreign = Stream::non_blocking(ctx)?;
    let mut input = DeviceBuffer::from_slice(&stream, &vec![1u32; N])?;
    let (mut out, mut r) = (word(&stream, 0)?, word(&stream, 0)?);
    let mut pipeline = Echo::new(ctx)?;
    let mut graph = pipeline.capture(EchoParams {
        input: &mut input,
        out: &mut out,
        r: &mut r,
    })?;
    graph.launch()?;
    graph.synchronize()?;
    graph.exec().expect("captured").launch(&foreign)?;
    graph.write_input()?.fill(10)?;
    graph.launch()?;
    {
        let mut clone = graph.clone_step()?;
        clone.write_input()?.fill(20)?;
        clone.launch()?;
        clone.exec().expect("captured").launch(&foreign)?;
        clone.write_input()?.fill(30)?;
    }
    graph.write_input()?.fill_range(..1, 40)?;
    graph.launch()?;
    drop(graph);
    assert_eq!(read(&stream, &out)?, [39]);
    assert_eq!(read(&stream, &input)?[1..], vec![30; N - 1][..]);
    Ok(())
}

gpu_pipeline! {
    /// `x[..half]` written, `y` read, and the two swapped between replays.
    pipeline SwappedRanges {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = cpu::step;
        }
        params {
            half: usize,
            x: &mut DeviceBuffer<u32>,
            y: &mut DeviceBuffer<u32>,
            r: &mut DeviceBuffer<u32>,
        }
        swap(x, y);
        stage s on main {
            launch k::gp_step(y, x[..half], r) grid 1u32 block 1u32;
        }
    }
}

/// After `swap_x_y`, the step writes the first half of the buffer passed as `y` (now its
/// `x`): a host write there through `write_x` is refused, and `write_y` (the buffer passed as
/// `x`, now only read) may write anywhere.
fn host_write_refusals_follow_the_swapped_arrangement(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut x = DeviceBuffer::from_slice(&stream, &[0u32; 4])?;
    let mut y = DeviceBuffer::from_slice(&stream, &[0u32; 4])?;
    let mut r = word(&stream, 0)?;
    stream.synchronize()?;
    let mut pipeline = SwappedRanges::new(ctx)?;
    let mut graph = pipeline.capture(SwappedRangesParams {
        half: 2,
        x: &mut x,
        y: &mut y,
        r: &mut r,
    })?;
    assert!(graph.write_x()?.fill_range(0..2, 1).is_err());
    graph.write_y()?.fill(5)?;
    graph.launch()?; // x[0] = 4
    graph.swap_x_y()?;
    assert!(graph.write_x()?.fill_range(1..2, 1).is_err());
    graph.write_x()?.fill_range(2.., 3)?; // the buffer passed as `y`
    graph.write_y()?.fill(8)?; // the buffer passed as `x`, read now
    graph.launch()?; // (passed as y)[0] = 7
    graph.synchronize()?;
    drop(graph);
    assert_eq!(read(&stream, &x)?, [8; 4]);
    assert_eq!(read(&stream, &y)?, [7, 5, 3, 3]);
    Ok(())
}

/// The pinned source of a host upload dropped right after the call: the copy still reads
/// what it held (the drop waits for the copy, or the memory outlives it).
fn a_host_write_source_dropped_at_once_is_copied_whole(ctx: &Context) -> Result<()> {
    const N: usize = 1 << 16;
    let stream = Stream::new(ctx)?;
    let mut input = DeviceBuffer::from_slice(&stream, &vec![0u32; N])?;
    let (mut out, mut r) = (word(&stream, 0)?, word(&stream, 0)?);
    let mut pipeline = Echo::new(ctx)?;
    let mut graph = pipeline.capture(EchoParams {
        input: &mut input,
        out: &mut out,
        r: &mut r,
    })?;
    for k in 1..=4u32 {
        graph.launch()?;
        let source = PinnedBuffer::from_slice(ctx, &vec![k; N])?;
        graph.write_input()?.upload(&source)?;
        drop(source);
    }
    graph.launch()?;
    drop(graph);
    assert_eq!(read(&stream, &out)?, [3]);
    assert_eq!(read(&stream, &input)?, vec![4; N]);
    Ok(())
}

gpu_pipeline! {
    /// A ping-pong of `p` and `q` whose body holds an `if` and a `do ... while` that kernels
    /// decide (one handle per half of the unrolled body) and a `while` on the swapped `q`.
    pipeline SwapKernelSet {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = cpu::step;
            fn gp_set_to(value: &[u32; unbounded], go: Condition) cpu = cpu::set_to;
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
        }
        params {
            p: &mut DeviceBuffer<u32>,
            q: &mut DeviceBuffer<u32>,
            pr: &mut DeviceBuffer<u32>,
            hits: &mut DeviceBuffer<u32>,
            dos: &mut DeviceBuffer<u32>,
            zero: &DeviceBuffer<u32>,
            inner: &mut DeviceBuffer<u32>,
            ir: &mut DeviceBuffer<u32>,
            t: &mut DeviceBuffer<u32>,
        }
        scratch { go: Condition, again: Condition }
        stage solve on main {
            while pr > 0u32 max 100u32 {
                launch k::gp_step(p, q, pr) grid 1u32 block 1u32;
                launch k::gp_set_to(q, go) grid 1u32 block 1u32;
                if go {
                    launch k::gp_bump(hits) grid 1u32 block 1u32;
                }
                do {
                    launch k::gp_bump(dos) grid 1u32 block 1u32;
                    launch k::gp_set_to(zero, again) grid 1u32 block 1u32;
                } while again max 10u32;
                while q > 3u32 max 10u32 {
                    launch k::gp_bump(inner) grid 1u32 block 1u32;
                    launch k::gp_step(q, t, ir) grid 1u32 block 1u32;
                    launch k::gp_step(t, q, ir) grid 1u32 block 1u32;
                }
                swap(p, q);
            }
        }
    }
}

/// The buffers of `SwapKernelSet`, each one word: p, q, pr, hits, dos, zero, inner, ir, t.
fn swap_kernel_set_words(stream: &Stream) -> Result<[DeviceBuffer<u32>; 9]> {
    let values = [5, 0, 5, 0, 0, 0, 0, 0, 0];
    let mut words = Vec::with_capacity(values.len());
    for value in values {
        words.push(word(stream, value)?);
    }
    Ok(words.try_into().expect("nine words"))
}

/// From `p = 5`: the first iteration writes 4 into `q`, which the inner loop takes to 2; the
/// second (swapped) writes 1 into `p`, the third 0 into `q`. The `if` holds in the first two
/// (its kernel sets 4, then 1), each do-while runs once per iteration, the inner loop once.
fn kernel_set_conditions_in_a_swapping_body_agree_eagerly_and_replayed(
    ctx: &Context,
) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let mut pipeline = SwapKernelSet::new(ctx)?;
    for graph in [false, true] {
        let [
            mut p,
            mut q,
            mut pr,
            mut hits,
            mut dos,
            zero,
            mut inner,
            mut ir,
            mut t,
        ] = swap_kernel_set_words(&stream)?;
        let params = SwapKernelSetParams {
            p: &mut p,
            q: &mut q,
            pr: &mut pr,
            hits: &mut hits,
            dos: &mut dos,
            zero: &zero,
            inner: &mut inner,
            ir: &mut ir,
            t: &mut t,
        };
        if graph {
            let mut graph = pipeline.capture(params)?;
            graph.launch()?;
            graph.synchronize()?;
        } else {
            pipeline.run(params)?.wait()?;
        }
        let what = if graph { "graph" } else { "eager" };
        // Three iterations, odd: `q` (which holds the last sweep) copied into `p`.
        assert_eq!(read(&stream, &p)?, [0], "{what}");
        assert_eq!(read(&stream, &q)?, [0], "{what}");
        assert_eq!(read(&stream, &hits)?, [2], "{what}");
        assert_eq!(read(&stream, &dos)?, [3], "{what}");
        assert_eq!(read(&stream, &inner)?, [1], "{what}");
    }
    Ok(())
}

/// `recapture_with` puts a two-element buffer beside a one-element one in a loop swap: the
/// refusal (before anything is enqueued) is returned by the recapture, the next launch, a
/// clone and `exec` alike, never a panic; putting the buffer back makes the graph launchable.
fn a_loop_swap_of_unequal_buffers_is_refused_by_every_path(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    let [
        mut p,
        mut q,
        mut pr,
        mut hits,
        mut dos,
        zero,
        mut inner,
        mut ir,
        mut t,
    ] = swap_kernel_set_words(&stream)?;
    let mut long = DeviceBuffer::from_slice(&stream, &[0u32, 0])?;
    stream.synchronize()?;
    let mut pipeline = SwapKernelSet::new(ctx)?;
    let mut graph = pipeline.capture(SwapKernelSetParams {
        p: &mut p,
        q: &mut q,
        pr: &mut pr,
        hits: &mut hits,
        dos: &mut dos,
        zero: &zero,
        inner: &mut inner,
        ir: &mut ir,
        t: &mut t,
    })?;
    graph.launch()?;
    let mut old = None;
    let refused = graph.recapture_with(|p| old = Some(std::mem::replace(&mut p.q, &mut long)));
    let message = refused.expect_err("unequal lengths").to_string();
    assert!(
        message.contains("`swap(p, q)` in a loop body exchanges buffers of 1 and 2 elements"),
        "{message}"
    );
    // The taken buffer is the host's: the launch before has finished.
    assert_eq!(read(&stream, old.as_ref().expect("taken"))?, [0]);
    assert!(graph.launch().is_err());
    assert!(graph.clone_step().is_err());
    assert!(graph.exec().is_none());
    let _ = graph.recapture_with(|p| p.q = old.take().expect("taken"))?;
    graph.launch()?;
    graph.synchronize()?;
    Ok(())
}

gpu_pipeline! {
    /// Every conditional form on two streams: a kernel-set `while` on `main` counting `n` down
    /// from `start` into `acc`; an `if ... else` on `acc` and a kernel-set `do ... while` on
    /// `side`; a `switch` and an `if step % 2 == 0` on `side` too.
    pipeline Ahead {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_bump(out: &mut [u32; unbounded]) cpu = cpu::bump;
            fn gp_count_down(n: &mut [u32; unbounded], go: Condition) cpu = cpu::count_down;
            fn gp_set_to(value: &[u32; unbounded], go: Condition) cpu = cpu::set_to;
        }
        params {
            start: &DeviceBuffer<u32>,
            n: &mut DeviceBuffer<u32>,
            acc: &mut DeviceBuffer<u32>,
            big: &mut DeviceBuffer<u32>,
            small: &mut DeviceBuffer<u32>,
            mode: &DeviceBuffer<u32>,
            m0: &mut DeviceBuffer<u32>,
            m1: &mut DeviceBuffer<u32>,
            even: &mut DeviceBuffer<u32>,
            once: &mut DeviceBuffer<u32>,
            zero: &DeviceBuffer<u32>,
        }
        scratch { go: Condition, again: Condition }
        stage count on main {
            copy start -> n;
            launch k::gp_count_down(n, go) grid 1u32 block 1u32;
            while go max 100u32 {
                launch k::gp_bump(acc) grid 1u32 block 1u32;
                launch k::gp_count_down(n, go) grid 1u32 block 1u32;
            }
        }
        stage judge on side {
            if acc > 10u32 {
                launch k::gp_bump(big) grid 1u32 block 1u32;
            } else {
                launch k::gp_bump(small) grid 1u32 block 1u32;
            }
            do {
                launch k::gp_bump(once) grid 1u32 block 1u32;
                launch k::gp_set_to(zero, again) grid 1u32 block 1u32;
            } while again max 3u32;
        }
        stage pick on side {
            switch mode {
                0 => { launch k::gp_bump(m0) grid 1u32 block 1u32; }
                1 => { launch k::gp_bump(m1) grid 1u32 block 1u32; }
            }
            if step % 2u32 == 0u32 {
                launch k::gp_bump(even) grid 1u32 block 1u32;
            }
        }
    }
}

/// Five steps from `start = 4` (three iterations each, `acc` 3, 6, .., 15): closed eager
/// steps, steps run ahead, profiled steps and graph replays leave the same counts, with no
/// race (each step's tests read the values of its own step).
fn steps_ahead_profiled_and_replayed_decide_alike(ctx: &Context) -> Result<()> {
    let stream = Stream::new(ctx)?;
    for how in ["closed", "ahead", "profiled", "replayed"] {
        // A pipeline of its own, so that the step counter starts at 0.
        let mut pipeline = Ahead::new(ctx)?;
        let (start, mode, zero) = (word(&stream, 4)?, word(&stream, 1)?, word(&stream, 0)?);
        let mut counts = Vec::with_capacity(8);
        for _ in 0..8 {
            counts.push(word(&stream, 0)?);
        }
        let [n, acc, big, small, m0, m1, even, once] = &mut counts[..] else {
            unreachable!("eight counts");
        };
        macro_rules! params {
            () => {
                AheadParams {
                    start: &start,
                    n: &mut *n,
                    acc: &mut *acc,
                    big: &mut *big,
                    small: &mut *small,
                    mode: &mode,
                    m0: &mut *m0,
                    m1: &mut *m1,
                    even: &mut *even,
                    once: &mut *once,
                    zero: &zero,
                }
            };
        }
        match how {
            "closed" => {
                for _ in 0..5 {
                    pipeline.run(params!())?.wait()?;
                }
            }
            "ahead" => pipeline.run_ahead(params!(), 5)?.wait()?,
            "profiled" => {
                for _ in 0..5 {
                    let _profile = pipeline.profile(params!())?;
                }
            }
            _ => {
                let mut graph = pipeline.capture(params!())?;
                for _ in 0..5 {
                    graph.launch()?;
                }
                graph.synchronize()?;
            }
        }
        let got: Vec<u32> = counts[1..]
            .iter()
            .map(|b| read(&stream, b).map(|v| v[0]))
            .collect::<Result<_>>()?;
        // acc, big, small, m0, m1, even (steps 0, 2 and 4), once.
        assert_eq!(got, [15, 2, 3, 0, 5, 3, 5], "{how}");
    }
    Ok(())
}

gpu_pipeline! {
    /// A ping-pong loop whose body copies `big` out to `out` and `inp` into `big`, inside an
    /// `if`: pinned memory that only a conditional body touches.
    pipeline BodyCopies {
        streams { main }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/condition_kernels.ptx")) {
            fn gp_step(src: &[u32; unbounded], dst: &mut [u32; unbounded], r: &mut [u32; unbounded])
                cpu = cpu::step;
        }
        params {
            x: &mut DeviceBuffer<u32>,
            y: &mut DeviceBuffer<u32>,
            r: &mut DeviceBuffer<u32>,
            flag: &DeviceBuffer<u32>,
            big: &mut DeviceBuffer<u32>,
            out: &mut PinnedBuffer<u32>,
            inp: &mut PinnedBuffer<u32>,
        }
        stage s on main {
            while r > 0u32 max 100000u32 {
                launch k::gp_step(x, y, r) grid 1u32 block 1u32;
                if flag != 0u32 {
                    copy big -> out;
                    copy inp -> big;
                }
                swap(x, y);
            }
        }
    }
}

/// A graph forgotten (`mem::forget`) with a replay of 2000 iterations in flight: the host's
/// write of `inp` waits for every copy the body makes from it, and its read of `out` for every
/// copy into it (the fences of copies inside conditional bodies live in the buffers too), so
/// `out` holds the 5s of `inp` as it was, never the 9s written after.
fn a_forgotten_graph_fences_the_pinned_buffers_its_loop_body_copies(ctx: &Context) -> Result<()> {
    const N: usize = 1 << 16;
    let stream = Stream::new(ctx)?;
    let (mut x, mut y, mut r) = (
        word(&stream, 2000)?,
        word(&stream, 0)?,
        word(&stream, 2000)?,
    );
    let flag = word(&stream, 1)?;
    let mut big = DeviceBuffer::from_slice(&stream, &vec![7u32; N])?;
    stream.synchronize()?;
    let mut out = PinnedBuffer::<u32>::zeros(ctx, N)?;
    let mut inp = PinnedBuffer::from_slice(ctx, &vec![5u32; N])?;
    let mut pipeline = BodyCopies::new(ctx)?;
    {
        let mut graph = pipeline.capture(BodyCopiesParams {
            x: &mut x,
            y: &mut y,
            r: &mut r,
            flag: &flag,
            big: &mut big,
            out: &mut out,
            inp: &mut inp,
        })?;
        graph.launch()?;
        std::mem::forget(graph);
    }
    inp.as_mut_slice()?.fill(9);
    assert_eq!(&*out.as_slice()?, &vec![5u32; N][..]);
    drop(pipeline);
    assert_eq!(read(&stream, &big)?, vec![5u32; N]);
    Ok(())
}

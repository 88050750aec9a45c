//! What an executable graph may be updated from (`GraphExec::update`, `try_update`): never a
//! graph with conditional nodes that has another executable graph alive (the two would share
//! its loops' states, which `Graph::instantiate` prevents; an update let a second executable
//! graph run them), and never a graph one of whose conditional bodies failed to build. A body
//! of another shape is refused as a topology change on both backends (the CPU backend
//! compared only the top level, so it updated in place where CUDA refuses). `Graph::instantiate` refused such a
//! graph, but an update took it: on the CPU backend the unfinished `while` node kept none of
//! its body's memory, so a launch ran the body's copy into pinned memory while a host slice
//! of it was alive (a data race on host memory from safe code), and on CUDA the unfinished
//! loop lacks the kernel that ends it.

use gpu_pipeline::{
    Comparison, Condition, Context, DeviceBuffer, Error, Graph, GraphExec, PinnedBuffer, Stream,
};

/// A graph with one `while` node (one iteration: `counter` is 1, the maximum 1) whose body
/// copies `src` into `dst`; `fail` makes the body fail after adding its copy.
fn one_copy_loop(
    ctx: &Context,
    counter: &DeviceBuffer<u32>,
    src: &DeviceBuffer<u32>,
    dst: &mut PinnedBuffer<u32>,
    fail: bool,
) -> Graph {
    let mut graph = Graph::new(ctx).unwrap();
    let condition = Condition::compare(counter, Comparison::NotEqual, 0u32);
    let built = graph.add_while_node(&[], condition, 1, |body| {
        body.add_copy_dtoh_node(&[], src, dst)?;
        if fail {
            // The lengths differ: refused, after the copy above was added.
            body.add_copy_dtoh_node(&[], counter, dst)?;
        }
        Ok(())
    });
    assert_eq!(built.is_err(), fail, "{:?}", built.err());
    graph
}

/// Both `try_update` and `update` of `exec` from `graph` are refused as invalid arguments of
/// `GraphExec::update`, saying `why`.
fn assert_both_updates_refused(exec: &mut GraphExec, graph: &Graph, why: &str) {
    for err in [
        exec.try_update(graph).map(|_| ()).unwrap_err(),
        exec.update(graph).unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                Error::InvalidArgument {
                    call: "GraphExec::update",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains(why), "{err}");
    }
}

fn an_update_from_a_graph_whose_body_failed_is_refused(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let counter = DeviceBuffer::from_slice(&stream, &[1u32]).unwrap();
    let src = DeviceBuffer::from_slice(&stream, &[7u32; 256]).unwrap();
    let mut first = PinnedBuffer::<u32>::zeros(ctx, 256).unwrap();
    let mut second = PinnedBuffer::<u32>::zeros(ctx, 256).unwrap();
    let good = one_copy_loop(ctx, &counter, &src, &mut first, false);
    let broken = one_copy_loop(ctx, &counter, &src, &mut second, true);
    let mut exec = good.instantiate().unwrap();
    assert_both_updates_refused(
        &mut exec,
        &broken,
        "building a conditional body of this graph failed; build a new graph",
    );
    // The executable graph runs what it ran before, and nothing touches `second`: a host
    // slice of it may be alive across a launch.
    let slice = second.as_mut_slice().unwrap();
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    drop(slice);
    assert!(second.to_vec().unwrap().iter().all(|&v| v == 0));
    drop(exec);
    assert!(first.to_vec().unwrap().iter().all(|&v| v == 7));
}

fn a_graph_with_conditional_nodes_keeps_one_executable_graph_through_updates(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let counter = DeviceBuffer::from_slice(&stream, &[1u32]).unwrap();
    let src = DeviceBuffer::from_slice(&stream, &[7u32; 256]).unwrap();
    let mut out = PinnedBuffer::<u32>::zeros(ctx, 256).unwrap();
    let first = one_copy_loop(ctx, &counter, &src, &mut out, false);
    let second = one_copy_loop(ctx, &counter, &src, &mut out, false);
    let mut exec = first.instantiate().unwrap();
    // `second` has an executable graph of its own: `exec` may not become a second one.
    let own = second.instantiate().unwrap();
    assert_both_updates_refused(
        &mut exec,
        &second,
        "another executable graph of it is alive",
    );
    drop(own);
    // Without one, the update succeeds and `exec` is `second`'s one executable graph.
    assert!(exec.try_update(&second).unwrap().is_success());
    let err = second.instantiate().map(|_| ()).unwrap_err();
    assert!(
        err.to_string().contains("one executable graph at a time"),
        "{err}"
    );
    // Updating again from it is no second executable graph.
    exec.update(&second).unwrap();
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    drop(exec);
    second.instantiate().unwrap();
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 7));
}

fn a_body_of_another_shape_is_a_topology_change(ctx: &Context) {
    let stream = Stream::new(ctx).unwrap();
    let counter = DeviceBuffer::from_slice(&stream, &[1u32]).unwrap();
    let src = DeviceBuffer::from_slice(&stream, &[7u32; 256]).unwrap();
    let mut out = PinnedBuffer::<u32>::zeros(ctx, 256).unwrap();
    let mut spare = PinnedBuffer::<u32>::zeros(ctx, 256).unwrap();
    let one = one_copy_loop(ctx, &counter, &src, &mut out, false);
    let mut two = Graph::new(ctx).unwrap();
    let condition = Condition::compare(&counter, Comparison::NotEqual, 0u32);
    two.add_while_node(&[], condition, 1, |body| {
        let first = body.add_copy_dtoh_node(&[], &src, &mut out)?;
        body.add_copy_dtoh_node(&[first], &src, &mut spare)?;
        Ok(())
    })
    .unwrap();
    let mut exec = one.instantiate().unwrap();
    let verdict = exec.try_update(&two).unwrap();
    assert!(!verdict.is_success(), "{verdict:?}");
    assert!(exec.update(&two).is_err());
    // Still the one-copy body: `spare` stays untouched.
    exec.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    drop(exec);
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 7));
    assert!(spare.to_vec().unwrap().iter().all(|&v| v == 0));
}

#[test]
fn cpu_a_body_of_another_shape_is_a_topology_change() {
    a_body_of_another_shape_is_a_topology_change(&Context::cpu());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_a_body_of_another_shape_is_a_topology_change() {
    a_body_of_another_shape_is_a_topology_change(&Context::cuda(0).expect("a CUDA device"));
}

#[test]
fn cpu_a_graph_with_conditional_nodes_keeps_one_executable_graph_through_updates() {
    a_graph_with_conditional_nodes_keeps_one_executable_graph_through_updates(&Context::cpu());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_a_graph_with_conditional_nodes_keeps_one_executable_graph_through_updates() {
    a_graph_with_conditional_nodes_keeps_one_executable_graph_through_updates(
        &Context::cuda(0).expect("a CUDA device"),
    );
}

#[test]
fn cpu_an_update_from_a_graph_whose_body_failed_is_refused() {
    an_update_from_a_graph_whose_body_failed_is_refused(&Context::cpu());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_an_update_from_a_graph_whose_body_failed_is_refused() {
    an_update_from_a_graph_whose_body_failed_is_refused(&Context::cuda(0).expect("a CUDA device"));
}

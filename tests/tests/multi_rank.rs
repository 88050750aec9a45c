//! Pipelines that communicate, run on simulated ranks (threads, each with its own checked
//! CPU context, pipeline and `World` rank): halo exchanges with `send`/`recv` inside a stage,
//! `all_reduce`, `broadcast`, `all_gather` and `reduce_scatter`, eagerly and replayed from a
//! captured graph, with 1, 2 and 4 ranks. The pipelines and their checks are in
//! `tests/src/multi.rs`; `gpu_multi.rs` runs the same on GPUs.

use gpu_pipeline::{CommStage, Communicator, Context, DeviceBuffer, Error, Stream};
use tests::multi;

/// Runs `rank` on `size` simulated ranks, each with its own checked CPU context.
fn on_ranks(size: usize, rank: impl Fn(&Context, &Communicator) + Sync) {
    let ranks = Communicator::cpu_ranks(size).unwrap();
    let rank = &rank;
    std::thread::scope(|scope| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|comm| scope.spawn(move || rank(&Context::cpu_checked(), &comm)))
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
    });
}

#[test]
fn a_halo_ring_and_a_reduced_sum_on_one_rank() {
    on_ranks(1, |ctx, comm| multi::ring_rank(ctx, comm, 8, 5));
}

#[test]
fn a_halo_ring_and_a_reduced_sum_on_two_ranks() {
    on_ranks(2, |ctx, comm| multi::ring_rank(ctx, comm, 8, 5));
}

#[test]
fn a_halo_ring_and_a_reduced_sum_on_four_ranks() {
    on_ranks(4, |ctx, comm| multi::ring_rank(ctx, comm, 8, 5));
}

#[test]
fn broadcast_gather_scatter_and_reduce_on_two_ranks() {
    on_ranks(2, multi::collectives_rank);
}

#[test]
fn broadcast_gather_scatter_and_reduce_on_four_ranks() {
    on_ranks(4, multi::collectives_rank);
}

/// A rank that skips its step leaves the others' communication unmatched: the CPU backend
/// reports it at their next wait (NCCL would hang).
#[test]
fn an_unmatched_rank_is_an_error_not_a_hang() {
    let world =
        gpu_pipeline::collective::World::with_timeout(2, std::time::Duration::from_millis(300))
            .unwrap();
    let mut comms = world
        .into_comms()
        .unwrap()
        .into_iter()
        .map(Communicator::cpu);
    let (comm, _silent) = (comms.next().unwrap(), comms.next().unwrap());
    let ctx = Context::cpu();
    let stream = Stream::new(&ctx).unwrap();
    let norm = DeviceBuffer::from_slice(&stream, &[1.0f32]).unwrap();
    let mut total = DeviceBuffer::<f32>::zeros(&stream, 1).unwrap();
    let mut group = CommStage::new(&comm, &stream);
    group
        .all_reduce(
            &norm,
            ..,
            &mut total,
            ..,
            gpu_pipeline::collective::ReduceOp::Sum,
        )
        .unwrap();
    group.finish().unwrap();
    let err = stream.synchronize().unwrap_err().to_string();
    assert!(err.contains("did not complete"), "{err}");
}

/// The race detector sees a stage group's accesses: a receive on one stream and a read of
/// the same buffer on another, with no event between them, is reported.
#[test]
fn the_race_detector_sees_communication_that_no_event_orders() {
    let comm = Communicator::cpu_ranks(1).unwrap().remove(0);
    let ctx = Context::cpu_checked();
    let (a, b) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let mut field = DeviceBuffer::<f32>::zeros(&a, 4).unwrap().named("field");
    let mut copy = DeviceBuffer::<f32>::zeros(&a, 4).unwrap();
    a.synchronize().unwrap();
    let mut group = CommStage::new(&comm, &a);
    group.send(&field, 2..4, 0).unwrap();
    group.recv(&mut field, 0..2, 0).unwrap();
    group.finish().unwrap();
    b.copy_dtod(&field, &mut copy).unwrap();
    a.synchronize().unwrap();
    let err = b.synchronize().unwrap_err();
    assert!(matches!(err, Error::Cpu(_)), "{err}");
    assert!(err.to_string().contains("field"), "{err}");
}

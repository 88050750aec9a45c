//! A host read that waits for a stream's work past a failed communication reports the failure
//! instead of returning values the operation never produced (the CPU backend; NCCL's watchdog
//! does the same on GPUs, `gpu_comm_timeout`). The stream's next synchronize reports it too.

use std::time::Duration;

use gpu_pipeline::collective::ReduceOp;
use gpu_pipeline::{CommStage, Communicator, Context, DeviceBuffer, Error, Stream};

#[test]
fn a_read_after_a_mismatched_collective_reports_it() {
    let comms = Communicator::cpu_ranks_with_timeout(2, Duration::from_secs(5)).unwrap();
    std::thread::scope(|scope| {
        let ranks: Vec<_> = comms
            .into_iter()
            .enumerate()
            .map(|(rank, comm)| {
                scope.spawn(move || {
                    let ctx = Context::cpu_checked();
                    let stream = Stream::new(&ctx).unwrap();
                    let mut x = DeviceBuffer::from_slice(&stream, &[1.0f32, 5.0]).unwrap();
                    // The ranks disagree on the operator.
                    let op = if rank == 0 {
                        ReduceOp::Sum
                    } else {
                        ReduceOp::Max
                    };
                    let mut group = CommStage::new(&comm, &stream);
                    group.all_reduce_in_place(&mut x, .., op).unwrap();
                    group.finish().unwrap();
                    let read = x.to_vec(&stream);
                    let synchronized = stream.synchronize();
                    assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
                    (rank, read, synchronized)
                })
            })
            .collect();
        for handle in ranks {
            let (rank, read, synchronized) = handle.join().unwrap();
            match read {
                Err(Error::Communication(failure)) => {
                    assert!(failure.to_string().contains("all_reduce"), "{failure}");
                }
                other => panic!("rank {rank}: the read returned {other:?}"),
            }
            assert!(
                matches!(synchronized, Err(Error::Communication(_))),
                "rank {rank}: the synchronize after it returned {synchronized:?}"
            );
        }
    });
}

//! NCCL between GPUs, one process per GPU as in production: the test launches this very
//! binary once per rank through `gpu_pipeline::launcher` (what `gpu-pipeline-launch` runs),
//! with `GPU_PIPELINE_TEST_ROLE=nccl-worker`; each worker builds its communicator from the
//! launcher's variables (TCP rendezvous over loopback), runs every operation on device
//! buffers and checks the results, then prints a line the launching test looks for.
//!
//! Two ranks on two GPUs; one rank when the machine has one GPU (every operation, with
//! itself as the peer); skipped, saying why, without a driver, a GPU or an NCCL library.
//! Runs from the GPU bundle (`bash .gpu/run`): it finds itself with `current_exe()`.

use gpu_pipeline::collective::ReduceOp;
use gpu_pipeline::nccl::Communicator;
use gpu_pipeline::rendezvous::RankInfo;
use gpu_pipeline::{Backend, CaptureMode, Context, DeviceBuffer, Error, Stream};
use tests::ranks;

const WORKER: &str = "nccl-worker";
const TEST: &str = "nccl_operations_between_processes";

#[test]
#[ignore = "needs a CUDA GPU"]
fn nccl_operations_between_processes() {
    if ranks::is_worker(WORKER) {
        return worker();
    }
    let Some(gpus) = ranks::gpus_or_skip(1) else {
        return;
    };
    if gpus < 2 {
        println!("only one GPU: one rank runs every operation with itself as the peer");
    }
    ranks::launch_ranks(TEST, WORKER, gpus.min(2));
}

/// One rank: every operation, checked.
fn worker() {
    let me = RankInfo::from_env().expect("the launcher's variables");
    let (rank, size) = (me.rank, me.world_size);
    assert_eq!(
        std::env::var("NCCL_NVLS_ENABLE").as_deref(),
        Ok("0"),
        "the launcher keeps NVLink multicast off"
    );
    let ctx = Context::cuda(me.local_rank).expect("this rank's GPU");
    let comm = Communicator::from_env(&ctx).expect("the communicator");
    assert_eq!((comm.rank(), comm.size()), (rank, size));
    let stream = Stream::non_blocking(&ctx).unwrap();
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    let step = |name: &str| println!("rank {rank}: {name} ok");

    // all_reduce: a large f32 sum (several NCCL chunks), an i32 max, an f64 mean.
    let n = 1 << 20;
    let mine: Vec<f32> = (0..n).map(|i| (rank + 1) as f32 + (i % 7) as f32).collect();
    let send = DeviceBuffer::from_slice(&stream, &mine).unwrap();
    let mut sum = DeviceBuffer::<f32>::zeros(&stream, n).unwrap();
    comm.all_reduce(&stream, &send, &mut sum, ReduceOp::Sum)
        .unwrap();
    let ranks_sum = (size * (size + 1) / 2) as f32;
    let got = sum.to_vec(&stream).unwrap();
    for (i, &v) in got.iter().enumerate() {
        assert_eq!(v, ranks_sum + (size * (i % 7)) as f32, "sum at {i}");
    }
    let mut max = DeviceBuffer::from_slice(&stream, &[rank as i32 * 3, -(rank as i32)]).unwrap();
    comm.all_reduce_in_place(&stream, &mut max, ReduceOp::Max)
        .unwrap();
    assert_eq!(max.to_vec(&stream).unwrap(), [(size as i32 - 1) * 3, 0]);
    let mut mean = DeviceBuffer::from_slice(&stream, &[rank as f64 * 2.0]).unwrap();
    comm.all_reduce_in_place(&stream, &mut mean, ReduceOp::Avg)
        .unwrap();
    assert_eq!(mean.to_vec(&stream).unwrap(), [(size - 1) as f64]);
    step("all_reduce");

    // broadcast in place from the last rank, and from rank 0's separate buffer.
    let mut b = DeviceBuffer::from_slice(&stream, &[rank as u64 + 100; 5]).unwrap();
    comm.broadcast(&stream, &mut b, size - 1).unwrap();
    assert_eq!(b.to_vec(&stream).unwrap(), [size as u64 + 99; 5]);
    let src = DeviceBuffer::from_slice(&stream, &[7u8, 8, 9]).unwrap();
    let mut dst = DeviceBuffer::<u8>::zeros(&stream, 3).unwrap();
    comm.broadcast_from(&stream, &src, &mut dst, 0).unwrap();
    assert_eq!(dst.to_vec(&stream).unwrap(), [7, 8, 9]);
    step("broadcast");

    // all_gather and reduce_scatter.
    let part =
        DeviceBuffer::from_slice(&stream, &[rank as i64 * 10, rank as i64 * 10 + 1]).unwrap();
    let mut all = DeviceBuffer::<i64>::zeros(&stream, 2 * size).unwrap();
    comm.all_gather(&stream, &part, &mut all).unwrap();
    let expected: Vec<i64> = (0..size as i64)
        .flat_map(|r| [r * 10, r * 10 + 1])
        .collect();
    assert_eq!(all.to_vec(&stream).unwrap(), expected);
    let blocks: Vec<u32> = (0..3 * size as u32).map(|i| i + rank as u32).collect();
    let blocks = DeviceBuffer::from_slice(&stream, &blocks).unwrap();
    let mut share = DeviceBuffer::<u32>::zeros(&stream, 3).unwrap();
    comm.reduce_scatter(&stream, &blocks, &mut share, ReduceOp::Sum)
        .unwrap();
    let offset = (size * (size - 1) / 2) as u32;
    let expected: Vec<u32> = (0..3)
        .map(|j| (3 * rank as u32 + j) * size as u32 + offset)
        .collect();
    assert_eq!(share.to_vec(&stream).unwrap(), expected);
    step("all_gather and reduce_scatter");

    // A send/recv ring in one group, then ungrouped pairs ordered so blocking sends meet
    // their recvs (two ranks: 0 sends first, 1 receives first).
    let token = DeviceBuffer::from_slice(&stream, &[rank as f32; 64]).unwrap();
    let mut from_prev = DeviceBuffer::<f32>::zeros(&stream, 64).unwrap();
    comm.group(|g| {
        g.send(&stream, &token, next)?;
        g.recv(&stream, &mut from_prev, prev)
    })
    .unwrap();
    assert_eq!(from_prev.to_vec(&stream).unwrap(), [prev as f32; 64]);
    if size == 2 {
        let mut back = DeviceBuffer::<f32>::zeros(&stream, 64).unwrap();
        if rank == 0 {
            comm.send(&stream, &token, 1).unwrap();
            comm.recv(&stream, &mut back, 1).unwrap();
        } else {
            comm.recv(&stream, &mut back, 0).unwrap();
            comm.send(&stream, &token, 0).unwrap();
        }
        assert_eq!(back.to_vec(&stream).unwrap(), [(1 - rank) as f32; 64]);
    }
    step("send/recv");

    // A periodic halo exchange on views of one field: rows 0 and 3 are halos.
    let nx = 32;
    let rows: Vec<f32> = (0..4 * nx).map(|i| (rank * 10 + i / nx) as f32).collect();
    let mut field = DeviceBuffer::from_slice(&stream, &rows).unwrap();
    {
        let (mut top, rest) = field.split_at_mut(nx).unwrap();
        let (interior, mut bottom) = rest.split_at_mut(2 * nx).unwrap();
        let first = interior.slice(..nx).unwrap();
        let last = interior.slice(nx..).unwrap();
        comm.group(|g| {
            g.recv(&stream, &mut top, prev)?;
            g.send(&stream, &last, next)?;
            g.recv(&stream, &mut bottom, next)?;
            g.send(&stream, &first, prev)
        })
        .unwrap();
    }
    let halo = field.to_vec(&stream).unwrap();
    assert_eq!(
        halo[0],
        (prev * 10 + 2) as f32,
        "top halo = prev's last interior row"
    );
    assert_eq!(
        halo[3 * nx],
        (next * 10 + 1) as f32,
        "bottom halo = next's first row"
    );
    assert_eq!(halo[nx], (rank * 10 + 1) as f32, "interior untouched");
    step("halo exchange");

    // Errors are values, checked before NCCL sees anything.
    let mut short = DeviceBuffer::<f32>::zeros(&stream, 3).unwrap();
    let err = comm
        .all_reduce(&stream, &token, &mut short, ReduceOp::Sum)
        .unwrap_err();
    assert!(err.to_string().contains("must be equal"), "{err}");
    let err = comm.send(&stream, &token, size).unwrap_err();
    assert!(
        err.to_string().contains("not one of the communicator's"),
        "{err}"
    );
    let err = comm
        .all_reduce_in_place(&stream, &mut max, ReduceOp::Avg)
        .unwrap_err();
    assert!(err.to_string().contains("floating-point"), "{err}");
    let cpu = Context::cpu();
    assert_eq!(cpu.backend(), Backend::Cpu);
    let cpu_stream = Stream::new(&cpu).unwrap();
    let err = comm
        .all_reduce_in_place(&cpu_stream, &mut short, ReduceOp::Sum)
        .unwrap_err();
    assert!(matches!(err, Error::BackendMismatch { .. }), "{err}");
    let err = comm
        .group(|_| comm.send(&stream, &token, next))
        .unwrap_err();
    assert!(err.to_string().contains("is open on this thread"), "{err}");
    comm.async_error().unwrap();
    step("argument errors");

    // A captured step (after the warm-up above, with the same peers): an all-reduce and a
    // grouped ring. The graph keeps the communicator alive after ours is dropped.
    let mut x = DeviceBuffer::from_slice(&stream, &[1.0f64; 16]).unwrap();
    let mut ring = DeviceBuffer::<f32>::zeros(&stream, 64).unwrap();
    stream.synchronize().unwrap();
    stream.begin_capture(CaptureMode::ThreadLocal).unwrap();
    comm.all_reduce_in_place(&stream, &mut x, ReduceOp::Sum)
        .unwrap();
    comm.group(|g| {
        g.send(&stream, &token, next)?;
        g.recv(&stream, &mut ring, prev)
    })
    .unwrap();
    let graph = stream.end_capture().unwrap();
    assert!(
        graph.retained_count() >= 4,
        "the graph keeps x, token, ring and the communicator: {}",
        graph.retained_count()
    );
    let exec = graph.instantiate().unwrap();
    drop(comm);
    let launches = 10;
    for _ in 0..launches {
        exec.launch(&stream).unwrap();
    }
    stream.synchronize().unwrap();
    assert_eq!(
        x.to_vec(&stream).unwrap(),
        [(size as f64).powi(launches); 16]
    );
    assert_eq!(ring.to_vec(&stream).unwrap(), [prev as f32; 64]);
    drop(exec);
    drop(graph);
    step("captured graph");

    println!("{}", ranks::done_line(WORKER, rank, size));
}

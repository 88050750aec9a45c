//! The CPU backend orders the launches of one executable graph, as `cuGraphLaunch` does,
//! without holding the graph while a full stream queue blocks a launch: a thread blocked
//! launching the graph on one stream does not block another thread's launch of it on
//! another stream (which would then never set the flag the first stream waits for).

use std::sync::mpsc;
use std::time::Duration;

use gpu_pipeline::{CaptureMode, Context, FlagCell, Stream, WaitCondition};

#[test]
fn a_launch_blocked_by_a_full_queue_does_not_block_the_graphs_launch_elsewhere() {
    let (done, finished) = mpsc::channel();
    // On a thread of its own, so a regression fails the test instead of hanging it.
    std::thread::spawn(move || {
        let ctx = Context::cpu_checked();
        let (a, b, c) = (
            Stream::new(&ctx).unwrap(),
            Stream::new(&ctx).unwrap(),
            Stream::new(&ctx).unwrap(),
        );
        let flag = FlagCell::<u32>::new(&ctx, 0).unwrap();
        let graph = c
            .capture(CaptureMode::ThreadLocal, |s| {
                s.wait_value_32(&flag, WaitCondition::GreaterOrEqual, 1)
            })
            .unwrap();
        let exec = graph.instantiate().unwrap();
        std::thread::scope(|scope| {
            // More launches than a queue holds: this thread blocks until the flag is set.
            scope.spawn(|| {
                for _ in 0..2000 {
                    exec.launch(&a).unwrap();
                }
            });
            std::thread::sleep(Duration::from_millis(200));
            exec.launch(&b).unwrap();
            flag.store(1);
        });
        a.synchronize().unwrap();
        b.synchronize().unwrap();
        drop(exec);
        assert!(ctx.races().is_empty(), "{:#?}", ctx.races());
        let _ = done.send(());
    });
    assert!(
        finished.recv_timeout(Duration::from_secs(20)).is_ok(),
        "the launches did not finish: a blocked launch held the graph"
    );
}

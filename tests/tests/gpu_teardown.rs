//! Teardown after refused work on two GPUs (issue 21): a managed buffer of device 0 given to
//! a launch on device 1 is refused, and the process must then end, whatever order its
//! handles are dropped in. Each scenario runs in a child process (this binary again, with
//! `GPU_PIPELINE_TEARDOWN_SCENARIO` naming it), so a hang at process exit (the driver's own
//! teardown) shows up too: the child must exit with status 0 within a minute.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpu_pipeline::{Context, DeviceBuffer, Graph, ManagedBuffer, Module, Stream};

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");
const SCENARIO_ENV: &str = "GPU_PIPELINE_TEARDOWN_SCENARIO";
type AddScalar = (u32, f32, &'static mut [f32]);

/// The refusals of device 0's managed memory on device 1, then the drops in `order`.
fn scenario(order: &str) {
    let ctx0 = Context::cuda(0).expect("device 0");
    let ctx1 = Context::cuda(1).expect("device 1");
    let stream1 = Stream::non_blocking(&ctx1).unwrap();
    let module = Module::load_ptx(&ctx1, PTX).unwrap();
    // SAFETY: add_scalar(unsigned n, float value, float* data) adds `value` to data[i] for
    // i < n; every launch below passes n equal to the buffer's length.
    let kernel = unsafe {
        module
            .function("add_scalar")
            .unwrap()
            .typed::<AddScalar>()
            .unwrap()
    };
    let n = 256u32;
    let mut managed0 = ManagedBuffer::<f32>::zeros(&ctx0, n as usize).unwrap();
    let mut own1 = DeviceBuffer::<f32>::zeros(&stream1, n as usize).unwrap();
    let grid = gpu_pipeline::LaunchConfig::for_elements(n, 256);
    assert!(
        kernel
            .launch(&stream1, grid, (n, 1.0f32, &mut managed0))
            .is_err()
    );
    assert!(stream1.copy_dtod(&own1, &mut managed0).is_err());
    let mut graph1 = Graph::new(&ctx1).unwrap();
    assert!(
        graph1
            .add_kernel_node(&[], &kernel, grid, (n, 1.0f32, &mut managed0))
            .is_err()
    );
    kernel
        .launch(&stream1, grid, (n, 2.0f32, &mut own1))
        .unwrap();
    match order {
        // Handles dropped in reverse order of creation, as a scope ends.
        "scope" => {}
        // Contexts first, buffers after.
        "contexts-first" => {
            drop(ctx0);
            drop(ctx1);
        }
        // No synchronize at all, and the managed buffer last.
        "managed-last" => {
            drop(graph1);
            drop(own1);
            drop(kernel);
            drop(module);
            drop(stream1);
            assert!(managed0.as_slice().unwrap().iter().all(|&x| x == 0.0));
            drop(managed0);
            return;
        }
        other => panic!("unknown scenario {other}"),
    }
    stream1.synchronize().unwrap();
    assert!(own1.to_vec(&stream1).unwrap().iter().all(|&x| x == 2.0));
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn refused_device_0_managed_memory_on_device_1_lets_the_process_end() {
    if let Ok(order) = std::env::var(SCENARIO_ENV) {
        scenario(&order);
        println!("scenario {order}: done");
        return;
    }
    let count = gpu_pipeline::Device::count().unwrap_or(0);
    if count < 2 {
        println!("skipped: {count} CUDA device(s) visible, this test needs two");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for order in ["scope", "contexts-first", "managed-last"] {
        let mut child = Command::new(&exe)
            .args([
                "refused_device_0_managed_memory_on_device_1_lets_the_process_end",
                "--exact",
                "--include-ignored",
                "--nocapture",
            ])
            .env(SCENARIO_ENV, order)
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("scenario {order}: the process had not ended after 60 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "scenario {order}: {status}");
    }
}

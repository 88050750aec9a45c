//! A ring halo exchange over a device array in one process (`devices { gpu[N] }`): each
//! device's kernel writes its edge rows straight into its neighbours' halo buffers through
//! peer access (`peer(fields)`), with no copy between them. The same pipeline runs on
//! simulated CPU-backend devices (`tests/tests/device_arrays.rs`, in CI, with the race
//! detector on) and on GPUs (`tests/tests/gpu_device_arrays.rs`), each run checked against
//! [`reference()`], the same steps computed on the host.

use gpu_pipeline::{Context, DeviceBuffer, Stream, gpu_pipeline};

use crate::multi::cpu;

/// One pipeline per device count: a device array's length is a constant.
macro_rules! device_ring {
    ($pipeline:ident, $params:ident, $run:ident, $n:literal) => {
        gpu_pipeline! {
            /// Each device's block of `rows` rows of `nx` and its halo buffer (its upper
            /// neighbour's last row, then its lower neighbour's first): the block grows by
            /// the device's number plus one and the halos are cleared; each device's kernel
            /// then adds its first row into its upper neighbour's halo and its last row into
            /// its lower neighbour's, on the neighbour's memory; finally each device mixes
            /// half of each halo into the row beside it.
            pub pipeline $pipeline {
                devices { gpu[$n] }
                streams { main on gpu[0], work[$n] on gpu[..] }
                unsafe kernels k = ptx(include_str!("../../runtime/kernels/test_kernels.ptx")) {
                    fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) cpu = cpu::add_scalar;
                    fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]) cpu = cpu::saxpy;
                }
                params {
                    nx: usize,
                    rows: usize,
                    fields: &mut [DeviceBuffer<f32>] on gpu[..],
                    halos: &mut [DeviceBuffer<f32>] on gpu[..],
                }
                for i in 0..$n {
                    stage grow on work[i] {
                        launch k::add_scalar((rows * nx) as u32, (i + 1) as f32, fields[i])
                            grid ((rows * nx) as u32).div_ceil(256) block 256;
                        fill halos[i] = 0.0;
                    }
                }
                for i in 0..$n {
                    stage send on work[i] {
                        launch k::saxpy(nx as u32, 1.0, fields[i][..nx],
                                        halos[(i + $n - 1) % $n][nx..])
                            grid (nx as u32).div_ceil(256) block 256 peer(halos);
                        launch k::saxpy(nx as u32, 1.0, fields[i][(rows - 1) * nx..],
                                        halos[(i + 1) % $n][..nx])
                            grid (nx as u32).div_ceil(256) block 256 peer(halos);
                    }
                }
                for i in 0..$n {
                    stage mix on work[i] {
                        launch k::saxpy(nx as u32, 0.5, halos[i][..nx], fields[i][..nx])
                            grid (nx as u32).div_ceil(256) block 256;
                        launch k::saxpy(nx as u32, 0.5, halos[i][nx..], fields[i][(rows - 1) * nx..])
                            grid (nx as u32).div_ceil(256) block 256;
                    }
                }
            }
        }

        /// Runs the ring on `devices`: two eager steps, then a captured step replayed three
        /// times, each checked against [`reference()`]; the race detector (on checked CPU
        /// devices) must stay clean.
        pub fn $run(devices: &[Context; $n], nx: usize, rows: usize) {
            let streams: Vec<Stream> = devices.iter().map(|d| Stream::new(d).unwrap()).collect();
            let alloc = |what: &str, len: usize| -> Vec<DeviceBuffer<f32>> {
                streams
                    .iter()
                    .enumerate()
                    .map(|(d, s)| {
                        DeviceBuffer::<f32>::zeros(s, len)
                            .unwrap()
                            .named(&format!("{what}[{d}]"))
                    })
                    .collect()
            };
            let mut fields = alloc("fields", rows * nx);
            let mut halos = alloc("halos", 2 * nx);
            for s in &streams {
                s.synchronize().unwrap();
            }
            let mut ring = $pipeline::new(devices).unwrap();
            assert_eq!(ring.devices().len(), $n);
            let read = |buffers: &[DeviceBuffer<f32>]| -> Vec<Vec<f32>> {
                buffers
                    .iter()
                    .zip(&streams)
                    .map(|(f, s)| f.to_vec(s).unwrap())
                    .collect()
            };
            ring.run_steps($params { nx, rows, fields: &mut fields, halos: &mut halos }, 2)
                .unwrap()
                .wait()
                .unwrap();
            assert_eq!((read(&fields), read(&halos)), reference($n, nx, rows, 2), "after 2 eager steps");
            {
                let mut graph = ring.capture($params { nx, rows, fields: &mut fields, halos: &mut halos }).unwrap();
                for _ in 0..3 {
                    graph.launch().unwrap();
                }
                graph.synchronize().unwrap();
            }
            assert_eq!((read(&fields), read(&halos)), reference($n, nx, rows, 5), "after 3 replays");
            for d in devices {
                assert!(d.races().is_empty(), "{:?}", d.races());
            }
        }
    };
}

device_ring!(DeviceRing2, DeviceRing2Params, device_ring_2, 2);
device_ring!(DeviceRing3, DeviceRing3Params, device_ring_3, 3);
device_ring!(DeviceRing4, DeviceRing4Params, device_ring_4, 4);

/// `steps` steps of the ring on `devices` devices, on the host: what every device's block
/// and halo buffer must hold afterwards.
pub fn reference(
    devices: usize,
    nx: usize,
    rows: usize,
    steps: usize,
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let mut fields = vec![vec![0.0f32; rows * nx]; devices];
    let mut halos = vec![vec![0.0f32; 2 * nx]; devices];
    let last = (rows - 1) * nx;
    for _ in 0..steps {
        for (i, (field, halo)) in fields.iter_mut().zip(&mut halos).enumerate() {
            field.iter_mut().for_each(|v| *v += (i + 1) as f32);
            halo.fill(0.0);
        }
        for (i, field) in fields.iter().enumerate() {
            let (up, down) = ((i + devices - 1) % devices, (i + 1) % devices);
            for x in 0..nx {
                halos[up][nx + x] += field[x];
                halos[down][x] += field[last + x];
            }
        }
        for (field, halo) in fields.iter_mut().zip(&halos) {
            for x in 0..nx {
                field[x] += 0.5 * halo[x];
                field[last + x] += 0.5 * halo[nx + x];
            }
        }
    }
    (fields, halos)
}

//! A device array: a stream per device (`work[4] on gpu[..]`), a buffer array with element
//! `k` on `gpu[k]`, one buffer on one element (`on gpu[1]`), a loop over the devices, kernels
//! that write a neighbour's halo through peer access (`peer(halos)`), and a peer copy.

use gpu_pipeline::{Context, DeviceBuffer, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Ring {
        devices { gpu[4] }
        streams { main on gpu[0], work[4] on gpu[..] }
        unsafe kernels k = ptx("") {
            fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n]);
        }
        params {
            n: usize,
            fields: &mut [DeviceBuffer<f32>] on gpu[..],
            halos: &mut [DeviceBuffer<f32>] on gpu[..],
            probe: &mut DeviceBuffer<f32> on gpu[1],
        }
        for i in 0..4 {
            stage send on work[i] {
                launch k::saxpy(n as u32, 1.0, fields[i][..n], halos[(i + 1) % 4][..n])
                    grid (n as u32).div_ceil(256) block 256 peer(halos);
            }
        }
        for i in 0..4 {
            stage mix on work[i] {
                launch k::saxpy(n as u32, 0.5, halos[i][..n], fields[i][..n])
                    grid (n as u32).div_ceil(256) block 256;
            }
        }
        stage sample on work[1] {
            launch k::saxpy(n as u32, 1.0, fields[0][..n], probe) grid 1 block 1 peer(fields);
        }
        stage fetch on main {
            copy probe -> fields[0];
        }
    }
}

fn main() {
    let devices: [Context; 4] = Context::cpu_devices(4).try_into().unwrap();
    let _ = Ring::new(&devices);
}

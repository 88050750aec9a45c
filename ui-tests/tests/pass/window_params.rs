//! Window params: a ring exchange that writes the neighbours' halos (`on rank`) and then reads
//! its own, a Jacobi-like step with two windows, each launch reading one window here and
//! writing the other on the neighbours (the first read of `a` stands on
//! `Window::mark_written`), ranks from params or expressions, ranges from params, a kind of
//! step of its own per exchange, and a window still passed whole to a `call`.

use gpu_pipeline::{DeviceBuffer, Result, TypedStream, Window, gpu_pipeline};

gpu_pipeline! {
    pub pipeline Exchanges {
        streams { main, side }
        unsafe kernels k = ptx(include_str!("../../../tests/kernels/language.ptx")) {
            fn affine(n: u32, a: f32, b: f32, src: &[f32; n], dst: &mut [f32; n]);
            fn affine2(n: u32, a: f32, b: f32, src: &[f32; n], up: &mut [f32; n],
                       down: &mut [f32; n]);
        }
        params {
            n: u32,
            up: usize,
            size: usize,
            ring: &mut Window<f32>,
            a: &mut Window<f32>,
            b: &mut Window<f32>,
            base: &DeviceBuffer<f32>,
            seen: &mut DeviceBuffer<f32>,
        }
        step ring_step {
            stage store on main {
                launch k::affine2(n, 1.0, 0.0, base, ring[n..2 * n] on rank up,
                                  ring[..n] on rank (up + 2) % size)
                    grid n.div_ceil(256) block 256;
            }
            stage load on side {
                launch k::affine(2 * n, 1.0, 0.0, ring, seen) grid (2 * n).div_ceil(256) block 256;
            }
        }
        step jacobi {
            stage a_to_b on main {
                launch k::affine2(n, 1.0, 0.0, a[..n], b[n..] on rank up,
                                  b[..n] on rank (up + 2) % size)
                    grid n.div_ceil(256) block 256;
            }
            stage b_to_a on main {
                launch k::affine2(n, 1.0, 0.0, b[n..2 * n], a[n..] on rank up,
                                  a[..n] on rank (up + 2) % size)
                    grid n.div_ceil(256) block 256;
            }
        }
        step by_hand {
            stage swap_halos on main {
                call exchange(ring) writes(ring);
            }
        }
    }
}

fn exchange(_stream: &TypedStream<'_, ExchangesMain>, _ring: &mut Window<f32>) -> Result<()> {
    Ok(())
}

fn main() {}

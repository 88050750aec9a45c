//! `half::f16` and `half::bf16` (feature `half`) as buffer elements and kernel scalars: a
//! pipeline whose kernels take f16/bf16 scalars and buffers, run eagerly and captured with an
//! f16 scalar changed in place, checked against exact references (every value is chosen so
//! that f32 arithmetic rounded back to 16 bits is exact). CPU backend in CI; the same on a GPU.

use gpu_pipeline::half::{bf16, f16};
use gpu_pipeline::{
    Context, DeviceBuffer, DeviceRepr, KernelParam, ParamLayout, PinnedBuffer, Stream, gpu_pipeline,
};

/// CPU implementations of `runtime/kernels/half_kernels.cu`: f32 arithmetic, rounded to
/// nearest even on the way back, as the kernels do.
mod cpu {
    use gpu_pipeline::half::{bf16, f16};

    pub fn scale_offset_f16(n: u32, factor: f16, offset: f16, data: &mut [f16]) {
        for v in &mut data[..n as usize] {
            *v = f16::from_f32(v.to_f32() * factor.to_f32() + offset.to_f32());
        }
    }

    pub fn scale_offset_bf16(n: u32, factor: bf16, offset: bf16, data: &mut [bf16]) {
        for v in &mut data[..n as usize] {
            *v = bf16::from_f32(v.to_f32() * factor.to_f32() + offset.to_f32());
        }
    }

    pub fn widen_f16(n: u32, input: &[f16], out: &mut [f32]) {
        for (o, i) in out[..n as usize].iter_mut().zip(input) {
            *o = i.to_f32();
        }
    }
}

gpu_pipeline! {
    /// An f16 field and a bf16 field scaled on two streams; the f16 one widened to f32 and
    /// copied back, the bf16 one copied back as it is.
    pub pipeline Halves {
        streams { a, b(non_blocking) }
        unsafe kernels k = ptx(include_str!("../../runtime/kernels/half_kernels.ptx")) {
            fn scale_offset_f16(n: u32, factor: f16, offset: f16, data: &mut [f16; unbounded])
                cpu = cpu::scale_offset_f16;
            fn scale_offset_bf16(n: u32, factor: bf16, offset: bf16, data: &mut [bf16; unbounded])
                cpu = cpu::scale_offset_bf16;
            fn widen_f16(n: u32, input: &[f16; unbounded], out: &mut [f32; unbounded]) cpu = cpu::widen_f16;
        }
        params {
            n: u32,
            factor: f16,
            offset: f16,
            factor_b: bf16,
            offset_b: bf16,
            h: &mut DeviceBuffer<f16>,
            wide: &mut DeviceBuffer<f32>,
            hb: &mut DeviceBuffer<bf16>,
            out: &mut PinnedBuffer<f32>,
            out_b: &mut PinnedBuffer<bf16>,
        }
        stage scale_h on a {
            launch k::scale_offset_f16(n, factor, offset, h) grid n.div_ceil(128) block 128;
            launch k::widen_f16(n, h, wide) grid n.div_ceil(128) block 128;
            copy wide -> out;
        }
        stage scale_b on b {
            launch k::scale_offset_bf16(n, factor_b, offset_b, hb) grid n.div_ceil(128) block 128;
            copy hb -> out_b;
        }
    }
}

const N: u32 = 1000;

/// Integers 0..1000 in f16 (exact up to 2048), 0..64 in bf16 (exact up to 256).
fn inputs() -> (Vec<f16>, Vec<bf16>) {
    let h = (0..N).map(|i| f16::from_f32(i as f32)).collect();
    let b = (0..N).map(|i| bf16::from_f32((i % 64) as f32)).collect();
    (h, b)
}

/// x/2 + 3 (f16) and x/2 + 1 (bf16): every intermediate has at most 11 (f16) or 8 (bf16)
/// significant bits, so the 16-bit results are exact.
fn params<'a>(
    h: &'a mut DeviceBuffer<f16>,
    wide: &'a mut DeviceBuffer<f32>,
    hb: &'a mut DeviceBuffer<bf16>,
    out: &'a mut PinnedBuffer<f32>,
    out_b: &'a mut PinnedBuffer<bf16>,
) -> HalvesParams<'a> {
    HalvesParams {
        n: N,
        factor: f16::from_f32(0.5),
        offset: f16::from_f32(3.0),
        factor_b: bf16::from_f32(0.5),
        offset_b: bf16::from_f32(1.0),
        h,
        wide,
        hb,
        out,
        out_b,
    }
}

fn step(values: &mut [f64], factor: f64, offset: f64) {
    for v in values {
        *v = *v * factor + offset;
    }
}

fn eager_and_captured_steps_are_exact(ctx: &Context) {
    let stream = Stream::non_blocking(ctx).unwrap();
    let (h0, b0) = inputs();
    let mut h = DeviceBuffer::from_slice(&stream, &h0).unwrap();
    let mut hb = DeviceBuffer::from_slice(&stream, &b0).unwrap();
    let mut wide = DeviceBuffer::<f32>::zeros(&stream, N as usize).unwrap();
    let mut out = PinnedBuffer::<f32>::zeros(ctx, N as usize).unwrap();
    let mut out_b = PinnedBuffer::<bf16>::zeros(ctx, N as usize).unwrap();
    stream.synchronize().unwrap();
    let mut want_h: Vec<f64> = h0.iter().map(|v| v.to_f64()).collect();
    let mut want_b: Vec<f64> = b0.iter().map(|v| v.to_f64()).collect();
    let check = |out: &PinnedBuffer<f32>, out_b: &PinnedBuffer<bf16>, h: &[f64], b: &[f64]| {
        let got: Vec<f64> = out.to_vec().unwrap().iter().map(|&v| v as f64).collect();
        assert_eq!(got, h);
        let got_b: Vec<f64> = out_b.to_vec().unwrap().iter().map(|v| v.to_f64()).collect();
        assert_eq!(got_b, b);
    };

    let mut pipeline = Halves::new(ctx).unwrap();
    // x/2 + 3 and x/2 + 1: every intermediate has at most 11 (f16) or 8 (bf16) significant
    // bits, so the 16-bit results are exact.
    pipeline
        .run(params(&mut h, &mut wide, &mut hb, &mut out, &mut out_b))
        .unwrap()
        .wait()
        .unwrap();
    step(&mut want_h, 0.5, 3.0);
    step(&mut want_b, 0.5, 1.0);
    check(&out, &out_b, &want_h, &want_b);

    {
        let mut graph = pipeline
            .capture(params(&mut h, &mut wide, &mut hb, &mut out, &mut out_b))
            .unwrap();
        graph.launch().unwrap();
        step(&mut want_h, 0.5, 3.0);
        step(&mut want_b, 0.5, 1.0);
        // The f16 scalar changes in the instantiated graph: x * 2 - 6 undoes x / 2 + 3.
        graph.set_factor(f16::from_f32(2.0)).unwrap();
        graph.set_offset(f16::from_f32(-6.0)).unwrap();
        graph.launch().unwrap();
        step(&mut want_h, 2.0, -6.0);
        step(&mut want_b, 0.5, 1.0);
        graph.synchronize().unwrap();
    }
    check(&out, &out_b, &want_h, &want_b);
    assert_eq!(
        h.to_vec(&stream)
            .unwrap()
            .iter()
            .map(|v| v.to_f64())
            .collect::<Vec<_>>(),
        want_h
    );
}

#[test]
fn cpu_eager_and_captured_steps_are_exact() {
    let ctx = Context::cpu_checked();
    eager_and_captured_steps_are_exact(&ctx);
    assert!(ctx.races().is_empty(), "{:?}", ctx.races());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_eager_and_captured_steps_are_exact() {
    eager_and_captured_steps_are_exact(&Context::cuda(0).unwrap());
}

/// CUDA's `__half` and `__nv_bfloat16` are 2 bytes, 2-byte aligned; so are the scalars.
#[test]
fn half_scalars_have_the_c_layout() {
    fn layout<T: DeviceRepr + KernelParam>() -> ParamLayout {
        T::LAYOUT
    }
    let two = ParamLayout { size: 2, align: 2 };
    assert_eq!(layout::<f16>(), two);
    assert_eq!(layout::<bf16>(), two);
    assert_eq!(<&[f16] as KernelParam>::LAYOUT, ParamLayout::of::<u64>());
}

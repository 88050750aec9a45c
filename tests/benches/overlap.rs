//! Copy/compute overlap: a chunked copy-in, compute, copy-out pass over 64 MiB and 1 GiB of
//! `f32`, against the pinned-copy limit measured in the same run.
//!
//! | case | work per pass |
//! | --- | --- |
//! | `H2D alone` | one async copy of the whole array, pinned host → device, one stream |
//! | `D2H alone` | one async copy of the whole array, device → pinned host, one stream |
//! | `H2D + D2H at once` | both copies at the same time on two streams (bytes of both) |
//! | `generated, 3 streams` | [`Chunked16`]: 16 chunks, upload on `h2d`, `add_scalar` on `compute`, download on `d2h`; one eager step |
//! | `generated, graph replay` | the same step captured once, one replay per pass |
//! | `by hand, 3 streams` | the same calls and events written against the runtime |
//! | `generated, 1 stream` | [`Serial16`]: the same stages all on one stream |
//!
//! The chunked step is one pipeline step over all 16 chunks: stage `up_i` copies chunk `i` in
//! on `h2d`, `k_i` runs `add_scalar` on it in place on `compute`, `down_i` copies it out on
//! `d2h`. Every chunk has its own pinned source, device buffer and pinned destination, so
//! the macro orders only `up_i → k_i → down_i` (two events per chunk) and the three engines
//! (H2D copy, SMs, D2H copy) work on different chunks at once, with no host synchronisation
//! inside a pass. Achieved bandwidth counts bytes in plus bytes out over the pass time; its
//! ratio to the one-way (H2D) limit can approach 2 when the two copy engines run in
//! parallel, and its ratio to `H2D + D2H at once` approaches 1.
//!
//! Each pass is timed with the host clock around enqueue + synchronize; every case runs once
//! to warm up, then `REPS` times (cases of one table interleaved), and the table shows
//! medians. Every variant's output is checked exactly (`x + 1.5`) after poisoning the
//! destinations with NaN. Without a GPU it says so and exits successfully.
//!
//! `cargo bench -p tests --bench overlap` (`-- --check-host` runs the same code on the checked
//! host backend at a tiny size and fails on any race); on the GPU machine
//! `bash .gpu/run bench overlap`. Results also go to `target/bench/overlap.json`.

use std::time::{Duration, Instant};

use gpu_pipeline::{
    Bound, Bounds, Context, DeviceBuffer, Event, EventFlags, HostKernel, LaunchConfig, Module,
    PinnedBuffer, Stream, TypedKernel, gpu_pipeline,
};

/// Chunks per pass.
pub const CHUNKS: usize = 16;
/// What `add_scalar` adds: exact in `f32` for the inputs below.
pub const VALUE: f32 = 1.5;
/// The test kernels, embedded at compile time.
const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");

/// Any error.
pub type BoxResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;
/// `add_scalar`'s signature.
pub type AddScalar = (u32, f32, &'static mut [f32]);

/// Host implementation of `add_scalar` (what the host backend runs for one launch).
pub fn add_scalar_host(n: u32, value: f32, data: &mut [f32]) {
    for x in &mut data[..n as usize] {
        *x += value;
    }
}

/// The buffers of one pass: per chunk a pinned source, a device buffer and a pinned
/// destination.
#[derive(Debug)]
pub struct Chunks {
    /// Pinned inputs.
    pub src: [PinnedBuffer<f32>; CHUNKS],
    /// Device buffers, one per chunk (the kernel works in place).
    pub dev: [DeviceBuffer<f32>; CHUNKS],
    /// Pinned outputs.
    pub dst: [PinnedBuffer<f32>; CHUNKS],
    /// Elements per chunk.
    pub len: usize,
}

fn array<T, const N: usize>(items: Vec<T>) -> BoxResult<[T; N]> {
    items
        .try_into()
        .map_err(|_| "wrong number of chunks".into())
}

/// Element `i` of the input: multiples of 0.25 in [-100, 153], so `x + 1.5` is exact.
fn input(i: usize) -> f32 {
    (i % 1013) as f32 * 0.25 - 100.0
}

impl Chunks {
    /// `CHUNKS` chunks of `len` elements, sources filled with [`input`].
    pub fn new(ctx: &Context, len: usize) -> BoxResult<Chunks> {
        let mut src = Vec::with_capacity(CHUNKS);
        let mut dev = Vec::with_capacity(CHUNKS);
        let mut dst = Vec::with_capacity(CHUNKS);
        for c in 0..CHUNKS {
            let data: Vec<f32> = (c * len..(c + 1) * len).map(input).collect();
            src.push(PinnedBuffer::from_slice(ctx, &data)?.named(&format!("src{c}")));
            dev.push(DeviceBuffer::alloc(ctx, len)?.named(&format!("dev{c}")));
            dst.push(PinnedBuffer::zeros(ctx, len)?.named(&format!("dst{c}")));
        }
        Ok(Chunks {
            src: array(src)?,
            dev: array(dev)?,
            dst: array(dst)?,
            len,
        })
    }

    /// Fills every destination with NaN, so an element no variant wrote fails the check.
    pub fn poison(&mut self) -> BoxResult<()> {
        for d in &mut self.dst {
            d.as_mut_slice()?.fill(f32::NAN);
        }
        Ok(())
    }

    /// Checks every destination element against `input + VALUE`, exactly.
    pub fn verify(&self, what: &str) -> BoxResult<()> {
        for (c, (s, d)) in self.src.iter().zip(&self.dst).enumerate() {
            let (s, d) = (s.as_slice()?, d.as_slice()?);
            if let Some(i) = (0..self.len).find(|&i| d[i] != s[i] + VALUE) {
                return Err(format!(
                    "{what}: chunk {c} element {i} is {} instead of {}",
                    d[i],
                    s[i] + VALUE
                )
                .into());
            }
        }
        Ok(())
    }
}

/// A chunked pipeline over `CHUNKS` chunks: stage triples `(up, k, down)` on the three given
/// streams, and `$build`, which lends a [`Chunks`] to its params.
macro_rules! chunked_pipeline {
    (
        $(#[$attr:meta])*
        $name:ident, $params:ident, $build:ident,
        streams { $($streams:tt)* }
        upload on $hs:ident, compute on $cs:ident, download on $ds:ident;
        $( ($up:ident $k:ident $down:ident $src:ident $dev:ident $dst:ident) )*
    ) => {
        gpu_pipeline! {
            $(#[$attr])*
            pub pipeline $name {
                streams { $($streams)* }
                unsafe kernels k = ptx(PTX) {
                    fn add_scalar(n: u32, value: f32, data: &mut [f32; n]) host = add_scalar_host;
                }
                params {
                    n: u32,
                    value: f32,
                    $( $src: &PinnedBuffer<f32>, $dev: &mut DeviceBuffer<f32>, $dst: &mut PinnedBuffer<f32>, )*
                }
                $(
                    stage $up on $hs { copy $src -> $dev; }
                    stage $k on $cs {
                        launch k::add_scalar(n, value, $dev) grid n.div_ceil(256) block 256u32;
                    }
                    stage $down on $ds { copy $dev -> $dst; }
                )*
            }
        }

        /// The params of one pass over `chunks`.
        pub fn $build(value: f32, chunks: &mut Chunks) -> $params<'_> {
            let n = chunks.len as u32;
            let Chunks { src, dev, dst, .. } = chunks;
            let [$($src,)*] = &*src;
            let [$($dev,)*] = dev;
            let [$($dst,)*] = dst;
            $params { n, value, $($src, $dev, $dst,)* }
        }
    };
}

chunked_pipeline! {
    /// Copy-in on `h2d`, compute on `compute`, copy-out on `d2h`, for 16 chunks in one step.
    Chunked16, Chunked16Params, chunked16_params,
    streams { compute(non_blocking), h2d(non_blocking), d2h(non_blocking) }
    upload on h2d, compute on compute, download on d2h;
    (up0 k0 down0 src0 dev0 dst0) (up1 k1 down1 src1 dev1 dst1)
    (up2 k2 down2 src2 dev2 dst2) (up3 k3 down3 src3 dev3 dst3)
    (up4 k4 down4 src4 dev4 dst4) (up5 k5 down5 src5 dev5 dst5)
    (up6 k6 down6 src6 dev6 dst6) (up7 k7 down7 src7 dev7 dst7)
    (up8 k8 down8 src8 dev8 dst8) (up9 k9 down9 src9 dev9 dst9)
    (up10 k10 down10 src10 dev10 dst10) (up11 k11 down11 src11 dev11 dst11)
    (up12 k12 down12 src12 dev12 dst12) (up13 k13 down13 src13 dev13 dst13)
    (up14 k14 down14 src14 dev14 dst14) (up15 k15 down15 src15 dev15 dst15)
}

chunked_pipeline! {
    /// The same stages as [`Chunked16`], all on one stream: the serial reference.
    Serial16, Serial16Params, serial16_params,
    streams { main(non_blocking) }
    upload on main, compute on main, download on main;
    (up0 k0 down0 src0 dev0 dst0) (up1 k1 down1 src1 dev1 dst1)
    (up2 k2 down2 src2 dev2 dst2) (up3 k3 down3 src3 dev3 dst3)
    (up4 k4 down4 src4 dev4 dst4) (up5 k5 down5 src5 dev5 dst5)
    (up6 k6 down6 src6 dev6 dst6) (up7 k7 down7 src7 dev7 dst7)
    (up8 k8 down8 src8 dev8 dst8) (up9 k9 down9 src9 dev9 dst9)
    (up10 k10 down10 src10 dev10 dst10) (up11 k11 down11 src11 dev11 dst11)
    (up12 k12 down12 src12 dev12 dst12) (up13 k13 down13 src13 dev13 dst13)
    (up14 k14 down14 src14 dev14 dst14) (up15 k15 down15 src15 dev15 dst15)
}

/// The `add_scalar` kernel through the runtime, with its host implementation.
pub fn add_scalar_kernel(ctx: &Context) -> BoxResult<TypedKernel<AddScalar>> {
    let module = Module::load_ptx(ctx, PTX)?.named("test_kernels");
    // SAFETY: add_scalar(unsigned n, float value, float* data) in test_kernels.cu, which
    // indexes `data` below `n`, as the pipelines declare (`&mut [f32; n]`).
    let kernel = unsafe {
        module
            .function("add_scalar")?
            .typed_with_bounds::<AddScalar>(Bounds::new().buffer(2, Bound::param(0)))?
    };
    Ok(kernel.with_host(HostKernel::new(add_scalar_host)))
}

/// [`Chunked16`]'s step written by hand against the runtime: the same streams, calls and
/// events, in the same order.
#[derive(Debug)]
pub struct HandChunked {
    /// The kernel's stream (the origin).
    pub compute: Stream,
    /// The upload stream.
    pub h2d: Stream,
    /// The download stream.
    pub d2h: Stream,
    fork: Event,
    join: Event,
    uploaded: Vec<Event>,
    computed: Vec<Event>,
    /// `add_scalar`, with its host implementation.
    pub add: TypedKernel<AddScalar>,
}

impl HandChunked {
    /// Streams, events and the kernel.
    pub fn new(ctx: &Context) -> BoxResult<HandChunked> {
        let event = || Event::with_flags(ctx, EventFlags::ORDERING);
        Ok(HandChunked {
            compute: Stream::non_blocking(ctx)?,
            h2d: Stream::non_blocking(ctx)?,
            d2h: Stream::non_blocking(ctx)?,
            fork: event()?,
            join: event()?,
            uploaded: (0..CHUNKS).map(|_| event()).collect::<Result<_, _>>()?,
            computed: (0..CHUNKS).map(|_| event()).collect::<Result<_, _>>()?,
            add: add_scalar_kernel(ctx)?,
        })
    }

    /// One pass, enqueued, then waited for.
    pub fn pass(&self, value: f32, chunks: &mut Chunks) -> BoxResult<()> {
        self.enqueue(value, chunks)?;
        Ok(self.compute.synchronize()?)
    }

    /// One pass, enqueued: `compute` ends it by joining the other streams.
    pub fn enqueue(&self, value: f32, chunks: &mut Chunks) -> BoxResult<()> {
        let n = chunks.len as u32;
        let cfg = LaunchConfig::new(n.div_ceil(256), 256u32);
        // The fork orders this pass's uploads after everything the last pass did.
        self.compute.record_into(&self.fork)?;
        self.h2d.wait_event(&self.fork)?;
        for c in 0..CHUNKS {
            self.h2d.copy_htod(&chunks.src[c], &mut chunks.dev[c])?;
            self.h2d.record_into(&self.uploaded[c])?;
            self.compute.wait_event(&self.uploaded[c])?;
            self.add
                .launch(&self.compute, cfg, (n, value, &mut chunks.dev[c]))?;
            self.compute.record_into(&self.computed[c])?;
            self.d2h.wait_event(&self.computed[c])?;
            self.d2h.copy_dtoh(&chunks.dev[c], &mut chunks.dst[c])?;
        }
        self.d2h.record_into(&self.join)?;
        self.compute.wait_event(&self.join)?;
        Ok(())
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Warms each of `variants` up, then runs them `reps` times interleaved; returns the median
/// seconds of each. One closure, since the variants share buffers.
fn measure(
    variants: usize,
    reps: usize,
    f: &mut dyn FnMut(usize) -> BoxResult<()>,
) -> BoxResult<Vec<f64>> {
    for variant in 0..variants {
        f(variant)?;
    }
    let mut samples = vec![Vec::new(); variants];
    for _ in 0..reps {
        for (variant, s) in samples.iter_mut().enumerate() {
            let start = Instant::now();
            f(variant)?;
            s.push(start.elapsed());
        }
    }
    Ok(samples
        .into_iter()
        .map(|s| median(s).as_secs_f64())
        .collect())
}

/// One row: a case's median seconds per pass and the bytes it moves.
#[derive(Debug)]
pub struct Row {
    /// `64 MiB` or `1 GiB`.
    pub size: String,
    /// What ran.
    pub case: &'static str,
    /// Streams it used.
    pub streams: u32,
    /// Median seconds per pass.
    pub seconds: f64,
    /// Bytes over the bus per pass.
    pub bytes: f64,
}

impl Row {
    fn gbps(&self) -> f64 {
        self.bytes / self.seconds / 1e9
    }
}

/// The pipeline and hand-written variants of one pass.
struct Variants {
    chunked: Chunked16,
    serial: Serial16,
    hand: HandChunked,
    chunks: Chunks,
}

impl Variants {
    const NAMES: [&'static str; 3] = [
        "generated, 3 streams",
        "by hand, 3 streams",
        "generated, 1 stream",
    ];
    const STREAMS: [u32; 3] = [3, 3, 1];

    fn pass(&mut self, variant: usize) -> BoxResult<()> {
        match variant {
            0 => Ok(self
                .chunked
                .run(chunked16_params(VALUE, &mut self.chunks))?
                .wait()?),
            1 => self.hand.pass(VALUE, &mut self.chunks),
            _ => Ok(self
                .serial
                .run(serial16_params(VALUE, &mut self.chunks))?
                .wait()?),
        }
    }
}

/// Every case at `elements` `f32`s (a multiple of `CHUNKS`), `reps` timed runs each.
pub fn run_size(ctx: &Context, elements: usize, reps: usize) -> BoxResult<Vec<Row>> {
    let size = if elements * 4 >= 1 << 30 {
        format!("{} GiB", (elements * 4) >> 30)
    } else if elements * 4 >= 1 << 20 {
        format!("{} MiB", (elements * 4) >> 20)
    } else {
        format!("{} KiB", (elements * 4) >> 10)
    };
    let bytes = (elements * 4) as f64;
    let mut rows = Vec::new();

    // (a) The pinned-copy limit: one large copy each way, then both at once.
    {
        let (s1, s2) = (Stream::non_blocking(ctx)?, Stream::non_blocking(ctx)?);
        let host_in = PinnedBuffer::<f32>::zeros(ctx, elements)?.named("host_in");
        let mut host_out = PinnedBuffer::<f32>::zeros(ctx, elements)?.named("host_out");
        let mut dev_in = DeviceBuffer::<f32>::alloc(ctx, elements)?.named("dev_in");
        let dev_out = DeviceBuffer::<f32>::zeros(&s2, elements)?.named("dev_out");
        s2.synchronize()?;
        let t = measure(3, reps, &mut |variant| {
            if variant != 1 {
                s1.copy_htod(&host_in, &mut dev_in)?;
            }
            if variant != 0 {
                s2.copy_dtoh(&dev_out, &mut host_out)?;
            }
            s1.synchronize()?;
            Ok(s2.synchronize()?)
        })?;
        let cases = ["H2D alone", "D2H alone", "H2D + D2H at once"];
        for (variant, case) in cases.into_iter().enumerate() {
            rows.push(Row {
                size: size.clone(),
                case,
                streams: if variant == 2 { 2 } else { 1 },
                seconds: t[variant],
                bytes: if variant == 2 { 2.0 * bytes } else { bytes },
            });
        }
    }

    // (b)-(d) The chunked pass: generated, by hand, serial; then the generated graph.
    let mut v = Variants {
        chunked: Chunked16::new(ctx)?,
        serial: Serial16::new(ctx)?,
        hand: HandChunked::new(ctx)?,
        chunks: Chunks::new(ctx, elements / CHUNKS)?,
    };
    // Like for like: the hand-written variant does not track faults either.
    v.chunked.set_fault_tracking(false);
    v.serial.set_fault_tracking(false);
    for (variant, name) in Variants::NAMES.into_iter().enumerate() {
        v.chunks.poison()?;
        v.pass(variant)?;
        v.chunks.verify(name)?;
    }
    let t = measure(3, reps, &mut |variant| v.pass(variant))?;
    for (variant, case) in Variants::NAMES.into_iter().enumerate() {
        rows.push(Row {
            size: size.clone(),
            case,
            streams: Variants::STREAMS[variant],
            seconds: t[variant],
            bytes: 2.0 * bytes,
        });
    }

    v.chunks.poison()?;
    let t = {
        let mut graph = v.chunked.capture(chunked16_params(VALUE, &mut v.chunks))?;
        measure(1, reps, &mut |_| {
            graph.launch()?;
            Ok(graph.synchronize()?)
        })?
    };
    v.chunks.verify("generated, graph replay")?;
    rows.push(Row {
        size,
        case: "generated, graph replay",
        streams: 3,
        seconds: t[0],
        bytes: 2.0 * bytes,
    });
    Ok(rows)
}

/// The same code on the checked host backend at a tiny size: every variant's output is
/// verified and the race detector must find nothing.
pub fn check_host() -> BoxResult<()> {
    let ctx = Context::host_checked();
    run_size(&ctx, CHUNKS * 64, 1)?;
    let races = ctx.races();
    if !races.is_empty() {
        return Err(format!("{} race(s), the first: {:?}", races.len(), races[0]).into());
    }
    Ok(())
}

fn print(device: &str, rows: &[Row]) {
    println!(
        "\n{device}: medians after warm-up; GB/s = bytes moved (in + out for the chunked passes) / time"
    );
    println!(
        "| size | case | streams | ms/pass | GB/s | / H2D limit | / H2D + D2H limit | generated / by hand |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for row in rows {
        let same_size = |case: &str| {
            rows.iter()
                .find(|r| r.size == row.size && r.case == case)
                .map_or(f64::NAN, Row::gbps)
        };
        let one_way = same_size("H2D alone");
        let both = same_size("H2D + D2H at once");
        let versus_hand = if row.case.starts_with("generated") && row.streams == 3 {
            format!("{:.3}", same_size("by hand, 3 streams") / row.gbps())
        } else {
            String::new()
        };
        println!(
            "| {} | {} | {} | {:.3} | {:.1} | {:.2} | {:.2} | {} |",
            row.size,
            row.case,
            row.streams,
            row.seconds * 1e3,
            row.gbps(),
            row.gbps() / one_way,
            row.gbps() / both,
            versus_hand
        );
    }
    if let Some(row) = rows
        .iter()
        .find(|r| r.size == "64 MiB" && r.case == "generated, 3 streams")
    {
        let verdict = if row.gbps() >= 50.0 { "met" } else { "MISSED" };
        println!(
            "\ntarget: generated pipeline >= 50 GB/s on 64 MiB: {:.1} GB/s, {verdict}",
            row.gbps()
        );
    }
}

fn write_json(device: &str, rows: &[Row]) {
    let rows: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{{\"size\":\"{}\",\"case\":\"{}\",\"streams\":{},\"ms\":{:.4},\"gbps\":{:.3}}}",
                r.size,
                r.case,
                r.streams,
                r.seconds * 1e3,
                r.gbps()
            )
        })
        .collect();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    let json = format!(
        "{{\"device\":\"{device}\",\"rows\":[{}]}}\n",
        rows.join(",")
    );
    if std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("overlap.json"), json))
        .is_err()
    {
        eprintln!("could not write target/bench/overlap.json");
    }
}

fn main() {
    if std::env::args().any(|a| a == "--check-host") {
        match check_host() {
            Ok(()) => println!("overlap: checked host backend, every variant verified, no races"),
            Err(e) => {
                eprintln!("overlap host check failed: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let ctx = match Context::cuda(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("overlap bench skipped: no CUDA device ({e})");
            return;
        }
    };
    let device = ctx.device().and_then(|d| d.name().ok()).unwrap_or_default();
    let mut rows = Vec::new();
    for (elements, reps) in [(16 << 20, 21), (256 << 20, 7)] {
        match run_size(&ctx, elements, reps) {
            Ok(r) => rows.extend(r),
            Err(e) => {
                eprintln!("overlap bench failed: {e}");
                std::process::exit(1);
            }
        }
    }
    print(&device, &rows);
    write_json(&device, &rows);
}

//! Malformed images (issue 12, item 8; issue 21, item 1): refused before the driver reads them, on every
//! backend; on a GPU, every field mutation of a real image that the checks accept loads or
//! fails with an error, never a crash.
//!
//! Real images are taken from `runtime/kernels/` by extension, so a new fixture needs no
//! code: `*.cubin` and `*.fatbin` must pass the checks, `*.compressed.fatbin` must be
//! refused as compressed. (The nvcc commands that make them are in
//! `runtime/kernels/README.md`.)

use std::path::Path;

use gpu_pipeline::image::{FatbinEntry, ImageFormat, check_cubin, check_fatbin};
use gpu_pipeline::{Context, Error, Module};

const CUBIN_SM90: &[u8] = include_bytes!("../../runtime/kernels/test_kernels.sm_90.cubin");

/// The committed cubin with `e_shstrndx = 0xfffe`: passed the old check, segfaulted the
/// driver on an H100.
fn reserved_shstrndx() -> Vec<u8> {
    let mut cubin = CUBIN_SM90.to_vec();
    cubin[0x3E..0x40].copy_from_slice(&0xFFFEu16.to_le_bytes());
    cubin
}

/// The committed cubin with `e_phentsize = 0`, `e_phnum = 0xffff`: the same.
fn pn_xnum_without_entry_size() -> Vec<u8> {
    let mut cubin = CUBIN_SM90.to_vec();
    cubin[0x36..0x38].copy_from_slice(&0u16.to_le_bytes());
    cubin[0x38..0x3A].copy_from_slice(&0xFFFFu16.to_le_bytes());
    cubin
}

/// The committed cubin with no program headers but `e_phoff` far past the end: passed the
/// check, then `cuModuleLoadData` hung (killed after 60 s on an H200; issue 21).
fn empty_program_header_table_far_away() -> Vec<u8> {
    let mut cubin = CUBIN_SM90.to_vec();
    cubin[0x38..0x3A].copy_from_slice(&0u16.to_le_bytes());
    cubin[0x20..0x28].copy_from_slice(&0x7FFF_FFFF_0000u64.to_le_bytes());
    cubin
}

fn assert_refused(ctx: &Context, image: &[u8], field: &str) {
    let err = Module::load_cubin(ctx, image).unwrap_err();
    let Error::InvalidImage { call, source } = &err else {
        panic!("expected InvalidImage, got {err:?}");
    };
    assert_eq!(*call, "Module::load_cubin");
    assert_eq!(source.format, ImageFormat::Cubin);
    assert_eq!(source.field, field, "{err}");
    assert!(err.report().to_string().contains(field), "{err}");
}

#[test]
fn the_reported_cubins_are_refused_on_the_host_backend() {
    let ctx = Context::host();
    assert_refused(&ctx, &reserved_shstrndx(), "`e_shstrndx`");
    assert_refused(&ctx, &pn_xnum_without_entry_size(), "`e_phnum`");
    assert_refused(&ctx, &empty_program_header_table_far_away(), "`e_phoff`");
    assert!(Module::load_cubin(&ctx, CUBIN_SM90).is_ok());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_reported_cubins_are_refused_on_cuda() {
    let ctx = Context::cuda(0).expect("a CUDA device");
    assert_refused(&ctx, &reserved_shstrndx(), "`e_shstrndx`");
    assert_refused(&ctx, &pn_xnum_without_entry_size(), "`e_phnum`");
    assert_refused(&ctx, &empty_program_header_table_far_away(), "`e_phoff`");
}

const PTX: &str = include_str!("../../runtime/kernels/test_kernels.ptx");

/// A fatbin laid out as the checks read one (see `runtime/src/image/fatbin.rs`), holding
/// `(kind, arch, payload)` entries: 1 for PTX, 2 for a cubin.
fn fatbin(entries: &[(u16, u32, Vec<u8>)]) -> Vec<u8> {
    let mut image = vec![0u8; 16];
    for (kind, arch, payload) in entries {
        let size = payload.len().next_multiple_of(8);
        // nvcc's layout: PTX entries carry an (empty) ptxas options record after the fixed
        // 64 bytes; cubin entries none.
        let header_size = if *kind == 1 { 80 } else { 64 };
        let mut header = vec![0u8; header_size];
        header[0..2].copy_from_slice(&kind.to_le_bytes());
        header[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
        header[4..8].copy_from_slice(&(header_size as u32).to_le_bytes());
        header[8..16].copy_from_slice(&(size as u64).to_le_bytes());
        if *kind == 1 {
            header[20..24].copy_from_slice(&64u32.to_le_bytes());
            header[64..68].copy_from_slice(&72u32.to_le_bytes());
        }
        // The PTX ISA version (minor, major), as the text's `.version` says.
        header[24..26].copy_from_slice(&0u16.to_le_bytes());
        header[26..28].copy_from_slice(&8u16.to_le_bytes());
        header[28..32].copy_from_slice(&arch.to_le_bytes());
        header[40..48].copy_from_slice(&0x11u64.to_le_bytes()); // 64-bit, Linux host
        image.extend_from_slice(&header);
        image.extend_from_slice(payload);
        image.resize(image.len().next_multiple_of(8), 0);
    }
    let body = (image.len() - 16) as u64;
    image[0..4].copy_from_slice(&0xBA55_ED50u32.to_le_bytes());
    image[4..6].copy_from_slice(&1u16.to_le_bytes());
    image[6..8].copy_from_slice(&16u16.to_le_bytes());
    image[8..16].copy_from_slice(&body.to_le_bytes());
    image
}

/// The committed PTX as a fatbin payload: the whole text, NUL-terminated (nvcc keeps the
/// `.version` line; the driver refuses PTX without it).
fn ptx_payload() -> Vec<u8> {
    let mut text = PTX.as_bytes().to_vec();
    text.push(0);
    text
}

/// A PTX entry without the ptxas options record (`options_offset` 0) crashed the driver on
/// an H100; the check refuses it before the driver sees it.
#[test]
fn a_ptx_entry_without_its_options_record_is_refused() {
    let mut image = fatbin(&[(1, 75, ptx_payload())]);
    image[16 + 20..16 + 24].copy_from_slice(&0u32.to_le_bytes());
    let e = check_fatbin(&image).unwrap_err();
    assert!(e.to_string().contains("options"), "{e}");
}

#[test]
fn fatbins_of_the_committed_images_pass_the_check() {
    for image in [
        fatbin(&[(2, 90, CUBIN_SM90.to_vec())]),
        fatbin(&[(1, 75, ptx_payload())]),
        fatbin(&[(2, 90, CUBIN_SM90.to_vec()), (1, 75, ptx_payload())]),
    ] {
        let entries = check_fatbin(&image).unwrap();
        assert!(
            entries
                .iter()
                .all(|e| e.kernels.iter().any(|k| k == "saxpy"))
        );
    }
}

/// The layout the fatbin checks assume, confirmed by the driver: a fatbin of the committed
/// cubin (sm_90 devices) and one of the committed PTX (any device) load, and their
/// kernels resolve.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fatbins_of_the_committed_images_load_on_cuda() {
    let ctx = Context::cuda(0).expect("a CUDA device");
    let mut images = vec![("PTX", fatbin(&[(1, 75, ptx_payload())]))];
    if ctx.device().unwrap().compute_capability().unwrap() == (9, 0) {
        images.push(("cubin", fatbin(&[(2, 90, CUBIN_SM90.to_vec())])));
    }
    for (what, image) in images {
        let module = Module::load_fatbin(&ctx, &image).unwrap_or_else(|e| panic!("{what}: {e}"));
        module
            .function("saxpy")
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

/// The images in `runtime/kernels/` whose names end in `suffix`, by name.
fn fixtures(suffix: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/kernels");
    let mut found: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?.to_owned();
            name.ends_with(suffix)
                .then(|| std::fs::read(&path).map(|bytes| (name, bytes)).ok())?
        })
        .collect();
    found.sort();
    found
}

fn is_compressed(name: &str) -> bool {
    name.ends_with(".compressed.fatbin")
}

#[test]
fn every_real_image_fixture_passes_its_check() {
    let cubins = fixtures(".cubin");
    assert!(!cubins.is_empty(), "the committed sm_90 cubin is a fixture");
    for (name, bytes) in &cubins {
        let kernels = check_cubin(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!kernels.is_empty(), "{name}: no kernels found");
    }
    for (name, bytes) in fixtures(".fatbin") {
        match check_fatbin(&bytes) {
            Ok(entries) => {
                assert!(!is_compressed(&name), "{name}: a compressed fatbin passed");
                assert!(entries.iter().any(|e: &FatbinEntry| !e.kernels.is_empty()));
            }
            Err(e) if is_compressed(&name) => {
                assert!(e.reason.contains("compressed"), "{name}: {e}");
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

/// Every ELF header, section header and program header field of a cubin, as `(offset,
/// width)`.
fn cubin_fields(image: &[u8]) -> Vec<(usize, usize)> {
    let int = |at: usize, w: usize| {
        image[at..at + w]
            .iter()
            .rev()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
    };
    let mut fields = vec![
        (4, 1),
        (5, 1),
        (0x10, 2),
        (0x12, 2),
        (0x20, 8),
        (0x28, 8),
        (0x34, 2),
        (0x36, 2),
        (0x38, 2),
        (0x3A, 2),
        (0x3C, 2),
        (0x3E, 2),
    ];
    let (shoff, shnum) = (int(0x28, 8), int(0x3C, 2));
    let (phoff, phnum) = (int(0x20, 8), int(0x38, 2));
    for i in 0..shnum {
        let at = shoff + 64 * i;
        for (f, w) in [
            (0, 4),
            (4, 4),
            (8, 8),
            (0x18, 8),
            (0x20, 8),
            (0x28, 4),
            (0x2C, 4),
        ] {
            fields.push((at + f, w));
        }
        fields.push((at + 0x38, 8));
    }
    for i in 0..phnum {
        let at = phoff + 56 * i;
        fields.extend([(at + 8, 8), (at + 0x20, 8), (at + 0x28, 8)]);
    }
    fields
}

/// Every container and entry header field of a fatbin.
fn fatbin_fields(image: &[u8]) -> Vec<(usize, usize)> {
    let int = |at: usize, w: usize| {
        image[at..at + w]
            .iter()
            .rev()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
    };
    let mut fields = vec![(4, 2), (6, 2), (8, 8)];
    let end = 16 + int(8, 8);
    let mut at = 16;
    while at + 64 <= end {
        for (f, w) in [
            (0, 2),
            (4, 4),
            (8, 8),
            (16, 4),
            (20, 4),
            (32, 4),
            (36, 4),
            (40, 8),
        ] {
            fields.push((at + f, w));
        }
        at += int(at + 4, 4) + int(at + 8, 8);
    }
    fields
}

/// The images the field mutations of `image` make, one field and one value at a time.
fn mutations(image: &[u8], fields: &[(usize, usize)]) -> Vec<Vec<u8>> {
    mutations_described(image, fields)
        .into_iter()
        .map(|(_, bytes)| bytes)
        .collect()
}

/// [`mutations`], each with what it changed (`at`, width, value), for tracing.
fn mutations_described(
    image: &[u8],
    fields: &[(usize, usize)],
) -> Vec<((usize, usize, u64), Vec<u8>)> {
    let len = image.len() as u64;
    let values = [
        0,
        1,
        0xFF00,
        0xFFFE,
        0xFFFF,
        len - 1,
        len,
        len + 1,
        u64::MAX,
    ];
    let mut out = Vec::new();
    for &(at, width) in fields {
        for value in values {
            let mut changed = image.to_vec();
            changed[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
            if changed != image {
                out.push(((at, width, value), changed));
            }
        }
    }
    out
}

/// At most this many accepted mutations of one fixture go to the driver (evenly spread over
/// all of them), so the GPU run stays within minutes; a loaded PTX entry is a JIT compile.
/// Set `GPU_PIPELINE_ALL_MUTATIONS` to load every one.
const LOADS_PER_FIXTURE: usize = 400;

/// The step between the accepted mutations given to the driver.
fn stride(accepted: usize) -> usize {
    if std::env::var_os("GPU_PIPELINE_ALL_MUTATIONS").is_some() {
        return 1;
    }
    accepted.div_ceil(LOADS_PER_FIXTURE).max(1)
}

/// Loads accepted mutations on the GPU (see [`LOADS_PER_FIXTURE`]). Reaching the end is the test: before the
/// checks, two of these crashed the process. Prints how many were accepted and loaded.
#[test]
#[ignore = "needs a CUDA GPU"]
fn accepted_mutations_of_real_images_never_crash_the_driver() {
    if tests::skip_under_compute_sanitizer("feeds the driver many odd images on purpose") {
        return;
    }
    let ctx = Context::cuda(0).expect("a CUDA device");
    // With this set (and --nocapture), each image is named before the driver sees it, so a
    // crash points at the mutation that caused it.
    let trace = std::env::var_os("GPU_PIPELINE_TRACE_MUTATIONS").is_some();
    for (name, image) in fixtures(".cubin") {
        let all = mutations_described(&image, &cubin_fields(&image));
        let total = all.len();
        let accepted: Vec<_> = all
            .into_iter()
            .filter(|(_, changed)| check_cubin(changed).is_ok())
            .collect();
        let (stride, mut tried, mut loaded) = (stride(accepted.len()), 0, 0);
        for ((at, width, value), changed) in accepted.iter().step_by(stride) {
            if trace {
                eprintln!("{name}: loading bytes {at:#x}..+{width} = {value:#x}");
            }
            tried += 1;
            loaded += usize::from(Module::load_cubin(&ctx, changed).is_ok());
        }
        let accepted = accepted.len();
        eprintln!(
            "{name}: {total} mutations, {accepted} accepted, {tried} given to the driver, \
             {loaded} loaded"
        );
        assert!(
            accepted > 0,
            "{name}: no mutation was accepted; the test saw nothing"
        );
    }
    for (name, image) in fixtures(".fatbin") {
        if is_compressed(&name) {
            continue;
        }
        let all = mutations(&image, &fatbin_fields(&image));
        let total = all.len();
        let accepted: Vec<_> = all
            .into_iter()
            .filter(|changed| check_fatbin(changed).is_ok())
            .collect();
        let (stride, mut tried, mut loaded) = (stride(accepted.len()), 0, 0);
        for changed in accepted.iter().step_by(stride) {
            tried += 1;
            loaded += usize::from(Module::load_fatbin(&ctx, changed).is_ok());
        }
        let accepted = accepted.len();
        eprintln!(
            "{name}: {total} mutations, {accepted} accepted, {tried} given to the driver, \
             {loaded} loaded"
        );
    }
}

/// The mutation of the committed cubin that crashed the driver on an H100 (the global
/// `.nv.info`'s `sh_info` set to `0xffffffff`, which the driver follows as an index) is
/// refused before the driver sees it.
#[test]
fn the_info_index_that_crashed_the_driver_is_refused() {
    let image = include_bytes!("../../runtime/kernels/test_kernels.sm_90.cubin");
    let int = |at: usize, w: usize| {
        image[at..at + w]
            .iter()
            .rev()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
    };
    let (shoff, shnum, shstrndx) = (int(0x28, 8), int(0x3C, 2), int(0x3E, 2));
    let names = int(shoff + 64 * shstrndx + 0x18, 8);
    let info = (0..shnum)
        .map(|i| shoff + 64 * i)
        .find(|&at| image[names + int(at, 4)..].starts_with(b".nv.info\0"))
        .expect("the committed cubin has a global .nv.info");
    let mut changed = image.to_vec();
    changed[info + 0x2C..info + 0x30].copy_from_slice(&u32::MAX.to_le_bytes());
    let err = check_cubin(&changed).unwrap_err();
    assert!(err.to_string().contains("sh_info"), "{err}");
}

/// Real fatbins load and their kernels resolve; compressed ones are refused, not loaded.
#[test]
#[ignore = "needs a CUDA GPU"]
fn real_fatbins_load_and_compressed_ones_are_refused() {
    let ctx = Context::cuda(0).expect("a CUDA device");
    let fatbins = fixtures(".fatbin");
    if fatbins.is_empty() {
        eprintln!("no fatbin in runtime/kernels/ yet (see runtime/kernels/README.md)");
    }
    for (name, image) in fatbins {
        let result = Module::load_fatbin(&ctx, &image);
        if is_compressed(&name) {
            let err = result.unwrap_err();
            assert!(matches!(err, Error::InvalidImage { .. }), "{name}: {err:?}");
            assert!(
                err.report().to_string().contains("compressed"),
                "{name}: {err}"
            );
            continue;
        }
        let module = result.unwrap_or_else(|e| panic!("{name}: {e}"));
        for entry in check_fatbin(&image).unwrap() {
            for kernel in &entry.kernels {
                module
                    .function(kernel)
                    .unwrap_or_else(|e| panic!("{name}: `{kernel}`: {e}"));
            }
        }
    }
}

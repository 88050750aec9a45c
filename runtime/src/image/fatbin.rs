//! Fatbins: containers of cubins and PTX from which the driver picks the best image for the
//! device.
//!
//! NVIDIA documents only the container header (`fatBinaryHeader` in `fatbinary_section.h`:
//! magic, version, header size, the size of what follows). The entry layout below is the one
//! public tools agree on (n-eiling's `cuda-fatbin-decompression`, jiegec's `fatbinary`
//! crate, cuobjdump-derived specifications): each entry is a header of at least 64 bytes
//!
//! | offset | field |
//! |---|---|
//! | 0 | `kind: u16` (1 PTX, 2 cubin) |
//! | 4 | `header_size: u32` (the payload follows it) |
//! | 8 | `size: u64` (payload bytes, padding included) |
//! | 16 | `compressed_size: u32` |
//! | 20 | `options_offset: u32` (of a `(offset: u32, size: u32)` pair of ptxas options) |
//! | 28 | `arch: u32` (e.g. 90 for sm_90) |
//! | 32 | `name_offset: u32`, 36 `name_len: u32` (from the entry's start) |
//! | 40 | `flags: u64` (0x2000 and 0x8000: the payload is compressed) |
//! | 56 | `decompressed_size: u64` |
//!
//! followed by its payload, entries back to back to the size the container header declares.
//! A payload is checked as what it is (a cubin by the ELF rules, PTX as terminated text), so
//! a compressed payload cannot be checked before the driver decompresses it: compressed
//! entries are refused, with how to build without compression.

use super::elf;
use super::error::{ImageError, ImageFormat};
use super::ptx;
use super::read::{self, Bytes};

/// `fatBinaryHeader.magic`.
use super::read::FATBIN_MAGIC;
/// `fatBinaryHeader.version`: the only version.
const FATBIN_VERSION: u16 = 1;
/// `sizeof(fatBinaryHeader)`, and its `headerSize`.
const FATBIN_HEADER_SIZE: u64 = 16;
/// The fixed part of an entry header; `header_size` may be larger.
const ENTRY_HEADER_MIN: u64 = 64;
/// Entry kinds.
const KIND_PTX: u16 = 1;
const KIND_CUBIN: u16 = 2;
/// Entry flags that mark a compressed payload (LZ4-style and, since CUDA 12.8, zstd).
const FLAGS_COMPRESSED: u64 = 0x2000 | 0x8000;

// Field offsets in the container header.
const H_MAGIC: u64 = 0;
const H_VERSION: u64 = 4;
const H_HEADER_SIZE: u64 = 6;
const H_FAT_SIZE: u64 = 8;

// Field offsets in an entry header.
const E_KIND: u64 = 0;
const E_HEADER_SIZE: u64 = 4;
const E_SIZE: u64 = 8;
const E_COMPRESSED_SIZE: u64 = 16;
const E_OPTIONS_OFFSET: u64 = 20;
const E_ARCH: u64 = 28;
const E_NAME_OFFSET: u64 = 32;
const E_NAME_LEN: u64 = 36;
const E_FLAGS: u64 = 40;

/// One entry of a checked fatbin.
///
/// ```standalone_crate
/// use gpu_pipeline::image::{ImageFormat, check_fatbin};
/// // `nvcc -fatbin -arch=sm_90 test_kernels.cu`
/// let fatbin = include_bytes!("../../kernels/test_kernels.sm_90.fatbin");
/// let entries = check_fatbin(fatbin)?;
/// let cubin = entries.iter().find(|e| e.format == ImageFormat::Cubin).expect("a cubin");
/// assert_eq!(cubin.arch, 90);
/// assert!(cubin.kernels.iter().any(|k| k == "saxpy"), "{:?}", cubin.kernels);
/// assert!(cubin.offset + cubin.size <= fatbin.len() as u64);
/// # Ok::<(), gpu_pipeline::ImageError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FatbinEntry {
    /// What the payload is: [`ImageFormat::Cubin`] or [`ImageFormat::Ptx`].
    pub format: ImageFormat,
    /// The architecture it is for, e.g. `90` for `sm_90` / `compute_90`.
    pub arch: u32,
    /// Where its payload starts in the fatbin.
    pub offset: u64,
    /// The payload's size in bytes (padding included).
    pub size: u64,
    /// The kernels it defines (a cubin's `.text.<name>` sections, PTX `.entry` names).
    pub kernels: Vec<String>,
}

/// Checks that `image` is one or more complete fatbins, back to back, every header and
/// entry of which lies inside it, every cubin entry passing [`check_cubin`](super::check_cubin)
/// and every PTX entry being NUL-terminated text. Returns the entries.
///
/// ```
/// let err = gpu_pipeline::image::check_fatbin(b"\x7fELF\x02\x01\x01").unwrap_err();
/// assert!(err.to_string().contains("load_cubin"), "{err}");
/// ```
pub fn check_fatbin(image: &[u8]) -> Result<Vec<FatbinEntry>, ImageError> {
    let image = Bytes::new(image);
    let mut entries = Vec::new();
    let mut at = 0;
    loop {
        at = container(image, at, &mut entries)?;
        if at == image.len() {
            return Ok(entries);
        }
        if image.u32(at + H_MAGIC) != Some(FATBIN_MAGIC) {
            return Err(fail(
                at,
                "the bytes after the fatbin",
                format!(
                    "are {} bytes that are not another fatbin (no magic {FATBIN_MAGIC:#x}); \
                     pass exactly the fatbin",
                    image.len() - at
                ),
            ));
        }
    }
}

fn fail(offset: u64, field: impl Into<String>, reason: impl Into<String>) -> ImageError {
    ImageError::at(ImageFormat::Fatbin, offset, field, reason)
}

/// One container at `start`: its header, then entries tiling exactly the size it declares.
/// Returns where it ends.
fn container(
    image: Bytes<'_>,
    start: u64,
    entries: &mut Vec<FatbinEntry>,
) -> Result<u64, ImageError> {
    let end = container_header(image, start)?;
    let first = entries.len();
    let mut at = start + FATBIN_HEADER_SIZE;
    while at < end {
        at = entry(image, at, end, entries)?;
    }
    if entries.len() == first {
        return Err(fail(
            start + H_FAT_SIZE,
            "`fatSize`",
            "is 0: the fatbin holds no image the driver could load",
        ));
    }
    Ok(end)
}

/// The container header: magic, version, header size, and the declared size inside the
/// image. Returns the container's end.
fn container_header(image: Bytes<'_>, start: u64) -> Result<u64, ImageError> {
    if let Some(magic) = image.u32(start + H_MAGIC).filter(|&m| m != FATBIN_MAGIC) {
        let hint = if image.get(start, 4) == Some(b"\x7fELF") {
            " (this is an ELF: load a cubin with `Module::load_cubin`)"
        } else {
            ""
        };
        return Err(fail(
            start + H_MAGIC,
            "the fatbin magic",
            format!(
                "is {magic:#x}; a fatbin starts with {FATBIN_MAGIC:#x} (fatBinaryHeader){hint}"
            ),
        ));
    }
    let (Some(_magic), Some(version), Some(header_size), Some(fat_size)) = (
        image.u32(start + H_MAGIC),
        image.u16(start + H_VERSION),
        image.u16(start + H_HEADER_SIZE),
        image.u64(start + H_FAT_SIZE),
    ) else {
        return Err(fail(
            start,
            "the fatbin header",
            format!(
                "needs {FATBIN_HEADER_SIZE} bytes but only {} remain",
                image.len().saturating_sub(start)
            ),
        ));
    };
    if version != FATBIN_VERSION {
        return Err(fail(
            start + H_VERSION,
            "`version`",
            format!("is {version}; expected {FATBIN_VERSION}, the only fatbin version"),
        ));
    }
    if u64::from(header_size) != FATBIN_HEADER_SIZE {
        return Err(fail(
            start + H_HEADER_SIZE,
            "`headerSize`",
            format!(
                "is {header_size}; expected {FATBIN_HEADER_SIZE} (the size of fatBinaryHeader)"
            ),
        ));
    }
    let body = start + FATBIN_HEADER_SIZE;
    match read::end(body, fat_size) {
        Some(end) if end <= image.len() => Ok(end),
        _ => Err(fail(
            start + H_FAT_SIZE,
            "`fatSize`",
            format!(
                "is {fat_size}: the fatbin's entries would end past the image ({} bytes after \
                 the header, {} available)",
                fat_size,
                image.len() - body
            ),
        )),
    }
}

/// The entry header fields the checks read.
struct EntryHeader {
    kind: u16,
    header_size: u64,
    size: u64,
    compressed_size: u32,
    options_offset: u32,
    arch: u32,
    name_offset: u32,
    name_len: u32,
    flags: u64,
}

impl EntryHeader {
    fn read(image: Bytes<'_>, at: u64) -> Option<EntryHeader> {
        Some(EntryHeader {
            kind: image.u16(at + E_KIND)?,
            header_size: u64::from(image.u32(at + E_HEADER_SIZE)?),
            size: image.u64(at + E_SIZE)?,
            compressed_size: image.u32(at + E_COMPRESSED_SIZE)?,
            options_offset: image.u32(at + E_OPTIONS_OFFSET)?,
            arch: image.u32(at + E_ARCH)?,
            name_offset: image.u32(at + E_NAME_OFFSET)?,
            name_len: image.u32(at + E_NAME_LEN)?,
            flags: image.u64(at + E_FLAGS)?,
        })
    }
}

/// One entry at `at`, inside a container ending at `end`. Returns where the next starts.
fn entry(
    image: Bytes<'_>,
    at: u64,
    end: u64,
    entries: &mut Vec<FatbinEntry>,
) -> Result<u64, ImageError> {
    let index = entries.len();
    let container = image.get(0, end).map(Bytes::new).unwrap_or(image);
    let field = |name: &str| format!("entry {index} `{name}`");
    // The fixed header must lie inside the container before any of it is read.
    let h = container
        .get(at, ENTRY_HEADER_MIN)
        .and_then(|_| EntryHeader::read(container, at))
        .ok_or_else(|| {
            fail(
                at,
                format!("entry {index}"),
                format!(
                    "its {ENTRY_HEADER_MIN}-byte header runs past the fatbin's declared end \
                     (byte {end})"
                ),
            )
        })?;
    header_size(&h, at, end, &field)?;
    let format = kind(&h, at, &field)?;
    not_compressed(&h, at, &field)?;
    let payload_at = at + h.header_size;
    let next = payload_in_bounds(&h, at, payload_at, end, &field)?;
    sizes_consistent(&h, at, &field)?;
    name_in_header(&h, at, &field)?;
    options_in_header(container, &h, at, &field)?;
    let payload = container.sub(payload_at, h.size).unwrap_or(Bytes::new(&[]));
    let kernels = match format {
        ImageFormat::Cubin => elf::check(payload),
        _ => ptx::check_payload(payload).map(|()| ptx_names(payload)),
    }
    .map_err(|e| e.in_fatbin_entry(index, payload_at))?;
    entries.push(FatbinEntry {
        format,
        arch: h.arch,
        offset: payload_at,
        size: h.size,
        kernels,
    });
    Ok(next)
}

fn ptx_names(payload: Bytes<'_>) -> Vec<String> {
    let bytes = payload.rest(0);
    let text = bytes.split(|&b| b == 0).next().unwrap_or_default();
    std::str::from_utf8(text)
        .map(ptx::entry_names)
        .unwrap_or_default()
}

/// The entry header is at least the fixed 64 bytes and ends inside the container: the
/// payload starts right after it.
fn header_size(
    h: &EntryHeader,
    at: u64,
    end: u64,
    field: &dyn Fn(&str) -> String,
) -> Result<(), ImageError> {
    let inside = read::end(at, h.header_size).is_some_and(|e| e <= end);
    if h.header_size >= ENTRY_HEADER_MIN && inside {
        return Ok(());
    }
    Err(fail(
        at + E_HEADER_SIZE,
        field("header_size"),
        format!(
            "is {}; expected at least {ENTRY_HEADER_MIN}, ending inside the fatbin (byte {end})",
            h.header_size
        ),
    ))
}

/// Only PTX and cubin entries are read; other kinds (e.g. LTO IR) cannot be checked here.
fn kind(
    h: &EntryHeader,
    at: u64,
    field: &dyn Fn(&str) -> String,
) -> Result<ImageFormat, ImageError> {
    match h.kind {
        KIND_PTX => Ok(ImageFormat::Ptx),
        KIND_CUBIN => Ok(ImageFormat::Cubin),
        other => Err(fail(
            at + E_KIND,
            field("kind"),
            format!(
                "is {other:#x}; only PTX (1) and cubin (2) entries can be checked, so other \
                 kinds are refused"
            ),
        )),
    }
}

/// A compressed payload cannot be checked until it is decompressed, which the driver does
/// on its own by sizes the header claims: refused.
fn not_compressed(
    h: &EntryHeader,
    at: u64,
    field: &dyn Fn(&str) -> String,
) -> Result<(), ImageError> {
    if h.flags & FLAGS_COMPRESSED == 0 {
        return Ok(());
    }
    Err(fail(
        at + E_FLAGS,
        field("flags"),
        format!(
            "is {:#x}: the entry is compressed, and a compressed image cannot be checked before \
             the driver reads it; build the fatbin without compression (`nvcc -fatbin \
             -no-compress`)",
            h.flags
        ),
    ))
}

/// The payload `[header end, header end + size)` lies inside the container. Returns its
/// end, where the next entry starts.
fn payload_in_bounds(
    h: &EntryHeader,
    at: u64,
    payload_at: u64,
    end: u64,
    field: &dyn Fn(&str) -> String,
) -> Result<u64, ImageError> {
    match read::end(payload_at, h.size) {
        Some(next) if next <= end => Ok(next),
        _ => Err(fail(
            at + E_SIZE,
            field("size"),
            format!(
                "is {}: the payload at byte {payload_at} would end past the fatbin's declared \
                 end (byte {end})",
                h.size
            ),
        )),
    }
}

/// `compressed_size` is the payload's real length without padding: it cannot exceed the
/// payload.
fn sizes_consistent(
    h: &EntryHeader,
    at: u64,
    field: &dyn Fn(&str) -> String,
) -> Result<(), ImageError> {
    if u64::from(h.compressed_size) <= h.size {
        return Ok(());
    }
    Err(fail(
        at + E_COMPRESSED_SIZE,
        field("compressed_size"),
        format!(
            "is {}, more than the payload's `size` ({})",
            h.compressed_size, h.size
        ),
    ))
}

/// The entry's name `[name_offset, name_offset + name_len)` (from the entry's start) lies
/// inside the entry header, where the toolchain writes it.
fn name_in_header(
    h: &EntryHeader,
    at: u64,
    field: &dyn Fn(&str) -> String,
) -> Result<(), ImageError> {
    let (offset, len) = (u64::from(h.name_offset), u64::from(h.name_len));
    if (offset == 0 && len == 0) || offset + len <= h.header_size {
        return Ok(());
    }
    Err(fail(
        at + E_NAME_OFFSET,
        field("name_offset"),
        format!(
            "is {offset} with `name_len` {len}: the name would end past the {}-byte entry \
             header",
            h.header_size
        ),
    ))
}

/// When an entry records ptxas options, the `(offset, size)` pair at `options_offset` and
/// the options it points to (both from the entry's start) lie inside the entry header. A PTX
/// entry must record them (an empty record will do): the driver (580, on an H100) follows a
/// PTX entry's `options_offset` of 0 and crashes, and nvcc always writes the record.
fn options_in_header(
    image: Bytes<'_>,
    h: &EntryHeader,
    at: u64,
    field: &dyn Fn(&str) -> String,
) -> Result<(), ImageError> {
    if h.options_offset == 0 {
        if h.kind == KIND_PTX {
            return Err(fail(
                at + E_OPTIONS_OFFSET,
                field("options_offset"),
                "is 0, but a PTX entry needs its ptxas options record (an empty one will do: \
                 `(offset, 0)`), which nvcc always writes; the driver crashes without it",
            ));
        }
        return Ok(());
    }
    let pair = u64::from(h.options_offset);
    if pair + 8 > h.header_size {
        return Err(fail(
            at + E_OPTIONS_OFFSET,
            field("options_offset"),
            format!(
                "is {pair}: the 8-byte options record would end past the {}-byte entry header",
                h.header_size
            ),
        ));
    }
    let (Some(offset), Some(size)) = (image.u32(at + pair), image.u32(at + pair + 4)) else {
        return Err(fail(
            at + pair,
            field("options"),
            "lies past the image's end",
        ));
    };
    let (offset, size) = (u64::from(offset), u64::from(size));
    if (offset == 0 && size == 0) || offset + size <= h.header_size {
        return Ok(());
    }
    Err(fail(
        at + pair,
        field("options"),
        format!(
            "are {size} bytes at {offset}: they would end past the {}-byte entry header",
            h.header_size
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::tests::build::{FatbinBuilder, put};

    const CUBIN: &[u8] = include_bytes!("../../kernels/test_kernels.sm_90.cubin");

    #[test]
    fn a_fatbin_of_a_cubin_and_ptx_passes_and_lists_its_entries() {
        let image = FatbinBuilder::cubin_and_ptx().build();
        let entries = check_fatbin(&image).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].format, ImageFormat::Cubin);
        assert_eq!(entries[0].arch, 90);
        assert_eq!(entries[0].offset, 16 + 64);
        assert_eq!(entries[0].size, CUBIN.len().next_multiple_of(8) as u64);
        assert!(entries[0].kernels.iter().any(|k| k == "saxpy"));
        assert_eq!(entries[1].format, ImageFormat::Ptx);
        assert!(entries[1].kernels.iter().any(|k| k == "saxpy"));
    }

    #[test]
    fn the_container_header_is_checked() {
        let good = FatbinBuilder::cubin_and_ptx().build();
        assert!(
            check_fatbin(&good[..15])
                .unwrap_err()
                .reason
                .contains("16 bytes")
        );
        for (at, value, field) in [
            (H_MAGIC, 0x7F45_4C46u64, "the fatbin magic"),
            (H_VERSION, 2, "`version`"),
            (H_HEADER_SIZE, 24, "`headerSize`"),
        ] {
            let mut b = good.clone();
            let width = if at == H_MAGIC { 4 } else { 2 };
            put(&mut b, at, &value.to_le_bytes()[..width]);
            assert_eq!(check_fatbin(&b).unwrap_err().field, field);
        }
        let mut b = good.clone();
        put(&mut b, H_FAT_SIZE, &u64::MAX.to_le_bytes());
        assert_eq!(check_fatbin(&b).unwrap_err().field, "`fatSize`");
        let mut b = good[..16].to_vec();
        put(&mut b, H_FAT_SIZE, &0u64.to_le_bytes());
        assert!(check_fatbin(&b).unwrap_err().reason.contains("no image"));
        // The old check passed this: a header claiming 16 bytes of zeros.
        let mut b = good[..32].to_vec();
        put(&mut b, H_FAT_SIZE, &16u64.to_le_bytes());
        assert!(
            check_fatbin(&b)
                .unwrap_err()
                .reason
                .contains("64-byte header")
        );
    }

    #[test]
    fn bytes_after_the_fatbin_must_be_another_fatbin() {
        let one = FatbinBuilder::cubin_and_ptx().build();
        let mut two = one.clone();
        two.extend_from_slice(&one);
        assert_eq!(check_fatbin(&two).unwrap().len(), 4);
        let mut trailing = one;
        trailing.extend_from_slice(&[0; 8]);
        let e = check_fatbin(&trailing).unwrap_err();
        assert!(e.reason.contains("not another fatbin"), "{e}");
    }

    /// Breaks field `field` of entry `entry`'s header.
    fn broken(entry: usize, field: u64, value: &[u8]) -> ImageError {
        let b = FatbinBuilder::cubin_and_ptx();
        let mut image = b.build();
        put(&mut image, b.entry_at(entry) + field, value);
        check_fatbin(&image).unwrap_err()
    }

    #[test]
    fn each_entry_field_is_checked() {
        let e = broken(0, E_HEADER_SIZE, &32u32.to_le_bytes());
        assert_eq!(e.field, "entry 0 `header_size`");
        let e = broken(1, E_HEADER_SIZE, &u32::MAX.to_le_bytes());
        assert_eq!(e.field, "entry 1 `header_size`");
        let e = broken(0, E_KIND, &4u16.to_le_bytes());
        assert!(e.reason.contains("only PTX (1) and cubin (2)"), "{e}");
        let e = broken(1, E_FLAGS, &0x2011u64.to_le_bytes());
        assert!(e.reason.contains("-no-compress"), "{e}");
        let e = broken(0, E_FLAGS, &0x8001u64.to_le_bytes());
        assert!(e.reason.contains("compressed"), "{e}");
        let e = broken(1, E_SIZE, &0x10_0000u64.to_le_bytes());
        assert_eq!(e.field, "entry 1 `size`");
        let e = broken(0, E_SIZE, &u64::MAX.to_le_bytes());
        assert_eq!(e.field, "entry 0 `size`");
        let e = broken(0, E_COMPRESSED_SIZE, &u32::MAX.to_le_bytes());
        assert_eq!(e.field, "entry 0 `compressed_size`");
        let e = broken(0, E_NAME_LEN, &100u32.to_le_bytes());
        assert_eq!(e.field, "entry 0 `name_offset`");
        let e = broken(1, E_NAME_OFFSET, &84u32.to_le_bytes());
        assert_eq!(e.field, "entry 1 `name_offset`");
        let e = broken(1, E_OPTIONS_OFFSET, &84u32.to_le_bytes());
        assert_eq!(e.field, "entry 1 `options_offset`");
        // The PTX entry's header has room for an options record at 64.
        let e = broken(1, 64, &[60, 0, 0, 0, 40, 0, 0, 0]);
        assert_eq!(e.field, "entry 1 `options`");
        // A PTX entry without an options record crashed the driver on an H100.
        let e = broken(1, E_OPTIONS_OFFSET, &0u32.to_le_bytes());
        assert_eq!(e.field, "entry 1 `options_offset`");
        assert!(e.reason.contains("PTX entry needs"), "{e}");
    }

    #[test]
    fn payloads_are_checked_as_what_they_are() {
        let b = FatbinBuilder::cubin_and_ptx();
        // The cubin's e_shstrndx, inside entry 0.
        let mut image = b.build();
        let cubin_at = b.entry_at(0) + 64;
        put(&mut image, cubin_at + 0x3E, &0xFFFEu16.to_le_bytes());
        let e = check_fatbin(&image).unwrap_err();
        assert_eq!((e.entry, e.format), (Some(0), ImageFormat::Cubin));
        assert_eq!(e.offset, Some(cubin_at + 0x3E));
        assert!(
            e.to_string().starts_with("invalid fatbin: entry 0 (cubin)"),
            "{e}"
        );
        // The PTX without its NUL: fill the padding.
        let mut image = b.build();
        let ptx = b.entry_at(1) + b.entry_header_size(1);
        let size = b.payload_size(1);
        for i in 0..size {
            if image[(ptx + i) as usize] == 0 {
                image[(ptx + i) as usize] = b' ';
            }
        }
        let e = check_fatbin(&image).unwrap_err();
        assert_eq!((e.entry, e.format), (Some(1), ImageFormat::Ptx));
        assert!(e.reason.contains("terminating NUL"), "{e}");
    }
}

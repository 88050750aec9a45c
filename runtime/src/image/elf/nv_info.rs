//! CUDA's `.nv.info` and `.nv.info.<kernel>` sections (`SHT_LOPROC`): lists of attribute
//! records (parameter layout, register counts, ...) the driver walks record by record.
//!
//! A record is `[format: u8][attribute: u8][value or size: u16]`, followed, for format
//! `EIFMT_SVAL`, by `size` bytes of value. The records must tile the section exactly, so
//! a walk that trusts each size ends at the section's end. (Format codes as in public
//! cubin tools, e.g. CuAssembler's `CuNVInfo`.)

use super::{SHT_CUDA_INFO, Section, fail};
use crate::image::error::ImageError;
use crate::image::read::Bytes;

/// No value: the record is its 4-byte head.
const EIFMT_NVAL: u8 = 1;
/// A byte value, in the head's last two bytes.
const EIFMT_BVAL: u8 = 2;
/// A half-word value, in the head's last two bytes.
const EIFMT_HVAL: u8 = 3;
/// A sized value: the head's last two bytes are the size of the value that follows.
const EIFMT_SVAL: u8 = 4;
/// The bytes of a record's head.
const HEAD: u64 = 4;

/// Checks every `.nv.info*` section.
pub(crate) fn check(image: Bytes<'_>, sections: &[Section]) -> Result<(), ImageError> {
    for s in sections.iter().filter(|s| s.kind == SHT_CUDA_INFO) {
        if let Some(data) = s.data(image) {
            records(data, s)?;
        }
    }
    Ok(())
}

/// The records of one section tile it: each head lies inside, each format is known, and
/// each sized value ends inside.
fn records(data: Bytes<'_>, s: &Section) -> Result<(), ImageError> {
    let mut at = 0u64;
    let mut index = 0u64;
    while at < data.len() {
        let pos = s.offset.saturating_add(at);
        let field = format!("attribute record {index} of section {}", s.index);
        let (Some(format), Some(value)) = (data.u8(at), data.u16(at + 2)) else {
            return Err(fail(
                pos,
                field,
                format!(
                    "starts {} bytes before the section's end, too few for its 4-byte head",
                    data.len() - at
                ),
            ));
        };
        let length = match format {
            EIFMT_NVAL | EIFMT_BVAL | EIFMT_HVAL => HEAD,
            EIFMT_SVAL => HEAD + u64::from(value),
            other => {
                return Err(fail(
                    pos,
                    field,
                    format!(
                        "has format {other}; expected 1 to 4 (EIFMT_NVAL, _BVAL, _HVAL, _SVAL)"
                    ),
                ));
            }
        };
        if !data.contains(at, length) {
            return Err(fail(
                pos,
                field,
                format!(
                    "has a {length}-byte record at byte {at} of a {}-byte section: it runs past \
                     the section's end",
                    data.len()
                ),
            ));
        }
        at += length;
        index += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::image::elf::check_cubin;
    use crate::image::tests::build::{ElfBuilder, put};

    #[test]
    fn records_must_tile_the_section() {
        let b = ElfBuilder::minimal();
        let info = b.section(".nv.info.k");
        let good = b.build();
        assert!(check_cubin(&good).is_ok());
        // The first record is an SVAL: claim a value longer than the section.
        let mut image = good.clone();
        put(&mut image, info.offset + 2, &0x100u16.to_le_bytes());
        let e = check_cubin(&image).unwrap_err();
        assert!(e.reason.contains("past the section's end"), "{e}");
        // An unknown format.
        let mut image = good.clone();
        put(&mut image, info.offset, &[9]);
        let e = check_cubin(&image).unwrap_err();
        assert!(e.reason.contains("format 9"), "{e}");
        // A section two bytes short of its last record's head.
        let mut image = good;
        let size_at = b.section_header_at(".nv.info.k") + 0x20;
        put(&mut image, size_at, &(info.size - 2).to_le_bytes());
        let e = check_cubin(&image).unwrap_err();
        assert!(e.reason.contains("head"), "{e}");
    }
}

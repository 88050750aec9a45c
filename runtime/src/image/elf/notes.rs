//! Note sections (`SHT_NOTE`, e.g. CUDA's `.note.nv.tkinfo`, `.note.nv.cuver`): lists of
//! `Elf64_Nhdr` records a reader walks by the sizes each record claims.
//!
//! A record is `[n_namesz: u32][n_descsz: u32][n_type: u32]`, then the name and the
//! descriptor, each padded to the note alignment (4 bytes, or 8 in a section aligned to 8,
//! as the gABI allows). The records must tile the section exactly, so a walk that trusts
//! the sizes ends at the section's end.

use super::{SHT_NOTE, Section, fail};
use crate::image::error::ImageError;
use crate::image::read::{self, Bytes};

/// `sizeof(Elf64_Nhdr)`.
const NHDR_SIZE: u64 = 12;

/// Checks every note section.
pub(crate) fn check(image: Bytes<'_>, sections: &[Section]) -> Result<(), ImageError> {
    for s in sections.iter().filter(|s| s.kind == SHT_NOTE) {
        if let Some(data) = s.data(image) {
            records(data, s)?;
        }
    }
    Ok(())
}

/// `n` rounded up to the note alignment, or `None` on overflow.
fn padded(n: u64, align: u64) -> Option<u64> {
    n.checked_next_multiple_of(align)
}

/// The notes of one section tile it: each header lies inside, and each padded name and
/// descriptor end inside.
fn records(data: Bytes<'_>, s: &Section) -> Result<(), ImageError> {
    let align = if s.align == 8 { 8 } else { 4 };
    let mut at = 0u64;
    let mut index = 0u64;
    while at < data.len() {
        let pos = s.offset.saturating_add(at);
        let field = format!("note {index} of section {}", s.index);
        let (Some(namesz), Some(descsz)) = (data.u32(at), data.u32(at + 4)) else {
            return Err(fail(
                pos,
                field,
                "its 12-byte header runs past the section's end",
            ));
        };
        let length = padded(u64::from(namesz), align)
            .zip(padded(u64::from(descsz), align))
            .and_then(|(name, desc)| read::end(NHDR_SIZE, name)?.checked_add(desc));
        match length {
            Some(length) if data.contains(at, length) => at += length,
            _ => {
                return Err(fail(
                    pos,
                    field,
                    format!(
                        "claims a {namesz}-byte name and a {descsz}-byte descriptor at byte {at} \
                         of a {}-byte section: they run past the section's end",
                        data.len()
                    ),
                ));
            }
        }
        index += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::image::elf::check_cubin;
    use crate::image::tests::build::{ElfBuilder, put};

    #[test]
    fn notes_must_tile_their_section() {
        let b = ElfBuilder::minimal();
        let note = b.section(".note.nv.tkinfo");
        let good = b.build();
        assert!(check_cubin(&good).is_ok());
        for (field, value) in [
            (0u64, 0x100u32),
            (4, 0x100),
            (4, u32::MAX),
            (0, u32::MAX - 2),
        ] {
            let mut image = good.clone();
            put(&mut image, note.offset + field, &value.to_le_bytes());
            let e = check_cubin(&image).unwrap_err();
            assert!(e.reason.contains("past the section's end"), "{e}");
        }
        // Two bytes short: the last descriptor no longer fits.
        let mut image = good;
        put(
            &mut image,
            b.section_header_at(".note.nv.tkinfo") + 0x20,
            &(note.size - 2).to_le_bytes(),
        );
        assert!(check_cubin(&image).is_err());
    }
}

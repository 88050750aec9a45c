//! Program headers (`Elf64_Phdr`): the segments the driver loads from the file.

use super::header::Header;
use super::{PHDR_SIZE, fail};
use crate::image::error::ImageError;
use crate::image::read::{self, Bytes};

/// `PT_LOAD`: a segment loaded into memory.
const PT_LOAD: u32 = 1;

// Field offsets in `Elf64_Phdr`.
const P_TYPE: u64 = 0;
const P_OFFSET: u64 = 8;
const P_FILESZ: u64 = 0x20;
const P_MEMSZ: u64 = 0x28;
const P_ALIGN: u64 = 0x30;

/// Checks every program header (the header check put the table in bounds).
pub(crate) fn check(image: Bytes<'_>, header: &Header) -> Result<(), ImageError> {
    for i in 0..header.phnum {
        let Some(at) = read::element(header.phoff, u64::from(i), PHDR_SIZE) else {
            break;
        };
        segment(image, i, at)?;
    }
    Ok(())
}

/// One segment: its file bytes `[p_offset, p_offset + p_filesz)` inside the image, a
/// loadable segment no larger in the file than in memory (the loader copies `p_filesz`
/// bytes into `p_memsz`), and `p_align` 0 or a power of two.
fn segment(image: Bytes<'_>, i: u16, at: u64) -> Result<(), ImageError> {
    let field = |name: &str| format!("program header {i} `{name}`");
    let read = || -> Option<(u32, u64, u64, u64, u64)> {
        Some((
            image.u32(at + P_TYPE)?,
            image.u64(at + P_OFFSET)?,
            image.u64(at + P_FILESZ)?,
            image.u64(at + P_MEMSZ)?,
            image.u64(at + P_ALIGN)?,
        ))
    };
    let Some((kind, offset, filesz, memsz, align)) = read() else {
        return Err(fail(
            at,
            format!("program header {i}"),
            "lies past the image's end",
        ));
    };
    if !image.contains(offset, filesz) {
        let end =
            read::end(offset, filesz).map_or_else(|| "overflow".to_owned(), |e| e.to_string());
        return Err(fail(
            at + P_OFFSET,
            field("p_offset"),
            format!(
                "is {offset}: the segment's bytes {offset}..{end} (`p_filesz` {filesz}) lie \
                 past the end of the image ({} bytes)",
                image.len()
            ),
        ));
    }
    if kind == PT_LOAD && filesz > memsz {
        return Err(fail(
            at + P_FILESZ,
            field("p_filesz"),
            format!(
                "is {filesz}, more than `p_memsz` ({memsz}): a loadable segment's file bytes \
                 must fit in its memory"
            ),
        ));
    }
    if align != 0 && !align.is_power_of_two() {
        return Err(fail(
            at + P_ALIGN,
            field("p_align"),
            format!("is {align}; expected 0 or a power of two"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::elf::check_cubin;
    use crate::image::tests::build::{ElfBuilder, put};

    /// Breaks field `field` of program header 1 (a `PT_LOAD` of the text).
    fn broken(field: u64, value: u64) -> ImageError {
        let b = ElfBuilder::minimal();
        let mut image = b.build();
        put(
            &mut image,
            b.program_header_at(1) + field,
            &value.to_le_bytes(),
        );
        check_cubin(&image).unwrap_err()
    }

    #[test]
    fn each_segment_field_is_checked() {
        let len = ElfBuilder::minimal().build().len() as u64;
        let e = broken(P_OFFSET, len);
        assert!(e.reason.contains("past the end"), "{e}");
        let e = broken(P_FILESZ, u64::MAX);
        assert!(e.reason.contains("overflow"), "{e}");
        let e = broken(P_MEMSZ, 0);
        assert!(e.field.ends_with("`p_filesz`"), "{e}");
        let e = broken(P_ALIGN, 3);
        assert!(e.field.ends_with("`p_align`"), "{e}");
    }
}

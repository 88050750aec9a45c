//! Section groups (`SHT_GROUP`, e.g. COMDAT groups of relocatable code): a flag word, then
//! the indices of the group's member sections, which a reader follows.

use super::tables::{is_symbol_table, symbol_count};
use super::{SHT_GROUP, Section, fail};
use crate::image::error::ImageError;
use crate::image::read::Bytes;

/// The size of a group entry (`Elf32_Word`).
const WORD: u64 = 4;

/// Checks every section group.
pub(crate) fn check(image: Bytes<'_>, sections: &[Section]) -> Result<(), ImageError> {
    for s in sections.iter().filter(|s| s.kind == SHT_GROUP) {
        group(image, s, sections)?;
    }
    Ok(())
}

/// One group: 4-byte entries, a whole number of them, its signature symbol (`sh_info`, in
/// the symbol table its `sh_link` names) present, and each member a section.
fn group(image: Bytes<'_>, s: &Section, sections: &[Section]) -> Result<(), ImageError> {
    if s.entsize != WORD || !s.size.is_multiple_of(WORD) {
        return Err(fail(
            s.entsize_at(),
            s.field("sh_entsize"),
            format!(
                "is {} with `sh_size` {}; a section group is a whole number of 4-byte words",
                s.entsize, s.size
            ),
        ));
    }
    let Some(symbols) = sections.get(s.link as usize).filter(|t| is_symbol_table(t)) else {
        return Err(fail(
            s.link_at(),
            s.field("sh_link"),
            format!(
                "is {}, not a symbol table; a group's `sh_link` names the table of its \
                 signature symbol",
                s.link
            ),
        ));
    };
    if u64::from(s.info) >= symbol_count(symbols) {
        return Err(fail(
            s.info_at(),
            s.field("sh_info"),
            format!(
                "is {} but the symbol table has {} symbols; a group's `sh_info` is its \
                 signature symbol",
                s.info,
                symbol_count(symbols)
            ),
        ));
    }
    let Some(words) = s.data(image) else {
        return Ok(()); // Out of bounds was refused by the section checks.
    };
    // Word 0 is the flags (GRP_COMDAT); the members follow.
    for at in (WORD..words.len()).step_by(WORD as usize) {
        let member = words.u32(at).unwrap_or(u32::MAX);
        if member == 0 || member as usize >= sections.len() {
            return Err(fail(
                s.offset.saturating_add(at),
                format!("member {} of section group {}", at / WORD - 1, s.index),
                format!(
                    "is section {member} but the image has {} sections (and 0 is not a \
                     member)",
                    sections.len()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::image::elf::check_cubin;
    use crate::image::error::ImageError;
    use crate::image::tests::build::{ElfBuilder, put};

    /// The minimal cubin with `.nv.constant0.k` (16 bytes) turned into a group of `members`
    /// (after the flag word), then `field` of its header set to `value`.
    fn group(members: [u32; 3], field: u64, value: &[u8]) -> Result<Vec<String>, ImageError> {
        let b = ElfBuilder::minimal();
        let mut image = b.build();
        let header = b.section_header_at(".nv.constant0.k");
        let words = b.section(".nv.constant0.k").offset;
        put(&mut image, header + 4, &17u32.to_le_bytes()); // SHT_GROUP
        put(&mut image, header + 8, &0u64.to_le_bytes()); // no SHF_INFO_LINK
        put(
            &mut image,
            header + 0x28,
            &u32::from(b.index(".symtab")).to_le_bytes(),
        );
        put(&mut image, header + 0x2C, &1u32.to_le_bytes());
        put(&mut image, header + 0x38, &4u64.to_le_bytes());
        put(&mut image, words, &1u32.to_le_bytes()); // GRP_COMDAT
        for (i, m) in members.iter().enumerate() {
            put(&mut image, words + 4 + 4 * i as u64, &m.to_le_bytes());
        }
        put(&mut image, header + field, value);
        check_cubin(&image)
    }

    #[test]
    fn groups_name_sections_and_a_signature_symbol() {
        let text = u32::from(ElfBuilder::minimal().index(".text.k"));
        let ok = [text, text + 1, text + 2];
        assert!(group(ok, 0x38, &4u64.to_le_bytes()).is_ok());
        let e = group([text, 99, text], 0x38, &4u64.to_le_bytes()).unwrap_err();
        assert!(e.field.starts_with("member 1 of section group"), "{e}");
        let e = group([0, text, text], 0x38, &4u64.to_le_bytes()).unwrap_err();
        assert!(e.reason.contains("0 is not a member"), "{e}");
        let e = group(ok, 0x38, &8u64.to_le_bytes()).unwrap_err();
        assert!(e.reason.contains("4-byte words"), "{e}");
        let e = group(ok, 0x2C, &50u32.to_le_bytes()).unwrap_err();
        assert!(e.reason.contains("signature symbol"), "{e}");
        let e = group(ok, 0x28, &2u32.to_le_bytes()).unwrap_err();
        assert!(e.reason.contains("not a symbol table"), "{e}");
    }
}

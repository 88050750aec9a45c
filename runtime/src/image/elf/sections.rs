//! Section headers (`Elf64_Shdr`): each one's bytes, alignment, links and name.

use super::header::Header;
use super::{
    SHDR_SIZE, SHF_INFO_LINK, SHT_DYNSYM, SHT_GROUP, SHT_NOBITS, SHT_REL, SHT_RELA, SHT_STRTAB,
    SHT_SYMTAB, SHT_SYMTAB_SHNDX, fail,
};
use crate::image::error::ImageError;
use crate::image::read::{self, Bytes};

// Field offsets in `Elf64_Shdr`.
const SH_NAME: u64 = 0;
const SH_TYPE: u64 = 4;
const SH_FLAGS: u64 = 8;
const SH_ADDR: u64 = 0x10;
const SH_OFFSET: u64 = 0x18;
const SH_SIZE: u64 = 0x20;
const SH_LINK: u64 = 0x28;
const SH_INFO: u64 = 0x2C;
const SH_ADDRALIGN: u64 = 0x30;
const SH_ENTSIZE: u64 = 0x38;

/// One section header, as read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Section {
    /// Its index in the section header table.
    pub(crate) index: u16,
    /// Where its header starts in the image.
    pub(crate) header_at: u64,
    pub(crate) name: u32,
    pub(crate) kind: u32,
    pub(crate) flags: u64,
    pub(crate) addr: u64,
    pub(crate) offset: u64,
    pub(crate) size: u64,
    pub(crate) link: u32,
    pub(crate) info: u32,
    pub(crate) align: u64,
    pub(crate) entsize: u64,
}

impl Section {
    fn read(image: Bytes<'_>, index: u16, at: u64) -> Option<Section> {
        Some(Section {
            index,
            header_at: at,
            name: image.u32(at + SH_NAME)?,
            kind: image.u32(at + SH_TYPE)?,
            flags: image.u64(at + SH_FLAGS)?,
            addr: image.u64(at + SH_ADDR)?,
            offset: image.u64(at + SH_OFFSET)?,
            size: image.u64(at + SH_SIZE)?,
            link: image.u32(at + SH_LINK)?,
            info: image.u32(at + SH_INFO)?,
            align: image.u64(at + SH_ADDRALIGN)?,
            entsize: image.u64(at + SH_ENTSIZE)?,
        })
    }

    /// The section's bytes in the file; `None` for `SHT_NOBITS` or out of bounds.
    pub(crate) fn data<'a>(&self, image: Bytes<'a>) -> Option<Bytes<'a>> {
        if self.kind == SHT_NOBITS {
            return None;
        }
        image.sub(self.offset, self.size)
    }

    /// A field of this section's header, for errors: "section 5 `sh_link`".
    pub(crate) fn field(&self, name: &str) -> String {
        format!("section {} `{name}`", self.index)
    }

    pub(crate) fn at(&self, field_offset: u64) -> u64 {
        self.header_at + field_offset
    }

    pub(crate) fn link_at(&self) -> u64 {
        self.at(SH_LINK)
    }

    pub(crate) fn info_at(&self) -> u64 {
        self.at(SH_INFO)
    }

    pub(crate) fn size_at(&self) -> u64 {
        self.at(SH_SIZE)
    }

    pub(crate) fn entsize_at(&self) -> u64 {
        self.at(SH_ENTSIZE)
    }

    pub(crate) fn kind_at(&self) -> u64 {
        self.at(SH_TYPE)
    }
}

/// Reads every section header; the header check put the whole table in bounds.
pub(crate) fn read(image: Bytes<'_>, header: &Header) -> Result<Vec<Section>, ImageError> {
    (0..header.shnum)
        .map(|i| {
            let at = read::element(header.shoff, u64::from(i), SHDR_SIZE);
            at.and_then(|at| Section::read(image, i, at))
                .ok_or_else(|| {
                    fail(
                        at.unwrap_or(header.shoff),
                        format!("section {i}"),
                        "its header lies past the end of the image",
                    )
                })
        })
        .collect()
}

/// Checks each section header on its own and against the table.
pub(crate) fn check(
    image: Bytes<'_>,
    header: &Header,
    sections: &[Section],
) -> Result<(), ImageError> {
    let (Some(null), Some(name_table_section)) =
        (sections.first(), sections.get(usize::from(header.shstrndx)))
    else {
        // The header check guarantees both; refuse rather than index.
        return Err(fail(0, "the section header table", "is empty"));
    };
    null_section(null)?;
    let indices = index_bound(sections);
    for s in sections {
        supported_kind(s)?;
        contents_in_bounds(image, s)?;
        alignment(s)?;
        link_in_range(s, sections.len())?;
        info_link_in_range(s, sections.len())?;
        info_is_an_index(s, indices)?;
    }
    let names = name_table(image, name_table_section)?;
    for s in sections {
        name_in_table(s, names)?;
    }
    Ok(())
}

/// Section 0 is the null section. Its `sh_size`, `sh_link` and `sh_info` carry the extended
/// counts when those are used; they are refused, so these must be zero, and no reader can
/// take them for counts.
fn null_section(s: &Section) -> Result<(), ImageError> {
    let fields = [
        (s.kind_at(), "sh_type", u64::from(s.kind)),
        (s.size_at(), "sh_size", s.size),
        (s.link_at(), "sh_link", u64::from(s.link)),
        (s.info_at(), "sh_info", u64::from(s.info)),
    ];
    for (at, name, value) in fields {
        if value != 0 {
            return Err(fail(
                at,
                s.field(name),
                format!(
                    "is {value}; section 0 must be the null section, all zero (extended \
                     numbering, which keeps counts there, is not supported)"
                ),
            ));
        }
    }
    Ok(())
}

/// Extended symbol section indices (`SHT_SYMTAB_SHNDX`) change how every symbol's section
/// is read, and cubins do not use them: refused rather than followed.
fn supported_kind(s: &Section) -> Result<(), ImageError> {
    if s.kind != SHT_SYMTAB_SHNDX {
        return Ok(());
    }
    Err(fail(
        s.kind_at(),
        s.field("sh_type"),
        "is 18 (SHT_SYMTAB_SHNDX): extended symbol section indices are not used by cubins \
         and not supported",
    ))
}

/// A section's bytes `[sh_offset, sh_offset + sh_size)` lie inside the image. A section that
/// occupies none (`SHT_NOBITS`) may claim any size, but its offset still lies within: every
/// offset a reader may seek to is inside the image.
fn contents_in_bounds(image: Bytes<'_>, s: &Section) -> Result<(), ImageError> {
    if s.kind == SHT_NOBITS {
        if s.offset <= image.len() {
            return Ok(());
        }
        return Err(fail(
            s.at(SH_OFFSET),
            s.field("sh_offset"),
            format!(
                "is {}, past the end of the image ({} bytes); a section with no file bytes \
                 (SHT_NOBITS) still has its offset inside",
                s.offset,
                image.len()
            ),
        ));
    }
    if image.contains(s.offset, s.size) {
        return Ok(());
    }
    let end = read::end(s.offset, s.size).map_or_else(|| "overflow".to_owned(), |e| e.to_string());
    Err(fail(
        s.at(SH_OFFSET),
        s.field("sh_offset"),
        format!(
            "is {}: the section's bytes {}..{end} (`sh_size` {}) lie past the end of the \
             image ({} bytes)",
            s.offset,
            s.offset,
            s.size,
            image.len()
        ),
    ))
}

/// The sections' file bytes lie apart: from the ELF header, from both header tables and
/// from each other. A section laid over a header or over another section gives the same
/// bytes two meanings (a string table that is also a symbol table, a section header that is
/// also code), which no toolchain writes and no check of either part alone can vouch for.
/// Empty and `SHT_NOBITS` sections occupy no bytes and may share an offset. Checked last, so
/// a section's own rules (a size that is not a whole number of records) report first.
pub(crate) fn contents_apart(header: &Header, sections: &[Section]) -> Result<(), ImageError> {
    let headers = [
        ((0, super::EHDR_SIZE), "the ELF header"),
        (
            (header.shoff, u64::from(header.shnum) * SHDR_SIZE),
            "the section header table",
        ),
        (
            (header.phoff, u64::from(header.phnum) * super::PHDR_SIZE),
            "the program header table",
        ),
    ];
    let mut placed: Vec<&Section> = sections
        .iter()
        .filter(|s| s.kind != SHT_NOBITS && s.size != 0)
        .collect();
    placed.sort_by_key(|s| (s.offset, s.index));
    for s in &placed {
        if let Some((_, what)) = headers
            .iter()
            .find(|(range, _)| read::overlap((s.offset, s.size), *range))
        {
            return Err(overlapping(s, what));
        }
    }
    for pair in placed.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if read::overlap((a.offset, a.size), (b.offset, b.size)) {
            return Err(overlapping(b, &format!("section {}'s bytes", a.index)));
        }
    }
    Ok(())
}

fn overlapping(s: &Section, what: &str) -> ImageError {
    fail(
        s.at(SH_OFFSET),
        s.field("sh_offset"),
        format!(
            "is {}: the section's bytes {}..{} overlap {what}; each section's bytes lie apart",
            s.offset,
            s.offset,
            u128::from(s.offset) + u128::from(s.size)
        ),
    )
}

/// `sh_addralign` is 0 or a power of two (the ELF rule); readers round with it as a mask.
fn alignment(s: &Section) -> Result<(), ImageError> {
    if s.align == 0 || s.align.is_power_of_two() {
        return Ok(());
    }
    Err(fail(
        s.at(SH_ADDRALIGN),
        s.field("sh_addralign"),
        format!("is {}; expected 0 or a power of two", s.align),
    ))
}

/// `sh_link` is a section index wherever it is used: it must name a section.
fn link_in_range(s: &Section, count: usize) -> Result<(), ImageError> {
    if (s.link as usize) < count {
        return Ok(());
    }
    Err(fail(
        s.link_at(),
        s.field("sh_link"),
        format!(
            "is {} but the image has {count} sections; expected a section index",
            s.link
        ),
    ))
}

/// `sh_info` is a section index for relocations and whenever `SHF_INFO_LINK` says so (CUDA's
/// `.nv.info.<kernel>` and `.nv.constant0.<kernel>` sections): it must name a section.
fn info_link_in_range(s: &Section, count: usize) -> Result<(), ImageError> {
    let is_index = s.flags & SHF_INFO_LINK != 0 || matches!(s.kind, SHT_REL | SHT_RELA);
    if !is_index || (s.info as usize) < count {
        return Ok(());
    }
    Err(fail(
        s.info_at(),
        s.field("sh_info"),
        format!(
            "is {} but the image has {count} sections; it names a section (SHF_INFO_LINK or a \
             relocation section)",
            s.info
        ),
    ))
}

/// The bound below which every `sh_info` must lie: the larger of the section count and the
/// symbol count, since CUDA's sections use `sh_info` for one index or the other.
fn index_bound(sections: &[Section]) -> u64 {
    let symbols = sections
        .iter()
        .filter(|s| matches!(s.kind, SHT_SYMTAB | SHT_DYNSYM))
        .map(|s| s.size / super::SYM_SIZE)
        .max()
        .unwrap_or(0);
    symbols.max(sections.len() as u64)
}

/// Every other `sh_info` is an index too, of a section or of a symbol, in CUDA's sections
/// (a kernel's `.text` names its symbol, its `.nv.shared` its `.text` section, without
/// `SHF_INFO_LINK`), and the driver follows it without a check: a cubin whose global
/// `.nv.info` said `sh_info = 0xffffffff` crashed it. So it must lie below both counts' larger.
fn info_is_an_index(s: &Section, bound: u64) -> Result<(), ImageError> {
    // Symbol tables and groups give `sh_info` their own meaning, checked in `tables.rs` and
    // `groups.rs`.
    if matches!(s.kind, SHT_SYMTAB | SHT_DYNSYM | SHT_GROUP) || u64::from(s.info) < bound {
        return Ok(());
    }
    Err(fail(
        s.info_at(),
        s.field("sh_info"),
        format!(
            "is {} but the image has fewer sections and symbols than that; CUDA's sections \
             use it as a section or symbol index",
            s.info
        ),
    ))
}

/// The section named by `e_shstrndx` is a non-empty string table ending in NUL, so every
/// name read from it ends inside it. Returns its bytes.
fn name_table<'a>(image: Bytes<'a>, s: &Section) -> Result<Bytes<'a>, ImageError> {
    if s.kind != SHT_STRTAB {
        return Err(fail(
            s.kind_at(),
            s.field("sh_type"),
            format!(
                "is {}, but `e_shstrndx` names this section: expected {SHT_STRTAB} \
                 (SHT_STRTAB), the section name table",
                s.kind
            ),
        ));
    }
    let bytes = s.data(image).unwrap_or(Bytes::new(&[]));
    if bytes.len() == 0 {
        return Err(fail(
            s.size_at(),
            s.field("sh_size"),
            "is 0, but this is the section name table: every section's name is read from it",
        ));
    }
    Ok(bytes)
}

/// Every section's name starts inside the section name table (which ends in NUL, so the
/// name ends inside it too).
fn name_in_table(s: &Section, names: Bytes<'_>) -> Result<(), ImageError> {
    if u64::from(s.name) < names.len() {
        return Ok(());
    }
    Err(fail(
        s.at(SH_NAME),
        s.field("sh_name"),
        format!(
            "is {} but the section name table has {} bytes",
            s.name,
            names.len()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::elf::check_cubin;
    use crate::image::tests::build::{ElfBuilder, put};

    /// Breaks field `field` (at `offset` in the header) of the section called `name` in the
    /// minimal cubin, and returns the error.
    fn broken(name: &str, field: u64, value: &[u8]) -> ImageError {
        let b = ElfBuilder::minimal();
        let mut image = b.build();
        put(&mut image, b.section_header_at(name) + field, value);
        check_cubin(&image).unwrap_err()
    }

    #[test]
    fn section_zero_must_be_null() {
        for (field, value) in [
            (SH_TYPE, 1u32.to_le_bytes().to_vec()),
            (SH_SIZE, 5u64.to_le_bytes().to_vec()),
            (SH_LINK, 1u32.to_le_bytes().to_vec()),
            (SH_INFO, 7u32.to_le_bytes().to_vec()),
        ] {
            let e = broken("", field, &value);
            assert!(e.field.starts_with("section 0 "), "{e}");
            assert!(e.reason.contains("null section"), "{e}");
        }
    }

    #[test]
    fn section_bytes_must_lie_inside_unless_nobits() {
        let e = broken(".text.k", SH_SIZE, &0x10_0000u64.to_le_bytes());
        assert!(e.field.ends_with("`sh_offset`"), "{e}");
        assert!(e.reason.contains("past the end"), "{e}");
        let e = broken(".text.k", SH_OFFSET, &(u64::MAX - 1).to_le_bytes());
        assert!(e.reason.contains("overflow"), "{e}");
        // A NOBITS section may claim any size: it has no bytes in the file.
        let b = ElfBuilder::minimal();
        let mut image = b.build();
        let at = b.section_header_at(".nv.shared.k");
        put(&mut image, at + SH_SIZE, &u64::MAX.to_le_bytes());
        assert!(check_cubin(&image).is_ok());
        // But its offset lies inside (issue 21: every offset a reader seeks to is in bounds).
        let len = image.len() as u64;
        put(&mut image, at + SH_OFFSET, &len.to_le_bytes());
        assert!(check_cubin(&image).is_ok());
        for offset in [len + 1, u64::MAX] {
            put(&mut image, at + SH_OFFSET, &offset.to_le_bytes());
            let e = check_cubin(&image).unwrap_err();
            assert!(e.field.ends_with("`sh_offset`"), "{e}");
            assert!(e.reason.contains("SHT_NOBITS"), "{e}");
        }
    }

    /// Issue 21: section bytes laid over a header or over another section are refused.
    #[test]
    fn section_bytes_lie_apart() {
        let b = ElfBuilder::minimal();
        let good = b.build();
        let h = crate::image::elf::header::check(Bytes::new(&good)).unwrap();
        let text = b.section(".text.k");
        let strtab = b.section(".strtab");
        for (offset, what) in [
            (0, "the ELF header"),
            (64 - 1, "the ELF header"),
            (h.shoff, "the section header table"),
            (h.phoff, "the program header table"),
            (strtab.offset, "section 2's bytes"),
            (strtab.offset + strtab.size - 1, "section 2's bytes"),
        ] {
            let mut image = good.clone();
            put(
                &mut image,
                b.section_header_at(".text.k") + SH_OFFSET,
                &offset.to_le_bytes(),
            );
            let e = check_cubin(&image).unwrap_err();
            assert!(e.field.ends_with("`sh_offset`"), "{offset}: {e}");
            assert!(e.reason.contains(what), "{offset}: {e}");
        }
        // Empty sections occupy no bytes and may sit anywhere inside.
        let mut image = good.clone();
        let at = b.section_header_at(".nv.constant0.k");
        put(&mut image, at + SH_OFFSET, &text.offset.to_le_bytes());
        put(&mut image, at + SH_SIZE, &0u64.to_le_bytes());
        assert!(check_cubin(&image).is_ok());
    }

    #[test]
    fn unsupported_kinds_are_refused() {
        let e = broken(".nv.info", SH_TYPE, &SHT_SYMTAB_SHNDX.to_le_bytes());
        assert!(e.reason.contains("SHT_SYMTAB_SHNDX"), "{e}");
        // A group is read, not refused: as .nv.info's bytes it has the wrong entry size.
        let e = broken(".nv.info", SH_TYPE, &17u32.to_le_bytes());
        assert!(e.reason.contains("section group"), "{e}");
    }

    #[test]
    fn alignment_must_be_a_power_of_two() {
        let e = broken(".text.k", SH_ADDRALIGN, &24u64.to_le_bytes());
        assert!(e.field.ends_with("`sh_addralign`"), "{e}");
    }

    #[test]
    fn every_info_is_a_section_or_symbol_index() {
        // The image that crashed the driver on an H100: the global `.nv.info` with
        // `sh_info = 0xffffffff`.
        let e = broken(".nv.info", SH_INFO, &u32::MAX.to_le_bytes());
        assert!(e.field.ends_with("`sh_info`"), "{e}");
        assert!(e.reason.contains("section or symbol index"), "{e}");
    }

    #[test]
    fn links_and_info_links_must_name_sections() {
        let e = broken(".nv.info", SH_LINK, &99u32.to_le_bytes());
        assert!(e.field.ends_with("`sh_link`"), "{e}");
        let e = broken(".nv.info.k", SH_INFO, &99u32.to_le_bytes());
        assert!(e.field.ends_with("`sh_info`"), "{e}");
        let e = broken(".rela.text.k", SH_INFO, &0xFFFF_FFFFu32.to_le_bytes());
        assert!(e.field.ends_with("`sh_info`"), "{e}");
    }

    #[test]
    fn names_come_from_a_terminated_section_name_table() {
        let e = broken(".text.k", SH_NAME, &0x1_0000u32.to_le_bytes());
        assert!(e.field.ends_with("`sh_name`"), "{e}");
        let e = broken(".shstrtab", SH_TYPE, &1u32.to_le_bytes());
        assert!(e.reason.contains("section name table"), "{e}");
        let e = broken(".shstrtab", SH_SIZE, &0u64.to_le_bytes());
        assert!(e.reason.contains("section name table"), "{e}");
        // One byte shorter, the table no longer ends in NUL.
        let b = ElfBuilder::minimal();
        let mut image = b.build();
        let at = b.section_header_at(".shstrtab") + SH_SIZE;
        let size = u64::from_le_bytes(image[at as usize..at as usize + 8].try_into().unwrap());
        put(&mut image, at, &(size - 1).to_le_bytes());
        let e = check_cubin(&image).unwrap_err();
        assert!(e.reason.contains("NUL"), "{e}");
    }
}

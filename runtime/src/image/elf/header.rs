//! The ELF header (`Elf64_Ehdr`): what the file is, and where its two header tables are.

use super::{EHDR_SIZE, PHDR_SIZE, SHDR_SIZE, SHN_LORESERVE, SHN_UNDEF, SHN_XINDEX, fail};
use crate::image::error::{ImageError, ImageFormat};
use crate::image::read::FATBIN_MAGIC;
use crate::image::read::{self, Bytes};

/// `e_ident[EI_CLASS]` of a 64-bit ELF.
const ELFCLASS64: u8 = 2;
/// `e_ident[EI_DATA]` of a little-endian ELF.
const ELFDATA2LSB: u8 = 1;
/// `e_ident[EI_VERSION]`: the only ELF version.
const EV_CURRENT: u8 = 1;
/// `EM_CUDA`: the ELF machine of NVIDIA GPU code.
pub(crate) const EM_CUDA: u16 = 190;
/// `ET_REL`: a relocatable cubin (`nvcc -rdc`).
const ET_REL: u16 = 1;
/// `ET_EXEC`: a linked cubin (`nvcc -cubin`).
const ET_EXEC: u16 = 2;
/// `PN_XNUM`: the program header count is in section 0's `sh_info`.
const PN_XNUM: u16 = 0xFFFF;

// Field offsets in `Elf64_Ehdr`.
const EI_CLASS: u64 = 4;
const EI_DATA: u64 = 5;
const EI_VERSION: u64 = 6;
const E_TYPE: u64 = 0x10;
const E_MACHINE: u64 = 0x12;
const E_PHOFF: u64 = 0x20;
const E_SHOFF: u64 = 0x28;
const E_EHSIZE: u64 = 0x34;
const E_PHENTSIZE: u64 = 0x36;
const E_PHNUM: u64 = 0x38;
const E_SHENTSIZE: u64 = 0x3A;
const E_SHNUM: u64 = 0x3C;
const E_SHSTRNDX: u64 = 0x3E;

/// The header fields the rest of the checks rely on, each already checked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    /// Where the section header table starts; it holds `shnum` 64-byte entries in bounds.
    pub(crate) shoff: u64,
    /// The number of sections, at least 1.
    pub(crate) shnum: u16,
    /// The section name table's index, below `shnum`.
    pub(crate) shstrndx: u16,
    /// Where the program header table starts; `phnum` 56-byte entries in bounds.
    pub(crate) phoff: u64,
    /// The number of program headers (`PN_XNUM` refused).
    pub(crate) phnum: u16,
}

/// The raw header fields, read once the image is known to hold a whole header.
struct Raw {
    e_type: u16,
    e_machine: u16,
    e_phoff: u64,
    e_shoff: u64,
    e_ehsize: u16,
    e_phentsize: u16,
    e_phnum: u16,
    e_shentsize: u16,
    e_shnum: u16,
    e_shstrndx: u16,
}

impl Raw {
    fn read(image: Bytes<'_>) -> Option<Raw> {
        Some(Raw {
            e_type: image.u16(E_TYPE)?,
            e_machine: image.u16(E_MACHINE)?,
            e_phoff: image.u64(E_PHOFF)?,
            e_shoff: image.u64(E_SHOFF)?,
            e_ehsize: image.u16(E_EHSIZE)?,
            e_phentsize: image.u16(E_PHENTSIZE)?,
            e_phnum: image.u16(E_PHNUM)?,
            e_shentsize: image.u16(E_SHENTSIZE)?,
            e_shnum: image.u16(E_SHNUM)?,
            e_shstrndx: image.u16(E_SHSTRNDX)?,
        })
    }
}

/// Checks the ELF header and returns the fields later checks use.
pub(crate) fn check(image: Bytes<'_>) -> Result<Header, ImageError> {
    identification(image)?;
    let raw = Raw::read(image).ok_or_else(|| short(image))?;
    machine(&raw)?;
    file_type(&raw)?;
    header_size(&raw)?;
    section_table(image, &raw)?;
    section_name_index(&raw)?;
    program_header_table(image, &raw)?;
    tables_apart(&raw)?;
    Ok(Header {
        shoff: raw.e_shoff,
        shnum: raw.e_shnum,
        shstrndx: raw.e_shstrndx,
        phoff: raw.e_phoff,
        phnum: raw.e_phnum,
    })
}

fn short(image: Bytes<'_>) -> ImageError {
    ImageError::whole(
        ImageFormat::Cubin,
        "the ELF header",
        format!(
            "needs {EHDR_SIZE} bytes but the image has {}; a cubin starts with a 64-bit ELF \
             header",
            image.len()
        ),
    )
}

/// The identification bytes say how every later field is laid out: only a 64-bit
/// little-endian ELF of the current version is read the way the driver reads cubins.
fn identification(image: Bytes<'_>) -> Result<(), ImageError> {
    let magic = image.rest(0).get(..4).unwrap_or(image.rest(0));
    if magic != b"\x7fELF" {
        let hint = if image.u32(0) == Some(FATBIN_MAGIC) {
            " (this is a fatbin: load it with `Module::load_fatbin`)"
        } else {
            ""
        };
        return Err(fail(
            0,
            "the ELF magic",
            format!("is {magic:02x?}; a cubin starts with `\\x7fELF`{hint}"),
        ));
    }
    if image.len() < EHDR_SIZE {
        return Err(short(image));
    }
    let byte = |at| image.u8(at).unwrap_or_default();
    let rules = [
        (
            EI_CLASS,
            "`EI_CLASS`",
            ELFCLASS64,
            "2 (ELFCLASS64): cubins are 64-bit ELF",
        ),
        (
            EI_DATA,
            "`EI_DATA`",
            ELFDATA2LSB,
            "1 (ELFDATA2LSB): cubins are little-endian",
        ),
        (EI_VERSION, "`EI_VERSION`", EV_CURRENT, "1 (EV_CURRENT)"),
    ];
    for (at, field, expected, what) in rules {
        if byte(at) != expected {
            return Err(fail(at, field, format!("is {}; expected {what}", byte(at))));
        }
    }
    Ok(())
}

/// Only GPU code is loaded as a cubin; another machine's ELF is a wrong file, not a cubin.
fn machine(raw: &Raw) -> Result<(), ImageError> {
    if raw.e_machine != EM_CUDA {
        return Err(fail(
            E_MACHINE,
            "`e_machine`",
            format!(
                "is {}; expected {EM_CUDA} (EM_CUDA): this ELF is not GPU code",
                raw.e_machine
            ),
        ));
    }
    Ok(())
}

/// Cubins are linked (`ET_EXEC`) or relocatable (`ET_REL`) objects; other types are not
/// produced by the CUDA toolchain.
fn file_type(raw: &Raw) -> Result<(), ImageError> {
    if !matches!(raw.e_type, ET_REL | ET_EXEC) {
        return Err(fail(
            E_TYPE,
            "`e_type`",
            format!(
                "is {}; expected {ET_EXEC} (ET_EXEC) or {ET_REL} (ET_REL)",
                raw.e_type
            ),
        ));
    }
    Ok(())
}

/// The header's declared size must be the size of the header the driver reads.
fn header_size(raw: &Raw) -> Result<(), ImageError> {
    if u64::from(raw.e_ehsize) != EHDR_SIZE {
        return Err(fail(
            E_EHSIZE,
            "`e_ehsize`",
            format!(
                "is {}; expected {EHDR_SIZE} (the size of Elf64_Ehdr)",
                raw.e_ehsize
            ),
        ));
    }
    Ok(())
}

/// The section header table: present (a cubin's kernels are sections), of `Elf64_Shdr`
/// entries (a reader indexes it as an array of them), and wholly inside the image. A zero
/// count with a table present means extended numbering (the count in section 0), which is
/// refused rather than guessed.
fn section_table(image: Bytes<'_>, raw: &Raw) -> Result<(), ImageError> {
    if raw.e_shnum == 0 {
        let reason = if raw.e_shoff != 0 {
            "is 0 with a section header table present: extended section numbering (the count \
             in section 0's `sh_size`) is not supported"
        } else {
            "is 0: a cubin needs sections (its kernels are `.text.<name>` sections)"
        };
        return Err(fail(E_SHNUM, "`e_shnum`", reason));
    }
    if u64::from(raw.e_shentsize) != SHDR_SIZE {
        return Err(fail(
            E_SHENTSIZE,
            "`e_shentsize`",
            format!(
                "is {}; expected {SHDR_SIZE} (the size of Elf64_Shdr)",
                raw.e_shentsize
            ),
        ));
    }
    table_in_bounds(
        image,
        E_SHOFF,
        "`e_shoff`",
        raw.e_shoff,
        raw.e_shnum,
        SHDR_SIZE,
        "section",
    )
}

/// The section name table index: names are read from that section, so it must be one. The
/// reserved indices (`SHN_UNDEF`, `SHN_LORESERVE..`, `SHN_XINDEX`) are not sections; the
/// extended form is refused rather than followed.
fn section_name_index(raw: &Raw) -> Result<(), ImageError> {
    let index = raw.e_shstrndx;
    let reason = if index == SHN_UNDEF {
        "is 0 (SHN_UNDEF): a cubin needs a section name table (its kernels are found by \
         section name)"
            .to_owned()
    } else if index == SHN_XINDEX {
        "is 0xffff (SHN_XINDEX): extended section numbering (the index in section 0's \
         `sh_link`) is not supported"
            .to_owned()
    } else if index >= SHN_LORESERVE {
        format!(
            "is {index:#x}, a reserved index (SHN_LORESERVE, 0xff00, and above), not a \
             section; expected the section name table's index, below `e_shnum` ({})",
            raw.e_shnum
        )
    } else if index >= raw.e_shnum {
        format!(
            "is {index} but the image has {} sections; expected the section name table's \
             index",
            raw.e_shnum
        )
    } else {
        return Ok(());
    };
    Err(fail(E_SHSTRNDX, "`e_shstrndx`", reason))
}

/// The program header table, when there is one: `PN_XNUM` (the count in section 0) is
/// refused rather than followed, entries are `Elf64_Phdr`, and the table lies inside.
fn program_header_table(image: Bytes<'_>, raw: &Raw) -> Result<(), ImageError> {
    if raw.e_phnum == PN_XNUM {
        return Err(fail(
            E_PHNUM,
            "`e_phnum`",
            "is 0xffff (PN_XNUM): extended program header numbering (the count in section \
             0's `sh_info`) is not supported",
        ));
    }
    if raw.e_phnum == 0 {
        return no_program_header_table(raw);
    }
    if u64::from(raw.e_phentsize) != PHDR_SIZE {
        return Err(fail(
            E_PHENTSIZE,
            "`e_phentsize`",
            format!(
                "is {} with {} program headers; expected {PHDR_SIZE} (the size of Elf64_Phdr)",
                raw.e_phentsize, raw.e_phnum
            ),
        ));
    }
    table_in_bounds(
        image,
        E_PHOFF,
        "`e_phoff`",
        raw.e_phoff,
        raw.e_phnum,
        PHDR_SIZE,
        "program header",
    )
}

/// No program headers means no table: `e_phoff` is 0, as the CUDA toolchain writes it for a
/// relocatable cubin. An empty table "at" some other offset is refused: the driver follows
/// `e_phoff` whatever `e_phnum` says (a cubin whose empty table sat far past its end hung
/// `cuModuleLoadData`, issue 21), and an offset that names nothing has no honest reading.
fn no_program_header_table(raw: &Raw) -> Result<(), ImageError> {
    if raw.e_phoff != 0 {
        return Err(fail(
            E_PHOFF,
            "`e_phoff`",
            format!(
                "is {} but `e_phnum` is 0: an empty program header table has no offset; \
                 expected 0",
                raw.e_phoff
            ),
        ));
    }
    if !matches!(u64::from(raw.e_phentsize), 0 | PHDR_SIZE) {
        return Err(fail(
            E_PHENTSIZE,
            "`e_phentsize`",
            format!(
                "is {} with no program headers; expected 0 or {PHDR_SIZE} (the size of \
                 Elf64_Phdr)",
                raw.e_phentsize
            ),
        ));
    }
    Ok(())
}

/// The two header tables lie after the ELF header and apart from each other: a table that
/// overlaps the ELF header or the other table makes one field mean two things, and no
/// toolchain writes one.
fn tables_apart(raw: &Raw) -> Result<(), ImageError> {
    let sections = (raw.e_shoff, u64::from(raw.e_shnum) * SHDR_SIZE);
    let programs = (raw.e_phoff, u64::from(raw.e_phnum) * PHDR_SIZE);
    for (at, field, (offset, bytes), what) in [
        (E_SHOFF, "`e_shoff`", sections, "section"),
        (E_PHOFF, "`e_phoff`", programs, "program header"),
    ] {
        if bytes != 0 && offset < EHDR_SIZE {
            return Err(fail(
                at,
                field,
                format!(
                    "is {offset}: the {what} header table would overlap the ELF header \
                     (bytes 0..{EHDR_SIZE}); expected an offset of at least {EHDR_SIZE}"
                ),
            ));
        }
    }
    if read::overlap(sections, programs) {
        return Err(fail(
            E_PHOFF,
            "`e_phoff`",
            format!(
                "is {}: the program header table (bytes {}..{}) overlaps the section header \
                 table (bytes {}..{})",
                programs.0,
                programs.0,
                programs.0 + programs.1,
                sections.0,
                sections.0 + sections.1
            ),
        ));
    }
    Ok(())
}

/// A table of `count` entries of `size` bytes at `offset` lies inside the image.
fn table_in_bounds(
    image: Bytes<'_>,
    field_at: u64,
    field: &str,
    offset: u64,
    count: u16,
    size: u64,
    what: &str,
) -> Result<(), ImageError> {
    let bytes = u64::from(count) * size;
    if image.contains(offset, bytes) {
        return Ok(());
    }
    let end = read::end(offset, bytes).map_or_else(|| "overflow".to_owned(), |e| e.to_string());
    Err(fail(
        field_at,
        field,
        format!(
            "is {offset}: the {what} header table ({count} entries, bytes {offset}..{end}) \
             lies past the end of the image ({} bytes)",
            image.len()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::tests::build::{ElfBuilder, put};

    fn check_bytes(b: &[u8]) -> Result<Header, ImageError> {
        check(Bytes::new(b))
    }

    #[test]
    fn the_minimal_cubin_passes() {
        let h = check_bytes(&ElfBuilder::minimal().build()).unwrap();
        assert!(h.shnum > 1 && h.phnum > 0);
    }

    #[test]
    fn each_identification_byte_is_checked() {
        let good = ElfBuilder::minimal().build();
        assert!(
            check_bytes(&good[..63])
                .unwrap_err()
                .reason
                .contains("64 bytes")
        );
        for (at, value, field) in [
            (0u64, 0x7Eu8, "the ELF magic"),
            (3, b'X', "the ELF magic"),
            (EI_CLASS, 1, "`EI_CLASS`"),
            (EI_DATA, 2, "`EI_DATA`"),
            (EI_VERSION, 0, "`EI_VERSION`"),
        ] {
            let mut b = good.clone();
            b[at as usize] = value;
            let e = check_bytes(&b).unwrap_err();
            let expected = if at < 4 { 0 } else { at }; // The magic is one field.
            assert_eq!((e.field.as_str(), e.offset), (field, Some(expected)), "{e}");
        }
    }

    /// Each 16-bit header field set to a value the rules refuse, and the field named.
    #[test]
    fn each_header_field_is_checked() {
        let good = ElfBuilder::minimal().build();
        let cases: [(u64, u16, &str, &str); 14] = [
            (E_MACHINE, 62, "`e_machine`", "EM_CUDA"),
            (E_TYPE, 3, "`e_type`", "ET_EXEC"),
            (E_EHSIZE, 52, "`e_ehsize`", "Elf64_Ehdr"),
            (E_SHENTSIZE, 40, "`e_shentsize`", "Elf64_Shdr"),
            (E_SHENTSIZE, 128, "`e_shentsize`", "Elf64_Shdr"),
            (E_SHNUM, 0, "`e_shnum`", "extended section numbering"),
            (E_SHNUM, 0x7FFF, "`e_shoff`", "past the end"),
            (E_SHSTRNDX, 0, "`e_shstrndx`", "SHN_UNDEF"),
            (E_SHSTRNDX, 0xFFFF, "`e_shstrndx`", "SHN_XINDEX"),
            (E_SHSTRNDX, 0xFF00, "`e_shstrndx`", "reserved"),
            (E_SHSTRNDX, 0xFFFE, "`e_shstrndx`", "reserved"),
            (E_SHSTRNDX, 200, "`e_shstrndx`", "sections"),
            (E_PHNUM, 0xFFFF, "`e_phnum`", "PN_XNUM"),
            (E_PHENTSIZE, 0, "`e_phentsize`", "Elf64_Phdr"),
        ];
        for (at, value, field, reason) in cases {
            let mut b = good.clone();
            put(&mut b, at, &value.to_le_bytes());
            let e = check_bytes(&b).unwrap_err();
            assert_eq!(e.field, field, "{at:#x} = {value}: {e}");
            assert!(e.reason.contains(reason), "{at:#x} = {value}: {e}");
        }
    }

    #[test]
    fn the_header_tables_must_lie_inside_the_image() {
        let good = ElfBuilder::minimal().build();
        let len = good.len() as u64;
        for (at, value, field) in [
            (E_SHOFF, len, "`e_shoff`"),
            (E_SHOFF, u64::MAX - 8, "`e_shoff`"),
            (E_PHOFF, len - 8, "`e_phoff`"),
            (E_PHOFF, u64::MAX, "`e_phoff`"),
        ] {
            let mut b = good.clone();
            put(&mut b, at, &value.to_le_bytes());
            let e = check_bytes(&b).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.reason.contains("past the end"), "{e}");
        }
        // No sections and no table is refused too: a cubin's kernels are sections.
        let mut b = good.clone();
        put(&mut b, E_SHNUM, &0u16.to_le_bytes());
        put(&mut b, E_SHOFF, &0u64.to_le_bytes());
        assert!(
            check_bytes(&b)
                .unwrap_err()
                .reason
                .contains("needs sections")
        );
        // No program headers and no table: accepted, as `nvcc -rdc` writes it.
        let mut b = good;
        put(&mut b, E_PHNUM, &0u16.to_le_bytes());
        put(&mut b, E_PHENTSIZE, &0u16.to_le_bytes());
        put(&mut b, E_PHOFF, &0u64.to_le_bytes());
        assert!(check_bytes(&b).is_ok());
    }

    /// Issue 21: an empty program header table placed far past the end passed, and the
    /// driver's load hung. Any nonzero offset with no entries is refused, in bounds or not.
    #[test]
    fn regression_an_empty_program_header_table_at_an_offset_is_refused() {
        let good = ElfBuilder::minimal().build();
        let len = good.len() as u64;
        for phoff in [u64::MAX, 1 << 40, len + 4096, len, 64, 1] {
            let mut b = good.clone();
            put(&mut b, E_PHNUM, &0u16.to_le_bytes());
            put(&mut b, E_PHOFF, &phoff.to_le_bytes());
            let e = check_bytes(&b).unwrap_err();
            assert_eq!(
                (e.field.as_str(), e.offset),
                ("`e_phoff`", Some(E_PHOFF)),
                "{e}"
            );
            assert!(e.reason.contains("`e_phnum` is 0"), "{e}");
        }
        // With no entries, an entry size other than 0 or 56 is refused too.
        let mut b = good;
        put(&mut b, E_PHNUM, &0u16.to_le_bytes());
        put(&mut b, E_PHOFF, &0u64.to_le_bytes());
        put(&mut b, E_PHENTSIZE, &0xFFFFu16.to_le_bytes());
        assert_eq!(check_bytes(&b).unwrap_err().field, "`e_phentsize`");
    }

    /// The header tables may not overlap the ELF header or each other.
    #[test]
    fn the_header_tables_lie_apart() {
        let good = ElfBuilder::minimal().build();
        let h = check_bytes(&good).unwrap();
        for (at, value, field, reason) in [
            (E_SHOFF, 0, "`e_shoff`", "ELF header"),
            (E_SHOFF, 8, "`e_shoff`", "ELF header"),
            (E_PHOFF, 0, "`e_phoff`", "ELF header"),
            (E_PHOFF, 63, "`e_phoff`", "ELF header"),
            (
                E_PHOFF,
                h.shoff,
                "`e_phoff`",
                "overlaps the section header table",
            ),
            (
                E_PHOFF,
                h.shoff + 64,
                "`e_phoff`",
                "overlaps the section header table",
            ),
        ] {
            let mut b = good.clone();
            put(&mut b, at, &value.to_le_bytes());
            let e = check_bytes(&b).unwrap_err();
            assert_eq!(e.field, field, "{at:#x} = {value}: {e}");
            assert!(e.reason.contains(reason), "{at:#x} = {value}: {e}");
        }
    }
}

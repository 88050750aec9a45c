//! String and symbol tables: the records the driver reads names and symbols from.

use super::{
    SHF_EXECINSTR, SHN_ABS, SHN_COMMON, SHN_LORESERVE, SHN_UNDEF, SHN_XINDEX, SHT_DYNSYM,
    SHT_STRTAB, SHT_SYMTAB, SYM_SIZE, Section, fail,
};
use crate::image::error::ImageError;
use crate::image::read::{self, Bytes};

// Field offsets in `Elf64_Sym`.
const ST_NAME: u64 = 0;
const ST_INFO: u64 = 4;
const ST_SHNDX: u64 = 6;
const ST_VALUE: u64 = 8;
const ST_SIZE: u64 = 0x10;

/// `STT_OBJECT`: a data object.
const STT_OBJECT: u8 = 1;
/// `STT_FUNC`: a function.
const STT_FUNC: u8 = 2;

/// Checks every string table, every symbol table, and the symbol indices of code sections.
pub(crate) fn check(image: Bytes<'_>, sections: &[Section]) -> Result<(), ImageError> {
    for s in sections.iter().filter(|s| s.kind == SHT_STRTAB) {
        string_table(image, s)?;
    }
    for s in sections.iter().filter(|s| is_symbol_table(s)) {
        symbol_table(image, s, sections)?;
    }
    for s in sections {
        code_symbol(s, sections)?;
    }
    Ok(())
}

pub(crate) fn is_symbol_table(s: &Section) -> bool {
    matches!(s.kind, SHT_SYMTAB | SHT_DYNSYM)
}

/// The number of symbols in a symbol table (whose size the checks made a whole number of
/// entries).
pub(crate) fn symbol_count(s: &Section) -> u64 {
    s.size / SYM_SIZE
}

/// The NUL-terminated UTF-8 string at `offset` of a string table, if there is one.
pub(crate) fn string_at(table: Bytes<'_>, offset: u64) -> Option<&str> {
    let tail = table.rest(offset);
    let end = tail.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&tail[..end]).ok()
}

/// A non-empty string table ends in NUL, so a name read from any offset inside it stops
/// inside it.
fn string_table(image: Bytes<'_>, s: &Section) -> Result<(), ImageError> {
    let Some(bytes) = s.data(image) else {
        return Ok(()); // Out of bounds was refused by the section checks.
    };
    let last = bytes.len().checked_sub(1);
    match last.map(|at| (at, bytes.u8(at))) {
        None | Some((_, Some(0))) => Ok(()),
        Some((at, _)) => Err(fail(
            s.offset.saturating_add(at),
            format!("section {} (a string table)", s.index),
            "does not end in a NUL byte: a name read from it could run past its end",
        )),
    }
}

/// A symbol table: `Elf64_Sym` entries, a whole number of them, names in a string table,
/// and each symbol's name, section and extent in range.
fn symbol_table(image: Bytes<'_>, s: &Section, sections: &[Section]) -> Result<(), ImageError> {
    if s.entsize != SYM_SIZE {
        return Err(fail(
            s.entsize_at(),
            s.field("sh_entsize"),
            format!(
                "is {} in a symbol table; expected {SYM_SIZE} (the size of Elf64_Sym)",
                s.entsize
            ),
        ));
    }
    if !s.size.is_multiple_of(SYM_SIZE) {
        return Err(fail(
            s.size_at(),
            s.field("sh_size"),
            format!(
                "is {}, not a whole number of {SYM_SIZE}-byte symbols",
                s.size
            ),
        ));
    }
    let count = symbol_count(s);
    if u64::from(s.info) > count {
        return Err(fail(
            s.info_at(),
            s.field("sh_info"),
            format!(
                "is {} but the table has {count} symbols; `sh_info` of a symbol table is one \
                 past its last local symbol",
                s.info
            ),
        ));
    }
    let names = symbol_names(image, s, sections)?;
    let Some(data) = s.data(image) else {
        return Ok(()); // Out of bounds was refused by the section checks.
    };
    for i in 0..count {
        let Some(at) = read::element(0, i, SYM_SIZE) else {
            break;
        };
        symbol(data, s, i, at, names, sections)?;
    }
    Ok(())
}

/// A symbol table's `sh_link` names the string table its symbols' names are read from.
fn symbol_names<'a>(
    image: Bytes<'a>,
    s: &Section,
    sections: &[Section],
) -> Result<Bytes<'a>, ImageError> {
    match sections.get(s.link as usize) {
        Some(t) if t.kind == SHT_STRTAB => Ok(t.data(image).unwrap_or(Bytes::new(&[]))),
        other => Err(fail(
            s.link_at(),
            s.field("sh_link"),
            format!(
                "is {}, a section of type {}; a symbol table's `sh_link` names the string \
                 table (SHT_STRTAB) of its symbols' names",
                s.link,
                other.map_or(0, |t| t.kind)
            ),
        )),
    }
}

/// One symbol: its name inside the string table, its section index a section (or
/// `SHN_UNDEF`, `SHN_ABS`, `SHN_COMMON`; `SHN_XINDEX` is refused, not followed), and a
/// function's or object's bytes inside its section.
fn symbol(
    data: Bytes<'_>,
    table: &Section,
    i: u64,
    at: u64,
    names: Bytes<'_>,
    sections: &[Section],
) -> Result<(), ImageError> {
    let field = |name: &str| format!("symbol {i} of section {} `{name}`", table.index);
    let pos = |off: u64| table.offset.saturating_add(at).saturating_add(off);
    let read = || -> Option<(u32, u8, u16, u64, u64)> {
        Some((
            data.u32(at + ST_NAME)?,
            data.u8(at + ST_INFO)?,
            data.u16(at + ST_SHNDX)?,
            data.u64(at + ST_VALUE)?,
            data.u64(at + ST_SIZE)?,
        ))
    };
    let Some((name, info, shndx, value, size)) = read() else {
        return Err(fail(pos(0), field("st_name"), "lies past the table's end"));
    };
    if u64::from(name) >= names.len() {
        return Err(fail(
            pos(ST_NAME),
            field("st_name"),
            format!(
                "is {name} but the symbol string table has {} bytes",
                names.len()
            ),
        ));
    }
    let defined_in = match shndx {
        SHN_UNDEF | SHN_ABS | SHN_COMMON => None,
        SHN_XINDEX => {
            return Err(fail(
                pos(ST_SHNDX),
                field("st_shndx"),
                "is 0xffff (SHN_XINDEX): extended symbol section indices are not supported",
            ));
        }
        _ if shndx >= SHN_LORESERVE => {
            return Err(fail(
                pos(ST_SHNDX),
                field("st_shndx"),
                format!(
                    "is {shndx:#x}, a reserved index that is not SHN_ABS or SHN_COMMON; \
                     expected a section index"
                ),
            ));
        }
        _ => match sections.get(usize::from(shndx)) {
            Some(section) => Some(section),
            None => {
                return Err(fail(
                    pos(ST_SHNDX),
                    field("st_shndx"),
                    format!("is {shndx} but the image has {} sections", sections.len()),
                ));
            }
        },
    };
    let kind = info & 0xF;
    if let Some(section) = defined_in.filter(|_| matches!(kind, STT_FUNC | STT_OBJECT)) {
        symbol_extent(section, value, size)
            .map_err(|reason| fail(pos(ST_VALUE), field("st_value"), reason))?;
    }
    Ok(())
}

/// A function's or object's bytes `[st_value, st_value + st_size)` (from its section's
/// address) lie inside its section: the driver reads code and data by these extents.
fn symbol_extent(section: &Section, value: u64, size: u64) -> Result<(), String> {
    let inside = value
        .checked_sub(section.addr)
        .and_then(|start| read::end(start, size))
        .is_some_and(|end| end <= section.size);
    if inside {
        return Ok(());
    }
    Err(format!(
        "is {value} with `st_size` {size}: the symbol's bytes lie outside its section {} \
         (address {}, {} bytes)",
        section.index, section.addr, section.size
    ))
}

/// A CUDA code section's `sh_info` is the index of its function's symbol in the symbol
/// table its `sh_link` names: that symbol must exist.
fn code_symbol(s: &Section, sections: &[Section]) -> Result<(), ImageError> {
    if s.flags & SHF_EXECINSTR == 0 {
        return Ok(());
    }
    let Some(table) = sections.get(s.link as usize).filter(|t| is_symbol_table(t)) else {
        return Ok(());
    };
    let count = symbol_count(table);
    if u64::from(s.info) < count || s.info == 0 {
        return Ok(());
    }
    Err(fail(
        s.info_at(),
        s.field("sh_info"),
        format!(
            "is {} but the symbol table (section {}) has {count} symbols; a code section's \
             `sh_info` is its function's symbol index",
            s.info, table.index
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::elf::check_cubin;
    use crate::image::tests::build::{ElfBuilder, put};

    #[test]
    fn strings_are_read_up_to_their_nul() {
        let t = Bytes::new(b"\0.text.k\0abc");
        assert_eq!(string_at(t, 1), Some(".text.k"));
        assert_eq!(string_at(t, 0), Some(""));
        assert_eq!(string_at(t, 9), None); // No NUL after it.
        assert_eq!(string_at(t, 100), None);
    }

    #[test]
    fn every_string_table_ends_in_nul() {
        let b = ElfBuilder::minimal();
        let mut image = b.build();
        let strtab = b.section(".strtab");
        put(&mut image, strtab.offset + strtab.size - 1, b"x");
        let e = check_cubin(&image).unwrap_err();
        assert!(e.reason.contains("NUL"), "{e}");
        assert_eq!(e.offset, Some(strtab.offset + strtab.size - 1));
    }

    fn broken_symtab(field: u64, value: &[u8]) -> ImageError {
        let b = ElfBuilder::minimal();
        let mut image = b.build();
        put(&mut image, b.section_header_at(".symtab") + field, value);
        check_cubin(&image).unwrap_err()
    }

    #[test]
    fn symbol_tables_hold_whole_elf64_syms_named_from_a_string_table() {
        let e = broken_symtab(0x38, &16u64.to_le_bytes());
        assert!(e.reason.contains("Elf64_Sym"), "{e}");
        let b = ElfBuilder::minimal();
        let size = b.section(".symtab").size;
        let e = broken_symtab(0x20, &(size - 1).to_le_bytes());
        assert!(e.reason.contains("whole number"), "{e}");
        let e = broken_symtab(0x2C, &100u32.to_le_bytes());
        assert!(e.field.ends_with("`sh_info`"), "{e}");
        let text = b.index(".text.k");
        let e = broken_symtab(0x28, &u32::from(text).to_le_bytes());
        assert!(e.reason.contains("string table"), "{e}");
    }

    /// Breaks field `field` of symbol 1 (the kernel's function symbol).
    fn broken_symbol(field: u64, value: &[u8]) -> ImageError {
        let b = ElfBuilder::minimal();
        let mut image = b.build();
        put(
            &mut image,
            b.section(".symtab").offset + SYM_SIZE + field,
            value,
        );
        check_cubin(&image).unwrap_err()
    }

    #[test]
    fn each_symbol_field_is_checked() {
        let e = broken_symbol(ST_NAME, &0xFFFFu32.to_le_bytes());
        assert!(e.field.ends_with("`st_name`"), "{e}");
        let e = broken_symbol(ST_SHNDX, &SHN_XINDEX.to_le_bytes());
        assert!(e.reason.contains("SHN_XINDEX"), "{e}");
        let e = broken_symbol(ST_SHNDX, &0xFF05u16.to_le_bytes());
        assert!(e.reason.contains("reserved"), "{e}");
        let e = broken_symbol(ST_SHNDX, &500u16.to_le_bytes());
        assert!(e.reason.contains("sections"), "{e}");
        let e = broken_symbol(ST_SIZE, &0x10_0000u64.to_le_bytes());
        assert!(e.field.ends_with("`st_value`"), "{e}");
        let e = broken_symbol(ST_VALUE, &u64::MAX.to_le_bytes());
        assert!(e.reason.contains("outside its section"), "{e}");
    }

    #[test]
    fn a_code_sections_symbol_must_exist() {
        let b = ElfBuilder::minimal();
        let mut image = b.build();
        put(
            &mut image,
            b.section_header_at(".text.k") + 0x2C,
            &77u32.to_le_bytes(),
        );
        let e = check_cubin(&image).unwrap_err();
        assert!(e.reason.contains("symbol index"), "{e}");
    }
}

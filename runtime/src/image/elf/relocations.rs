//! Relocation tables (`SHT_REL`, `SHT_RELA`): the driver rewrites bytes of a target section
//! at each entry's offset, so each entry's symbol must exist and the bytes it rewrites must
//! lie inside that section.

use super::tables::{is_symbol_table, symbol_count};
use super::{REL_SIZE, RELA_SIZE, SHT_REL, SHT_RELA, Section, fail};
use crate::image::error::ImageError;
use crate::image::read::{self, Bytes};

// Field offsets in `Elf64_Rel` / `Elf64_Rela`.
const R_OFFSET: u64 = 0;
const R_INFO: u64 = 8;

/// Checks every relocation table.
pub(crate) fn check(image: Bytes<'_>, sections: &[Section]) -> Result<(), ImageError> {
    for s in sections {
        let entry = match s.kind {
            SHT_REL => REL_SIZE,
            SHT_RELA => RELA_SIZE,
            _ => continue,
        };
        relocation_table(image, s, entry, sections)?;
    }
    Ok(())
}

/// The bytes a relocation of CUDA type `kind` rewrites from its offset: the smallest
/// aligned word (1, 2, 4, 8 or 16 bytes) holding every bit the type patches.
///
/// NVIDIA publishes no table of `R_CUDA_*` types; this one follows the bit ranges of
/// ptxas 13.0's relocation table as listed by public reverse-engineering (e.g. type 2,
/// `R_CUDA_64`, patches bits 0..63; type 67, `R_CUDA_INSTRUCTION128`, bits 0..127). A type
/// not in it is assumed to patch 16 bytes, the widest any type does.
fn patched_bytes(kind: u32) -> u64 {
    match kind {
        // R_CUDA_NONE, R_CUDA_NONE_LAST: nothing is written.
        0 | 116 => 0,
        // R_CUDA_8_*, R_CUDA_G8_*, R_CUDA_FUNC_DESC_8_*, R_CUDA_UNIFIED_8_*: one byte.
        76..=99 | 104..=111 => 1,
        // R_CUDA_YIELD_OPCODE9_0 (bits 0..8), R_CUDA_SAMP_HEADER_INDEX_0 (bits 0..11).
        68 | 101 => 2,
        // Fields within bits 0..31: R_CUDA_32, _G32, _TEX/SAMP_HEADER_INDEX, _SURF_HW_DESC,
        // _SURF_HW_SW_DESC, _SURF_SLOT, _FUNC_DESC_32, _SURF_HEADER_INDEX, _32_LO, _32_HI,
        // _UNUSED_CLEAR32, _UNIFIED_32.
        1 | 3 | 6..=9 | 21 | 34 | 52 | 70..=72 | 103 => 4,
        // Fields reaching past bit 63 of a 128-bit instruction: R_CUDA_ABS47_34,
        // _INSTRUCTION128, _YIELD_CLEAR_PRED4_87, _ABS55_16_34, _ABS56_16_34.
        58 | 67 | 69 | 75 | 114 => 16,
        // Every other known type patches bits within 0..63.
        2..=115 => 8,
        _ => 16,
    }
}

/// One relocation table: entries of the declared record size, a whole number of them, a
/// symbol table to resolve against and a target section to rewrite (when it has entries),
/// then each entry.
fn relocation_table(
    image: Bytes<'_>,
    s: &Section,
    entry: u64,
    sections: &[Section],
) -> Result<(), ImageError> {
    let record = if entry == REL_SIZE {
        "Elf64_Rel"
    } else {
        "Elf64_Rela"
    };
    if s.entsize != entry {
        return Err(fail(
            s.entsize_at(),
            s.field("sh_entsize"),
            format!("is {}; expected {entry} (the size of {record})", s.entsize),
        ));
    }
    if !s.size.is_multiple_of(entry) {
        return Err(fail(
            s.size_at(),
            s.field("sh_size"),
            format!(
                "is {}, not a whole number of {entry}-byte relocations",
                s.size
            ),
        ));
    }
    let count = s.size / entry;
    if count == 0 {
        return Ok(());
    }
    let Some(symbols) = sections.get(s.link as usize).filter(|t| is_symbol_table(t)) else {
        return Err(fail(
            s.link_at(),
            s.field("sh_link"),
            format!(
                "is {}, not a symbol table; a relocation section's `sh_link` names the symbol \
                 table its entries refer to",
                s.link
            ),
        ));
    };
    let target = match sections.get(s.info as usize) {
        Some(t) if t.index != 0 => t,
        _ => {
            return Err(fail(
                s.info_at(),
                s.field("sh_info"),
                format!(
                    "is {}; a relocation section's `sh_info` names the section it rewrites \
                     (not section 0)",
                    s.info
                ),
            ));
        }
    };
    let Some(data) = s.data(image) else {
        return Ok(()); // Out of bounds was refused by the section checks.
    };
    for i in 0..count {
        let Some(at) = read::element(0, i, entry) else {
            break;
        };
        relocation(data, s, i, at, symbol_count(symbols), target)?;
    }
    Ok(())
}

/// One relocation: its symbol index below the symbol count, and the bytes its type rewrites
/// `[r_offset, r_offset + patched_bytes)` (from the target's address) inside the target.
fn relocation(
    data: Bytes<'_>,
    table: &Section,
    i: u64,
    at: u64,
    symbols: u64,
    target: &Section,
) -> Result<(), ImageError> {
    let field = |name: &str| format!("relocation {i} of section {} `{name}`", table.index);
    let pos = |off: u64| table.offset.saturating_add(at).saturating_add(off);
    let (Some(offset), Some(info)) = (data.u64(at + R_OFFSET), data.u64(at + R_INFO)) else {
        return Err(fail(pos(0), field("r_offset"), "lies past the table's end"));
    };
    let symbol = info >> 32;
    let kind = (info & 0xFFFF_FFFF) as u32;
    if symbol >= symbols {
        return Err(fail(
            pos(R_INFO),
            field("r_info"),
            format!("names symbol {symbol} but the symbol table has {symbols} symbols"),
        ));
    }
    let width = patched_bytes(kind);
    let inside = offset
        .checked_sub(target.addr)
        .and_then(|start| read::end(start, width))
        .is_some_and(|end| end <= target.size);
    if inside {
        return Ok(());
    }
    Err(fail(
        pos(R_OFFSET),
        field("r_offset"),
        format!(
            "is {offset}: a type {kind} relocation rewrites {width} bytes there, outside the \
             section it relocates (section {}, address {}, {} bytes)",
            target.index, target.addr, target.size
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::elf::check_cubin;
    use crate::image::tests::build::{ElfBuilder, put};

    #[test]
    fn widths_cover_the_patched_bits() {
        assert_eq!(patched_bytes(1), 4); // R_CUDA_32
        assert_eq!(patched_bytes(2), 8); // R_CUDA_64
        assert_eq!(patched_bytes(56), 8); // R_CUDA_ABS32_LO_32
        assert_eq!(patched_bytes(67), 16); // R_CUDA_INSTRUCTION128
        assert_eq!(patched_bytes(83), 1); // R_CUDA_8_56
        assert_eq!(patched_bytes(0), 0);
        assert_eq!(patched_bytes(5000), 16);
    }

    fn broken(field: u64, value: &[u8]) -> ImageError {
        let b = ElfBuilder::minimal();
        let mut image = b.build();
        put(
            &mut image,
            b.section_header_at(".rela.text.k") + field,
            value,
        );
        check_cubin(&image).unwrap_err()
    }

    #[test]
    fn relocation_tables_hold_whole_records_and_name_their_tables() {
        let e = broken(0x38, &16u64.to_le_bytes());
        assert!(e.reason.contains("Elf64_Rela"), "{e}");
        let e = broken(0x20, &25u64.to_le_bytes());
        assert!(e.reason.contains("whole number"), "{e}");
        let b = ElfBuilder::minimal();
        let e = broken(0x28, &u32::from(b.index(".strtab")).to_le_bytes());
        assert!(e.reason.contains("symbol table"), "{e}");
        let e = broken(0x2C, &0u32.to_le_bytes());
        assert!(e.reason.contains("not section 0"), "{e}");
    }

    /// Breaks field `field` of the minimal cubin's one relocation.
    fn broken_entry(field: u64, value: u64) -> Result<Vec<String>, ImageError> {
        let b = ElfBuilder::minimal();
        let mut image = b.build();
        put(
            &mut image,
            b.section(".rela.text.k").offset + field,
            &value.to_le_bytes(),
        );
        check_cubin(&image)
    }

    #[test]
    fn each_relocation_rewrites_inside_its_target_with_an_existing_symbol() {
        let text = ElfBuilder::minimal().section(".text.k").size;
        // The last 8 bytes of the text take an 8-byte R_CUDA_64, not a 16-byte one.
        assert!(broken_entry(R_OFFSET, text - 8).is_ok());
        assert!(broken_entry(R_INFO, (1 << 32) | 67).is_ok()); // at offset 0
        let e = broken_entry(R_OFFSET, text - 4).unwrap_err();
        assert!(e.reason.contains("outside the section"), "{e}");
        let e = broken_entry(R_OFFSET, u64::MAX - 2).unwrap_err();
        assert!(e.field.ends_with("`r_offset`"), "{e}");
        let e = broken_entry(R_INFO, (9 << 32) | 2).unwrap_err();
        assert!(e.reason.contains("symbol 9"), "{e}");
    }
}

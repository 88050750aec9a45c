//! Cubins: CUDA ELF images (64-bit, little-endian, `EM_CUDA`).
//!
//! The driver walks a cubin the way any trusting ELF reader does: the header gives the
//! section and program header tables, each section header gives where its bytes are, string
//! tables are read up to a NUL, symbol and relocation tables are arrays of fixed-size
//! records, and CUDA's `.nv.info` sections and ELF notes are lists of sized records. The checks below
//! make every one of those reads land inside the image (or, for relocations and records,
//! inside their section), in this order:
//!
//! - [`header`]: identification, machine, type, header size, the two header tables (inside
//!   the image, after the ELF header, apart from each other; no program headers means
//!   `e_phoff` 0) and the section name table index (extended numbering is refused, not
//!   guessed);
//! - [`sections`]: each section header (null section, kinds, bounds, the offset of an
//!   `SHT_NOBITS` section too, alignment, `sh_link` / `sh_info` indices, names), and the
//!   sections' bytes apart from the headers and from each other;
//! - [`tables`]: string tables (NUL-terminated) and symbol tables (entry size, names,
//!   section indices, extents);
//! - [`relocations`]: entry size, symbol indices, relocated bytes inside their section;
//! - [`nv_info`]: attribute records tile their section;
//! - [`notes`]: note records (`SHT_NOTE`) tile their section;
//! - [`groups`]: section group members (`SHT_GROUP`) are sections;
//! - [`segments`]: each program header's bytes in bounds.
//!
//! What is *not* checked: instruction bytes, the values inside `.nv.info` attributes, and
//! the contents of `.nv.callgraph`, debug and constant sections. Those are read by the
//! driver only as bounded data once the structure above holds.

mod groups;
mod header;
mod notes;
mod nv_info;
mod relocations;
mod sections;
mod segments;
mod tables;

use super::error::{ImageError, ImageFormat};
use super::read::Bytes;

pub(crate) use sections::Section;

/// `SHT_SYMTAB`: a symbol table.
const SHT_SYMTAB: u32 = 2;
/// `SHT_STRTAB`: a string table.
const SHT_STRTAB: u32 = 3;
/// `SHT_RELA`: relocations with addends.
const SHT_RELA: u32 = 4;
/// `SHT_NOTE`: a list of notes (`Elf64_Nhdr` records).
const SHT_NOTE: u32 = 7;
/// `SHT_NOBITS`: a section that occupies no bytes of the file (`.bss`, `.nv.shared.*`).
const SHT_NOBITS: u32 = 8;
/// `SHT_REL`: relocations without addends.
const SHT_REL: u32 = 9;
/// `SHT_DYNSYM`: a dynamic symbol table (same layout as `SHT_SYMTAB`).
const SHT_DYNSYM: u32 = 11;
/// `SHT_GROUP`: a section group.
const SHT_GROUP: u32 = 17;
/// `SHT_SYMTAB_SHNDX`: extended symbol section indices (refused).
const SHT_SYMTAB_SHNDX: u32 = 18;
/// `SHT_LOPROC + 0`: CUDA's `.nv.info*` attribute sections.
const SHT_CUDA_INFO: u32 = 0x7000_0000;

/// `SHF_EXECINSTR`: a section of machine code.
const SHF_EXECINSTR: u64 = 0x4;
/// `SHF_INFO_LINK`: `sh_info` holds a section index.
const SHF_INFO_LINK: u64 = 0x40;

/// `SHN_UNDEF`: no section.
const SHN_UNDEF: u16 = 0;
/// `SHN_LORESERVE`: the first reserved section index.
const SHN_LORESERVE: u16 = 0xFF00;
/// `SHN_ABS`: a symbol with an absolute value.
const SHN_ABS: u16 = 0xFFF1;
/// `SHN_COMMON`: a common (unallocated) symbol.
const SHN_COMMON: u16 = 0xFFF2;
/// `SHN_XINDEX`: the real index is elsewhere (section 0 or `SHT_SYMTAB_SHNDX`).
const SHN_XINDEX: u16 = 0xFFFF;

/// `sizeof(Elf64_Ehdr)`.
const EHDR_SIZE: u64 = 64;
/// `sizeof(Elf64_Shdr)`.
const SHDR_SIZE: u64 = 64;
/// `sizeof(Elf64_Phdr)`.
const PHDR_SIZE: u64 = 56;
/// `sizeof(Elf64_Sym)`.
const SYM_SIZE: u64 = 24;
/// `sizeof(Elf64_Rel)`.
const REL_SIZE: u64 = 16;
/// `sizeof(Elf64_Rela)`.
const RELA_SIZE: u64 = 24;

/// Checks that `image` is a cubin every part of which a reader trusting its headers finds
/// inside it, and returns the names of its kernels (its `.text.<name>` sections).
///
/// ```standalone_crate
/// let cubin = include_bytes!("../../../kernels/test_kernels.sm_90.cubin");
/// let kernels = gpu_pipeline::image::check_cubin(cubin)?;
/// assert!(kernels.iter().any(|k| k == "saxpy"));
/// // One byte short, the last section no longer fits.
/// assert!(gpu_pipeline::image::check_cubin(&cubin[..cubin.len() - 1]).is_err());
/// # Ok::<(), gpu_pipeline::image::ImageError>(())
/// ```
pub fn check_cubin(image: &[u8]) -> Result<Vec<String>, ImageError> {
    check(Bytes::new(image))
}

/// [`check_cubin`] on a part of a larger image (a fatbin entry); offsets in errors are from
/// the start of `image`.
pub(crate) fn check(image: Bytes<'_>) -> Result<Vec<String>, ImageError> {
    let header = header::check(image)?;
    let sections = sections::read(image, &header)?;
    sections::check(image, &header, &sections)?;
    tables::check(image, &sections)?;
    relocations::check(image, &sections)?;
    nv_info::check(image, &sections)?;
    notes::check(image, &sections)?;
    groups::check(image, &sections)?;
    segments::check(image, &header)?;
    sections::contents_apart(&header, &sections)?;
    Ok(kernel_names(image, &header, &sections))
}

/// A fault in a cubin field at byte `offset`.
fn fail(offset: u64, field: impl Into<String>, reason: impl Into<String>) -> ImageError {
    ImageError::at(ImageFormat::Cubin, offset, field, reason)
}

/// The kernels a checked cubin defines: its `.text.<kernel>` sections, by name.
fn kernel_names(image: Bytes<'_>, header: &header::Header, sections: &[Section]) -> Vec<String> {
    let Some(names) = sections
        .get(usize::from(header.shstrndx))
        .and_then(|s| s.data(image))
    else {
        return Vec::new();
    };
    sections
        .iter()
        .filter_map(|s| tables::string_at(names, u64::from(s.name)))
        .filter_map(|name| name.strip_prefix(".text."))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CUBIN: &[u8] = include_bytes!("../../../kernels/test_kernels.sm_90.cubin");

    #[test]
    fn the_committed_cubin_checks_and_lists_its_kernels() {
        let mut names = check_cubin(CUBIN).unwrap();
        names.sort();
        assert_eq!(
            names,
            [
                "add_scalar",
                "empty",
                "reduce_sum",
                "saxpy",
                "write_out_of_bounds"
            ]
        );
    }

    #[test]
    fn the_committed_cubin_truncated_anywhere_is_refused() {
        for len in 0..CUBIN.len() {
            assert!(check_cubin(&CUBIN[..len]).is_err(), "{len} bytes passed");
        }
    }

    /// Issue 12, item 8: this image passed the old check and crashed the driver.
    #[test]
    fn regression_a_reserved_section_name_index_is_refused() {
        let mut cubin = CUBIN.to_vec();
        cubin[0x3E..0x40].copy_from_slice(&0xFFFEu16.to_le_bytes());
        let e = check_cubin(&cubin).unwrap_err();
        assert_eq!(e.field, "`e_shstrndx`");
        assert_eq!(e.offset, Some(0x3E));
        assert!(e.reason.contains("reserved"), "{e}");
    }

    /// Issue 21: the committed cubin with its program header table emptied but left at a
    /// far-away offset passed, and `cuModuleLoadData` hung on an H200.
    #[test]
    fn regression_an_emptied_program_header_table_far_away_is_refused() {
        let mut cubin = CUBIN.to_vec();
        cubin[0x38..0x3A].copy_from_slice(&0u16.to_le_bytes());
        cubin[0x20..0x28].copy_from_slice(&0x7FFF_FFFF_0000u64.to_le_bytes());
        let e = check_cubin(&cubin).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.offset),
            ("`e_phoff`", Some(0x20)),
            "{e}"
        );
        // The same with the offset reset to 0 is a cubin without segments, which passes.
        cubin[0x20..0x28].copy_from_slice(&0u64.to_le_bytes());
        assert!(check_cubin(&cubin).is_ok());
    }

    /// Issue 12, item 8: this image passed the old check and crashed the driver.
    #[test]
    fn regression_a_zero_program_header_size_with_pn_xnum_is_refused() {
        let mut cubin = CUBIN.to_vec();
        cubin[0x36..0x38].copy_from_slice(&0u16.to_le_bytes());
        cubin[0x38..0x3A].copy_from_slice(&0xFFFFu16.to_le_bytes());
        let e = check_cubin(&cubin).unwrap_err();
        assert_eq!(e.field, "`e_phnum`");
        assert!(e.reason.contains("PN_XNUM"), "{e}");
        // Either field alone is refused too.
        let mut cubin = CUBIN.to_vec();
        cubin[0x36..0x38].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(check_cubin(&cubin).unwrap_err().field, "`e_phentsize`");
    }
}

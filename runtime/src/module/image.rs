//! Checks of the images a module loads, before the driver sees them: the driver reads a
//! cubin or fatbin by the sizes its headers claim, so a header that lies is refused here.
//! Pure functions; no driver calls.

use std::ffi::CStr;

/// A copy of an image at an 8-byte aligned address (`include_bytes!` gives no alignment; the
/// driver reads ELF headers as words).
/// A copy of an image at an 8-byte aligned address, when the original is not aligned
/// (`include_bytes!` gives no alignment; the driver reads ELF headers as words).
pub(crate) struct AlignedImage(Vec<u64>);

impl AlignedImage {
    /// A copy of `image` in 8-byte words (zero-padded at the end).
    pub(crate) fn new(image: &[u8]) -> AlignedImage {
        let mut words = vec![0u64; image.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..image.len()].copy_from_slice(image);
        AlignedImage(words)
    }

    /// The words.
    pub(crate) fn words(&self) -> &[u64] {
        &self.0
    }
}

/// The names of the kernels a PTX file defines (`.entry name`).
pub(crate) fn ptx_entry_names(ptx: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = ptx;
    while let Some(at) = rest.find(".entry") {
        rest = &rest[at + ".entry".len()..];
        if !rest.starts_with(|c: char| c.is_whitespace()) {
            continue;
        }
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|&c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
            .collect();
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

pub(crate) fn missing_kernel_message(name: &str, module: &str, entries: &[String]) -> String {
    let mut message = format!("no kernel named `{name}` in module `{module}`");
    if !entries.is_empty() {
        let list = entries
            .iter()
            .map(|e| format!("`{e}`"))
            .collect::<Vec<_>>()
            .join(", ");
        message.push_str(&format!("; it defines {list}"));
        if entries.iter().any(|e| e.starts_with("_Z")) {
            message.push_str(
                " (names starting `_Z` are C++-mangled: declare the kernel `extern \"C\"`)",
            );
        }
    }
    message
}

fn read_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn read_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// `EM_CUDA`: the ELF machine of NVIDIA GPU code.
const EM_CUDA: u16 = 190;
/// `SHT_NOBITS`: a section that takes no space in the file (`.bss`-like).
const SHT_NOBITS: u32 = 8;

/// Checks that `image` is a complete 64-bit little-endian CUDA ELF: every header table and
/// section the headers describe lies within it. Returns the kernels' names (from the
/// `.text.<name>` sections).
pub(crate) fn check_cubin(image: &[u8]) -> Result<Vec<String>, String> {
    let bad = |what: &str| format!("not a complete cubin: {what}");
    if image.len() < 64 || &image[..4] != b"\x7fELF" {
        return Err(bad("no ELF header (a cubin starts with `\\x7fELF`)"));
    }
    if image[4] != 2 || image[5] != 1 {
        return Err(bad("not a 64-bit little-endian ELF"));
    }
    let machine = read_u16(image, 0x12).unwrap_or(0);
    if machine != EM_CUDA {
        return Err(bad(&format!(
            "ELF machine {machine} is not a CUDA GPU ({EM_CUDA})"
        )));
    }
    let within = |offset: u64, size: u64| {
        offset
            .checked_add(size)
            .is_some_and(|end| end <= image.len() as u64)
    };
    let table = |off_at, entsize_at, num_at| -> Option<(u64, u64, u64)> {
        Some((
            read_u64(image, off_at)?,
            u64::from(read_u16(image, entsize_at)?),
            u64::from(read_u16(image, num_at)?),
        ))
    };
    let (phoff, phentsize, phnum) = table(0x20, 0x36, 0x38).ok_or_else(|| bad("short header"))?;
    if phnum > 0 && !within(phoff, phentsize * phnum) {
        return Err(bad(
            "the program header table lies past the end of the image",
        ));
    }
    let (shoff, shentsize, shnum) = table(0x28, 0x3A, 0x3C).ok_or_else(|| bad("short header"))?;
    if shnum > 0 && (shentsize < 64 || !within(shoff, shentsize * shnum)) {
        return Err(bad(
            "the section header table lies past the end of the image",
        ));
    }
    let section = |i: u64| -> Option<(u32, u32, u64, u64)> {
        let at = (shoff + i * shentsize) as usize;
        Some((
            read_u32(image, at)?,        // sh_name
            read_u32(image, at + 4)?,    // sh_type
            read_u64(image, at + 0x18)?, // sh_offset
            read_u64(image, at + 0x20)?, // sh_size
        ))
    };
    for i in 0..shnum {
        let (_, kind, offset, size) = section(i).ok_or_else(|| bad("short section header"))?;
        if kind != SHT_NOBITS && !within(offset, size) {
            return Err(bad(&format!("section {i} lies past the end of the image")));
        }
    }
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        let (offset, size) = (
            read_u64(image, at as usize + 8).ok_or_else(|| bad("short program header"))?,
            read_u64(image, at as usize + 0x20).ok_or_else(|| bad("short program header"))?,
        );
        if !within(offset, size) {
            return Err(bad(&format!("segment {i} lies past the end of the image")));
        }
    }
    // Kernel names, from the section-name string table's `.text.<kernel>` entries.
    let mut names = Vec::new();
    let shstrndx = u64::from(read_u16(image, 0x3E).unwrap_or(0));
    if let Some((_, _, str_off, str_size)) = (shstrndx < shnum).then(|| section(shstrndx)).flatten()
    {
        let strings = usize::try_from(str_off)
            .ok()
            .zip(usize::try_from(str_size).ok())
            .and_then(|(at, size)| image.get(at..at.checked_add(size)?))
            .unwrap_or_default();
        for i in 0..shnum {
            let Some((name_at, ..)) = section(i) else {
                continue;
            };
            let Some(tail) = strings.get(name_at as usize..) else {
                continue;
            };
            let Ok(name) = CStr::from_bytes_until_nul(tail) else {
                continue;
            };
            if let Some(kernel) = name.to_str().ok().and_then(|n| n.strip_prefix(".text.")) {
                names.push(kernel.to_owned());
            }
        }
    }
    Ok(names)
}

/// `fatBinaryHeader.magic`.
const FATBIN_MAGIC: u32 = 0xBA55_ED50;

/// Checks a fatbin's header: the magic, and that the size it declares lies within `image`.
pub(crate) fn check_fatbin(image: &[u8]) -> Result<(), String> {
    let bad = |what: &str| format!("not a complete fatbin: {what}");
    if read_u32(image, 0) != Some(FATBIN_MAGIC) {
        return Err(bad("no fatbin header (magic 0xBA55ED50)"));
    }
    let header = u64::from(read_u16(image, 6).ok_or_else(|| bad("short header"))?);
    let body = read_u64(image, 8).ok_or_else(|| bad("short header"))?;
    match header.checked_add(body) {
        Some(total) if header >= 16 && total <= image.len() as u64 => Ok(()),
        _ => Err(bad(&format!(
            "it declares {header} + {body} bytes but the image has {}",
            image.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = include_str!("../../kernels/test_kernels.ptx");

    #[test]
    fn ptx_entries_are_listed_in_order() {
        assert_eq!(
            ptx_entry_names(PTX),
            [
                "empty",
                "saxpy",
                "reduce_sum",
                "add_scalar",
                "write_out_of_bounds"
            ]
        );
        assert_eq!(
            ptx_entry_names(".visible .entry _Z3fooPf(\n.param .u64 p)\n.entry\tbar()"),
            ["_Z3fooPf", "bar"]
        );
        assert!(ptx_entry_names(".func helper()").is_empty());
    }

    #[test]
    fn a_missing_kernel_names_the_kernel_the_module_and_what_exists() {
        let msg = missing_kernel_message("saxpy", "test_kernels", &["saxpy".into()]);
        assert_eq!(
            msg,
            "no kernel named `saxpy` in module `test_kernels`; it defines `saxpy`"
        );
        let msg = missing_kernel_message("foo", "m", &["_Z3fooPf".into()]);
        assert!(msg.contains("extern \"C\""), "{msg}");
    }

    #[test]
    fn cubin_headers_must_lie_within_the_image() {
        assert!(check_cubin(b"not an elf").is_err());
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[0x12..0x14].copy_from_slice(&EM_CUDA.to_le_bytes());
        assert_eq!(check_cubin(&elf), Ok(vec![]));
        // A section table claimed past the end.
        elf[0x28..0x30].copy_from_slice(&64u64.to_le_bytes());
        elf[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3C..0x3E].copy_from_slice(&3u16.to_le_bytes());
        let err = check_cubin(&elf).unwrap_err();
        assert!(err.contains("section header table"), "{err}");
        // An x86 ELF is refused by machine.
        elf[0x12..0x14].copy_from_slice(&62u16.to_le_bytes());
        assert!(check_cubin(&elf).unwrap_err().contains("machine 62"));
    }

    #[test]
    fn the_committed_cubin_checks_and_lists_its_kernels() {
        let cubin = include_bytes!("../../kernels/test_kernels.sm_90.cubin");
        let mut names = check_cubin(cubin).unwrap();
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
        // Truncated anywhere past the header, it is refused.
        assert!(check_cubin(&cubin[..cubin.len() - 1]).is_err());
    }

    #[test]
    fn fatbin_sizes_must_lie_within_the_image() {
        let mut fat = vec![0u8; 32];
        fat[..4].copy_from_slice(&FATBIN_MAGIC.to_le_bytes());
        fat[6..8].copy_from_slice(&16u16.to_le_bytes());
        fat[8..16].copy_from_slice(&16u64.to_le_bytes());
        assert_eq!(check_fatbin(&fat), Ok(()));
        fat[8..16].copy_from_slice(&17u64.to_le_bytes());
        assert!(check_fatbin(&fat).unwrap_err().contains("16 + 17 bytes"));
        assert!(check_fatbin(b"\x7fELF").is_err());
    }
}

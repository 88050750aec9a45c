//! An independent reader that walks an image the way the driver does, trusting every header
//! field (including the extended-numbering escapes a full ELF reader follows), and reports
//! the first read that would leave the image or the region it belongs to. It shares no code
//! with the checks: its arithmetic is in `u128`, its reads are plain slice `get`s.
//!
//! The property the fuzz tests hold the checks to: whatever a check accepts, this reader
//! reads without leaving bounds.

type Read<T> = Result<T, String>;

/// Bytes `[offset, offset + len)` of `region`, or why not.
fn range<'a>(region: &'a [u8], offset: u128, len: u128, what: &str) -> Read<&'a [u8]> {
    let end = offset + len;
    if end > region.len() as u128 {
        return Err(format!(
            "{what}: bytes {offset}..{end} of a {}-byte region",
            region.len()
        ));
    }
    Ok(&region[offset as usize..end as usize])
}

/// A little-endian integer of `width` bytes at `offset`.
fn int(region: &[u8], offset: u128, width: u128, what: &str) -> Read<u128> {
    let bytes = range(region, offset, width, what)?;
    Ok(bytes
        .iter()
        .rev()
        .fold(0u128, |acc, &b| (acc << 8) | u128::from(b)))
}

/// A NUL-terminated string starting at `offset` of `table`: it must end inside the table.
fn c_string(table: &[u8], offset: u128, what: &str) -> Read<()> {
    range(table, offset, 0, what)?;
    match table[offset as usize..].iter().position(|&b| b == 0) {
        Some(_) => Ok(()),
        None => Err(format!("{what}: no NUL before the end of its table")),
    }
}

struct Shdr {
    name: u128,
    kind: u128,
    flags: u128,
    addr: u128,
    offset: u128,
    size: u128,
    link: u128,
    info: u128,
}

/// The bits (highest patched bit) of each `R_CUDA_*` type, by type number, from the same
/// public listing, kept here as raw data rather than the checks' byte classes.
const LAST_BIT: [u8; 117] = [
    0, 31, 63, 31, 63, 57, 19, 31, 31, 31, 57, 57, 54, 54, 54, 49, 46, 41, 38, 39, // 0-19
    44, 31, 44, 59, 45, 41, 57, 36, 48, 53, 57, 54, 54, 54, 31, 63, 46, 57, 44, 43, // 20-39
    49, 46, 51, 51, 51, 43, 35, 51, 51, 51, 38, 48, 19, 63, 40, 63, 63, 63, 80, 47, // 40-59
    55, 63, 63, 63, 58, 53, 58, 127, 8, 90, 31, 31, 31, 63, 63, 80, 7, 7, 7, 7, // 60-79
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, // 80-99
    63, 11, 63, 31, 7, 7, 7, 7, 7, 7, 7, 7, 63, 63, 81, 58, 0, // 100-116
];

/// The bytes a relocation touches: the power-of-two word holding its last bit.
fn reloc_width(kind: u128) -> u128 {
    match kind {
        0 | 116 => 0,
        k if k < 116 => (u128::from(LAST_BIT[k as usize]) / 8 + 1).next_power_of_two(),
        _ => 16,
    }
}

/// Walks a cubin like a trusting reader.
pub(crate) fn read_cubin(image: &[u8]) -> Read<()> {
    range(image, 0, 64, "ELF header")?;
    let e = |at, w, what| int(image, at, w, what);
    let shoff = e(0x28, 8, "e_shoff")?;
    let mut shnum = e(0x3C, 2, "e_shnum")?;
    let mut shstrndx = e(0x3E, 2, "e_shstrndx")?;
    let phoff = e(0x20, 8, "e_phoff")?;
    let mut phnum = e(0x38, 2, "e_phnum")?;
    // A trusting reader indexes `Elf64_Shdr *` arrays: 64-byte strides, whatever e_shentsize.
    let shdr = |i: u128| -> Read<Shdr> {
        let at = shoff + 64 * i;
        let what = format!("section header {i}");
        range(image, at, 64, &what)?;
        Ok(Shdr {
            name: int(image, at, 4, &what)?,
            kind: int(image, at + 4, 4, &what)?,
            flags: int(image, at + 8, 8, &what)?,
            addr: int(image, at + 0x10, 8, &what)?,
            offset: int(image, at + 0x18, 8, &what)?,
            size: int(image, at + 0x20, 8, &what)?,
            link: int(image, at + 0x28, 4, &what)?,
            info: int(image, at + 0x2C, 4, &what)?,
        })
    };
    // The extended-numbering escapes, followed as the ELF specification says.
    if shnum == 0 && shoff != 0 {
        shnum = shdr(0)?.size;
    }
    if shstrndx == 0xFFFF {
        shstrndx = shdr(0)?.link;
    }
    if phnum == 0xFFFF {
        phnum = shdr(0)?.info;
    }
    let sections = (0..shnum).map(shdr).collect::<Read<Vec<_>>>()?;
    let bytes = |s: &Shdr, what: &str| -> Read<&[u8]> {
        if s.kind == 8 {
            // No file bytes, but the offset is still one a reader may seek to.
            range(image, s.offset, 0, what).map(|_| &[][..])
        } else {
            range(image, s.offset, s.size, what)
        }
    };
    let section = |i: u128, what: &str| -> Read<&Shdr> {
        sections
            .get(i as usize)
            .filter(|_| i < sections.len() as u128)
            .ok_or_else(|| format!("{what}: section {i} of {}", sections.len()))
    };
    for (i, s) in sections.iter().enumerate() {
        bytes(s, &format!("section {i}'s bytes"))?;
    }
    // Section names.
    let names = section(shstrndx, "e_shstrndx")?;
    let name_bytes = bytes(names, "section name table")?;
    for (i, s) in sections.iter().enumerate() {
        c_string(name_bytes, s.name, &format!("section {i}'s name"))?;
        if s.link != 0 {
            section(s.link, &format!("section {i}'s sh_link"))?;
        }
        if s.flags & 0x40 != 0 || s.kind == 4 || s.kind == 9 {
            section(s.info, &format!("section {i}'s sh_info"))?;
        }
    }
    // Symbols.
    for (i, s) in sections.iter().enumerate() {
        if s.kind != 2 && s.kind != 11 {
            continue;
        }
        let table = bytes(s, "symbol table")?;
        let strings = bytes(section(s.link, "symbol names")?, "symbol names")?;
        for j in 0..s.size / 24 {
            let what = format!("symbol {j} of section {i}");
            let at = 24 * j;
            range(table, at, 24, &what)?;
            c_string(strings, int(table, at, 4, &what)?, &what)?;
            let kind = int(table, at + 4, 1, &what)? & 0xF;
            let shndx = int(table, at + 6, 2, &what)?;
            let value = int(table, at + 8, 8, &what)?;
            let size = int(table, at + 16, 8, &what)?;
            if shndx != 0 && shndx < 0xFF00 {
                let home = section(shndx, &what)?;
                if kind == 1 || kind == 2 {
                    let start = value
                        .checked_sub(home.addr)
                        .ok_or_else(|| format!("{what}: below its section"))?;
                    if start + size > home.size {
                        return Err(format!("{what}: past its section"));
                    }
                }
            }
        }
    }
    // Code sections name their function's symbol.
    for (i, s) in sections.iter().enumerate() {
        if s.flags & 0x4 == 0 {
            continue;
        }
        let Ok(table) = section(s.link, "") else {
            continue;
        };
        if table.kind == 2 || table.kind == 11 {
            range(
                bytes(table, "")?,
                24 * s.info,
                24,
                &format!("section {i}'s symbol"),
            )?;
        }
    }
    // Relocations.
    for (i, s) in sections.iter().enumerate() {
        let entry = match s.kind {
            4 => 24,
            9 => 16,
            _ => continue,
        };
        let table = bytes(s, "relocations")?;
        let count = s.size / entry;
        if count == 0 {
            continue;
        }
        let symtab = section(s.link, "relocation symbols")?;
        let symbols = bytes(symtab, "relocation symbols")?;
        let target = section(s.info, "relocation target")?;
        for j in 0..count {
            let what = format!("relocation {j} of section {i}");
            let offset = int(table, entry * j, 8, &what)?;
            let info = int(table, entry * j + 8, 8, &what)?;
            range(symbols, 24 * (info >> 32), 24, &what)?;
            let start = offset
                .checked_sub(target.addr)
                .ok_or_else(|| format!("{what}: below its target"))?;
            if start + reloc_width(info & 0xFFFF_FFFF) > target.size {
                return Err(format!("{what}: rewrites past its target"));
            }
        }
    }
    // .nv.info records.
    for (i, s) in sections.iter().enumerate() {
        if s.kind != 0x7000_0000 {
            continue;
        }
        let records = bytes(s, "nv.info")?;
        let mut at = 0u128;
        while at < records.len() as u128 {
            let what = format!("record at {at} of section {i}");
            let format = int(records, at, 1, &what)?;
            let value = int(records, at + 2, 2, &what)?;
            let len = match format {
                1..=3 => 4,
                4 => 4 + value,
                _ => return Err(format!("{what}: unknown format {format}")),
            };
            range(records, at, len, &what)?;
            at += len;
        }
    }
    // Notes: 12-byte headers, name and descriptor padded to 4 (8 in 8-aligned sections).
    for (i, s) in sections.iter().enumerate() {
        if s.kind != 7 {
            continue;
        }
        let notes = bytes(s, "notes")?;
        let pad = if int(image, shoff + 64 * i as u128 + 0x30, 8, "")? == 8 {
            8
        } else {
            4
        };
        let mut at = 0u128;
        while at < notes.len() as u128 {
            let what = format!("note at {at} of section {i}");
            let name = int(notes, at, 4, &what)?;
            let desc = int(notes, at + 4, 4, &what)?;
            let len = 12 + name.div_ceil(pad) * pad + desc.div_ceil(pad) * pad;
            range(notes, at, len, &what)?;
            at += len;
        }
    }
    // Section groups: a flag word, then member section indices; the signature symbol.
    for (i, s) in sections.iter().enumerate() {
        if s.kind != 17 {
            continue;
        }
        let words = bytes(s, "group")?;
        let symbols = bytes(section(s.link, "group symbols")?, "group symbols")?;
        range(
            symbols,
            24 * s.info,
            24,
            &format!("section {i}'s signature"),
        )?;
        for w in 1..words.len() as u128 / 4 {
            section(
                int(words, 4 * w, 4, "group member")?,
                &format!("group {i} member"),
            )?;
        }
    }
    // Segments. The driver seeks to `e_phoff` whatever `e_phnum` says (issue 21: an empty
    // table far past the end hung the load), so a nonzero offset must lie inside.
    if phoff != 0 {
        range(image, phoff, 56 * phnum.max(1), "program header table")?;
    }
    for i in 0..phnum {
        let what = format!("program header {i}");
        let at = phoff + 56 * i;
        range(image, at, 56, &what)?;
        let offset = int(image, at + 8, 8, &what)?;
        let filesz = int(image, at + 0x20, 8, &what)?;
        range(image, offset, filesz, &what)?;
    }
    Ok(())
}

/// Walks one or more fatbins back to back like a trusting reader.
pub(crate) fn read_fatbin(image: &[u8]) -> Read<()> {
    let mut start = 0u128;
    loop {
        range(image, start, 16, "fatbin header")?;
        let fat_size = int(image, start + 8, 8, "fatSize")?;
        let header_size = int(image, start + 6, 2, "headerSize")?;
        let container = range(image, 0, start + header_size + fat_size, "fatbin")?;
        let end = start + header_size + fat_size;
        let mut at = start + header_size;
        while at < end {
            let what = format!("entry at {at}");
            range(container, at, 64, &what)?;
            let kind = int(container, at, 2, &what)?;
            let hs = int(container, at + 4, 4, &what)?;
            let size = int(container, at + 8, 8, &what)?;
            let options = int(container, at + 20, 4, &what)?;
            let (name_at, name_len) = (
                int(container, at + 32, 4, &what)?,
                int(container, at + 36, 4, &what)?,
            );
            let flags = int(container, at + 40, 8, &what)?;
            let header = range(container, at, hs, &what)?;
            range(header, name_at, name_len, &format!("{what}: name"))?;
            if options != 0 {
                let o = int(header, options, 4, &what)?;
                let n = int(header, options + 4, 4, &what)?;
                range(header, o, n, &format!("{what}: options"))?;
            }
            if flags & 0xA000 != 0 {
                return Err(format!("{what}: compressed, which no check can vouch for"));
            }
            let payload = range(container, at + hs, size, &format!("{what}: payload"))?;
            match kind {
                2 => read_cubin(payload).map_err(|e| format!("{what}: {e}"))?,
                1 => {
                    if !payload.contains(&0) {
                        return Err(format!("{what}: PTX without a NUL"));
                    }
                }
                _ => return Err(format!("{what}: kind {kind} cannot be read")),
            }
            at += hs + size;
        }
        start = end;
        if start >= image.len() as u128 {
            return Ok(());
        }
    }
}

/// Every header field of a valid cubin, as `(offset, width)`: the ELF header's, each
/// section header's, each program header's, each symbol's and relocation's, each `.nv.info`
/// record head's. What the fuzz tests mutate.
pub(crate) fn cubin_fields(image: &[u8]) -> Vec<(u64, u8)> {
    let mut fields: Vec<(u64, u8)> = vec![
        (4, 1),
        (5, 1),
        (6, 1),
        (0x10, 2),
        (0x12, 2),
        (0x20, 8),
        (0x28, 8),
        (0x34, 2),
        (0x36, 2),
        (0x38, 2),
        (0x3A, 2),
        (0x3C, 2),
        (0x3E, 2),
    ];
    let get = |at: u64, w: u128| int(image, u128::from(at), w, "").unwrap_or(0) as u64;
    let shoff = get(0x28, 8);
    let shnum = get(0x3C, 2);
    let phoff = get(0x20, 8);
    let phnum = get(0x38, 2);
    for i in 0..shnum {
        let at = shoff + 64 * i;
        for (f, w) in [
            (0, 4),
            (4, 4),
            (8, 8),
            (0x10, 8),
            (0x18, 8),
            (0x20, 8),
            (0x28, 4),
        ] {
            fields.push((at + f, w));
        }
        for (f, w) in [(0x2C, 4), (0x30, 8), (0x38, 8)] {
            fields.push((at + f, w));
        }
        let (kind, offset, size) = (get(at + 4, 4), get(at + 0x18, 8), get(at + 0x20, 8));
        match kind {
            2 | 11 => {
                for j in 0..size / 24 {
                    let s = offset + 24 * j;
                    fields.extend([(s, 4), (s + 4, 1), (s + 6, 2), (s + 8, 8), (s + 16, 8)]);
                }
            }
            4 | 9 => {
                let entry = if kind == 4 { 24 } else { 16 };
                for j in 0..size / entry {
                    let r = offset + entry * j;
                    fields.extend([(r, 8), (r + 8, 4), (r + 12, 4)]);
                }
            }
            7 => {
                let mut r = 0;
                while r + 12 <= size {
                    fields.extend([(offset + r, 4), (offset + r + 4, 4)]);
                    let (name, desc) = (get(offset + r, 4), get(offset + r + 4, 4));
                    r += 12 + name.next_multiple_of(4) + desc.next_multiple_of(4);
                }
            }
            0x7000_0000 => {
                let mut r = 0;
                while r + 4 <= size {
                    fields.extend([(offset + r, 1), (offset + r + 2, 2)]);
                    let format = get(offset + r, 1);
                    r += 4 + if format == 4 {
                        get(offset + r + 2, 2)
                    } else {
                        0
                    };
                }
            }
            _ => {}
        }
    }
    for i in 0..phnum {
        let at = phoff + 56 * i;
        fields.extend([
            (at, 4),
            (at + 8, 8),
            (at + 0x20, 8),
            (at + 0x28, 8),
            (at + 0x30, 8),
        ]);
    }
    fields
}

/// Every header field of a valid fatbin (container and entry headers, and the fields of
/// each cubin inside), as `(offset, width)`.
pub(crate) fn fatbin_fields(image: &[u8]) -> Vec<(u64, u8)> {
    let mut fields: Vec<(u64, u8)> = vec![(0, 4), (4, 2), (6, 2), (8, 8)];
    let get = |at: u64, w: u128| int(image, u128::from(at), w, "").unwrap_or(0) as u64;
    let end = 16 + get(8, 8);
    let mut at = 16;
    while at + 64 <= end {
        for (f, w) in [
            (0, 2),
            (4, 4),
            (8, 8),
            (16, 4),
            (20, 4),
            (28, 4),
            (32, 4),
            (36, 4),
        ] {
            fields.push((at + f, w));
        }
        fields.push((at + 40, 8));
        let (kind, hs, size) = (get(at, 2), get(at + 4, 4), get(at + 8, 8));
        if get(at + 20, 4) != 0 {
            let pair = at + get(at + 20, 4);
            fields.extend([(pair, 4), (pair + 4, 4)]);
        }
        if kind == 2 {
            let payload = &image[(at + hs) as usize..(at + hs + size) as usize];
            let base = at + hs;
            fields.extend(
                cubin_fields(payload)
                    .into_iter()
                    .map(|(o, w)| (base + o, w)),
            );
        }
        at += hs + size;
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::tests::build::{ElfBuilder, FatbinBuilder};

    const CUBIN: &[u8] = include_bytes!("../../../kernels/test_kernels.sm_90.cubin");

    #[test]
    fn the_oracle_reads_the_valid_images() {
        read_cubin(CUBIN).unwrap();
        read_cubin(&ElfBuilder::minimal().build()).unwrap();
        read_fatbin(&FatbinBuilder::cubin_and_ptx().build()).unwrap();
        assert!(cubin_fields(CUBIN).len() > 400);
        assert!(fatbin_fields(&FatbinBuilder::cubin_and_ptx().build()).len() > 400);
    }

    #[test]
    fn the_oracle_finds_the_reported_reads_past_the_end() {
        let mut shstrndx = CUBIN.to_vec();
        shstrndx[0x3E..0x40].copy_from_slice(&0xFFFEu16.to_le_bytes());
        assert!(read_cubin(&shstrndx).is_err());
        let mut phnum = CUBIN.to_vec();
        phnum[0x36..0x38].copy_from_slice(&0u16.to_le_bytes());
        phnum[0x38..0x3A].copy_from_slice(&0xFFFFu16.to_le_bytes());
        // PN_XNUM: the count is section 0's sh_info, 0 here, so this walk stays inside;
        // with a count there, it does not.
        assert!(read_cubin(&phnum).is_ok());
        let shoff = u64::from_le_bytes(CUBIN[0x28..0x30].try_into().unwrap()) as usize;
        phnum[shoff + 0x2C..shoff + 0x30].copy_from_slice(&0xFFFFu32.to_le_bytes());
        assert!(read_cubin(&phnum).is_err());
        // Issue 21: no program headers, but the table's offset far past the end.
        let mut far = CUBIN.to_vec();
        far[0x38..0x3A].copy_from_slice(&0u16.to_le_bytes());
        far[0x20..0x28].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(read_cubin(&far).is_err());
    }
}

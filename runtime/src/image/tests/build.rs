//! Builders of small valid images, laid out the way the CUDA toolchain lays them out, so a
//! test can break exactly one field and see which rule refuses it.

use std::collections::HashMap;

/// Writes `bytes` at `at` (tests only: panics past the end).
pub(crate) fn put(image: &mut [u8], at: u64, bytes: &[u8]) {
    let at = at as usize;
    image[at..at + bytes.len()].copy_from_slice(bytes);
}

/// Where a section's bytes are in a built image.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placed {
    pub(crate) offset: u64,
    pub(crate) size: u64,
}

struct SectionSpec {
    name: &'static str,
    kind: u32,
    flags: u64,
    link: u32,
    info: u32,
    align: u64,
    entsize: u64,
    /// The file bytes, or for `SHT_NOBITS` none and `nobits` as the size.
    data: Vec<u8>,
    nobits: u64,
}

/// A small cubin: null, `.shstrtab`, `.strtab`, `.symtab`, `.nv.info`, `.nv.info.k`,
/// `.text.k`, `.rela.text.k`, `.nv.shared.k` (NOBITS), `.nv.constant0.k`, `.note.nv.tkinfo`;
/// program headers
/// `PT_PHDR`, `PT_LOAD` (text), `PT_LOAD` (shared, memory only).
pub(crate) struct ElfBuilder {
    image: Vec<u8>,
    sections: HashMap<&'static str, (u16, u64, Placed)>,
    phoff: u64,
}

const TEXT_SIZE: usize = 64;

impl ElfBuilder {
    pub(crate) fn minimal() -> ElfBuilder {
        // Section indices, fixed so links can name them.
        const SHSTRTAB: u32 = 1;
        const STRTAB: u32 = 2;
        const SYMTAB: u32 = 3;
        const TEXT: u32 = 6;
        let mut strtab = b"\0k\0".to_vec();
        strtab.extend_from_slice(b".text.k\0");
        // Symbols: the null symbol, then the kernel `k`: FUNC GLOBAL in .text.k.
        let mut symtab = vec![0u8; 24];
        let mut k = vec![0u8; 24];
        k[0..4].copy_from_slice(&1u32.to_le_bytes()); // "k"
        k[4] = 0x12; // STB_GLOBAL << 4 | STT_FUNC
        k[5] = 0x10; // STO_CUDA_ENTRY
        k[6..8].copy_from_slice(&(TEXT as u16).to_le_bytes());
        k[16..24].copy_from_slice(&(TEXT_SIZE as u64).to_le_bytes());
        symtab.extend_from_slice(&k);
        // .nv.info: EIATTR_REGCOUNT (SVAL, 8 bytes: symbol 1, 16 registers).
        let mut nv_info = vec![0x04, 0x2F, 8, 0];
        nv_info.extend_from_slice(&1u32.to_le_bytes());
        nv_info.extend_from_slice(&16u32.to_le_bytes());
        // .nv.info.k: EIATTR_CUDA_API_VERSION (SVAL 4), EIATTR_SW_WAR-like NVAL, then
        // EIATTR_MAXREG_COUNT (HVAL) last.
        let mut nv_info_k = vec![0x04, 0x37, 4, 0];
        nv_info_k.extend_from_slice(&128u32.to_le_bytes());
        nv_info_k.extend_from_slice(&[0x01, 0x50, 0, 0]);
        nv_info_k.extend_from_slice(&[0x03, 0x1B, 0xFF, 0]);
        // One R_CUDA_64 at offset 0 of .text.k against symbol 1.
        let mut rela = 0u64.to_le_bytes().to_vec();
        rela.extend_from_slice(&((1u64 << 32) | 2).to_le_bytes());
        rela.extend_from_slice(&0i64.to_le_bytes());

        // A note: 4-byte name "NVI" (padded from 4), 6-byte descriptor padded to 8, type 2000.
        let mut note = 4u32.to_le_bytes().to_vec();
        note.extend_from_slice(&6u32.to_le_bytes());
        note.extend_from_slice(&2000u32.to_le_bytes());
        note.extend_from_slice(b"NVI\0");
        note.extend_from_slice(b"13.0\0\0\0\0");

        let spec = |name, kind, flags, link, info, align, entsize, data: Vec<u8>| SectionSpec {
            name,
            kind,
            flags,
            link,
            info,
            align,
            entsize,
            data,
            nobits: 0,
        };
        let sections = vec![
            spec("", 0, 0, 0, 0, 0, 0, Vec::new()),
            spec(".shstrtab", 3, 0, 0, 0, 1, 0, Vec::new()), // filled below
            spec(".strtab", 3, 0, 0, 0, 1, 0, strtab),
            spec(".symtab", 2, 0, STRTAB, 1, 8, 24, symtab),
            spec(".nv.info", 0x7000_0000, 0, SYMTAB, 0, 4, 0, nv_info),
            spec(
                ".nv.info.k",
                0x7000_0000,
                0x40,
                SYMTAB,
                TEXT,
                4,
                0,
                nv_info_k,
            ),
            spec(".text.k", 1, 0x6, SYMTAB, 1, 128, 0, vec![0x5A; TEXT_SIZE]),
            spec(".rela.text.k", 4, 0x40, SYMTAB, TEXT, 8, 24, rela),
            SectionSpec {
                nobits: 0x400,
                ..spec(".nv.shared.k", 8, 0x43, 0, TEXT, 16, 0, Vec::new())
            },
            spec(".nv.constant0.k", 1, 0x42, 0, TEXT, 4, 0, vec![0; 16]),
            spec(".note.nv.tkinfo", 7, 0, 0, 0, 4, 0, note),
        ];
        debug_assert_eq!(sections[SHSTRTAB as usize].name, ".shstrtab");
        Self::lay_out(sections)
    }

    fn lay_out(mut sections: Vec<SectionSpec>) -> ElfBuilder {
        // The section name table holds every name.
        let mut names = vec![0u8];
        let mut name_at = Vec::new();
        for s in &sections {
            if s.name.is_empty() {
                name_at.push(0u32);
            } else {
                name_at.push(names.len() as u32);
                names.extend_from_slice(s.name.as_bytes());
                names.push(0);
            }
        }
        sections[1].data = names;

        let mut image = vec![0u8; 64];
        let mut placed = Vec::new();
        for s in &sections {
            let align = s.align.max(1) as usize;
            if s.kind == 8 || s.name.is_empty() {
                placed.push(Placed {
                    offset: if s.name.is_empty() {
                        0
                    } else {
                        image.len() as u64
                    },
                    size: s.nobits,
                });
                continue;
            }
            image.resize(image.len().next_multiple_of(align), 0);
            placed.push(Placed {
                offset: image.len() as u64,
                size: s.data.len() as u64,
            });
            image.extend_from_slice(&s.data);
        }
        image.resize(image.len().next_multiple_of(8), 0);
        let shoff = image.len() as u64;
        for (i, s) in sections.iter().enumerate() {
            let mut h = [0u8; 64];
            h[0..4].copy_from_slice(&name_at[i].to_le_bytes());
            h[4..8].copy_from_slice(&s.kind.to_le_bytes());
            h[8..16].copy_from_slice(&s.flags.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&placed[i].offset.to_le_bytes());
            h[0x20..0x28].copy_from_slice(&placed[i].size.to_le_bytes());
            h[0x28..0x2C].copy_from_slice(&s.link.to_le_bytes());
            h[0x2C..0x30].copy_from_slice(&s.info.to_le_bytes());
            h[0x30..0x38].copy_from_slice(&s.align.to_le_bytes());
            h[0x38..0x40].copy_from_slice(&s.entsize.to_le_bytes());
            image.extend_from_slice(&h);
        }
        let phoff = image.len() as u64;
        let text = placed[6];
        let shared = placed[8];
        let phdrs: [(u32, u32, u64, u64, u64); 3] = [
            (6, 4, phoff, 3 * 56, 3 * 56),             // PT_PHDR, R
            (1, 5, text.offset, text.size, text.size), // PT_LOAD, R X
            (1, 6, shared.offset, 0, shared.size),     // PT_LOAD, RW, memory only
        ];
        for (kind, flags, offset, filesz, memsz) in phdrs {
            let mut p = [0u8; 56];
            p[0..4].copy_from_slice(&kind.to_le_bytes());
            p[4..8].copy_from_slice(&flags.to_le_bytes());
            p[8..16].copy_from_slice(&offset.to_le_bytes());
            p[0x20..0x28].copy_from_slice(&filesz.to_le_bytes());
            p[0x28..0x30].copy_from_slice(&memsz.to_le_bytes());
            p[0x30..0x38].copy_from_slice(&8u64.to_le_bytes());
            image.extend_from_slice(&p);
        }
        // The ELF header of an sm_90 cubin.
        put(&mut image, 0, b"\x7fELF\x02\x01\x01\x33\x07");
        put(&mut image, 0x10, &2u16.to_le_bytes()); // ET_EXEC
        put(&mut image, 0x12, &190u16.to_le_bytes()); // EM_CUDA
        put(&mut image, 0x14, &0x81u32.to_le_bytes());
        put(&mut image, 0x20, &phoff.to_le_bytes());
        put(&mut image, 0x28, &shoff.to_le_bytes());
        put(&mut image, 0x30, &0x005A_055Au32.to_le_bytes());
        put(&mut image, 0x34, &64u16.to_le_bytes());
        put(&mut image, 0x36, &56u16.to_le_bytes());
        put(&mut image, 0x38, &3u16.to_le_bytes());
        put(&mut image, 0x3A, &64u16.to_le_bytes());
        put(&mut image, 0x3C, &(sections.len() as u16).to_le_bytes());
        put(&mut image, 0x3E, &1u16.to_le_bytes());

        let sections = sections
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name, (i as u16, shoff + 64 * i as u64, placed[i])))
            .collect();
        ElfBuilder {
            image,
            sections,
            phoff,
        }
    }

    pub(crate) fn build(&self) -> Vec<u8> {
        self.image.clone()
    }

    /// Where the header of section `name` ("" for section 0) starts.
    pub(crate) fn section_header_at(&self, name: &str) -> u64 {
        self.sections[name].1
    }

    /// Where section `name`'s bytes are.
    pub(crate) fn section(&self, name: &str) -> Placed {
        self.sections[name].2
    }

    /// Section `name`'s index.
    pub(crate) fn index(&self, name: &str) -> u16 {
        self.sections[name].0
    }

    /// Where program header `i` starts.
    pub(crate) fn program_header_at(&self, i: u64) -> u64 {
        self.phoff + 56 * i
    }
}

/// A fatbin of the committed sm_90 cubin (entry 0, a 64-byte header) and the committed PTX
/// (entry 1, an 88-byte header holding a ptxas options record, the options and a name).
pub(crate) struct FatbinBuilder {
    image: Vec<u8>,
    entries: Vec<(u64, u64, u64)>,
}

impl FatbinBuilder {
    pub(crate) fn cubin_and_ptx() -> FatbinBuilder {
        let cubin = include_bytes!("../../../kernels/test_kernels.sm_90.cubin");
        let ptx = include_str!("../../../kernels/test_kernels.ptx");
        let mut ptx_payload = ptx.as_bytes().to_vec();
        ptx_payload.push(0);
        let mut ptx_header_tail = Vec::new();
        ptx_header_tail.extend_from_slice(&72u32.to_le_bytes()); // options at 72
        ptx_header_tail.extend_from_slice(&3u32.to_le_bytes()); // 3 bytes
        ptx_header_tail.extend_from_slice(b"-O3\0\0\0\0\0");
        ptx_header_tail.extend_from_slice(b"k.ptx\0\0\0"); // name at 80, 5 bytes
        Self::from_entries(&[
            Entry {
                kind: 2,
                arch: 90,
                options_offset: 0,
                name: (0, 0),
                header_tail: Vec::new(),
                payload: cubin.to_vec(),
            },
            Entry {
                kind: 1,
                arch: 90,
                options_offset: 64,
                name: (80, 5),
                header_tail: ptx_header_tail,
                payload: ptx_payload,
            },
        ])
    }

    fn from_entries(entries: &[Entry]) -> FatbinBuilder {
        let mut image = vec![0u8; 16];
        let mut placed = Vec::new();
        for e in entries {
            let at = image.len() as u64;
            let header_size = 64 + e.header_tail.len() as u64;
            let size = e.payload.len().next_multiple_of(8) as u64;
            let mut h = [0u8; 64];
            h[0..2].copy_from_slice(&e.kind.to_le_bytes());
            h[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
            h[4..8].copy_from_slice(&(header_size as u32).to_le_bytes());
            h[8..16].copy_from_slice(&size.to_le_bytes());
            h[20..24].copy_from_slice(&e.options_offset.to_le_bytes());
            h[24..26].copy_from_slice(&3u16.to_le_bytes()); // minor
            h[26..28].copy_from_slice(&8u16.to_le_bytes()); // major
            h[28..32].copy_from_slice(&e.arch.to_le_bytes());
            h[32..36].copy_from_slice(&e.name.0.to_le_bytes());
            h[36..40].copy_from_slice(&e.name.1.to_le_bytes());
            h[40..48].copy_from_slice(&0x11u64.to_le_bytes()); // 64-bit, Linux
            image.extend_from_slice(&h);
            image.extend_from_slice(&e.header_tail);
            image.extend_from_slice(&e.payload);
            image.resize(image.len().next_multiple_of(8), 0);
            placed.push((at, header_size, size));
        }
        let body = image.len() as u64 - 16;
        put(&mut image, 0, &0xBA55_ED50u32.to_le_bytes());
        put(&mut image, 4, &1u16.to_le_bytes());
        put(&mut image, 6, &16u16.to_le_bytes());
        put(&mut image, 8, &body.to_le_bytes());
        FatbinBuilder {
            image,
            entries: placed,
        }
    }

    pub(crate) fn build(&self) -> Vec<u8> {
        self.image.clone()
    }

    /// Where entry `i`'s header starts.
    pub(crate) fn entry_at(&self, i: usize) -> u64 {
        self.entries[i].0
    }

    /// Entry `i`'s header size (its payload follows).
    pub(crate) fn entry_header_size(&self, i: usize) -> u64 {
        self.entries[i].1
    }

    /// Entry `i`'s payload size.
    pub(crate) fn payload_size(&self, i: usize) -> u64 {
        self.entries[i].2
    }
}

struct Entry {
    kind: u16,
    arch: u32,
    options_offset: u32,
    name: (u32, u32),
    header_tail: Vec<u8>,
    payload: Vec<u8>,
}

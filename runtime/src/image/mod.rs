//! Image checks: what a PTX, cubin or fatbin image must be before the driver may read it.
//!
//! `cuModuleLoadData` reads an image by the offsets and sizes its own headers claim, without
//! checking them against the image's length (a cubin with `e_shstrndx = 0xfffe` segfaults
//! the driver). So the only thing between safe code and a read past the end of the caller's
//! slice is this module: every field the driver trusts is checked here first, and anything
//! that cannot be checked (extended ELF numbering, compressed fatbin entries, unknown entry
//! kinds) is refused with an [`ImageError`] naming the field, rather than guessed at.
//!
//! The promise: an image that passes can be walked by a reader that trusts its headers (the
//! ELF header, section and program header tables, string, symbol and relocation tables,
//! `.nv.info` records; the fatbin header and entry headers) without reading outside it, and
//! every offset such a reader may seek to lies inside, whether or not the count beside it is
//! zero (an empty program header table placed far past the end hung the driver, issue 21).
//! The tests check that promise by fuzzing the checks against an independent reader.
//!
//! This module is pure: no `unsafe`, no driver calls. [`Module`](crate::Module)'s loaders
//! call it, and it can be called directly to check an image before shipping it:
//!
//! ```standalone_crate
//! let cubin = include_bytes!("../../kernels/test_kernels.sm_90.cubin");
//! let kernels = gpu_pipeline::image::check_cubin(cubin)?;
//! assert_eq!(kernels.len(), 5);
//! # Ok::<(), gpu_pipeline::image::ImageError>(())
//! ```
//!
//! Files: `ptx` (text rules), `elf/` (cubins: header, sections, tables, relocations,
//! `.nv.info`, segments), `fatbin` (container and entries), `read` (the bounds-checked
//! reads every check goes through), `error` ([`ImageError`]).
#![forbid(unsafe_code)]

mod elf;
mod error;
mod fatbin;
mod ptx;
mod read;

#[cfg(test)]
mod tests;

pub use elf::check_cubin;
pub use error::{ImageError, ImageFormat};
pub use fatbin::{FatbinEntry, check_fatbin};
pub use ptx::check_ptx;

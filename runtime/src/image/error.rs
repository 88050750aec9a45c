//! The value every check returns when it refuses an image: which format, where, which field,
//! and why.

use std::fmt;

/// The kind of image a check read.
///
/// ```
/// use gpu_pipeline::image::{ImageFormat, check_ptx};
/// let err = check_ptx("").unwrap_err();
/// assert_eq!(err.format, ImageFormat::Ptx);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ImageFormat {
    /// PTX text (`nvcc -ptx`), JIT-compiled by the driver.
    Ptx,
    /// A cubin: a CUDA ELF for one architecture (`nvcc -cubin`).
    Cubin,
    /// A fatbin: a container of cubins and PTX (`nvcc -fatbin`).
    Fatbin,
}

impl fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ImageFormat::Ptx => "PTX",
            ImageFormat::Cubin => "cubin",
            ImageFormat::Fatbin => "fatbin",
        })
    }
}

/// Why an image was refused before the driver read it.
///
/// The driver reads images by the sizes and offsets their headers claim, without checking
/// them against the image's length, so every field it trusts is checked first; this names
/// the first one that failed.
///
/// ```
/// use gpu_pipeline::image::{check_cubin, ImageFormat};
///
/// let err = check_cubin(b"\x7fELF").unwrap_err();
/// assert_eq!(err.format, ImageFormat::Cubin);
/// assert!(err.to_string().contains("ELF header"), "{err}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct ImageError {
    /// The format of the part that is wrong: a cubin inside a fatbin says `Cubin`.
    pub format: ImageFormat,
    /// The fatbin entry (counted from 0) the fault is in, for images inside a fatbin.
    pub entry: Option<usize>,
    /// The byte offset of the offending field from the start of the image passed in, when
    /// the fault is at one place.
    pub offset: Option<u64>,
    /// The field that is wrong, e.g. "`e_shstrndx`" or "section 5 `sh_link`".
    pub field: String,
    /// What is wrong with it and what is accepted instead.
    pub reason: String,
}

impl ImageError {
    /// A fault in `field` at byte `offset` of an image of `format`.
    pub(crate) fn at(
        format: ImageFormat,
        offset: u64,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        ImageError {
            format,
            entry: None,
            offset: Some(offset),
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// A fault of the image as a whole (its length, its first bytes).
    pub(crate) fn whole(
        format: ImageFormat,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        ImageError {
            format,
            entry: None,
            offset: None,
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The same fault seen from a fatbin: inside entry `index`, whose payload starts at byte
    /// `base` of the fatbin.
    pub(crate) fn in_fatbin_entry(mut self, index: usize, base: u64) -> Self {
        self.entry = Some(index);
        self.offset = Some(self.offset.map_or(base, |o| o.saturating_add(base)));
        self
    }
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.entry {
            Some(i) => write!(f, "invalid fatbin: entry {i} ({})", self.format)?,
            None => write!(f, "invalid {}", self.format)?,
        }
        write!(f, ": {}: {}", self.field, self.reason)?;
        if let Some(offset) = self.offset {
            write!(f, " (at byte {offset:#x})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_format_field_reason_and_offset() {
        let e = ImageError::at(ImageFormat::Cubin, 0x3e, "`e_shstrndx`", "is 0xfffe");
        assert_eq!(
            e.to_string(),
            "invalid cubin: `e_shstrndx`: is 0xfffe (at byte 0x3e)"
        );
        let e = e.in_fatbin_entry(2, 0x50);
        assert_eq!(
            e.to_string(),
            "invalid fatbin: entry 2 (cubin): `e_shstrndx`: is 0xfffe (at byte 0x8e)"
        );
        let e = ImageError::whole(ImageFormat::Ptx, "the text", "is empty");
        assert_eq!(e.to_string(), "invalid PTX: the text: is empty");
        assert_eq!(e.in_fatbin_entry(0, 0x50).offset, Some(0x50));
    }
}

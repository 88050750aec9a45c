//! PTX text: what the driver reads as a NUL-terminated string and JIT-compiles.
//!
//! The JIT parses the text itself and reports its own errors, so the rules here are only the
//! ones the JIT cannot enforce: where the text ends, and that it is read as text at all.

use super::error::{ImageError, ImageFormat};
use super::read::Bytes;

/// The first bytes by which the driver recognizes a binary image. A text starting with one
/// would be read as that image, bypassing the cubin and fatbin checks.
const BINARY_MAGICS: [(&[u8], &str); 3] = [
    (b"\x7fELF", "a cubin (ELF)"),
    (&[0x50, 0xED, 0x55, 0xBA], "a fatbin"),
    (&[0xB1, 0x43, 0x62, 0x46], "a fatbin wrapper"),
];

/// Checks PTX text for [`Module::load_ptx`](crate::Module::load_ptx) and returns the names of
/// the kernels it defines (`.entry` names), in order.
///
/// ```
/// let names = gpu_pipeline::image::check_ptx(".visible .entry saxpy(.param .u32 n) { ret; }")?;
/// assert_eq!(names, ["saxpy"]);
/// assert!(gpu_pipeline::image::check_ptx("abc\0def").is_err());
/// # Ok::<(), gpu_pipeline::image::ImageError>(())
/// ```
pub fn check_ptx(text: &str) -> Result<Vec<String>, ImageError> {
    no_nul(text.as_bytes())?;
    check_text(text.as_bytes())?;
    Ok(entry_names(text))
}

/// Checks the PTX payload of a fatbin entry: text the driver reads up to its NUL.
pub(crate) fn check_payload(payload: Bytes<'_>) -> Result<(), ImageError> {
    let bytes = payload.rest(0);
    let text = terminated_within(bytes)?;
    check_text(text)
}

/// The driver reads PTX up to its first NUL: a NUL inside the text would silently drop
/// everything after it.
fn no_nul(text: &[u8]) -> Result<(), ImageError> {
    match text.iter().position(|&b| b == 0) {
        Some(at) => Err(ImageError::at(
            ImageFormat::Ptx,
            at as u64,
            "the text",
            "contains a NUL byte; the driver would stop reading there (remove it)",
        )),
        None => Ok(()),
    }
}

/// A PTX payload must end with a NUL within its declared size, or the driver's string read
/// runs past the entry. Returns the text before the NUL.
fn terminated_within(payload: &[u8]) -> Result<&[u8], ImageError> {
    match payload.iter().position(|&b| b == 0) {
        Some(at) => Ok(&payload[..at]),
        None => Err(ImageError::at(
            ImageFormat::Ptx,
            payload.len() as u64,
            "the text",
            "has no terminating NUL within the entry's size; the driver would read past the \
             entry",
        )),
    }
}

/// Rules every PTX text follows, wherever it comes from.
fn check_text(text: &[u8]) -> Result<(), ImageError> {
    not_empty(text)?;
    not_binary(text)?;
    utf8(text)
}

/// An empty text has nothing to compile; say so here rather than through a JIT error.
fn not_empty(text: &[u8]) -> Result<(), ImageError> {
    if text.is_empty() {
        return Err(ImageError::whole(
            ImageFormat::Ptx,
            "the text",
            "is empty; expected PTX source (`.version`, `.target`, `.entry` ...)",
        ));
    }
    Ok(())
}

/// The driver tells images apart by their first bytes: PTX starting like a binary image would
/// be read as one, without the checks that format gets here.
fn not_binary(text: &[u8]) -> Result<(), ImageError> {
    for (magic, what) in BINARY_MAGICS {
        if text.starts_with(magic) {
            return Err(ImageError::at(
                ImageFormat::Ptx,
                0,
                "the first bytes",
                format!(
                    "are the magic of {what}, so the driver would read the text as one; load \
                     binary images with `Module::load_cubin` or `Module::load_fatbin`"
                ),
            ));
        }
    }
    Ok(())
}

/// PTX is text: a payload that is not UTF-8 is not PTX (`load_ptx` takes a `&str`, so the
/// two paths accept the same texts).
fn utf8(text: &[u8]) -> Result<(), ImageError> {
    std::str::from_utf8(text).map(|_| ()).map_err(|e| {
        ImageError::at(
            ImageFormat::Ptx,
            e.valid_up_to() as u64,
            "the text",
            "is not UTF-8 text",
        )
    })
}

/// The names of the kernels a PTX text defines (`.entry name`), in order, without repeats.
pub(crate) fn entry_names(ptx: &str) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = include_str!("../../kernels/test_kernels.ptx");

    #[test]
    fn ptx_entries_are_listed_in_order() {
        assert_eq!(
            check_ptx(PTX).unwrap(),
            [
                "empty",
                "saxpy",
                "reduce_sum",
                "add_scalar",
                "write_out_of_bounds"
            ]
        );
        assert_eq!(
            entry_names(".visible .entry _Z3fooPf(\n.param .u64 p)\n.entry\tbar()"),
            ["_Z3fooPf", "bar"]
        );
        assert!(entry_names(".func helper()").is_empty());
    }

    #[test]
    fn every_committed_ptx_file_passes() {
        for (name, text) in [
            ("test_kernels", PTX),
            (
                "heat2d",
                include_str!("../../../examples/kernels/heat2d.ptx"),
            ),
            ("nbody", include_str!("../../../examples/kernels/nbody.ptx")),
            (
                "interop",
                include_str!("../../../examples/kernels/interop.ptx"),
            ),
            (
                "overlap",
                include_str!("../../../examples/kernels/overlap.ptx"),
            ),
        ] {
            let names = check_ptx(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!names.is_empty(), "{name} defines no kernel");
        }
    }

    #[test]
    fn a_nul_inside_the_text_is_refused_with_its_position() {
        let e = check_ptx("abc\0def").unwrap_err();
        assert_eq!(e.offset, Some(3));
        assert!(e.reason.contains("NUL"), "{e}");
    }

    #[test]
    fn an_empty_text_is_refused() {
        assert!(check_ptx("").unwrap_err().reason.contains("empty"));
    }

    #[test]
    fn text_that_starts_like_a_cubin_is_refused() {
        // Valid UTF-8 and NUL-free, but the driver would parse it as an ELF.
        let e = check_ptx("\x7fELF\x02\x01\x01 .entry k()").unwrap_err();
        assert!(e.reason.contains("cubin (ELF)"), "{e}");
        assert!(e.reason.contains("load_cubin"), "{e}");
    }

    #[test]
    fn payloads_must_be_terminated_text() {
        let ok = b".entry k() { ret; }\0\0\0";
        assert_eq!(check_payload(Bytes::new(ok)), Ok(()));
        let e = check_payload(Bytes::new(b".entry k() { ret; }")).unwrap_err();
        assert!(e.reason.contains("terminating NUL"), "{e}");
        let e = check_payload(Bytes::new(b"\0\0\0\0")).unwrap_err();
        assert!(e.reason.contains("empty"), "{e}");
        let e = check_payload(Bytes::new(b".entry \xff\xfe\0")).unwrap_err();
        assert_eq!(e.offset, Some(7));
        let e = check_payload(Bytes::new(&[0x50, 0xED, 0x55, 0xBA, 1, 0])).unwrap_err();
        assert!(e.reason.contains("a fatbin"), "{e}");
    }
}

//! The parameter lists a PTX image declares for its kernels, read from the text
//! (`.entry name(.param .u32 n, .param .u64 .ptr .global .align 4 x, ...)`), so that a typed
//! declaration is checked against the image on both backends: a three-parameter declaration
//! of a four-parameter kernel fails on the CPU backend too, not first on a GPU.
//!
//! PTX only: cubin and fatbin images are not read for parameters here (on CUDA the driver's
//! `cuFuncGetParamInfo` still checks them, where the driver has it).

use crate::launch::index::ParamKind;
use crate::launch::param::ParamLayout;

/// One `.param` of a PTX `.entry`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PtxParam {
    /// The parameter's name in the PTX.
    pub(crate) name: String,
    /// Its type as written, e.g. `.u32`, `.b8[16]`.
    pub(crate) ty: String,
    /// Its size in bytes.
    pub(crate) size: usize,
}

/// The parameters of one `.entry`, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EntryParams {
    /// The kernel's name.
    pub(crate) kernel: String,
    /// Its parameters; `None` when the list could not be read (an unknown type, say), in
    /// which case nothing is checked against it.
    pub(crate) params: Option<Vec<PtxParam>>,
}

/// Reads every `.entry`'s parameter list from PTX text. Comments are not stripped: the
/// generated PTX this reads has none inside a parameter list.
pub(crate) fn entry_params(ptx: &str) -> Vec<EntryParams> {
    let mut entries = Vec::new();
    let mut rest = ptx;
    while let Some(at) = rest.find(".entry") {
        rest = &rest[at + ".entry".len()..];
        if !rest.starts_with(|c: char| c.is_whitespace()) {
            continue;
        }
        let after = rest.trim_start();
        let kernel: String = after
            .chars()
            .take_while(|&c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
            .collect();
        if kernel.is_empty() || entries.iter().any(|e: &EntryParams| e.kernel == kernel) {
            continue;
        }
        let after = after[kernel.len()..].trim_start();
        let params = match after.strip_prefix('(') {
            Some(list) => list.find(')').and_then(|end| parse_list(&list[..end])),
            // No parenthesised list: a kernel without parameters.
            None => Some(Vec::new()),
        };
        entries.push(EntryParams { kernel, params });
    }
    entries
}

/// `.param .u32 a, .param .u64 b` → the parameters, or `None` if one cannot be read.
fn parse_list(list: &str) -> Option<Vec<PtxParam>> {
    if list.trim().is_empty() {
        return Some(Vec::new());
    }
    list.split(',').map(parse_param).collect()
}

/// One `.param [.align N] .type [.ptr [.space] [.align N]] name[[N]]`.
fn parse_param(text: &str) -> Option<PtxParam> {
    let mut tokens = text.split_whitespace().peekable();
    if tokens.next()? != ".param" {
        return None;
    }
    let mut ty = None;
    let mut name = None;
    while let Some(token) = tokens.next() {
        if token == ".align" {
            tokens.next()?;
        } else if token.starts_with('.') {
            if ty.is_none() {
                ty = Some(token);
            }
            // `.ptr`, `.global`, `.const`, ... qualify a pointer; its size is its type's.
        } else {
            name = Some(token);
            break;
        }
    }
    let (ty, name) = (ty?, name?);
    let element = scalar_size(ty)?;
    let (name, count) = match name.split_once('[') {
        Some((base, count)) => (base, count.strip_suffix(']')?.trim().parse::<usize>().ok()?),
        None => (name, 1),
    };
    Some(PtxParam {
        name: name.to_owned(),
        ty: if count == 1 {
            ty.to_owned()
        } else {
            format!("{ty}[{count}]")
        },
        size: element.checked_mul(count)?,
    })
}

/// The names of the `__global__` functions CUDA C source defines (`extern "C" __global__
/// void name(...)`, templates and all: the identifier before the parameter list), in order.
/// A C++ kernel without `extern "C"` is listed by its source name, not its mangled one.
pub(crate) fn global_names(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("__global__") {
        rest = &rest[at + "__global__".len()..];
        // The name is the identifier before the first `(` that does not open an attribute
        // (`__launch_bounds__(256)`, `__attribute__((...))`).
        let mut search = rest;
        let name = loop {
            let Some(open) = search.find('(') else {
                break None;
            };
            let ident = trailing_identifier(&search[..open]);
            if !ident.starts_with("__") {
                break Some(ident);
            }
            // Skip the attribute's balanced parentheses.
            let mut depth = 0usize;
            let mut end = None;
            for (i, c) in search[open..].char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(open + i + 1);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let Some(end) = end else { break None };
            search = &search[end..];
        };
        if let Some(name) = name.filter(|n| !n.is_empty())
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_owned());
        }
    }
    names
}

/// The identifier `text` ends with (after trailing whitespace).
fn trailing_identifier(text: &str) -> &str {
    let text = text.trim_end();
    let start = text
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    &text[start..]
}

/// The size of a PTX fundamental type.
fn scalar_size(ty: &str) -> Option<usize> {
    Some(match ty {
        ".b8" | ".u8" | ".s8" | ".pred" => 1,
        ".b16" | ".u16" | ".s16" | ".f16" | ".bf16" => 2,
        ".b32" | ".u32" | ".s32" | ".f32" | ".f16x2" | ".bf16x2" => 4,
        ".b64" | ".u64" | ".s64" | ".f64" => 8,
        _ => return None,
    })
}

/// Whether a PTX type is a floating-point one (`.f32`, `.f16x2`, ...).
fn is_float(ty: &str) -> bool {
    let base = ty.split('[').next().unwrap_or(ty);
    matches!(
        base,
        ".f16" | ".bf16" | ".f32" | ".f64" | ".f16x2" | ".bf16x2"
    )
}

/// Compares what a signature declares with the types of a PTX image's parameters, beyond
/// their sizes (`check_param_sizes` ran first): an integer scalar, or a buffer, where the
/// kernel takes a floating-point number cannot be right (a `(f32, u32, ..)` declaration of a
/// kernel taking `(unsigned n, float a, ..)`, say, whose sizes agree). Floats and other
/// `Pod` scalars declared where the image has an integer are left alone: a `#[repr(C)]`
/// newtype of a `u32` is such a scalar. `Err` says which parameter differs and how.
pub(crate) fn check_param_types(kinds: &[ParamKind], image: &[PtxParam]) -> Result<(), String> {
    for (i, (kind, param)) in kinds.iter().zip(image).enumerate() {
        if !is_float(&param.ty) {
            continue;
        }
        let declared = match kind {
            ParamKind::Scalar { index: Some(int) } => format!("an integer (`{}`)", int.name()),
            ParamKind::Buffer { .. } => "a buffer (a pointer)".to_owned(),
            ParamKind::Scalar { index: None } => continue,
        };
        return Err(format!(
            "parameter {i} is declared {declared} but the kernel's `{}` is `{}`, a \
             floating-point number; declare it `f32` (`f64` for `.f64`), or check the order of \
             the parameters",
            param.name, param.ty
        ));
    }
    Ok(())
}

/// `(u32: 4 B, &[T]: 8 B, ...)`: a declared signature, for messages.
pub(crate) fn describe_declared(layouts: &[ParamLayout], kinds: &[ParamKind]) -> String {
    let items: Vec<String> = layouts
        .iter()
        .zip(kinds)
        .map(|(layout, kind)| match kind {
            ParamKind::Buffer { writes: true, .. } => format!("&mut [_] ({} B)", layout.size),
            ParamKind::Buffer { writes: false, .. } => format!("&[_] ({} B)", layout.size),
            ParamKind::Scalar { .. } => format!("scalar ({} B)", layout.size),
        })
        .collect();
    format!("({})", items.join(", "))
}

/// `(.u32 n (4 B), .u64 x (8 B))`: an image's parameter list, for messages.
pub(crate) fn describe_image(params: &[PtxParam]) -> String {
    let items: Vec<String> = params
        .iter()
        .map(|p| format!("{} {} ({} B)", p.ty, p.name, p.size))
        .collect();
    format!("({})", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_lists_are_read_with_their_sizes() {
        let ptx = ".visible .entry saxpy(\n\t.param .u32 saxpy_param_0,\n\t.param .f32 \
                   saxpy_param_1,\n\t.param .u64 .ptr .global .align 4 saxpy_param_2,\n\t.param \
                   .align 8 .b8 saxpy_param_3[16]\n)\n{ ret; }\n.entry empty()\n{ ret; }\n\
                   .entry bare\n{ ret; }";
        let entries = entry_params(ptx);
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].kernel, "saxpy");
        let params = entries[0].params.as_ref().unwrap();
        let sizes: Vec<usize> = params.iter().map(|p| p.size).collect();
        assert_eq!(sizes, [4, 4, 8, 16]);
        assert_eq!(params[3].ty, ".b8[16]");
        assert_eq!(params[2].name, "saxpy_param_2");
        assert_eq!(entries[1].params, Some(Vec::new()));
        assert_eq!(entries[2].params, Some(Vec::new()));
        assert_eq!(
            describe_image(&params[..2]),
            "(.u32 saxpy_param_0 (4 B), .f32 saxpy_param_1 (4 B))"
        );
    }

    #[test]
    fn integers_and_buffers_where_the_image_has_floats_are_refused() {
        let ptx =
            ".entry saxpy(.param .u32 n, .param .f32 a, .param .u64 x, .param .f64 y)\n{ ret; }";
        let image = entry_params(ptx).remove(0).params.unwrap();
        let int = ParamKind::Scalar {
            index: Some(crate::launch::index::IndexType::U32),
        };
        let other = ParamKind::Scalar { index: None };
        let buffer = ParamKind::Buffer {
            writes: true,
            elem_size: 4,
        };
        assert_eq!(
            check_param_types(&[int, other, buffer, other], &image),
            Ok(())
        );
        // `(f32, u32, ..)` for `(unsigned n, float a, ..)`: the sizes agree, the types do not.
        let swapped = check_param_types(&[other, int, buffer, other], &image).unwrap_err();
        assert!(
            swapped.starts_with(
                "parameter 1 is declared an integer (`u32`) but the kernel's `a` is `.f32`"
            ),
            "{swapped}"
        );
        let pointer = check_param_types(&[int, other, buffer, buffer], &image).unwrap_err();
        assert!(
            pointer.starts_with("parameter 3 is declared a buffer"),
            "{pointer}"
        );
        // A float, or a `Pod` newtype, where the image has an integer: not judged.
        assert_eq!(
            check_param_types(&[other, other, buffer, other], &image),
            Ok(())
        );
    }

    #[test]
    fn global_functions_are_found_in_cuda_source() {
        let source = "#include <x.h>\n__device__ float sq(float x) { return x * x; }\n\
                      extern \"C\" __global__ void scale(unsigned n, float* x) {}\n\
                      extern \"C\" __global__ void __launch_bounds__(256) sum (const float* x) {}";
        assert_eq!(global_names(source), ["scale", "sum"]);
        assert!(global_names("int main() {}").is_empty());
    }

    #[test]
    fn an_unreadable_list_checks_nothing() {
        let entries = entry_params(".entry k(.param .weird x)\n{ ret; }");
        assert_eq!(entries[0].params, None);
    }

    #[test]
    fn every_committed_ptx_file_is_read() {
        for text in [
            include_str!("../../kernels/test_kernels.ptx"),
            include_str!("../../../examples/kernels/heat2d.ptx"),
            include_str!("../../../examples/kernels/nbody.ptx"),
        ] {
            let entries = entry_params(text);
            assert!(!entries.is_empty());
            for e in entries {
                assert!(e.params.is_some(), "{}", e.kernel);
            }
        }
    }
}

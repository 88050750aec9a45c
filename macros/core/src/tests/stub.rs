//! What a pipeline with errors expands to: the errors plus stub items, so code using the
//! pipeline compiles against the same names and reports nothing more.

use crate::expand::{after_parse_error, stub};

use super::parse;

fn squash(tokens: proc_macro2::TokenStream) -> String {
    tokens.to_string().replace(' ', "")
}

#[test]
fn a_syntax_error_keeps_the_header_streams_and_params() {
    let source = "pub pipeline P {
        streams { compute, copy }
        params { n: u32, y: &mut DeviceBuffer<f32> }
        stage s on compute { memset y = 0; }
    }";
    let tokens: proc_macro2::TokenStream = source.parse().unwrap();
    let error = parse(source).unwrap_err();
    let out = squash(after_parse_error(tokens, error));
    assert!(out.contains("compile_error!"), "{out}");
    assert!(
        out.contains("pubstructPParams<'a,>{pubn:u32,puby:&'amutDeviceBuffer<f32>,}"),
        "{out}"
    );
    assert!(
        out.contains("pubstructPCompute;") && out.contains("pubstructPCopy;"),
        "{out}"
    );
    assert!(out.contains("pubfnset_n(&mutself,n:u32)"), "{out}");
}

#[test]
fn a_broken_header_gives_the_error_alone() {
    let source = "pipeline { }";
    let tokens: proc_macro2::TokenStream = source.parse().unwrap();
    let error = parse(source).unwrap_err();
    let out = squash(after_parse_error(tokens, error));
    assert!(out.starts_with("::core::compile_error!"), "{out}");
    assert!(!out.contains("struct"), "{out}");
}

#[test]
fn the_stub_has_one_field_per_name_and_no_type_rustc_would_reject() {
    let source = "pipeline P {
            streams { main }
            params { y: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, z: &mut DeviceBuffer }
            stage s on main { fill y = 0.0; }
        }";
    let input = parse(source).unwrap();
    let error = syn::Error::new(proc_macro2::Span::call_site(), "boom");
    let out = squash(stub(&input, error, &source.parse().unwrap()));
    assert_eq!(out.matches("puby:").count(), 1, "{out}");
    assert!(
        out.contains("structPParams<'a,__Z>{puby:&'amutDeviceBuffer<f32>,pubz:__Z,}"),
        "{out}"
    );
    assert!(out.contains("pubfnrun<'a,__Z>"), "{out}");
}

/// The stub names the first segment of each path of the input (`use cpu as _;`), so that an
/// import used only inside a pipeline with an error is no unused-import warning beside the
/// error; not the pipeline's kernel modules, primitive types, `crate`, tool attributes or
/// names a block of the input imports or declares itself.
#[test]
fn the_stub_uses_the_first_segment_of_each_path() {
    let source = "pipeline P {
        streams { main }
        unsafe kernels k = ptx(HEAT_PTX) {
            fn step(n: u32, x: &mut [f32; n]) cpu = cpu::step;
            fn bump(n: u32, x: &mut [f32; n]) cpu = bump;
        }
        params { n: u32, x: &mut DeviceBuffer<f32>, shared: gpu_pipeline::Window<f32> }
        stage s on main {
            launch k::step(n, x) grid n.div_ceil(u32::MAX) block 1;
            launch blas::bump(n, x) grid 1 block crate::BLOCK;
            host |v: &[f32]| { #[allow(clippy::all)] let _ = consts::PI * f32::EPSILON; } reads(x);
            host |v: &[f32]| { use std::cmp::Ordering; let _ = Ordering::Less; } reads(x);
        }
    }";
    let input = parse(source).unwrap();
    let error = syn::Error::new(proc_macro2::Span::call_site(), "boom");
    let out = squash(stub(&input, error, &source.parse().unwrap()));
    for name in ["cpu", "bump", "HEAT_PTX", "gpu_pipeline", "consts"] {
        assert!(out.contains(&format!("use{name}as_;")), "{name}: {out}");
    }
    // `Ordering` is imported inside its closure: a block that declares items is left alone.
    for name in [
        "k", "blas", "u32", "f32", "crate", "clippy", "step", "n", "div_ceil", "Ordering",
    ] {
        assert!(!out.contains(&format!("use{name}as_;")), "{name}: {out}");
    }
}

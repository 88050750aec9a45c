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
    let input = parse(
        "pipeline P {
            streams { main }
            params { y: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, z: &mut DeviceBuffer }
            stage s on main { fill y = 0.0; }
        }",
    )
    .unwrap();
    let error = syn::Error::new(proc_macro2::Span::call_site(), "boom");
    let out = squash(stub(&input, error));
    assert_eq!(out.matches("puby:").count(), 1, "{out}");
    assert!(
        out.contains("structPParams<'a,__Z>{puby:&'amutDeviceBuffer<f32>,pubz:__Z,}"),
        "{out}"
    );
    assert!(out.contains("pubfnrun<'a,__Z>"), "{out}");
}

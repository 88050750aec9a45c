//! Parsing: the grammar's shapes, option loops, and the tokens kept for diagnostics.

use proc_macro2::{Delimiter, Group, TokenStream};
use quote::quote;

use super::*;
use crate::ast::{Statement, bare_ident, tokens_string, type_string};
use crate::lower::{ImageFormat, Memory, Priority, WaitCondition};
use crate::scope::{Scope, Value, shape};

fn parse_error(source: &str) -> String {
    match parse(source) {
        Ok(_) => panic!("expected a parse error"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn the_heat_example_parses_into_its_parts() {
    let input = parse(HEAT).expect("parses");
    assert_eq!(input.name, "HeatStep");
    assert_eq!(input.attrs.len(), 1, "the doc comment is kept");
    let streams: Vec<_> = input.streams().collect();
    assert_eq!(streams.len(), 2);
    assert_eq!(streams[0].name, "compute");
    assert_eq!(
        streams[0].priority.as_ref().map(|p| p.level),
        Some(Priority::High)
    );
    assert!(streams[0].non_blocking.is_none());
    assert!(streams[1].priority.is_none());
    assert!(streams[1].non_blocking.is_some());

    let module = input.modules().next().expect("one module");
    assert_eq!(module.name, "heat");
    assert_eq!(module.format, ImageFormat::Ptx);
    assert_eq!(
        tokens_string(&module.image),
        "include_str!(\"../kernels/heat.ptx\")"
    );
    let kernel = &module.kernels[0];
    assert_eq!(kernel.attrs.len(), 1);
    assert_eq!(
        kernel.signature(),
        "fn stencil(nx: u32, ny: u32, alpha: f32, src: &[f32; unbounded], dst: &mut [f32; unbounded])"
    );
    let host = kernel.host.as_ref().expect("host implementation");
    assert_eq!(tokens_string(&host.path), "crate::heat_host::stencil");

    assert_eq!(input.params().count(), 7);
    let scratch: Vec<_> = input.scratch().collect();
    assert_eq!(scratch[0].name, "tmp");
    assert_eq!(tokens_string(&scratch[0].len), "(nx * ny) as usize");

    let stages: Vec<_> = input.stages().collect();
    let names: Vec<String> = stages.iter().map(|s| s.name.to_string()).collect();
    assert_eq!(names, ["step", "save", "clear", "publish"]);
    assert_eq!(stages[3].after, ["clear"]);
    let Statement::Launch(launch) = &stages[0].statements[0] else {
        panic!("launch")
    };
    assert_eq!(
        launch.target().map(|(m, k)| (m.to_string(), k.to_string())),
        Some(("heat".into(), "stencil".into()))
    );
    assert_eq!(launch.args.len(), 5);
    assert_eq!(
        tokens_string(&launch.grid.as_ref().map(|g| &g.value)),
        "(nx * ny).div_ceil(256)"
    );
    assert_eq!(
        tokens_string(&launch.block.as_ref().map(|b| &b.value)),
        "256"
    );
    assert!(launch.shared.is_none());

    let claims: Vec<_> = input.claims().collect();
    assert_eq!(claims[0].stages.len(), 2);
}

#[test]
fn items_come_in_any_order() {
    let source = r#"pipeline P {
        stage b on s { fill x = 0; }
        params { x: &mut DeviceBuffer<u8> }
        streams { s }
    }"#;
    let pipeline = lower_ok(source);
    assert_eq!(pipeline.stages[0].name, "b");
}

#[test]
fn launch_dimensions_take_tuples_and_shared_memory_in_any_order() {
    let input = parse(&with(
        "stage s on s1 { launch k::touch(a) block (16, 16) shared 4 * 1024 grid (n / 16, n / 16, 1); }",
    ))
    .expect("parses");
    let stage = input.stages().next().expect("stage");
    let Statement::Launch(launch) = &stage.statements[0] else {
        panic!("launch")
    };
    assert_eq!(
        tokens_string(&launch.block.as_ref().map(|o| &o.value)),
        "(16, 16)"
    );
    assert_eq!(
        tokens_string(&launch.grid.as_ref().map(|o| &o.value)),
        "(n / 16, n / 16, 1)"
    );
    assert_eq!(
        tokens_string(&launch.shared.as_ref().map(|o| &o.value)),
        "4 * 1024"
    );
}

#[test]
fn every_statement_form_parses() {
    let input = parse(&with(
        "stage s on s1 {
            copy a -> h;
            fill a = 0.0;
            wait flag == 1;
            wait flag >= n;
            wait flag & 0x4;
            write flag = 2;
            host move |h| { let _ = h; } reads(h) writes(v);
            host || println!(\"done\") writes(v) reads(h);
            call crate::blas::axpy(handle, alpha, a, b) reads(a) writes(b, handle);
            call tick();
            synchronize;
            wait_event outside_event;
        }",
    ))
    .expect("parses");
    let stage = input.stages().next().expect("stage");
    let kinds: Vec<&str> = stage
        .statements
        .iter()
        .map(|statement| match statement {
            Statement::Launch(_) => "launch",
            Statement::Copy(_) => "copy",
            Statement::Fill(_) => "fill",
            Statement::Wait(wait) => match wait.condition {
                WaitCondition::Equal => "wait ==",
                WaitCondition::AtLeast => "wait >=",
                WaitCondition::AnyBit => "wait &",
            },
            Statement::Write(_) => "write",
            Statement::Host(_) => "host",
            Statement::Call(_) => "call",
            Statement::Control(control) => control.word(),
            Statement::Comm(comm) => comm.word(),
            Statement::NotCapturable(statement) => {
                if statement.word == "synchronize" {
                    "synchronize"
                } else {
                    "wait_event"
                }
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "copy",
            "fill",
            "wait ==",
            "wait >=",
            "wait &",
            "write",
            "host",
            "host",
            "call",
            "call",
            "synchronize",
            "wait_event"
        ]
    );
    let Statement::Host(host) = &stage.statements[7] else {
        panic!("host")
    };
    let reads: Vec<String> = host.accesses.reads().map(ToString::to_string).collect();
    let writes: Vec<String> = host.accesses.writes().map(ToString::to_string).collect();
    assert_eq!(
        (reads, writes),
        (vec!["h".to_owned()], vec!["v".to_owned()])
    );
    let Statement::NotCapturable(outside) = &stage.statements[11] else {
        panic!("not capturable")
    };
    assert_eq!(outside.rest.to_string(), "outside_event");
}

#[test]
fn a_repeated_option_is_an_error_at_the_second() {
    assert_eq!(
        parse_error("pipeline P { streams { s(priority = high, priority = low) } }"),
        "`priority` set twice on stream `s`; keep one"
    );
    assert_eq!(
        parse_error("pipeline P { streams { s(non_blocking, non_blocking) } }"),
        "`non_blocking` set twice on stream `s`; keep one"
    );
    assert_eq!(
        parse_error(r#"pipeline P { unsafe kernels k = ptx("") { fn f() host = a host = b; } }"#),
        "the CPU implementation of kernel `f` is set twice; keep one `cpu = ...`"
    );
    assert_eq!(
        parse_error(&with(
            "stage s on s1 { launch k::touch(a) grid 1 block 1 grid 2; }"
        )),
        "`grid` set twice in one `launch`; keep one"
    );
    assert_eq!(
        parse_error(&with("stage s on s1 { call f() reads(a) reads(b); }")),
        "`reads(...)` given twice; list every buffer in one"
    );
}

#[test]
fn unexpected_words_list_what_was_expected() {
    assert_eq!(
        parse_error(&with("stage s on s1 { a.synchronize(); }")),
        "expected one of: `while`, `if`, `do`, `switch`, `launch`, `copy`, `fill`, `wait`, `write`, `host`, `call`, `send`, `recv`, `all_reduce`, `broadcast`, `all_gather`, `reduce_scatter`"
    );
    assert_eq!(
        parse_error("pipeline P { streams { s(fast) } }"),
        "expected `priority` or `non_blocking`"
    );
    assert_eq!(
        parse_error("pipeline P { stream { s } }"),
        "expected one of: `streams`, `kernels`, `params`, `scratch`, `stage`, `for`, `step`, `swap`, `concurrent`, `devices`"
    );
    assert_eq!(
        parse_error(r#"pipeline P { unsafe kernels k = spirv("") {} }"#),
        "expected one of: `ptx`, `cubin`, `fatbin`, `cuda_c`"
    );
    assert_eq!(parse_error("struct P {}"), "expected `pipeline`");
    assert_eq!(
        parse_error(&with("stage s on s1 { wait flag < 3; }")),
        "expected one of: `==`, `>=`, `&`"
    );
    assert_eq!(
        parse_error(&with("stage s on s1 { call a reads(a); }")),
        "`call` takes a function call, e.g. `call crate::blas::gemv(a, x, y)`"
    );
}

#[test]
fn priorities_are_names_or_integers() {
    let source = "pipeline P { streams { a(priority = -2), b(priority = 3), c(priority = low), d(priority = default) } }";
    let input = parse(source).expect("parses");
    let levels: Vec<_> = input
        .streams()
        .filter_map(|s| s.priority.as_ref().map(|p| p.level))
        .collect();
    assert_eq!(
        levels,
        [
            Priority::Value(-2),
            Priority::Value(3),
            Priority::Low,
            Priority::Default
        ]
    );
    assert_eq!(
        parse_error("pipeline P { streams { a(priority = 3000000000) } }"),
        "stream priority must fit in an `i32`"
    );
}

#[test]
fn names_and_types_keep_their_spelling() {
    assert_eq!(
        type_string(&syn::parse_quote!(&mut gpu::DeviceBuffer<Vec<[f32; 4]>>)),
        "&mut gpu::DeviceBuffer<Vec<[f32; 4]>>"
    );
    assert_eq!(type_string(&syn::parse_quote!((u32, u32))), "(u32, u32)");
}

/// What `macro_rules!` passes for `$t:ty` and `$e:expr`: tokens in an invisible group.
fn invisible(tokens: TokenStream) -> Group {
    Group::new(Delimiter::None, tokens)
}

#[test]
fn types_and_expressions_from_macro_rules_are_looked_through() {
    let ty = invisible(quote!(&mut DeviceBuffer<f32>));
    let arg = invisible(quote!(field));
    let elem = invisible(quote!(f32));
    let tokens = quote! {
        pipeline P {
            streams { s }
            unsafe kernels k = ptx("") { fn touch(buf: &mut [#elem]); }
            params { field: #ty }
            stage one on s { launch k::touch(#arg) grid 1 block 1; }
        }
    };
    let input: ast::Pipeline = syn::parse2(tokens).expect("parses");
    let scope = Scope::new(&input);
    assert_eq!(
        scope.value(&syn::parse_quote!(field)),
        Some(Value::Buffer(0))
    );
    assert_eq!(scope.buffers[0].memory, Memory::Device);
    assert!(scope.buffers[0].mutable);
    let pipeline = crate::analyse(&input).expect("checks");
    assert_eq!(pipeline.stages[0].accesses[0].buffer, buffer(0));

    let grouped: syn::Expr = syn::parse2(quote!(#arg)).expect("expr");
    assert_eq!(
        bare_ident(&grouped).map(ToString::to_string),
        Some("field".to_owned())
    );
}

#[test]
fn memory_kinds_are_recognised_by_their_last_segment() {
    let cases: [(syn::Type, Option<bool>, Option<Memory>); 8] = [
        (
            syn::parse_quote!(&gpu_pipeline::DeviceBuffer<f32>),
            Some(false),
            Some(Memory::Device),
        ),
        (
            syn::parse_quote!(&mut PinnedBuffer<u8>),
            Some(true),
            Some(Memory::Pinned),
        ),
        (
            syn::parse_quote!(&FlagCell),
            Some(false),
            Some(Memory::Flag),
        ),
        (
            syn::parse_quote!(&mut Vec<f32>),
            Some(true),
            Some(Memory::Pageable),
        ),
        (
            syn::parse_quote!(&mut [f32]),
            Some(true),
            Some(Memory::Pageable),
        ),
        (syn::parse_quote!(&Handle), Some(false), None),
        (
            syn::parse_quote!(DeviceBuffer<f32>),
            None,
            Some(Memory::Device),
        ),
        (syn::parse_quote!(u32), None, None),
    ];
    for (ty, reference, memory) in &cases {
        let shape = shape(ty);
        assert_eq!(
            (shape.reference, shape.memory),
            (*reference, *memory),
            "{}",
            type_string(ty)
        );
    }
}

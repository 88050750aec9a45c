//! Every check, with the exact message a user reads and the token it points at.

use super::*;

/// `(items appended to the common test pipeline, message, offending token)`.
type Case<'a> = (&'a str, &'a str, &'a str);

#[track_caller]
fn assert_cases(cases: &[Case<'_>]) {
    for &(items, message, token) in cases {
        assert_error(&with(items), message, token);
    }
}

#[test]
fn the_examples_compile() {
    lower_ok(HEAT);
    lower_ok(&with(
        "stage x on s1 { launch k::sum(a, a, b) grid 1 block 1; }
         stage y on s2 after x { }",
    ));
}

#[test]
fn a_pipeline_declares_streams_and_stages_once() {
    let source =
        "pipeline P { params { a: &mut DeviceBuffer<f32> } stage s on main { fill a = 0; } }";
    assert_eq!(
        errors(source),
        [
            "pipeline `P` declares no streams; add `streams { main }`",
            "unknown stream `main`; declare it in `streams { ... }`",
        ]
    );
    assert_error(
        "pipeline P { streams { s } }",
        "pipeline `P` has no stages; add one, e.g. `stage first on s { ... }`",
        "P",
    );
    assert_cases(&[(
        "params { z: u32 } stage s on s1 { fill a = 0; }",
        "second `params` block; declare all of them in one",
        "params",
    )]);
}

#[test]
fn only_doc_comments_annotate_items() {
    assert_cases(&[(
        "/// Fine.\n#[cfg(feature = \"x\")] stage s on s1 { fill a = 0; }",
        "unsupported attribute `#[cfg]`; only doc comments are allowed inside a pipeline",
        "#[cfg(feature = \"x\")]",
    )]);
}

#[test]
fn names_are_declared_once() {
    assert_error(
        "pipeline P { streams { s, s } stage x on s { call f(); } }",
        "duplicate stream `s`",
        "s",
    );
    assert_cases(&[
        (
            "stage s on s1 { call f(); } stage s on s2 { call g(); }",
            "duplicate stage `s`",
            "s",
        ),
        (
            "scratch { a: DeviceBuffer<f32> = 4 } stage s on s1 { fill a = 0; }",
            "scratch buffer `a` has the name of a param; rename one of them",
            "a",
        ),
        (
            "scratch { t: DeviceBuffer<f32> = 4, t: DeviceBuffer<f32> = 8 } stage s on s1 { fill t = 0; }",
            "duplicate scratch buffer `t`",
            "t",
        ),
        (
            r#"unsafe kernels k = ptx("") { fn f(); } stage s on s1 { call f(); }"#,
            "duplicate kernel module `k`",
            "k",
        ),
    ]);
    let source = r#"pipeline P {
        streams { s }
        unsafe kernels m = cubin(IMAGE) { fn f(x: u32, x: u32); fn f(); }
        params { n: u32, n: u64 }
        stage one on s { call tick(); }
    }"#;
    assert_eq!(
        errors(source),
        [
            "duplicate kernel `f` in module `m`",
            "duplicate parameter `x` in kernel `f`",
            "duplicate param `n`",
        ]
    );
}

#[test]
fn stream_marker_types_do_not_collide() {
    assert_error(
        "pipeline P { streams { copy_in, copyIn } stage x on copy_in { call f(); } }",
        "streams `copy_in` and `copyIn` would both get the marker type `PCopyIn`; rename one",
        "copyIn",
    );
}

#[test]
fn stream_marker_types_do_not_take_a_generated_types_name() {
    for (stream, ty, what) in [
        (
            "graph",
            "PGraph",
            "the type the macro generates for the pipeline's graph",
        ),
        (
            "params",
            "PParams",
            "the type the macro generates for the pipeline's params",
        ),
        (
            "run",
            "PRun",
            "the type the macro generates for the pipeline's run",
        ),
        (
            "window",
            "PWindow",
            "the type the macro generates for the pipeline's window",
        ),
        ("__", "P", "the pipeline `P` itself"),
    ] {
        assert_error(
            &format!("pipeline P {{ streams {{ {stream} }} stage x on {stream} {{ call f(); }} }}"),
            &format!(
                "stream `{stream}` would get the marker type `{ty}`, the name of {what}; \
                 rename the stream (for example `{stream}_work`)"
            ),
            stream,
        );
    }
    // Names that only start like one are fine.
    assert!(compile("pipeline P { streams { graphs } stage x on graphs { call f(); } }").is_ok());
}

#[test]
fn kernel_parameters_are_scalars_or_slices() {
    let source = r#"pipeline P {
        streams { s }
        unsafe kernels q = ptx("") { fn f(x: &u32, p: *mut f32, ok: &mut [u8]); }
        stage one on s { call tick(); }
    }"#;
    let message = |ty: &str| {
        format!(
            "unsupported kernel parameter type `{ty}`; write a scalar by value, `&[T]` for a buffer the kernel reads or `&mut [T]` for one it writes (`&[T; n]` to bound its indices by `n`)"
        )
    };
    assert_eq!(errors(source), [message("&u32"), message("*mut f32")]);
}

#[test]
fn params_borrow_and_scratch_owns() {
    let source = r#"pipeline P {
        streams { s }
        params {
            owned: DeviceBuffer<f32>,
            host: Vec<f32>,
            untyped: &mut DeviceBuffer,
        }
        scratch {
            borrowed: &mut DeviceBuffer<f32> = 4,
            value: u32 = 4,
            unsized_: PinnedBuffer<f32>,
            flag: FlagCell = 1,
            ok: FlagCell,
        }
        stage one on s { call tick(); }
    }"#;
    assert_eq!(
        errors(source),
        [
            "param `owned` takes `DeviceBuffer<f32>` by value; declare `owned: &mut DeviceBuffer<f32>`, or move it to `scratch { ... }` for a buffer the pipeline owns",
            "param `host` takes `Vec<f32>` by value; host memory for the GPU must be pinned: declare `host: &mut PinnedBuffer<f32>`",
            "`DeviceBuffer` needs its element type, e.g. `DeviceBuffer<f32>`",
            "scratch buffer `borrowed` is owned by the pipeline; write `borrowed: DeviceBuffer<f32>` without the reference",
            "scratch buffer `value` must be a `DeviceBuffer<T>`, `PinnedBuffer<T>` or `FlagCell`, not `u32`; values belong in `params { ... }`",
            "scratch buffer `unsized_` needs a length: write `unsized_: PinnedBuffer<f32> = LEN`",
            "flag cell `flag` holds one value and takes no length; write `flag: FlagCell`",
        ]
    );
}

/// A pipeline whose params are `params`, with one stage that calls a function.
fn declaring_params(params: &str) -> String {
    format!(
        r#"pipeline P {{
            streams {{ s }}
            params {{ {params} }}
            stage one on s {{ call tick(); }}
        }}"#
    )
}

/// The error for a memory type `held` inside param `name` of type `ty`, with what to declare.
fn hidden(name: &str, held: &str, ty: &str, instead: &str) -> String {
    format!(
        "param `{name}` holds a `{held}` inside `{ty}`, where the pipeline cannot see it: it orders the memory each statement names, so stages that reach this one through `{name}` would race; declare it as a param of its own, {instead}, and name that in the statements that use it"
    )
}

/// A memory type inside a scalar param, or inside the type a reference points to, is
/// invisible to the ordering: an error on the memory type, saying to declare it as a param.
#[test]
fn memory_inside_a_param_is_refused() {
    let device = |name: &str, elem: &str| {
        format!(
            "`{name}: &mut DeviceBuffer<{elem}>` (`&` if the step only reads it; several: `{name}: &mut [DeviceBuffer<{elem}>]`, an array of buffers)"
        )
    };
    for (ty, held, token) in [
        (
            "std::sync::Arc<std::sync::Mutex<DeviceBuffer<f32>>>",
            "DeviceBuffer",
            "DeviceBuffer<f32>",
        ),
        (
            "Option<&'static mut DeviceBuffer<f32>>",
            "DeviceBuffer",
            "DeviceBuffer<f32>",
        ),
        (
            "(u32, gpu_pipeline::DeviceBuffer<f32>)",
            "DeviceBuffer",
            "DeviceBuffer<f32>",
        ),
        (
            "[DeviceBuffer<f32>; 2]",
            "DeviceBuffer",
            "DeviceBuffer<f32>",
        ),
        (
            "*mut DeviceBuffer<f32>",
            "DeviceBuffer",
            "DeviceBuffer<f32>",
        ),
        // What a function type returns it reaches without a param (it compiled: only the
        // argument types hold nothing).
        (
            "std::sync::Arc<dyn Fn() -> std::sync::Arc<DeviceBuffer<f32>> + Send + Sync>",
            "DeviceBuffer",
            "DeviceBuffer<f32>",
        ),
        (
            "fn() -> &'static DeviceBuffer<f32>",
            "DeviceBuffer",
            "DeviceBuffer<f32>",
        ),
        (
            "&Vec<DeviceBuffer<f32>>",
            "DeviceBuffer",
            "DeviceBuffer<f32>",
        ),
        (
            "&mut [DeviceBuffer<f32>; 2]",
            "DeviceBuffer",
            "DeviceBuffer<f32>",
        ),
        (
            "&(DeviceBuffer<f32>, DeviceBuffer<f32>)",
            "DeviceBuffer",
            "DeviceBuffer<f32>",
        ),
        (
            "&mut [&mut DeviceBuffer<f32>]",
            "DeviceBuffer",
            "DeviceBuffer<f32>",
        ),
        (
            "&[Vec<DeviceBuffer<f32>>]",
            "DeviceBuffer",
            "DeviceBuffer<f32>",
        ),
        (
            "&std::sync::Mutex<DeviceBuffer<f32>>",
            "DeviceBuffer",
            "DeviceBuffer<f32>",
        ),
    ] {
        let source = declaring_params(&format!("store: {ty}"));
        let shown = crate::ast::type_string(&syn::parse_str::<syn::Type>(ty).unwrap());
        assert_error(
            &source,
            &hidden("store", held, &shown, &device("store", "f32")),
            token,
        );
    }
    assert_error(
        &declaring_params("views: std::sync::Arc<Vec<DeviceView<'static, f64>>>"),
        &hidden(
            "views",
            "DeviceView",
            "std::sync::Arc<Vec<DeviceView<'static, f64>>>",
            "`views: &mut DeviceBuffer<f64>`, the buffer it views (a statement names a part of it as `views[lo..hi]`)",
        ),
        "DeviceView<'static, f64>",
    );
    assert_error(
        &declaring_params("host: Box<PinnedBuffer<u8>>"),
        &hidden(
            "host",
            "PinnedBuffer",
            "Box<PinnedBuffer<u8>>",
            "`host: &mut PinnedBuffer<u8>` (`&` if the step only reads it; several: `host: &mut [PinnedBuffer<u8>]`, an array of buffers)",
        ),
        "PinnedBuffer<u8>",
    );
    assert_error(
        &declaring_params("flags: std::rc::Rc<FlagCell<u64>>"),
        &hidden(
            "flags",
            "FlagCell",
            "std::rc::Rc<FlagCell<u64>>",
            "`flags: &mut FlagCell<u64>`",
        ),
        "FlagCell<u64>",
    );
    // A name an application may give its own type counts written as the runtime's.
    assert_error(
        &declaring_params("halos: std::sync::Arc<gpu_pipeline::Window<f32>>"),
        &hidden(
            "halos",
            "Window",
            "std::sync::Arc<gpu_pipeline::Window<f32>>",
            "`halos: &mut Window<f32>`",
        ),
        "Window<f32>",
    );
    assert_error(
        &declaring_params("m: Option<ManagedBuffer<f32>>"),
        &hidden(
            "m",
            "ManagedBuffer",
            "Option<ManagedBuffer<f32>>",
            "`m: &mut ManagedBuffer<f32>`, a handle that `call` and `host` statements name whole in `reads(...)`/`writes(...)`",
        ),
        "ManagedBuffer<f32>",
    );
    // A view held by value is a scalar too.
    assert_eq!(
        errors(&declaring_params("v: PinnedView<'static, f32>")).len(),
        1
    );
}

/// What the language treats as memory, scalars without memory inside them, references to
/// other types (opaque handles) and function types that take memory all compile.
#[test]
fn params_that_show_their_memory_compile() {
    lower_ok(&declaring_params(
        "a: &mut DeviceBuffer<f32>, b: &PinnedBuffer<u8>, f: &mut FlagCell, g: &FlagCell<u64>,
         xs: &mut [DeviceBuffer<f32>], hs: &[PinnedBuffer<f32>], w: &mut Window<f32>,
         comm: &Communicator, handle: &mut BlasHandle, m: &mut ManagedBuffer<f32>,
         log: std::sync::Arc<std::sync::Mutex<Vec<f32>>>, n: Option<u32>, pair: (u32, f64),
         window: Window, sl: &[f32], v: &mut Vec<f32>,
         hook: std::sync::Arc<dyn Fn(&DeviceBuffer<f32>) + Send + Sync>,
         measure: std::sync::Arc<dyn Fn(&DeviceBuffer<f32>) -> usize + Send + Sync>,
         pointer: fn(&mut DeviceBuffer<f32>),
         marker: std::marker::PhantomData<DeviceBuffer<f32>>",
    ));
    // An application's own types with names the runtime also uses, inside a scalar.
    lower_ok(&declaring_params(
        "taper: std::sync::Arc<Window<f32>>, mode: Option<Condition>, rows: Option<HostSlice>",
    ));
}

#[test]
fn a_buffer_with_a_bad_declaration_gives_one_error() {
    let source = r#"pipeline P {
        streams { s }
        params { owned: DeviceBuffer<f32> }
        stage one on s { fill owned = 0; copy owned -> owned; }
    }"#;
    assert_eq!(errors(source).len(), 1);
}

#[test]
fn stages_name_declared_streams_and_stages() {
    assert_cases(&[
        (
            "stage s on s3 { call f(); }",
            "unknown stream `s3`; did you mean `s1`?",
            "s3",
        ),
        (
            "stage s on s1 after t { call f(); }",
            "unknown stage `t`; did you mean `s`?",
            "t",
        ),
        (
            "stage s on s1 after s { call f(); }",
            "stage `s` cannot run after itself; remove `s` from `after`",
            "s",
        ),
        (
            "stage x on s1 { call f(); } stage s on s2 after x, x { call f(); }",
            "`x` is named twice in `after`; keep one",
            "x",
        ),
        (
            "stage s on s1 { }",
            "stage `s` is empty; add a statement, or `after ...` to make it a barrier",
            "s",
        ),
    ]);
}

#[test]
fn concurrent_names_two_or_more_declared_stages() {
    assert_cases(&[
        (
            "stage x on s1 { call f(); } concurrent(x);",
            "`concurrent` needs at least two stages, e.g. `concurrent(a, b)`",
            "concurrent",
        ),
        (
            "stage x on s1 { call f(); } concurrent(x, why);",
            "unknown stage `why`; expected one of `x`",
            "why",
        ),
        (
            "stage x on s1 { call f(); } stage y on s2 { call g(); } concurrent(x, y, x);",
            "`x` is named twice in `concurrent`; keep one",
            "x",
        ),
    ]);
}

#[test]
fn launches_name_a_declared_kernel_with_grid_and_block() {
    assert_cases(&[
        (
            "stage s on s1 { launch touch(a) grid 1 block 1; }",
            "`launch` names its kernel as `module::kernel`; write `k::touch`",
            "touch",
        ),
        (
            "stage s on s1 { launch q::touch(a) grid 1 block 1; }",
            "unknown kernel module `q`; did you mean `k`?",
            "q",
        ),
        (
            "stage s on s1 { launch k::toch(a) grid 1 block 1; }",
            "module `k` has no kernel `toch`; did you mean `touch`?",
            "toch",
        ),
        (
            "stage s on s1 { launch k::touch(a); }",
            "`launch` needs `grid` and `block`, e.g. `grid n.div_ceil(256) block 256`",
            "launch",
        ),
        (
            "stage s on s1 { launch k::touch(a) grid 1; }",
            "`launch` needs `block`, e.g. `block 256`",
            "launch",
        ),
        (
            "stage s on s1 { launch k::touch(a) block 1; }",
            "`launch` needs `grid`, e.g. `grid n.div_ceil(256)`",
            "launch",
        ),
    ]);
}

#[test]
fn launch_arguments_match_the_kernel_signature() {
    assert_cases(&[
        (
            "stage s on s1 { launch k::scale(n, alpha, a) grid 1 block 1; }",
            "`k::scale` takes 4 arguments but 3 were given; its signature is `fn scale(n: u32, alpha: f32, src: &[f32; unbounded], dst: &mut [f32; unbounded])`",
            "k::scale(n, alpha, a)",
        ),
        (
            "stage s on s1 { launch k::touch(a, b) grid 1 block 1; }",
            "`k::touch` takes 1 argument but 2 were given; its signature is `fn touch(buf: &mut [f32])`",
            "k::touch(a, b)",
        ),
        (
            "stage s on s1 { launch k::scale(big, alpha, a, b) grid 1 block 1; }",
            "`big` is declared `u64` but `scale` takes `n: u32`; declare `big: u32` or pass `big as u32`",
            "big",
        ),
        (
            "stage s on s1 { launch k::scale(a, alpha, a, b) grid 1 block 1; }",
            "`a` is a buffer but `scale` takes a scalar for `n: u32`",
            "a",
        ),
        (
            "stage s on s1 { launch k::scale(n, alpha, n, b) grid 1 block 1; }",
            "`n` is a scalar param; `scale` takes a buffer for `src: &[f32; unbounded]`",
            "n",
        ),
        (
            "stage s on s1 { launch k::touch(&mut a) grid 1 block 1; }",
            "`touch` takes a buffer for `buf: &mut [f32]`; pass the name of a buffer param or scratch buffer (or a range of one, `x[lo..hi]`)",
            "&mut a",
        ),
        (
            "stage s on s1 { launch k::touch(aa) grid 1 block 1; }",
            "unknown buffer `aa`; did you mean `a`?",
            "aa",
        ),
        (
            "stage s on s1 { launch k::scale(n, alpha, d, b) grid 1 block 1; }",
            "`d` holds `f64` but `scale` takes `src: &[f32; unbounded]`",
            "d",
        ),
        (
            "stage s on s1 { launch k::touch(c) grid 1 block 1; }",
            "`c` is declared `&` but `touch` writes its `buf`; declare it `&mut DeviceBuffer<f32>`",
            "c",
        ),
        (
            "stage s on s1 { launch k::touch(v) grid 1 block 1; }",
            "`v` is pageable host memory (`&mut Vec<f32>`), which kernels cannot access; pass a `DeviceBuffer`",
            "v",
        ),
        (
            "stage s on s1 { launch k::touch(h) grid 1 block 1; }",
            "`h` is a `PinnedBuffer` (`&mut PinnedBuffer<f32>`), which kernels do not take; `copy` it into a `DeviceBuffer` and pass that for `buf: &mut [f32]`",
            "h",
        ),
        (
            "stage s on s1 { launch k::touch(flag) grid 1 block 1; }",
            "`flag` is a flag cell (`&mut FlagCell`); `touch` takes a `DeviceBuffer` for `buf: &mut [f32]`",
            "flag",
        ),
        (
            "stage s on s1 { launch k::touch(handle) grid 1 block 1; }",
            "`handle` is not a buffer (`&mut BlasHandle`; the macro knows a buffer by its type as written, so if `BlasHandle` is a `type` alias of one, write the buffer type itself, e.g. `handle: &mut DeviceBuffer<f32>`); `touch` takes a `DeviceBuffer` for `buf: &mut [f32]`",
            "handle",
        ),
    ]);
}

#[test]
fn scalar_expressions_and_aliased_types_are_left_to_type_assertions() {
    use crate::lower::{Arg, StatementKind};
    let source = r#"pipeline P {
        streams { s }
        unsafe kernels k = ptx("") { fn f(n: u32, x: Real, y: f32); }
        params { n: u32, x: Real, m: usize }
        stage one on s { launch k::f(n, x, (m * 2) as f32) grid 1 block 1; }
    }"#;
    let pipeline = lower_ok(source);
    let StatementKind::Launch { args, .. } = &pipeline.stages[0].statements[0].kind else {
        panic!("launch")
    };
    let asserted: Vec<bool> = args
        .iter()
        .map(|arg| match arg {
            Arg::Scalar { assert_type, .. } => *assert_type,
            Arg::Buffer { .. } => panic!("scalar"),
        })
        .collect();
    assert_eq!(asserted, [false, false, true]);
}

#[test]
fn a_written_buffer_is_not_passed_twice_to_one_launch() {
    assert_cases(&[(
        "stage s on s1 { launch k::scale(n, alpha, a, a) grid 1 block 1; }",
        "`a` is passed to `scale` as both `src` and `dst`, and `dst` is written; pass a separate buffer, since a written parameter must not alias another",
        "a",
    )]);
    lower_ok(&with(
        "stage s on s1 { launch k::sum(a, a, b) grid 1 block 1; }",
    ));
}

#[test]
fn copies_go_between_pinned_or_device_buffers() {
    assert_cases(&[
        (
            "stage s on s1 { copy a -> a; }",
            "`copy a -> a` copies a buffer onto itself; name two different buffers",
            "a",
        ),
        (
            "stage s on s1 { copy a -> v; }",
            "`v` is pageable host memory (`&mut Vec<f32>`); only `PinnedBuffer` copies asynchronously or can be captured: declare it `&mut PinnedBuffer<f32>`",
            "v",
        ),
        (
            "stage s on s1 { copy sl -> a; }",
            "`sl` is pageable host memory (`&[f32]`); only `PinnedBuffer` copies asynchronously or can be captured: declare it `&PinnedBuffer<f32>`",
            "sl",
        ),
        (
            "stage s on s1 { copy a -> hc; }",
            "`hc` is declared `&` but `copy` writes it; declare it `&mut PinnedBuffer<f32>`",
            "hc",
        ),
        (
            "stage s on s1 { copy d -> a; }",
            "`copy d -> a` copies `f64` into `f32`; both buffers must hold the same element type",
            "d -> a",
        ),
        (
            "stage s on s1 { copy flag -> a; }",
            "`flag` is a flag cell (`&mut FlagCell`); `copy` does not take flag cells; use `write` and `wait` on them",
            "flag",
        ),
        (
            "stage s on s1 { copy n -> a; }",
            "`n` is a scalar param; `copy` takes buffers",
            "n",
        ),
        (
            "stage s on s1 { copy hc -> h; }",
            "`copy hc -> h` copies host memory to host memory (both are `PinnedBuffer`s), which a stream does not do; copy through a `DeviceBuffer`, or copy on the host outside the step",
            "hc -> h",
        ),
    ]);
}

#[test]
fn fills_write_writable_buffers() {
    assert_cases(&[
        (
            "stage s on s1 { fill c = 0.0; }",
            "`c` is declared `&` but `fill` writes it; declare it `&mut DeviceBuffer<f32>`",
            "c",
        ),
        (
            "stage s on s1 { fill flag = 0; }",
            "`flag` is a flag cell (`&mut FlagCell`); set it with `write flag = VALUE`",
            "flag",
        ),
        (
            "stage s on s1 { fill v = 0.0; }",
            "`v` is pageable host memory (`&mut Vec<f32>`); it cannot be filled in stream order; use a `DeviceBuffer`",
            "v",
        ),
        (
            "stage s on s1 { fill h = 0.0; }",
            "`h` is a `PinnedBuffer` (`&mut PinnedBuffer<f32>`); `fill` sets device memory; fill a `DeviceBuffer` and `copy` it here, or set the pinned buffer on the host outside the step",
            "h",
        ),
    ]);
}

#[test]
fn waits_and_writes_take_flag_cells() {
    assert_cases(&[
        (
            "stage s on s1 { write shared_flag = 1; }",
            "`shared_flag` is declared `&` but `write` sets it; declare it `&mut FlagCell`",
            "shared_flag",
        ),
        (
            "stage s on s1 { wait a == 1; }",
            "`a` is a `DeviceBuffer` (`&mut DeviceBuffer<f32>`), but `wait` takes a `FlagCell`",
            "a",
        ),
        (
            "stage s on s1 { write a = 1; }",
            "`a` is a `DeviceBuffer` (`&mut DeviceBuffer<f32>`), but `write` takes a `FlagCell`; use `fill a = VALUE` for buffers",
            "a",
        ),
        (
            "stage s on s1 { wait event == 1; }",
            "unknown buffer `event`; declare it in `params { ... }` or `scratch { ... }`",
            "event",
        ),
    ]);
    lower_ok(&with(
        "stage s on s1 { wait shared_flag == 1; write flag = 3; wait flag >= 2; }",
    ));
}

#[test]
fn host_closures_touch_host_memory_they_declare() {
    assert_cases(&[
        (
            "stage s on s1 { host || {} reads(a); }",
            "`a` is a `DeviceBuffer` (`&mut DeviceBuffer<f32>`), which a host closure cannot touch: it runs on the CPU; copy it into a `PinnedBuffer` first and list that",
            "a",
        ),
        (
            "stage s on s1 { host || {} writes(hc); }",
            "`hc` is declared `&` but the host closure writes it; declare it `&mut PinnedBuffer<f32>`",
            "hc",
        ),
        (
            "stage s on s1 { host || {} reads(n); }",
            "`n` is a scalar param; `reads(...)` and `writes(...)` list buffers; the closure captures scalars by value",
            "n",
        ),
    ]);
}

#[test]
fn calls_declare_what_they_touch() {
    assert_cases(&[
        (
            "stage s on s1 { call f() writes(c); }",
            "`c` is declared `&` but `f` writes it; declare it `&mut DeviceBuffer<f32>`",
            "c",
        ),
        (
            "stage s on s1 { call blas::gemv(handle, a, &b) reads(a) writes(handle); }",
            "`b` is passed to `gemv` but not declared; add it to `reads(...)` or `writes(...)`",
            "b",
        ),
    ]);
    lower_ok(&with(
        "stage s on s1 { call blas::gemv(handle, alpha, a, &mut b) reads(a) writes(b, handle); }",
    ));
}

#[test]
fn statements_that_cannot_be_captured_are_rejected_by_name() {
    let cases = [
        (
            "synchronize;",
            "`synchronize` blocks the host and cannot be captured in a CUDA graph; stages are ordered by their accesses and `after`, and the host waits for a whole step outside the pipeline",
        ),
        (
            "sync;",
            "`sync` blocks the host and cannot be captured in a CUDA graph; stages are ordered by their accesses and `after`, and the host waits for a whole step outside the pipeline",
        ),
        (
            "copy_blocking a -> h;",
            "`copy_blocking` blocks the host and cannot be captured in a CUDA graph; write `copy src -> dst` with a `PinnedBuffer` on the host side",
        ),
        (
            "wait_event upload_done;",
            "`wait_event` waits on an event from outside the pipeline, which a captured graph cannot do; order stages with `after`, or wait on a `FlagCell` param with `wait flag == VALUE`",
        ),
        (
            "record_event(ev);",
            "`record_event` wires an event by hand; the macro derives every event from the stages' accesses, and `after` adds an ordering no access implies",
        ),
        (
            "alloc tmp = 1024;",
            "`alloc` cannot appear in a stage: a step is captured once and replayed, so memory is allocated with the pipeline; declare the buffer in `scratch { ... }`",
        ),
        (
            "free a;",
            "`free` cannot appear in a stage: a replayed graph would free memory it still uses; scratch buffers are freed with the pipeline and params by their owner",
        ),
    ];
    for (statement, message) in cases {
        let word = statement.split([' ', ';', '(']).next().unwrap_or_default();
        assert_error(
            &with(&format!("stage s on s1 {{ {statement} }}")),
            message,
            word,
        );
    }
}

#[test]
fn an_after_cycle_reports_its_path() {
    assert_cases(&[
        (
            "stage x on s1 after y { call f() writes(a); } stage y on s2 { call g() reads(a); }",
            "stage `x` cannot run after `y`, which already runs after it: `y` reads `a` after `x` writes it; remove `y` from `after`",
            "y",
        ),
        (
            "stage x on s1 after z { call f(); }
             stage y on s1 { call f() writes(a); }
             stage z on s2 { call g() reads(a); }",
            "stage `x` cannot run after `z`, which already runs after it: `y` follows `x` on stream `s1`, and `z` reads `a` after `y` writes it; remove `z` from `after`",
            "z",
        ),
        (
            "stage x on s1 after y { call f(); } stage y on s1 { call f(); }",
            "stage `x` cannot run after `y`, which already runs after it: `y` follows `x` on stream `s1`; remove `y` from `after`",
            "y",
        ),
    ]);
    // A later stage is fine when no cycle results: `x` then waits for `y`.
    let pipeline = lower_ok(&with(
        "stage x on s1 after y { call f() writes(a); } stage y on s2 { call g() writes(b); }",
    ));
    assert_eq!(pipeline.order, [stage(1), stage(0)]);
}

#[test]
fn concurrent_claims_are_verified() {
    assert_cases(&[
        (
            "stage x on s1 { call f() writes(a); } stage y on s2 { call g() reads(a); } concurrent(x, y);",
            "`x` and `y` cannot run concurrently: `y` reads `a` after `x` writes it; drop the claim, or remove that ordering",
            "x, y",
        ),
        (
            "stage x on s1 { call f(); } stage y on s1 { call g(); } concurrent(x, y);",
            "`x` and `y` both run on stream `s1`, which runs them one after the other; put one on another stream, or drop the claim",
            "x, y",
        ),
        (
            "stage x on s1 { call f() writes(a); }
             stage m on s2 { call g() writes(b); }
             stage y on s2 after x { call g() reads(b); }
             concurrent(y, x);",
            "`y` and `x` cannot run concurrently: `y` is declared `after x`; drop the claim, or remove that ordering",
            "y, x",
        ),
    ]);
    lower_ok(&with(
        "stage x on s1 { call f() writes(a); } stage y on s2 { call g() reads(b); } concurrent(x, y);",
    ));
}

#[test]
fn every_error_is_reported_at_once() {
    let all = errors(&with(
        "stage s on s3 { copy a -> a; fill c = 0; launch k::touch(v) grid 1 block 1; synchronize; }
         stage s on s1 { call f(); }",
    ));
    assert_eq!(all.len(), 6, "{all:#?}");
}

#[test]
fn nothing_is_lowered_while_a_declaration_is_wrong() {
    // The cycle is only found by lowering, which does not run while a stream is unknown.
    let all = errors(&with(
        "stage x on s1 after y { call f() writes(a); } stage y on nowhere { call g() reads(a); }",
    ));
    assert_eq!(
        all,
        ["unknown stream `nowhere`; expected one of `s1`, `s2`"]
    );
}

#[test]
fn a_window_shorter_than_a_constant_bound_is_an_error() {
    let source = |launch: &str| {
        format!(
            r#"pipeline P {{
            streams {{ s }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn scale(n: u32, alpha: f32, src: &[f32; n], dst: &mut [f32; n + 1]);
                fn first(out: &mut [f32; 4]);
            }}
            params {{ n: u32, x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32> }}
            scratch {{ tmp: DeviceBuffer<f32> = 64 }}
            stage a on s {{ {launch} }}
        }}"#
        )
    };
    assert_error(
        &source("launch k::scale(256, 1.0, x[0..128], y) grid 1 block 1;"),
        "`x[0..128]` holds 128 elements, but `scale` indexes its `src` below `n` = 256: the kernel would reach past the end; pass a window of 256 elements (`x[0..256]`), or pass a smaller `n`",
        "x[0..128]",
    );
    assert_error(
        &source("launch k::scale(64, 1.0, x, tmp) grid 1 block 1;"),
        "`tmp` holds 64 elements, but `scale` indexes its `dst` below `n + 1` = 65: the kernel would reach past the end; declare `tmp` with at least 65 elements, or pass a smaller `n + 1`",
        "tmp",
    );
    assert_error(
        &source("launch k::first(y[8..10]) grid 1 block 1;"),
        "`y[8..10]` holds 2 elements, but `first` indexes its `out` below `4`: the kernel would reach past the end; pass a window of 4 elements (`y[8..12]`)",
        "y[8..10]",
    );
    // A window of a scratch buffer whose fix would run past the buffer's constant length:
    // a window inside it, or a longer declaration.
    assert_error(
        &source("launch k::first(tmp[62..63]) grid 1 block 1;"),
        "`tmp[62..63]` holds 1 elements, but `first` indexes its `out` below `4`: the kernel would reach past the end; declare scratch buffer `tmp` with at least 66 elements, or pass a window of 4 elements inside its 64 (`tmp[60..64]`)",
        "tmp[62..63]",
    );
    // Long enough, or not decidable: a param, an open end, a param's whole buffer.
    for launch in [
        "launch k::scale(128, 1.0, x[0..128], y[0..129]) grid 1 block 1;",
        "launch k::scale(n, 1.0, x[0..128], y) grid 1 block 1;",
        "launch k::scale(256, 1.0, x[0..], y) grid 1 block 1;",
        "launch k::scale(63, 1.0, x, tmp) grid 1 block 1;",
        "launch k::first(y[n as usize..n as usize + 2]) grid 1 block 1;",
    ] {
        lower_ok(&source(launch));
    }
}

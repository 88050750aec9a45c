//! Kernel bounds (`y: &mut [f32; n]`): what each form lowers to, each misuse's message and
//! token, and the generated code's checks.

use super::*;
use crate::lower::KernelParamKind;
use crate::lower::bound::Bound;
use quote::quote;

/// A pipeline declaring `signature` in module `k`, with one stage that calls a function (the
/// kernel need not be launched for its declaration to be checked).
fn declaring(signature: &str) -> String {
    format!(
        r#"pipeline P {{
            streams {{ s }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{ {signature}; }}
            stage one on s {{ call tick(); }}
        }}"#
    )
}

/// The bound of each parameter of the only kernel, as `(scale, factor positions, offset)`.
fn bounds_of(signature: &str) -> Vec<Option<(u64, Vec<usize>, u64)>> {
    let pipeline = lower_ok(&declaring(signature));
    pipeline.kernels[0]
        .params
        .iter()
        .map(|param| match &param.kind {
            KernelParamKind::Slice {
                bound:
                    Some(Bound {
                        scale,
                        factors,
                        offset,
                    }),
                ..
            } => Some((*scale, factors.iter().map(|(p, _)| *p).collect(), *offset)),
            _ => None,
        })
        .collect()
}

#[test]
fn bounds_lower_to_scale_factors_and_offset() {
    assert_eq!(
        bounds_of("fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; n])"),
        [None, None, Some((1, vec![0], 0)), Some((1, vec![0], 0))]
    );
    assert_eq!(
        bounds_of("fn stencil(nx: u32, ny: usize, f: &mut [f32; nx * ny], g: &[f32; unbounded])"),
        [None, None, Some((1, vec![0, 1], 0)), None]
    );
    // Literals multiply into the scale, parentheses and suffixes are fine, the added literal
    // may come first, and a bound may be a constant alone.
    assert_eq!(
        bounds_of(
            "fn k(n: i32, m: u64, p: &[f32; 3 * (n * 2u32) + 1], q: &[u8; 4 + m], r: &[u8; 16])"
        ),
        [
            None,
            None,
            Some((6, vec![0], 1)),
            Some((1, vec![1], 4)),
            Some((16, vec![], 0)),
        ]
    );
    // A type the macro cannot judge by its spelling (an alias) is left to the compiler.
    assert_eq!(
        bounds_of("fn k(n: Len, p: &mut [f32; n])"),
        [None, Some((1, vec![0], 0))]
    );
}

#[test]
fn a_bound_names_integer_parameters_of_its_kernel() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "fn saxpy(n: u32, a: f32, x: &[f32; m], y: &mut [f32; n])",
            "the bound of `x` names `m`, which is not a parameter of `saxpy`; did you mean `n`?",
            "m",
        ),
        (
            "fn saxpy(count: u32, x: &[f32; len])",
            "the bound of `x` names `len`, which is not a parameter of `saxpy`; expected one of `count`",
            "len",
        ),
        (
            "fn f(x: &[f32; len])",
            "the bound of `x` names `len`, which is not a parameter of `f`; a bound names integer parameters of `f`, such as `n: u32`, declared in the signature",
            "len",
        ),
        (
            "fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32; a])",
            "the bound of `y` names `a`, which is `f32`; a bound counts elements, so it names integer parameters (`u32`, `u64`, `usize`, `i32`, ...) of `saxpy`, such as `n`",
            "a",
        ),
        (
            "fn f(n: u32, x: &[f32; n], y: &mut [f32; x])",
            "the bound of `y` names `x`, a buffer; a bound counts elements, so it names integer parameters of `f`, such as `n`",
            "x",
        ),
        (
            "fn f(n: [u32; 2], y: &mut [f32; n])",
            "the bound of `y` names `n`, which is `[u32; 2]`; a bound counts elements, so it names integer parameters (`u32`, `u64`, `usize`, `i32`, ...) of `f`, such as `n: u32`, declared in the signature",
            "n",
        ),
    ];
    for &(signature, message, token) in cases {
        assert_error(&declaring(signature), message, token);
    }
}

#[test]
fn a_bound_has_the_one_shape_the_runtime_checks() {
    let unsupported = |bound: &str| {
        format!(
            "unsupported bound `{bound}`; a bound is a product of `f`'s integer parameters and integer literals, optionally plus a literal: `n`, `nx * ny`, `3 * n`, `n + 1`; for any other extent, pass it as a parameter of its own and bound `y` by that"
        )
    };
    for bound in [
        "n - 1",
        "n / 2",
        "(n + 2) * m",
        "n + m",
        "n as usize",
        "n % 4",
        "n.pow(2)",
        "2.0",
    ] {
        let signature = format!("fn f(n: u32, m: u32, y: &mut [f32; {bound}])");
        assert_error(&declaring(&signature), &unsupported(bound), bound);
    }
    assert_error(
        &declaring(
            "fn f(a: u32, b: u32, c: u32, d: u32, e: u32, y: &mut [f32; a * b * c * d * e])",
        ),
        "the bound of `y` multiplies more than 4 parameters; pass the product as a parameter of its own and bound `y` by that",
        "a * b * c * d * e",
    );
    assert_error(
        &declaring("fn f(n: u32, y: &mut [f32; 99999999999 * 99999999999 * n])"),
        "the constants in the bound `99999999999 * 99999999999 * n` of `y` do not fit in a `u64`",
        "99999999999 * 99999999999 * n",
    );
}

#[test]
fn only_buffers_take_bounds() {
    assert_error(
        &declaring("fn f(n: u32, coeffs: [f32; n], y: &mut [f32; n])"),
        "`coeffs` is passed by value, so it has no indices to bound; for a buffer `f` reads write `coeffs: &[f32; n]`, or `coeffs: &mut [f32; n]` if it writes it",
        "[f32; n]",
    );
    // An array of constant length is an ordinary by-value parameter.
    lower_ok(&declaring(
        "fn f(n: u32, coeffs: [f32; 4], y: &mut [f32; n])",
    ));
}

#[test]
fn errors_in_several_bounds_are_reported_together() {
    assert_eq!(
        errors(&declaring(
            "fn f(n: u32, a: f32, x: &[f32; q], y: &mut [f32; a])"
        ))
        .len(),
        2
    );
}

#[test]
fn a_bounded_launch_is_checked_before_anything_is_enqueued() {
    let source = with(
        "unsafe kernels b = ptx(include_str!(\"b.ptx\")) { fn scale(n: u32, alpha: f32, src: &[f32; n], dst: &mut [f32; n]); }
         stage first on s1 { launch k::touch(a) grid 1 block 1; }
         stage second on s1 { launch b::scale(n, alpha, c, b) grid 1 block 1; }",
    );
    let expanded = crate::gpu_pipeline(source.parse().unwrap()).to_string();
    let check = expanded
        .find("check_bounds")
        .expect("the bounded launch is checked");
    let reset = expanded
        .find("__progress . begin_step (__origin")
        .expect("the step starts");
    let first_launch = expanded.find(". launch (__stream").expect("a launch");
    assert!(check < reset && reset < first_launch, "{expanded}");
    // Checked once in the eager step, once before the graph is built, and once in `set_n`,
    // the one setter that feeds the bound (`set_alpha` feeds none); the unbounded kernel is
    // declared with empty bounds.
    assert_eq!(
        expanded.matches(". check_bounds (").count(),
        3,
        "{expanded}"
    );
    assert!(expanded.contains("declare_bounded_kernel"));
    assert!(expanded.contains("bound_scalar :: < u32 >"));
}

/// Issue 21, item 4: `; unbounded` parses as a slice with no bound, written on purpose, and
/// reaches code generation as an unbounded buffer; `&[T]` alone parses the same way without
/// the mark; a real bound is not mistaken for the keyword.
#[test]
fn unbounded_parses_as_a_slice_without_a_bound() {
    let param = |tokens: proc_macro2::TokenStream| {
        let kernel: ast::Kernel = syn::parse2(tokens).expect("parses");
        kernel.params.into_iter().last().expect("a parameter")
    };
    let kinds = [
        (
            param(quote!(
                fn k(n: u32, y: &mut [f32; unbounded]);
            )),
            true,
            true,
            false,
        ),
        (
            param(quote!(
                fn k(n: u32, x: &[u8; unbounded]);
            )),
            false,
            true,
            false,
        ),
        (
            param(quote!(
                fn k(x: &[u8]);
            )),
            false,
            false,
            false,
        ),
        (
            param(quote!(
                fn k(n: u32, x: &[u8; n]);
            )),
            false,
            false,
            true,
        ),
    ];
    for (param, mutable_expected, unbounded_expected, bounded_expected) in kinds {
        match param.kind() {
            ast::KernelParamType::Slice {
                mutable,
                bound,
                unbounded,
                ..
            } => {
                assert_eq!(mutable, mutable_expected, "{}", param.name);
                assert_eq!(unbounded, unbounded_expected, "{}", param.name);
                assert_eq!(bound.is_some(), bounded_expected, "{}", param.name);
            }
            other => panic!("expected a slice, got {other:?}"),
        }
    }
    assert_eq!(
        bounds_of("fn saxpy(n: u32, a: f32, x: &[f32; unbounded], y: &mut [f32; n])"),
        [None, None, None, Some((1, vec![0], 0))]
    );
}

/// Issue 21, item 4: a slice with no bound beside an integer parameter is refused on its
/// own type, saying what to write; without an integer parameter, or spelled `unbounded`, it
/// is accepted.
#[test]
fn an_unbounded_slice_beside_an_integer_is_refused() {
    assert_error(
        &declaring("fn saxpy(n: u32, a: f32, x: &[f32; n], y: &mut [f32])"),
        "`y` has no bound, but `saxpy` takes the integer `n`: a launch with `n` past `y`'s length would index outside it; if `saxpy` indexes `y` below `n`, write `y: &mut [f32; n]`; if it checks its own indices, write `y: &mut [f32; unbounded]`",
        "& mut [f32]",
    );
    assert_error(
        &declaring("fn k(a: f32, count: usize, src: &[u16])"),
        "`src` has no bound, but `k` takes the integer `count`: a launch with `count` past `src`'s length would index outside it; if `k` indexes `src` below `count`, write `src: &[u16; count]`; if it checks its own indices, write `src: &[u16; unbounded]`",
        "& [u16]",
    );
    lower_ok(&declaring("fn k(a: f32, src: &[f32], dst: &mut [f32])"));
    lower_ok(&declaring(
        "fn k(n: u32, src: &[f32; unbounded], dst: &mut [f32; unbounded])",
    ));
}

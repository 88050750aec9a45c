//! Issue 14's language: parsing, checks and lowering of ranges, stream and buffer arrays,
//! loops, kinds of step, swaps and host closures that receive buffers.

use super::*;
use crate::ast::{BufRef, Item, Statement, tokens_string};
use crate::lower::{Access, Extent, Mode};

/// A pipeline with a stream array sized by `lanes` and an array of buffers.
fn looped(items: &str) -> String {
    format!(
        r#"pipeline L {{
            streams {{ main, work[lanes] }}
            unsafe kernels k = ptx(include_str!("k.ptx")) {{
                fn scale(n: u32, alpha: f32, src: &[f32; unbounded], dst: &mut [f32; unbounded]);
                fn touch(buf: &mut [f32]);
            }}
            params {{
                lanes: usize, chunks: usize, alpha: f32,
                x: &mut DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>,
                xs: &mut [DeviceBuffer<f32>], h: &mut PinnedBuffer<f32>,
            }}
            {items}
        }}"#
    )
}

#[test]
fn loops_steps_swaps_and_arrays_parse_into_their_items() {
    let input = parse(&looped(
        "swap(x, y);
         step run {
             for i in 0..chunks {
                 let lo = i * 4;
                 let hi = lo + 4;
                 stage load on work[i % lanes] { copy h[lo..hi] -> x[lo..hi]; }
                 concurrent(load, load);
             }
         }",
    ))
    .unwrap();
    let streams: Vec<_> = input.streams().collect();
    assert!(streams[0].count.is_none());
    assert_eq!(tokens_string(&streams[1].count), "lanes");
    assert_eq!(input.swaps().count(), 1);
    let steps: Vec<_> = input.steps().collect();
    assert_eq!(steps[0].name, "run");
    let loops = input.loops();
    assert_eq!(loops.len(), 1);
    assert_eq!(loops[0].var, "i");
    let lets: Vec<String> = loops[0].lets.iter().map(|l| l.name.to_string()).collect();
    assert_eq!(lets, ["lo", "hi"]);
    let places = input.stage_places();
    assert_eq!(places.len(), 1);
    assert!(places[0].step.is_some() && places[0].looped.is_some());
    assert_eq!(tokens_string(&places[0].stage.lane), "i % lanes");
    let Statement::Copy(copy) = &places[0].stage.statements[0] else {
        panic!("copy");
    };
    let range = copy.src_ref.range.as_ref().expect("a range");
    assert_eq!(tokens_string(&range.start), "lo");
    assert_eq!(tokens_string(&range.end), "hi");
    assert_eq!(input.claims_with_loops().len(), 1);
    assert!(matches!(input.items.last(), Some(Item::Step(_))));
}

#[test]
fn buffer_references_take_an_element_and_a_range() {
    let parse_ref = |text: &str| {
        let expr: syn::Expr = syn::parse_str(text).unwrap();
        BufRef::of_expr(Box::leak(Box::new(expr))).map(|r| {
            (
                r.name.to_string(),
                r.index.map(tokens_string),
                r.range
                    .map(|b| (b.start.map(tokens_string), b.end.map(tokens_string))),
            )
        })
    };
    assert_eq!(parse_ref("x"), Some(("x".into(), None, None)));
    assert_eq!(
        parse_ref("xs[k]"),
        Some(("xs".into(), Some("k".into()), None))
    );
    assert_eq!(
        parse_ref("x[..n]"),
        Some(("x".into(), None, Some((None, Some("n".into())))))
    );
    assert_eq!(
        parse_ref("xs[2][a..]"),
        Some((
            "xs".into(),
            Some("2".into()),
            Some((Some("a".into()), None))
        ))
    );
    // A closed range, a range before an element, and anything else are not buffers.
    assert_eq!(parse_ref("x[0..=3]"), None);
    assert_eq!(parse_ref("x[0..3][1]"), None);
    assert_eq!(parse_ref("x.len()"), None);
    // `copy` and `fill` parse their buffers on their own: a closed range is a syntax error.
    let error = parse(&looped("stage s on main { fill x[0..=3] = 0.0; }")).unwrap_err();
    assert!(error.to_string().contains("half-open"), "{error}");
    let error = parse(&looped("stage s on main { fill x[0][1..2][3] = 0.0; }")).unwrap_err();
    assert!(
        error.to_string().contains("at most an element and a range"),
        "{error}"
    );
}

#[test]
fn constant_ranges_order_at_compile_time_and_others_make_the_step_dynamic() {
    let p = lower_ok(&with(
        "stage low on s1 { launch k::touch(a[0..8]) grid 1u32 block 32u32; }
         stage high on s2 { launch k::touch(a[8..16]) grid 1u32 block 32u32; }
         stage mid on s1 { launch k::touch(a[4..12]) grid 1u32 block 32u32; }",
    ));
    assert!(!p.dynamic);
    assert_eq!(
        p.stages[0].accesses,
        [Access {
            buffer: buffer(0),
            mode: Mode::Write,
            extent: Some(Extent::new(0, 8)),
        }]
    );
    let pairs: Vec<(usize, usize)> = p.edges.iter().map(|e| (e.from.0, e.to.0)).collect();
    // `low` and `high` are apart; `mid` overlaps `high` (and follows `low` on its stream).
    assert_eq!(pairs, [(1, 2)]);
    let p = lower_ok(&with(
        "stage low on s1 { launch k::touch(a[..n as usize]) grid 1u32 block 32u32; }",
    ));
    assert!(p.dynamic);
    assert_eq!(
        p.stages[0].accesses[0].extent, None,
        "a sketch: the whole buffer"
    );
    assert!(p.structural.iter().any(|id| p.scalars[id.0].name == "n"));
}

#[test]
fn kinds_of_step_are_ordered_apart() {
    let p = lower_ok(&with(
        "step first {
             stage a on s1 { launch k::touch(a) grid 1u32 block 32u32; }
             stage b on s2 { launch k::touch(a) grid 1u32 block 32u32; }
         }
         step second {
             stage c on s1 { launch k::touch(a) grid 1u32 block 32u32; }
         }",
    ));
    assert_eq!(p.kinds.len(), 2);
    assert_eq!(p.kinds[1].stages, [stage(2)]);
    // `b` waits for `a`; nothing orders `c` after them within its own step.
    let pairs: Vec<(usize, usize)> = p.edges.iter().map(|e| (e.from.0, e.to.0)).collect();
    assert_eq!(pairs, [(0, 1)]);
    assert!(p.path(stage(0), stage(2)).is_none());
    assert!(p.dot().contains("digraph P_second"));
}

#[test]
fn loop_stages_read_the_scalars_of_the_lets_they_use() {
    let p = lower_ok(&looped(
        "for i in 0..chunks {
             let scale = alpha * 2.0;
             let n = x.len() / chunks;
             stage s on work[i % lanes] {
                 launch k::scale(n as u32, scale, x[i * n..(i + 1) * n], y[i * n..(i + 1) * n])
                     grid 1u32 block 32u32;
             }
         }",
    ));
    assert!(p.dynamic);
    let read: Vec<&str> = p.stages[0].statements[0]
        .scalars
        .iter()
        .map(|id| p.scalars[id.0].name.as_str())
        .collect();
    assert_eq!(read, ["chunks", "alpha"]);
    let shape: Vec<&str> = p
        .structural
        .iter()
        .map(|id| p.scalars[id.0].name.as_str())
        .collect();
    assert_eq!(shape, ["lanes", "chunks", "alpha"]);
}

#[test]
fn misuses_are_reported_once_on_their_tokens() {
    assert_error(
        &looped("stage s on work { launch k::touch(x) grid 1u32 block 32u32; }"),
        "`work` is an array of streams; say which one stage `s` runs on: `on work[INDEX]`",
        "work",
    );
    assert_error(
        &looped("stage s on main { launch k::touch(xs) grid 1u32 block 32u32; }"),
        "`xs` is an array of buffers; name one: `xs[k]`",
        "xs",
    );
    assert_error(
        &looped("swap(x, h); stage s on main { launch k::touch(x) grid 1u32 block 32u32; }"),
        "`x` is `&mut DeviceBuffer<f32>` and `h` is `&mut PinnedBuffer<f32>`; `swap` exchanges buffers declared with one type",
        "h",
    );
    assert_error(
        &looped("stage s on main { host |h: &mut [f32]| { h[0] = 1.0; } reads(h); }"),
        "`h` is declared in `reads(...)`, so the closure gets `&[T]`; list it in `writes(h)` to change it",
        "&mut [f32]",
    );
    assert_error(
        &looped("stage s on main { fill x[9..3] = 0.0; }"),
        "`x[9..3]` ends before it starts; write `x[3..9]`",
        "[9..3]",
    );
}

#[test]
fn host_closures_may_take_declared_pinned_buffers_and_stubs_keep_the_new_names() {
    lower_ok(&looped(
        "stage s on main { host |h: &[f32]| { let _ = h.len(); } reads(h); }",
    ));
    lower_ok(&looped(
        "stage s on main { host |h| { h[0] = alpha; } writes(h); }",
    ));
    let stub = crate::gpu_pipeline(
        looped("swap(x, y); step go { stage s on work { fill x = 0.0; } }")
            .parse()
            .unwrap(),
    )
    .to_string();
    for name in [
        "swap_x_y",
        "run_go_ahead",
        "launch_go",
        "then_go",
        "LWindow",
        "work_streams",
    ] {
        assert!(stub.contains(name), "{name} missing from the stub");
    }
}

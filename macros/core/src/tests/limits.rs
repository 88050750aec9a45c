//! Values no GPU accepts, or that do the opposite of what they say (`check/limits.rs`).

use super::*;

#[track_caller]
fn assert_cases(cases: &[(&str, &str, &str)]) {
    for &(items, message, token) in cases {
        assert_error(&with(items), message, token);
    }
}

#[test]
fn constant_blocks_fit_a_block() {
    assert_cases(&[
        (
            "stage s on s1 { launch k::touch(a) grid 1 block (32, 32, 2); }",
            "`block (32, 32, 2)` is 2048 threads per block, but CUDA runs at most 1024; use smaller blocks and more of them, e.g. `block (32, 32)` or `block 256` with a larger `grid`",
            "(32, 32, 2)",
        ),
        (
            "stage s on s1 { launch k::touch(a) grid 1 block (2048, n); }",
            "`block (2048, n)` has 2048 threads in x, but CUDA allows at most 1024 there; use smaller blocks and more of them (a larger `grid`)",
            "2048",
        ),
        (
            "stage s on s1 { launch k::touch(a) grid 1 block 2 * 1024; }",
            "`block 2 * 1024` has 2048 threads in x, but CUDA allows at most 1024 there; use smaller blocks and more of them (a larger `grid`)",
            "2 * 1024",
        ),
        (
            "stage s on s1 { launch k::touch(a) grid 1 block (2, 2, 65); }",
            "`block (2, 2, 65)` has 65 threads in z, but CUDA allows at most 64 there; use smaller blocks and more of them (a larger `grid`)",
            "65",
        ),
        (
            "stage s on s1 { launch k::touch(a) grid 1 block 0; }",
            "`block 0` has 0 threads in x; every dimension of a block needs at least 1",
            "0",
        ),
        (
            "stage s on s1 { launch k::touch(a) grid (n, 70000) block 1; }",
            "`grid (n, 70000)` has 70000 blocks in y, but CUDA allows at most 65535; put more of the work in x, or in each block",
            "70000",
        ),
        (
            "stage s on s1 { launch k::touch(a) grid 1 block 1 shared 228 * 1024; }",
            "`shared 228 * 1024` asks for 233472 bytes of dynamic shared memory per block, but no supported GPU gives a block more than 232448 (227 KiB, H100 and H200); use less, e.g. by tiling the data over more blocks",
            "228 * 1024",
        ),
    ]);
    // (64, 32) is too many only together.
    assert_cases(&[(
        "stage s on s1 { launch k::touch(a) grid 1 block (64, 32); }",
        "`block (64, 32)` is 2048 threads per block, but CUDA runs at most 1024; use smaller blocks and more of them, e.g. `block (32, 32)` or `block 256` with a larger `grid`",
        "(64, 32)",
    )]);
    // At least 2 * 600 threads, whatever `n` is.
    assert_cases(&[(
        "stage s on s1 { launch k::touch(a) grid 1 block (2, n, 600); }",
        "`block (2, n, 600)` has 600 threads in z, but CUDA allows at most 64 there; use smaller blocks and more of them (a larger `grid`)",
        "600",
    )]);
    lower_ok(&with(
        "stage s on s1 { launch k::touch(a) grid (n, 65535, 1) block (32, 32, 1) shared 227 * 1024; }
         stage t on s1 { launch k::touch(a) grid n block n * 4 shared n; }",
    ));
}

#[test]
fn priorities_follow_cuda() {
    assert_error(
        "pipeline P { streams { s(priority = 3) } params { a: &mut DeviceBuffer<f32> } stage x on s { fill a = 0.0; } }",
        "`priority = 3` would make `s` the least urgent stream: CUDA runs lower numbers first and clamps positive ones to 0, the default; write `priority = high` (or a negative number such as `-1`) for an urgent stream, or `priority = low` for a background one",
        "3",
    );
    lower_ok(
        "pipeline P { streams { s(priority = -3), t(priority = 0), u(priority = high) } params { a: &mut DeviceBuffer<f32> } stage x on s { fill a = 0.0; } }",
    );
}

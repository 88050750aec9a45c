//! Values the macro can see that no GPU accepts, or that do the opposite of what they say:
//! constant launch dimensions and shared memory beyond CUDA's limits, and stream priorities
//! outside CUDA's convention. Values that are not constants are checked by the runtime
//! against the device's real limits before every launch.

use syn::Expr;

use crate::ast::{self, Statement, tokens_string};
use crate::constant;
use crate::ctxt::Ctxt;
use crate::lower::Priority;
use crate::scope::Scope;

/// Threads per block, over all three dimensions (every GPU since compute capability 2.0).
pub const MAX_THREADS_PER_BLOCK: i128 = 1024;
/// Threads per block in x, y and z.
pub const MAX_BLOCK: [i128; 3] = [1024, 1024, 64];
/// Blocks per grid in x, y and z.
pub const MAX_GRID: [i128; 3] = [(1 << 31) - 1, 65_535, 65_535];
/// Dynamic shared memory one block may use on the largest supported GPU (H100 and H200:
/// 227 KiB with the opt-in attribute).
pub const MAX_SHARED_BYTES: i128 = 227 * 1024;

/// Runs the rules on every stream and every launch.
pub fn check(cx: &Ctxt, scope: &Scope<'_>) {
    for stream in &scope.streams {
        stream_priority(cx, stream);
    }
    for stage in &scope.stages {
        for statement in crate::ast::flatten(&stage.statements) {
            if let Statement::Launch(launch) = statement {
                if let Some(block) = &launch.block {
                    block_dimensions(cx, &block.value);
                }
                if let Some(grid) = &launch.grid {
                    grid_dimensions(cx, &grid.value);
                }
                if let Some(shared) = &launch.shared {
                    shared_memory(cx, &shared.value);
                }
            }
        }
    }
}

/// CUDA runs lower priority numbers first and clamps positive ones to 0, its least urgent
/// and default priority: `priority = 5` written to mean "urgent" would mean "background".
fn stream_priority(cx: &Ctxt, stream: &ast::Stream) {
    let Some(option) = &stream.priority else {
        return;
    };
    let Priority::Value(value) = option.level else {
        return;
    };
    if value > 0 {
        cx.error_at(
            option.span,
            format!(
                "`priority = {value}` would make `{}` the least urgent stream: CUDA runs lower numbers first and clamps positive ones to 0, the default; write `priority = high` (or a negative number such as `-1`) for an urgent stream, or `priority = low` for a background one",
                stream.name
            ),
        );
    }
}

/// A block has at least one thread in each dimension, at most 1024 in x and y and 64 in z,
/// and at most 1024 in all.
fn block_dimensions(cx: &Ctxt, value: &Expr) {
    let dims = constant::dimensions(value);
    let written = tokens_string(value);
    for (axis, (expr, dim)) in dims.iter().enumerate() {
        let Some(dim) = *dim else { continue };
        let name = ["x", "y", "z"][axis.min(2)];
        if dim < 1 {
            cx.error_spanned_by(
                expr,
                format!("`block {written}` has {dim} threads in {name}; every dimension of a block needs at least 1"),
            );
            return;
        }
        if dim > MAX_BLOCK[axis.min(2)] {
            cx.error_spanned_by(
                expr,
                format!(
                    "`block {written}` has {dim} threads in {name}, but CUDA allows at most {} there; use smaller blocks and more of them (a larger `grid`)",
                    MAX_BLOCK[axis.min(2)]
                ),
            );
            return;
        }
    }
    let threads = dims
        .iter()
        .filter_map(|(_, dim)| *dim)
        .try_fold(1i128, i128::checked_mul);
    if let Some(threads) = threads.filter(|&t| t > MAX_THREADS_PER_BLOCK) {
        let all = if dims.iter().all(|(_, dim)| dim.is_some()) {
            "is"
        } else {
            "is at least"
        };
        cx.error_spanned_by(
            value,
            format!(
                "`block {written}` {all} {threads} threads per block, but CUDA runs at most {MAX_THREADS_PER_BLOCK}; use smaller blocks and more of them, e.g. `block (32, 32)` or `block 256` with a larger `grid`"
            ),
        );
    }
}

/// A grid has at least one block in each dimension, at most 2^31 - 1 in x and 65535 in y
/// and z.
fn grid_dimensions(cx: &Ctxt, value: &Expr) {
    let written = tokens_string(value);
    for (axis, (expr, dim)) in constant::dimensions(value).iter().enumerate() {
        let Some(dim) = *dim else { continue };
        let name = ["x", "y", "z"][axis.min(2)];
        if dim < 1 {
            cx.error_spanned_by(
                expr,
                format!("`grid {written}` has {dim} blocks in {name}; every dimension of a grid needs at least 1"),
            );
        } else if dim > MAX_GRID[axis.min(2)] {
            cx.error_spanned_by(
                expr,
                format!(
                    "`grid {written}` has {dim} blocks in {name}, but CUDA allows at most {}; put more of the work in x, or in each block",
                    MAX_GRID[axis.min(2)]
                ),
            );
        }
    }
}

/// Dynamic shared memory fits the largest shared memory any supported GPU gives one block.
fn shared_memory(cx: &Ctxt, value: &Expr) {
    let Some(bytes) = constant::value(value) else {
        return;
    };
    if !(0..=MAX_SHARED_BYTES).contains(&bytes) {
        cx.error_spanned_by(
            value,
            format!(
                "`shared {}` asks for {bytes} bytes of dynamic shared memory per block, but no supported GPU gives a block more than {MAX_SHARED_BYTES} (227 KiB, H100 and H200); use less, e.g. by tiling the data over more blocks",
                tokens_string(value)
            ),
        );
    }
}

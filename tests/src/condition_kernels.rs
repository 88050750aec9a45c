//! The CPU twins of `runtime/kernels/condition_kernels.cu`: what the CPU backend runs for
//! `gp_count_down`, `gp_set_to`, `gp_bump` and `gp_step`, shared by every test that declares
//! those kernels (`cpu = tests::condition_kernels::bump`, or through a `use ... as cpu`).

use gpu_pipeline::ConditionSetter;

/// `gp_count_down`: `n[0] -= 1`, then the condition holds while `n[0] > 0`.
pub fn count_down(n: &mut [u32], mut go: ConditionSetter<'_>) {
    n[0] -= 1;
    go.set(u32::from(n[0] > 0));
}

/// `gp_set_to`: sets the condition to `value[0]` (a switch's case, or non-zero for an `if`).
pub fn set_to(value: &[u32], mut go: ConditionSetter<'_>) {
    go.set(value[0]);
}

/// `gp_bump`: `out[0] += 1`, what a body does.
pub fn bump(out: &mut [u32]) {
    out[0] += 1;
}

/// `gp_step`: `dst[0] = src[0] - 1` (wrapping, as the GPU's unsigned arithmetic does) and
/// `r[0] = dst[0]`, one sweep of a ping-pong loop whose condition reads `r`.
pub fn step(src: &[u32], dst: &mut [u32], r: &mut [u32]) {
    dst[0] = src[0].wrapping_sub(1);
    r[0] = dst[0];
}

//! What the benches that time a port against its C++ anchor (`benches/anchors/*.cu`) share:
//! running the anchor, and the median and spread of the rounds.

use std::path::Path;
use std::process::Command;

/// Runs `anchor` with `args` and returns what it printed, or an error naming it: when it
/// could not be started, or when it failed (its status and what it wrote to stderr).
pub fn anchor_stdout<S: AsRef<std::ffi::OsStr>>(
    anchor: &Path,
    args: impl IntoIterator<Item = S>,
) -> Result<String, String> {
    let output = Command::new(anchor)
        .args(args)
        .output()
        .map_err(|e| format!("could not run the anchor {}: {e}", anchor.display()))?;
    if !output.status.success() {
        return Err(format!(
            "the anchor {} failed ({}): {}",
            anchor.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The median and the spread, (max - min) / median, of a non-empty sample.
///
/// ```
/// assert_eq!(tests::anchor::median_spread(&[3.0, 1.0, 2.0]), (2.0, 1.0));
/// ```
pub fn median_spread(samples: &[f64]) -> (f64, f64) {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let spread = (sorted[sorted.len() - 1] - sorted[0]) / median;
    (median, spread)
}

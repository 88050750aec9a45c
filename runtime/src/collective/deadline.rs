//! How long one communication may take before it is declared hung: the deadline every
//! `send`, `recv` and collective gets, on NCCL and on the CPU backend's simulated ranks.
//!
//! The deadline of a communicator comes from, in order: its builder option
//! ([`CommConfig::timeout`](crate::nccl::CommConfig::timeout),
//! [`Communicator::cpu_ranks_with_timeout`](crate::Communicator::cpu_ranks_with_timeout)), the
//! environment variable [`COMM_TIMEOUT_ENV`] (seconds), and [`DEFAULT_COMM_TIMEOUT`].

use std::time::Duration;

/// The environment variable that sets the communication deadline, in seconds (`300`, `2.5`).
pub const COMM_TIMEOUT_ENV: &str = "GPU_PIPELINE_COMM_TIMEOUT";

/// The deadline when neither the builder nor [`COMM_TIMEOUT_ENV`] sets one: 5 minutes.
///
/// Long enough for NCCL's lazy connection setup on the first exchange with a peer and for a
/// slow rank's first step (PyTorch waits 10 minutes), short enough that a hung job gives its
/// GPUs back within minutes. Set a shorter one in tests.
pub const DEFAULT_COMM_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The deadline a text gives: a positive, finite number of seconds (`300`, `2.5`, ` 10 `).
///
/// ```
/// use std::time::Duration;
/// use gpu_pipeline::collective::parse_comm_timeout;
/// assert_eq!(parse_comm_timeout(" 2.5 "), Ok(Duration::from_millis(2500)));
/// let err = parse_comm_timeout("0").unwrap_err();
/// assert!(err.contains("positive"), "{err}");
/// assert!(parse_comm_timeout("5m").is_err()); // seconds, as a number
/// ```
pub fn parse_comm_timeout(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    let refuse = |why: &str| {
        format!(
            "{COMM_TIMEOUT_ENV}={text:?} {why}; set a positive number of seconds, such as 300 \
             or 2.5"
        )
    };
    let seconds: f64 = trimmed
        .parse()
        .map_err(|_| refuse("is not a number of seconds"))?;
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(refuse("is not a positive, finite number of seconds"));
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| refuse("is too long"))
}

/// The deadline [`COMM_TIMEOUT_ENV`] sets, or [`DEFAULT_COMM_TIMEOUT`] when it is unset or
/// empty; a value that is not a positive number of seconds is an error saying so.
///
/// ```
/// use gpu_pipeline::collective::{COMM_TIMEOUT_ENV, DEFAULT_COMM_TIMEOUT, comm_timeout_from_env};
/// let deadline = comm_timeout_from_env()?;
/// if std::env::var_os(COMM_TIMEOUT_ENV).is_none() {
///     assert_eq!(deadline, DEFAULT_COMM_TIMEOUT);
/// }
/// # Ok::<(), String>(())
/// ```
pub fn comm_timeout_from_env() -> Result<Duration, String> {
    match std::env::var(COMM_TIMEOUT_ENV) {
        Ok(text) if !text.trim().is_empty() => parse_comm_timeout(&text),
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok(DEFAULT_COMM_TIMEOUT),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!(
            "{COMM_TIMEOUT_ENV} is not valid Unicode; set a positive number of seconds"
        )),
    }
}

/// A deadline the builder gave, checked: zero would time every operation out at once.
pub(crate) fn check_timeout(call: &'static str, timeout: Duration) -> Result<Duration, String> {
    if timeout.is_zero() {
        Err(format!(
            "{call}: a communication deadline of zero would fail every operation; give a \
             positive duration"
        ))
    } else {
        Ok(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_parse_as_whole_and_fractional_numbers() {
        assert_eq!(parse_comm_timeout("300"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_comm_timeout(" 2.5 "), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_comm_timeout("0.001"), Ok(Duration::from_millis(1)));
    }

    #[test]
    fn bad_values_are_refused_saying_what_to_write() {
        for bad in ["", "abc", "0", "-3", "inf", "NaN", "5s", "1e30"] {
            let err = parse_comm_timeout(bad).unwrap_err();
            assert!(
                err.contains(COMM_TIMEOUT_ENV) && err.contains("positive number of seconds"),
                "{bad}: {err}"
            );
        }
        assert!(check_timeout("x", Duration::ZERO).is_err());
        assert!(check_timeout("x", Duration::from_millis(1)).is_ok());
    }
}

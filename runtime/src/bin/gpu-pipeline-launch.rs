//! `gpu-pipeline-launch -n N -- PROGRAM ARGS...`: one process per rank on this host, with the
//! rank and rendezvous variables set and `NCCL_NVLS_ENABLE=0`. See
//! [`gpu_pipeline::launcher`] (and `--help`).

use std::process::ExitCode;

use gpu_pipeline::launcher::Launch;

fn main() -> ExitCode {
    let launch = match Launch::from_args(std::env::args_os().skip(1)) {
        Ok(Some(launch)) => launch,
        Ok(None) => {
            println!("{}", gpu_pipeline::launcher::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("gpu-pipeline-launch: {e}");
            return ExitCode::from(2);
        }
    };
    match launch.run() {
        Ok(report) if report.success() => ExitCode::SUCCESS,
        Ok(report) => {
            eprintln!("gpu-pipeline-launch: a rank failed\n{}", report.summary());
            // Exit statuses are 8 bits; a code that does not fit still means failure.
            ExitCode::from(
                u8::try_from(report.exit_code())
                    .ok()
                    .filter(|&c| c != 0)
                    .unwrap_or(1),
            )
        }
        Err(e) => {
            eprintln!("gpu-pipeline-launch: {}", chain(&e));
            ExitCode::from(2)
        }
    }
}

/// The error and its sources on one line (each layer displays only its own context).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

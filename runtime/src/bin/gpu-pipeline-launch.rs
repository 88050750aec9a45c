//! `gpu-pipeline-launch -n N -- PROGRAM ARGS...`: one process per rank on this host, with the
//! rank and rendezvous variables set and `NCCL_NVLS_ENABLE=0`. See
//! [`gpu_pipeline::launcher`] (and `--help`).

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(gpu_pipeline::launcher::main_with_args(
        std::env::args_os().skip(1),
    ))
}

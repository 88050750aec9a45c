#!/usr/bin/env bash
# Regenerates the committed PTX of the examples' kernels (run from the repository root on a
# machine with the CUDA toolkit). compute_75 PTX is JIT-compiled by the driver for any newer GPU.
set -euo pipefail
for f in examples/kernels/*.cu; do nvcc -ptx -arch=compute_75 "$f" -o "${f%.cu}.ptx"; done

#!/usr/bin/env bash
# Builds NVIDIA's `multi_threaded_p2p_opt` Jacobi (multi-gpu-programming-models) with nvcc on a
# GPU machine, the anchor benches/multi_gpu/run.sh compares jacobi_multi with.
#
#   benches/multi_gpu/build-anchor.sh SOURCE.cu OUTPUT [ARCH]
#
# SOURCE.cu is `multi_threaded_p2p_opt/jacobi.cu` from NVIDIA's repository (not carried here);
# ARCH defaults to sm_90 (H100, H200). Built as NVIDIA's Makefile does (-O3, CUB's block reduce,
# OpenMP), with C++17 for CUDA 13's CUB and without NVTX.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 SOURCE.cu OUTPUT [ARCH]" >&2
  exit 2
fi
src=$1 out=$2 arch=${3:-sm_90}
[ -f "$src" ] || { echo "error: no source file $src" >&2; exit 2; }
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$nvcc" ] || { echo "error: no nvcc (set NVCC)" >&2; exit 2; }
"$nvcc" -O3 -DHAVE_CUB -std=c++17 -arch="$arch" -Xcompiler -fopenmp -ldl "$src" -o "$out"

#!/usr/bin/env bash
# Multi-GPU scaling of examples/jacobi_multi, side by side with NVIDIA's Jacobi
# (multi-gpu-programming-models, `multi_threaded_p2p_opt`) run in the same call: time per
# iteration and parallel efficiency at 8192^2, 16384^2 and 32768^2 on 1, 2 and 4 GPUs,
# 1000 iterations, as one Markdown table (what docs/PERFORMANCE.md records).
#
# Runs prebuilt binaries, so it works on a GPU machine without Rust (from the GPU bundle):
#
#   JACOBI=.gpu/examples/jacobi_multi ANCHOR=/path/to/jacobi benches/multi_gpu/run.sh
#
#   JACOBI      jacobi_multi (default: .gpu/examples/jacobi_multi, else target/release/examples/)
#   ANCHOR      NVIDIA's multi_threaded_p2p_opt binary, built on that machine from NVIDIA's
#               source (this repository carries neither the source nor its build); left
#               out of the table when unset
#   SIZES       grid sizes (default: "8192 16384 32768")
#   GPUS        GPU counts (default: "1 2 4", capped at the GPUs nvidia-smi lists)
#   ITERATIONS  iterations per run (default: 1000)
#
# NCCL_NVLS_ENABLE=0 is set for every run (NVLink multicast must stay off on these machines).
# jacobi_multi starts one process per GPU itself (`--gpus N`, what gpu-pipeline-launch does);
# the anchor is one process with one OpenMP thread per GPU, given the first N GPUs through
# CUDA_VISIBLE_DEVICES. Efficiency is each program's own: its 1-GPU time over N times its
# N-GPU time (jacobi_multi's 1-GPU time from the 1-GPU row of this run; the anchor's from the
# single-GPU run it makes itself). Every jacobi_multi run checks its result against a plain
# CPU solver only when cheap (--reference auto), and the runs here skip the single-rank
# check (--no-single-rank) to measure nothing but the solve; run jacobi_multi without those
# flags to check every rank's block against one rank.
set -euo pipefail
export NCCL_NVLS_ENABLE=0

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "${JACOBI:-}" ]; then
  for candidate in "$root/.gpu/examples/jacobi_multi" "$root/target/release/examples/jacobi_multi"; do
    if [ -x "$candidate" ]; then JACOBI=$candidate; break; fi
  done
fi
if [ -z "${JACOBI:-}" ] || [ ! -x "$JACOBI" ]; then
  echo "error: no jacobi_multi binary; build it (cargo build --release -p examples --example jacobi_multi, or the GPU bundle) or set JACOBI" >&2
  exit 2
fi
SIZES=${SIZES:-"8192 16384 32768"}
ITERATIONS=${ITERATIONS:-1000}
available=$(nvidia-smi --list-gpus 2>/dev/null | wc -l)
if [ "$available" -eq 0 ]; then
  echo "error: nvidia-smi lists no GPU" >&2
  exit 2
fi
GPUS=${GPUS:-"1 2 4"}
counts=()
for n in $GPUS; do
  if [ "$n" -le "$available" ]; then counts+=("$n"); else echo "note: skipping $n GPUs ($available available)" >&2; fi
done
if [ -n "${ANCHOR:-}" ] && [ ! -x "$ANCHOR" ]; then
  echo "error: ANCHOR=$ANCHOR is not an executable" >&2
  exit 2
fi

nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
echo "jacobi_multi: $JACOBI"
echo "anchor: ${ANCHOR:-not given (set ANCHOR to the multi_threaded_p2p_opt binary)}"
echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE, $ITERATIONS iterations"
echo

# jacobi_multi on N GPUs: prints milliseconds per iteration (rank 0's CSV line).
ours() {
  local n=$1 size=$2 out line
  out=$("$JACOBI" --gpus "$n" --nx "$size" --ny "$size" --iterations "$ITERATIONS" \
    --no-single-rank --reference auto --csv -q 2>&1) || {
    echo "error: jacobi_multi on $n GPU(s) at ${size}^2 failed:" >&2
    echo "$out" | tail -n 30 >&2
    return 1
  }
  line=$(echo "$out" | grep -o 'jacobi_multi,[0-9].*' | head -n 1)
  if [ -z "$line" ]; then
    echo "error: no CSV line from jacobi_multi on $n GPU(s) at ${size}^2:" >&2
    echo "$out" | tail -n 30 >&2
    return 1
  fi
  echo "$line" | cut -d, -f6
}

# The anchor on the first N GPUs: prints "ms_per_iteration ms_per_iteration_on_one_gpu".
anchor() {
  local n=$1 size=$2 devices out line
  devices=$(seq -s, 0 $((n - 1)))
  out=$(CUDA_VISIBLE_DEVICES=$devices "$ANCHOR" -nx "$size" -ny "$size" -niter "$ITERATIONS" -csv 2>&1) || {
    echo "error: the anchor on $n GPU(s) at ${size}^2 failed:" >&2
    echo "$out" | tail -n 30 >&2
    return 1
  }
  # multi_threaded_p2p_opt, nx, ny, iter_max, nccheck, num_devices, 1, t, runtime_serial
  line=$(echo "$out" | grep '^multi_threaded_p2p_opt' | tail -n 1)
  if [ -z "$line" ]; then
    echo "error: no CSV line from the anchor on $n GPU(s) at ${size}^2:" >&2
    echo "$out" | tail -n 30 >&2
    return 1
  fi
  echo "$line" | awk -F, -v it="$ITERATIONS" '{ printf "%.6f %.6f\n", 1000 * $8 / it, 1000 * $9 / it }'
}

echo "| grid | GPUs | jacobi_multi ms/iter | efficiency | anchor ms/iter | anchor efficiency | time vs anchor |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
status=0
for size in $SIZES; do
  one=""
  for n in "${counts[@]}"; do
    if ! t=$(ours "$n" "$size"); then status=1; continue; fi
    [ "$n" -eq 1 ] && one=$t
    eff="n/a"
    [ -n "$one" ] && eff=$(awk -v a="$one" -v b="$t" -v n="$n" 'BEGIN { printf "%.1f%%", 100 * a / (n * b) }')
    at="n/a"; aeff="n/a"; ratio="n/a"
    if [ -n "${ANCHOR:-}" ]; then
      if read -r at aone < <(anchor "$n" "$size"); then
        aeff=$(awk -v a="$aone" -v b="$at" -v n="$n" 'BEGIN { printf "%.1f%%", 100 * a / (n * b) }')
        ratio=$(awk -v a="$t" -v b="$at" 'BEGIN { printf "%.2f", a / b }')
        at=$(printf "%.4f" "$at")
      else
        status=1; at="failed"
      fi
    fi
    printf "| %s^2 | %s | %.4f | %s | %s | %s | %s |\n" "$size" "$n" "$t" "$eff" "$at" "$aeff" "$ratio"
  done
done
exit $status

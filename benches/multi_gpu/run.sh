#!/usr/bin/env bash
# Multi-GPU scaling of examples/jacobi_multi, side by side with NVIDIA's Jacobi
# (multi-gpu-programming-models, `multi_threaded_p2p_opt`) run in the same call: time per
# iteration and parallel efficiency at 8192^2, 16384^2 and 32768^2 on 1, 2 and 4 GPUs, as one
# Markdown table (what docs/PERFORMANCE.md records).
#
# One run is not a measurement: each cell is RUNS runs (default 5), ours and the anchor
# alternating (ours, anchor, ours, anchor, ...), and the table gives each one's median and
# its spread, (max - min) / median. `time vs anchor` is our median over the anchor's.
#
# Runs prebuilt binaries, so it works on a GPU machine without Rust (from the GPU bundle):
#
#   JACOBI=.gpu/examples/jacobi_multi ANCHOR=/path/to/jacobi benches/multi_gpu/run.sh
#
#   JACOBI      jacobi_multi (default: .gpu/examples/jacobi_multi, else target/release/examples/)
#   ANCHOR      NVIDIA's multi_threaded_p2p_opt binary, built on that machine from NVIDIA's
#               source (benches/multi_gpu/build-anchor.sh; this repository carries neither the
#               source nor its build); left out of the table when unset
#   SIZES       grid sizes (default: "8192 16384 32768")
#   GPUS        GPU counts (default: "1 2 4", capped at the GPUs nvidia-smi lists)
#   ITERATIONS  iterations per run (default: 1000)
#   RUNS        runs per cell, alternating ours and the anchor (default: 5)
#   EXCHANGES   jacobi_multi's halo exchanges to time, each a row (default: "nccl peer onesided";
#               onesided has no row on 1 GPU, where it would run the nccl step, there being no
#               neighbour: its efficiency is taken against the nccl row's 1-GPU time)
#   RAW         a file to append every single run to, one CSV line each (optional):
#               program, exchange, size, GPUs, run, ms per iteration, seconds the whole run
#               took (start-up, upload and checks included: what fills a call at 32768^2)
#
# NCCL_NVLS_ENABLE=0 is set for every run (NVLink multicast must stay off on these machines).
# jacobi_multi starts one process per GPU itself (`--gpus N`, what gpu-pipeline-launch does);
# the anchor is one process with one OpenMP thread per GPU, given the first N GPUs through
# CUDA_VISIBLE_DEVICES. Efficiency is each program's own: its 1-GPU median over N times its
# N-GPU median (jacobi_multi's 1-GPU time from the 1-GPU row of this run; the anchor's from
# the single-GPU run it makes itself each time). The runs skip jacobi_multi's single-rank
# check (--no-single-rank) and check against a CPU solver only when cheap (--reference
# auto); run jacobi_multi without those flags to check every rank's block against one rank.
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
RUNS=${RUNS:-5}
EXCHANGES=${EXCHANGES:-"nccl peer onesided"}
case "$RUNS" in ''|*[!0-9]*|0) echo "error: RUNS=$RUNS is not a positive count" >&2; exit 2 ;; esac
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
echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE, $ITERATIONS iterations, $RUNS alternating runs per cell"
echo

# jacobi_multi on N GPUs with one exchange: prints milliseconds per iteration (rank 0's CSV).
ours() {
  local n=$1 size=$2 exchange=$3 out line flags=()
  [ "$exchange" = default ] || flags=(--exchange "$exchange")
  out=$("$JACOBI" --gpus "$n" --nx "$size" --ny "$size" --iterations "$ITERATIONS" \
    --no-single-rank --reference auto --csv -q "${flags[@]}" 2>&1) || {
    echo "error: jacobi_multi (${exchange}) on $n GPU(s) at ${size}^2 failed:" >&2
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

# Wall-clock seconds, and the seconds since a time it gave.
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Whether EXCHANGE has no row on N GPUs: onesided needs a neighbour.
no_row() { [ "$1" = onesided ] && [ "$2" -eq 1 ]; }

# "median spread" of the numbers given (spread = (max - min) / median).
stats() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "n/a n/a"; exit }
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.6f %.1f%%\n", m, 100 * (v[NR] - v[1]) / m }'
}

echo "| grid | GPUs | exchange | ours median ms/iter | ours spread | efficiency | anchor median ms/iter | anchor spread | anchor efficiency | time vs anchor |"
echo "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
status=0
for size in $SIZES; do
  declare -A one=()
  for n in "${counts[@]}"; do
    declare -A times=()
    anchor_times=() anchor_ones=()
    for ((run = 1; run <= RUNS; run++)); do
      for exchange in $EXCHANGES; do
        no_row "$exchange" "$n" && continue
        started=$(now)
        if t=$(ours "$n" "$size" "$exchange"); then
          times[$exchange]="${times[$exchange]:-} $t"
          [ -n "${RAW:-}" ] && echo "ours,$exchange,$size,$n,$run,$t,$(since "$started")" >> "$RAW"
        else
          status=1
        fi
      done
      if [ -n "${ANCHOR:-}" ]; then
        started=$(now)
        if read -r at aone < <(anchor "$n" "$size"); then
          anchor_times+=("$at"); anchor_ones+=("$aone")
          [ -n "${RAW:-}" ] && echo "anchor,,$size,$n,$run,$at,$(since "$started")" >> "$RAW"
        else
          status=1
        fi
      fi
    done
    at="n/a" aspread="n/a" aeff="n/a"
    if [ "${#anchor_times[@]}" -gt 0 ]; then
      read -r at aspread < <(stats "${anchor_times[@]}")
      read -r aone _ < <(stats "${anchor_ones[@]}")
      aeff=$(awk -v a="$aone" -v b="$at" -v n="$n" 'BEGIN { printf "%.1f%%", 100 * a / (n * b) }')
    fi
    for exchange in $EXCHANGES; do
      no_row "$exchange" "$n" && continue
      # shellcheck disable=SC2086
      [ -n "${times[$exchange]:-}" ] || { printf "| %s^2 | %s | %s | failed | | | | | | |\n" "$size" "$n" "$exchange"; continue; }
      # shellcheck disable=SC2086
      read -r t spread < <(stats ${times[$exchange]})
      [ "$n" -eq 1 ] && one[$exchange]=$t
      [ "$n" -eq 1 ] && [ "$exchange" = nccl ] && one[onesided]=$t
      eff="n/a"
      [ -n "${one[$exchange]:-}" ] && eff=$(awk -v a="${one[$exchange]}" -v b="$t" -v n="$n" 'BEGIN { printf "%.1f%%", 100 * a / (n * b) }')
      ratio="n/a"
      [ "$at" != "n/a" ] && ratio=$(awk -v a="$t" -v b="$at" 'BEGIN { printf "%.3f", a / b }')
      printf "| %s^2 | %s | %s | %.4f | %s | %s | %s | %s | %s | %s |\n" "$size" "$n" "$exchange" "$t" "$spread" "$eff" \
        "$( [ "$at" = n/a ] && echo n/a || printf %.4f "$at")" "$aspread" "$aeff" "$ratio"
    done
    unset times
  done
  unset one
done
exit $status

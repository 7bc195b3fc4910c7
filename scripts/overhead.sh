#!/usr/bin/env bash
# Scheduling overhead per task of every policy against StarPU's eager, on
# Debian's tasks_overhead example (many empty tasks). Runs are interleaved
# (eager, then each policy, repeated), and the median "Per task" time of
# each policy is reported with its ratio to eager's median.
# Usage: bash scripts/overhead.sh [repetitions (default 7)] [tasks (default 20000)]
# Prints figures only; it asserts nothing (timings on a shared machine).
set -euo pipefail
cd "$(dirname "$0")/.."
reps="${1:-7}"
tasks="${2:-20000}"
lib="$PWD/target/release/libstarpu_plb.so"
app=""
for d in /usr/lib/*/starpu/examples; do [ -x "$d/tasks_overhead" ] && app="$d/tasks_overhead"; done
[ -n "$app" ] || { echo "overhead: tasks_overhead not found (install starpu-examples)" >&2; exit 1; }
[ -f "$lib" ] || { echo "overhead: $lib missing (run cargo build --release)" >&2; exit 1; }
policies=(eager greedy plb-hac plb-hec hdss acosta)
home="$(mktemp -d)"
out="$(mktemp)"
trap 'rm -rf "$home" "$out"' EXIT
echo "overhead: $app -i $tasks, $reps interleaved repetitions, STARPU_NCPU=2 (real runs, no emulation)"
for ((r = 1; r <= reps; r++)); do
  for p in "${policies[@]}"; do
    preload=""
    [ "$p" = eager ] || preload="$lib"
    us=$(env -u PLB_EMULATE STARPU_HOME="$home" STARPU_SILENT=1 STARPU_NCPU=2 STARPU_SCHED="$p" \
      LD_PRELOAD="$preload" "$app" -i "$tasks" 2>&1 | awk '/^Per task:/ {print $3}')
    [ -n "$us" ] || { echo "overhead: no 'Per task' line for $p" >&2; exit 1; }
    echo "$p $us" >>"$out"
  done
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
base=$(awk '$1=="eager" {print $2}' "$out" | median)
printf '%-10s %14s %10s\n' policy "median µs/task" "vs eager"
for p in "${policies[@]}"; do
  m=$(awk -v p="$p" '$1==p {print $2}' "$out" | median)
  awk -v p="$p" -v m="$m" -v b="$base" 'BEGIN {printf "%-10s %14.3f %9.2fx\n", p, m, m / b}'
done

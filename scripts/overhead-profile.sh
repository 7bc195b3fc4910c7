#!/usr/bin/env bash
# Where the time of tasks_overhead -i 20000 goes (real runs, StarPU 1.4.10's
# native prefix, CPU workers only), per policy: per-task µs, CPU time,
# futex system calls (threads that slept on a contended lock), context
# switches, and from a sampling profile the share of CPU samples in
# StarPU's worker loop (`_starpu_get_worker_task`: idle workers' polling and
# back-off) and in our library. The figures under `perf record` are slower
# than without it; read them against each other, not against
# scripts/overhead.sh.
# Usage: bash scripts/overhead-profile.sh [workers (8)] [policies (eager,dmda,greedy,plb-heft,plb-hac)] [OUT]
# Needs `perf` (Debian: linux-perf) with access to system-call tracepoints
# (root, or kernel.perf_event_paranoid <= -1). Prints figures only.
set -euo pipefail
cd "$(dirname "$0")/.."
ncpu="${1:-8}"
IFS=, read -r -a policies <<<"${2:-eager,dmda,greedy,plb-heft,plb-hac}"
csv="${3:-target/overhead-profile.csv}"
case "$ncpu" in '' | *[!0-9]*) echo "overhead-profile: workers must be a number" >&2; exit 2 ;; esac
command -v perf >/dev/null || { echo "overhead-profile: perf not found (apt-get install linux-perf)" >&2; exit 1; }
# shellcheck source=scripts/lib/starpu14.sh
source scripts/lib/starpu14.sh
starpu14_native_ours overhead-profile
examples="$prefix/lib/starpu/examples"
read -r -a ours <<<"$(target/release/plb policies | awk '{print $1}' | tr '\n' ' ')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$csv")"
echo "policy,workers,per_task_us,cpu_ms,futex_calls,context_switches,share_starpu_worker_loop,share_our_library" >"$csv"
for p in "${policies[@]}"; do
  schedlib=""
  [[ " ${ours[*]} " == *" $p "* ]] && schedlib="$lib"
  env -u PLB_EMULATE -u LD_PRELOAD -u PLB_SUMMARY STARPU_HOME="$work/home" STARPU_NCPU="$ncpu" \
    STARPU_NOPENCL=0 STARPU_NCUDA=0 STARPU_SCHED="$p" STARPU_SCHED_LIB="$schedlib" \
    LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    perf stat -x, -e task-clock,context-switches,syscalls:sys_enter_futex -o "$work/stat" \
    perf record -q -o "$work/perf.data" "$examples/tasks_overhead" -i 20000 >"$work/out" 2>&1 ||
    { echo "overhead-profile: $p failed:" >&2; tail -5 "$work/out" >&2; exit 1; }
  us=$(awk '/^Per task:/ {print $3}' "$work/out")
  stat() { awk -F, -v e="$1" '$3 == e {print $1; exit}' "$work/stat"; }
  perf report -i "$work/perf.data" --no-children --sort symbol >"$work/symbols" 2>/dev/null
  perf report -i "$work/perf.data" --no-children --sort dso >"$work/dsos" 2>/dev/null
  loop=$(awk '$NF == "_starpu_get_worker_task" || / _starpu_get_worker_task +/ {gsub("%", "", $1); print $1; exit}' "$work/symbols")
  mine=$(awk '/libstarpu_plb\.so/ {gsub("%", "", $1); print $1; exit}' "$work/dsos")
  echo "$p,$ncpu,${us:-NA},$(stat task-clock),$(stat syscalls:sys_enter_futex),$(stat context-switches),${loop:-0},${mine:-0}" >>"$csv"
done
column -s, -t "$csv"
echo "written: $csv"

#!/usr/bin/env bash
# Scheduling overhead of every policy (ours, from `plb policies`, and
# StarPU's eager as the baseline), three figures, real runs, no emulation:
#  1. tasks_overhead (many empty tasks), 2 CPU workers: median "Per task" µs;
#  2. the same with 4 CPU workers (oversubscribed on small machines: a lock
#     contention figure);
#  3. cholesky_implicit (a task mix with real work: potrf, trsm, syrk, gemm)
#     on 4 CPU workers: median wall time.
# Runs are interleaved (each repetition runs every policy once) and each
# policy's median is given with its ratio to eager's median of the same
# runs. For our policies, one extra run per figure with PLB_SUMMARY=1
# measures the time the push/pop lock is held, per task (not in the timed
# runs: measuring it reads the clock twice per critical section).
# Usage: bash scripts/overhead.sh [repetitions (default 7)] [tasks (default 20000)]
# Prints figures only; it asserts nothing (timings on a shared machine).
set -euo pipefail
cd "$(dirname "$0")/.."
reps="${1:-7}"
tasks="${2:-20000}"
lib="$PWD/target/release/libstarpu_plb.so"
plb="$PWD/target/release/plb"
examples=""
for d in /usr/lib/*/starpu/examples; do [ -x "$d/tasks_overhead" ] && examples="$d"; done
[ -n "$examples" ] || { echo "overhead: tasks_overhead not found (install starpu-examples)" >&2; exit 1; }
[ -f "$lib" ] && [ -x "$plb" ] || { echo "overhead: build first (cargo build --release)" >&2; exit 1; }
read -r -a ours <<<"$("$plb" policies | awk '{print $1}' | tr '\n' ' ')"
policies=(eager "${ours[@]}")
# Cholesky size: 16x16 tiles of 120 (816 tasks); smaller with few tasks (CI).
chol_size=1920
[ "$tasks" -ge 10000 ] || chol_size=960
home="$(mktemp -d)"
out="$(mktemp)"
trap 'rm -rf "$home" "$out"' EXIT

# run FIGURE POLICY NCPU SUMMARY CMD...: prints the figure's value (µs per
# task, or ms) and, with SUMMARY=1, the summary's lock_us and tasks.
run() {
  local fig="$1" p="$2" ncpu="$3" summary="$4"
  shift 4
  local preload=""
  [ "$p" = eager ] || preload="$lib"
  env -u PLB_EMULATE STARPU_HOME="$home" STARPU_SILENT=1 STARPU_NCPU="$ncpu" STARPU_SCHED="$p" \
    PLB_SUMMARY="$summary" LD_PRELOAD="$preload" "$@" 2>&1 |
    awk -v fig="$fig" '
      fig != "chol" && /^Per task:/ {v = $3}
      fig == "chol" && $1 ~ /^[0-9]+$/ && NF >= 3 {v = $2}
      /^plb: policy=/ {for (i = 1; i <= NF; i++) {split($i, kv, "="); s[kv[1]] = kv[2]}
                       lock += s["lock_us"]; n += s["tasks"]}
      END {print v, lock + 0, n + 0}'
}

figure() {
  local fig="$1" ncpu="$2"
  shift 2
  for ((r = 1; r <= reps; r++)); do
    for p in "${policies[@]}"; do
      read -r v _ _ < <(run "$fig" "$p" "$ncpu" "" "$@")
      [ -n "$v" ] || { echo "overhead: no figure for $p ($fig)" >&2; exit 1; }
      echo "$fig $p value $v" >>"$out"
    done
  done
  for p in "${ours[@]}"; do
    read -r _ lock n < <(run "$fig" "$p" "$ncpu" 1 "$@")
    echo "$fig $p lock $(awk -v l="$lock" -v n="$n" 'BEGIN {print (n > 0 ? l / n : 0)}')" >>"$out"
  done
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

report() {
  local fig="$1" title="$2" unit="$3"
  echo
  echo "$title"
  local base
  base=$(awk -v f="$fig" '$1==f && $2=="eager" && $3=="value" {print $4}' "$out" | median)
  printf '%-10s %16s %10s %16s\n' policy "median $unit" "vs eager" "lock µs/task"
  for p in "${policies[@]}"; do
    local m l
    m=$(awk -v f="$fig" -v p="$p" '$1==f && $2==p && $3=="value" {print $4}' "$out" | median)
    l=$(awk -v f="$fig" -v p="$p" '$1==f && $2==p && $3=="lock" {print $4}' "$out")
    awk -v p="$p" -v m="$m" -v b="$base" -v l="${l:--}" \
      'BEGIN {printf "%-10s %16.3f %9.2fx %16s\n", p, m, m / b, (l == "-" ? "-" : sprintf("%.3f", l))}'
  done
}

echo "overhead: $reps interleaved repetitions; real runs on this machine ($(nproc) cores), no emulation"
figure tasks2 2 "$examples/tasks_overhead" -i "$tasks"
figure tasks4 4 "$examples/tasks_overhead" -i "$tasks"
figure chol 4 "$examples/cholesky_implicit" -size "$chol_size" -nblocks 16
report tasks2 "1. tasks_overhead -i $tasks, STARPU_NCPU=2 (empty tasks)" "µs/task"
report tasks4 "2. tasks_overhead -i $tasks, STARPU_NCPU=4 (empty tasks, lock contention)" "µs/task"
report chol "3. cholesky_implicit -size $chol_size -nblocks 16, STARPU_NCPU=4 (task mix with real work)" "ms"

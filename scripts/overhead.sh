#!/usr/bin/env bash
# Scheduling overhead of every policy of ours (`plb policies`) against
# StarPU's eager, lws, dmda and dmdas: real runs on this machine's CPU
# workers, no emulation, StarPU 1.4.10 (the native prefix of
# scripts/starpu14.sh, which allows more CPU workers than Debian's 1.3;
# our library loaded with STARPU_SCHED_LIB). Two figures, each with
# STARPU_NCPU = 2, 4 and 8 (oversubscribed on a small machine: a
# lock-contention figure):
#  1. tasks_overhead -i TASKS (empty tasks): median "Per task" µs
#     (submission + execution);
#  2. cholesky_implicit -size S -nblocks B (a task graph of small tasks,
#     tiles of 40: B = 24 by default, 2600 tasks; OVERHEAD_NBLOCKS=40 gives
#     11480;
#     tasks of four codelets): median wall time, ms.
# Every (figure, workers) first runs each policy once, uncounted: StarPU's
# model-based policies calibrate their history models and ours learn theirs
# (both kept in one private STARPU_HOME for the whole script). Then the
# counted repetitions are interleaved (each repetition runs every policy
# once); each policy's median is given with its min–max and its ratios to
# eager's and dmda's medians of the same runs. For our policies, one extra
# run with PLB_SUMMARY=1 gives the time the push/pop lock is held per task
# (not in the timed runs: measuring it reads the clock twice per critical
# section). Writes the rows to OUT (default target/overhead.csv).
# Every run has OPENBLAS_NUM_THREADS=1 (one BLAS thread per task, as StarPU
# expects of its CPU workers): with OpenBLAS's own threads, the Cholesky
# figure measured their contention for the cores, not the policy (2 workers,
# 5984 tasks of 40x40: dmda 525-624 ms and eager 709-769 without it, 42-45
# and 32-41 with it).
# Usage: bash scripts/overhead.sh [repetitions (default 5)] [tasks (default 20000)] [OUT] [POLICIES]
#   POLICIES: comma-separated (default: eager, lws, dmda, dmdas and every
#   policy of ours); eager and dmda are always run (the ratios' references).
# Prints figures only; it asserts nothing (timings on a shared machine).
set -euo pipefail
cd "$(dirname "$0")/.."
reps="${1:-5}"
tasks="${2:-20000}"
csv="${3:-target/overhead.csv}"
case "$reps$tasks" in *[!0-9]*)
  echo "usage: bash scripts/overhead.sh [repetitions] [tasks] [OUT] [POLICIES]" >&2
  exit 2
  ;;
esac
# shellcheck source=scripts/lib/starpu14.sh
source scripts/lib/starpu14.sh
starpu14_native_ours overhead
examples="$prefix/lib/starpu/examples"
plb="$PWD/target/release/plb"
[ -x "$examples/tasks_overhead" ] || { echo "overhead: $examples/tasks_overhead not found (bash scripts/setup.sh --all)" >&2; exit 1; }
[ -x "$plb" ] || { echo "overhead: build first (bash scripts/setup.sh --all)" >&2; exit 1; }
read -r -a ours <<<"$("$plb" policies | awk '{print $1}' | tr '\n' ' ')"
starpus=(eager lws dmda dmdas)
policies=("${starpus[@]}" "${ours[@]}")
if [ -n "${4:-}" ]; then
  IFS=, read -r -a asked <<<"$4"
  policies=(eager dmda)
  for p in "${asked[@]}"; do
    [[ " ${policies[*]} " == *" $p "* ]] || policies+=("$p")
  done
  # Only the policies of ours asked for get the summary run.
  chosen=()
  for p in "${ours[@]}"; do [[ " ${policies[*]} " == *" $p "* ]] && chosen+=("$p"); done
  ours=("${chosen[@]}")
fi
# Cholesky: BxB tiles of 40 (B = 24: 2600 tasks); tiles of 20 with few
# tasks (CI).
nblocks="${OVERHEAD_NBLOCKS:-24}"
case "$nblocks" in '' | *[!0-9]* | 0 | 1)
  echo "overhead: OVERHEAD_NBLOCKS must be an integer >= 2" >&2
  exit 2
  ;;
esac
chol_tasks=$((nblocks * (nblocks + 1) * (nblocks + 2) / 6))
chol_size=$((40 * nblocks))
[ "$tasks" -ge 10000 ] || chol_size=$((20 * nblocks))
home="$(mktemp -d)"
out="$(mktemp)"
trap 'rm -rf "$home" "$out"' EXIT

is_ours() { [[ " ${ours[*]} " == *" $1 "* ]]; }

# run FIGURE POLICY NCPU SUMMARY CMD...: prints the figure's value (µs per
# task, or ms) and, with SUMMARY=1, the summary's lock_us, tasks, popped
# and line_pops (pops served by a worker's own line alone).
run() {
  local fig="$1" p="$2" ncpu="$3" summary="$4"
  shift 4
  local schedlib=""
  is_ours "$p" && schedlib="$lib"
  env -u PLB_EMULATE -u LD_PRELOAD -u STARPU_SILENT STARPU_HOME="$home" STARPU_NCPU="$ncpu" \
    STARPU_NOPENCL=0 STARPU_NCUDA=0 STARPU_SCHED="$p" STARPU_SCHED_LIB="$schedlib" \
    LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    OPENBLAS_NUM_THREADS=1 PLB_SUMMARY="$summary" "$@" 2>&1 |
    awk -v fig="$fig" "$OVERHEAD_FIGURE_AWK"'
      /^plb: policy=/ {for (i = 1; i <= NF; i++) {split($i, kv, "="); s[kv[1]] = kv[2]}
                       lock += s["lock_us"]; n += s["tasks"]; pops += s["popped"]; own += s["line_pops"]}
      END {print (v == "" ? "NA" : v), lock + 0, n + 0, pops + 0, own + 0}'
}

figure() {
  local fig="$1" ncpu="$2" p r v lock n pops own
  shift 2
  echo "overhead: $fig, $ncpu CPU workers: calibration and learning runs" >&2
  for p in "${policies[@]}"; do run "$fig" "$p" "$ncpu" "" "$@" >/dev/null; done
  for ((r = 1; r <= reps; r++)); do
    echo "overhead: $fig, $ncpu CPU workers: repetition $r/$reps" >&2
    for p in "${policies[@]}"; do
      read -r v _ _ < <(run "$fig" "$p" "$ncpu" "" "$@")
      [ "$v" != NA ] || { echo "overhead: no figure for $p ($fig, $ncpu workers)" >&2; exit 1; }
      echo "$fig $ncpu $p value $v" >>"$out"
    done
  done
  for p in "${ours[@]}"; do
    read -r _ lock n pops own < <(run "$fig" "$p" "$ncpu" 1 "$@")
    echo "$fig $ncpu $p lock $(awk -v l="$lock" -v n="$n" 'BEGIN {print (n > 0 ? l / n : 0)}')" >>"$out"
    echo "$fig $ncpu $p own $(awk -v o="$own" -v n="$pops" 'BEGIN {print (n > 0 ? o / n : 0)}')" >>"$out"
  done
}

# stats: median min max of the numbers on stdin.
stats() { sort -g | awk '{a[NR]=$1} END {m = (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2); print m, a[1], a[NR]}'; }
values() { awk -v f="$1" -v c="$2" -v p="$3" '$1==f && $2==c && $3==p && $4=="value" {print $5}' "$out"; }

mkdir -p "$(dirname "$csv")"
echo "figure,workers,policy,median,min,max,vs_eager,vs_dmda,lock_us_per_task,own_line_pop_share" >"$csv"
report() {
  local fig="$1" ncpu="$2" title="$3" unit="$4" eager dmda p
  read -r eager _ _ < <(values "$fig" "$ncpu" eager | stats)
  read -r dmda _ _ < <(values "$fig" "$ncpu" dmda | stats)
  echo
  echo "$title, STARPU_NCPU=$ncpu"
  printf '%-10s %12s %20s %9s %9s %14s %10s\n' policy "median $unit" "min–max" "vs eager" "vs dmda" "lock µs/task" "own line"
  for p in "${policies[@]}"; do
    local m lo hi l o
    read -r m lo hi < <(values "$fig" "$ncpu" "$p" | stats)
    l=$(awk -v f="$fig" -v c="$ncpu" -v p="$p" '$1==f && $2==c && $3==p && $4=="lock" {print $5}' "$out")
    o=$(awk -v f="$fig" -v c="$ncpu" -v p="$p" '$1==f && $2==c && $3==p && $4=="own" {print $5}' "$out")
    awk -v p="$p" -v m="$m" -v lo="$lo" -v hi="$hi" -v e="$eager" -v d="$dmda" -v l="${l:--}" -v o="${o:--}" \
      'BEGIN {printf "%-10s %12.3f %9.3f–%-10.3f %8.2fx %8.2fx %14s %10s\n", p, m, lo, hi, m / e, m / d, (l == "-" ? "-" : sprintf("%.3f", l)), (o == "-" ? "-" : sprintf("%.0f%%", 100 * o))}'
    awk -v f="$fig" -v c="$ncpu" -v p="$p" -v m="$m" -v lo="$lo" -v hi="$hi" -v e="$eager" -v d="$dmda" -v l="$l" -v o="$o" \
      'BEGIN {printf "%s,%s,%s,%.4f,%.4f,%.4f,%.4f,%.4f,%s,%s\n", f, c, p, m, lo, hi, m / e, m / d, l, o}' >>"$csv"
  done
}

echo "overhead: $reps interleaved repetitions; real runs on this machine ($(nproc) cores), no emulation; StarPU 1.4.10"
for workers in 2 4 8; do
  figure tasks "$workers" "$examples/tasks_overhead" -i "$tasks"
  figure chol "$workers" "$examples/cholesky_implicit" -size "$chol_size" -nblocks "$nblocks"
done
for workers in 2 4 8; do
  report tasks "$workers" "1. tasks_overhead -i $tasks (empty tasks)" "µs/task"
done
for workers in 2 4 8; do
  report chol "$workers" "2. cholesky_implicit -size $chol_size -nblocks $nblocks ($chol_tasks small tasks)" "ms"
done
echo
echo "written: $csv"

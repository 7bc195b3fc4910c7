#!/usr/bin/env bash
# Two builds of our library against each other, run by run: the two figures
# of scripts/overhead.sh (tasks_overhead -i 20000, µs per task; and
# cholesky_implicit -size 40B -nblocks B, ms; B = OVERHEAD_NBLOCKS, 24 by
# default: 2600 tasks), STARPU_NCPU = 2, 4 and 8 (OVERHEAD_WORKERS, a
# space-separated list, chooses others),
# each policy given, A and B alternating in every repetition after one
# uncounted run of each (our models learned, kept in one private
# STARPU_HOME). Real runs on this machine's CPU workers, StarPU 1.4.10's
# native prefix, no emulation. Prints each (figure, workers, policy): A's and
# B's medians with min–max and B/A; writes every run to OUT. One BLAS
# thread per task (OPENBLAS_NUM_THREADS=1), as in scripts/overhead.sh.
# Usage: bash scripts/overhead-ab.sh LIB_A LIB_B [repetitions (7)] [policies (plb-heft,dada)] [OUT]
#   (LIB_*: libstarpu_plb.so built for the native prefix, e.g. with
#   `source scripts/lib/starpu14.sh; with_starpu14 native cargo build --release -p starpu-plb`
#   in two git worktrees). Prints figures only; it asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ] || [ ! -f "$1" ] || [ ! -f "$2" ]; then
  echo "usage: bash scripts/overhead-ab.sh LIB_A LIB_B [repetitions] [policies] [OUT]" >&2
  exit 2
fi
a="$(realpath "$1")" b="$(realpath "$2")"
reps="${3:-7}"
IFS=, read -r -a policies <<<"${4:-plb-heft,dada}"
csv="${5:-target/overhead-ab.csv}"
case "$reps" in '' | *[!0-9]*) echo "overhead-ab: repetitions must be a number" >&2; exit 2 ;; esac
nblocks="${OVERHEAD_NBLOCKS:-24}"
workers_list="${OVERHEAD_WORKERS:-2 4 8}"
for w in $workers_list; do
  case "$w" in *[!0-9]* | 0) echo "overhead-ab: OVERHEAD_WORKERS must list positive integers" >&2; exit 2 ;; esac
done
case "$nblocks" in '' | *[!0-9]* | 0 | 1) echo "overhead-ab: OVERHEAD_NBLOCKS must be an integer >= 2" >&2; exit 2 ;; esac
# shellcheck source=scripts/lib/starpu14.sh
source scripts/lib/starpu14.sh
prefix="$(starpu14_prefix native)"
examples="$prefix/lib/starpu/examples"
[ -x "$examples/tasks_overhead" ] || { echo "overhead-ab: $examples/tasks_overhead not found (bash scripts/setup.sh --all)" >&2; exit 1; }
home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT

# one FIGURE POLICY NCPU LIB: the figure's value.
one() {
  local fig="$1" p="$2" ncpu="$3" lib="$4" cmd
  if [ "$fig" = tasks ]; then cmd=("$examples/tasks_overhead" -i 20000); else cmd=("$examples/cholesky_implicit" -size $((40 * nblocks)) -nblocks "$nblocks"); fi
  env -u PLB_EMULATE -u LD_PRELOAD -u PLB_SUMMARY STARPU_HOME="$home" STARPU_NCPU="$ncpu" STARPU_NOPENCL=0 \
    STARPU_NCUDA=0 STARPU_SCHED="$p" STARPU_SCHED_LIB="$lib" \
    LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OPENBLAS_NUM_THREADS=1 "${cmd[@]}" 2>&1 |
    awk -v fig="$fig" "$OVERHEAD_FIGURE_AWK"'
      END {print (v == "" ? "NA" : v)}'
}

mkdir -p "$(dirname "$csv")"
echo "figure,workers,policy,library,rep,value" >"$csv"
echo "overhead-ab: A=$a"
echo "overhead-ab: B=$b"
for ncpu in $workers_list; do
  for p in "${policies[@]}"; do
    for fig in tasks chol; do
      one "$fig" "$p" "$ncpu" "$a" >/dev/null
      one "$fig" "$p" "$ncpu" "$b" >/dev/null
      for ((r = 1; r <= reps; r++)); do
        echo "$fig,$ncpu,$p,A,$r,$(one "$fig" "$p" "$ncpu" "$a")" >>"$csv"
        echo "$fig,$ncpu,$p,B,$r,$(one "$fig" "$p" "$ncpu" "$b")" >>"$csv"
      done
    done
  done
done
python3 - "$csv" <<'EOF'
import csv, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    if r["value"] != "NA":
        runs[(r["figure"], int(r["workers"]), r["policy"], r["library"])].append(float(r["value"]))
print(f"{'figure':7} {'workers':>7} {'policy':10} {'A median (min-max)':>24} {'B median (min-max)':>24} {'B/A':>6}")
for key in sorted({k[:3] for k in runs}):
    a, b = runs.get(key + ("A",), []), runs.get(key + ("B",), [])
    if not a or not b:
        print(f"{key[0]:7} {key[1]:>7} {key[2]:10} missing runs")
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    fa = f"{ma:.2f} ({min(a):.2f}-{max(a):.2f})"
    fb = f"{mb:.2f} ({min(b):.2f}-{max(b):.2f})"
    print(f"{key[0]:7} {key[1]:>7} {key[2]:10} {fa:>24} {fb:>24} {mb / ma:6.3f}")
EOF
echo "written: $csv"

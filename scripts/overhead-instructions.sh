#!/usr/bin/env bash
# Two builds of our library against each other by what each task costs in
# our scheduling callbacks, counted rather than timed (so the figures hold
# on a loaded machine): instructions executed inside StarPU's calls into
# our library (push, pop, pre- and post-execution hooks, callees included)
# and calls to the Rust allocator, per task, under valgrind's callgrind.
# Real runs of StarPU 1.4.10's native tasks_overhead (a chain of empty
# tasks, linked by tags) with OVERHEAD_NCPU CPU workers (2 by default; with
# 1 no idle worker polls, and the whole program's instructions per task
# compare policies: printed too), our library loaded with STARPU_SCHED_LIB. Each
# build runs the program twice, with N and 2N tasks; the difference over N
# is the cost per task (start-up and the first placement's one-time work
# cancel out). One private STARPU_HOME, our models learned by one uncounted
# run. Prints A's and B's figures and B/A; asserts nothing.
# Usage: bash scripts/overhead-instructions.sh LIB_A LIB_B [policy (plb-heft)] [N (2000)]
# Needs valgrind (Debian: apt-get install valgrind); each run takes about
# a minute under it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ] || [ ! -f "$1" ] || [ ! -f "$2" ]; then
  echo "usage: bash scripts/overhead-instructions.sh LIB_A LIB_B [policy] [N]" >&2
  exit 2
fi
a="$(realpath "$1")" b="$(realpath "$2")"
policy="${3:-plb-heft}"
n="${4:-2000}"
case "$n" in '' | *[!0-9]* | 0) echo "overhead-instructions: N must be a positive integer" >&2; exit 2 ;; esac
ncpu="${OVERHEAD_NCPU:-2}"
case "$ncpu" in '' | *[!0-9]* | 0) echo "overhead-instructions: OVERHEAD_NCPU must be a positive integer" >&2; exit 2 ;; esac
command -v valgrind >/dev/null || { echo "overhead-instructions: valgrind not found (apt-get install valgrind)" >&2; exit 1; }
# shellcheck source=scripts/lib/starpu14.sh
source scripts/lib/starpu14.sh
prefix="$(starpu14_prefix native)"
program="$prefix/lib/starpu/examples/tasks_overhead"
[ -x "$program" ] || { echo "overhead-instructions: $program not found (bash scripts/setup.sh --all)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# run LIB TASKS OUT [TOOL...]: tasks_overhead under the policy with LIB.
run() {
  local lib="$1" tasks="$2"
  shift 2
  env -u PLB_EMULATE -u LD_PRELOAD -u PLB_SUMMARY STARPU_HOME="$work/home" STARPU_NCPU="$ncpu" \
    STARPU_NOPENCL=0 STARPU_NCUDA=0 STARPU_SCHED="$policy" STARPU_SCHED_LIB="$lib" \
    LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OPENBLAS_NUM_THREADS=1 \
    "$@" "$program" -i "$tasks" >/dev/null 2>&1
}

# counts FILE: instructions inside our callbacks, Rust allocator calls, and
# the whole program's instructions.
counts() {
  local incl total
  incl="$(callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
    { grep -E 'callbacks::(pop_task|push_task|pre_exec_hook|post_exec_hook) \[' || true; } |
    awk '{gsub(",", "", $1); s += $1} END {print s + 0}')"
  total="$(callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1 + 0}')"
  python3 - "$1" "$incl" "$total" <<'PY'
import re, sys
# Calls to the Rust allocator, from the call records (`calls=` after a
# `cfn=` naming one of its entry points).
names, cfn, calls = {}, None, 0
target = re.compile(r"__rust_(alloc|alloc_zeroed|realloc)$")
for line in open(sys.argv[1], errors="replace"):
    if line.startswith("cfn="):
        m = re.match(r"cfn=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
        if m and m.group(2):
            names[m.group(1)] = m.group(2)
        cfn = names.get(m.group(1)) if m else line[4:].strip()
    elif line.startswith("fn="):
        m = re.match(r"fn=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
        if m and m.group(2):
            names[m.group(1)] = m.group(2)
    elif line.startswith("calls=") and cfn and target.search(cfn):
        calls += int(line[6:].split()[0])
print(sys.argv[2], calls, sys.argv[3])
PY
}

echo "overhead-instructions: $policy, tasks_overhead with $n and $((2 * n)) tasks, $ncpu CPU worker(s), under callgrind"
run "$a" "$n"
for side in A B; do
  lib="$a"
  [ "$side" = B ] && lib="$b"
  for tasks in "$n" "$((2 * n))"; do
    echo "overhead-instructions: $side, $tasks tasks" >&2
    run "$lib" "$tasks" valgrind --tool=callgrind --separate-threads=no --callgrind-out-file="$work/$side-$tasks.out"
  done
  read -r i1 c1 t1 < <(counts "$work/$side-$n.out")
  read -r i2 c2 t2 < <(counts "$work/$side-$((2 * n)).out")
  echo "$side $(( (i2 - i1) / n )) $(awk -v a="$c1" -v b="$c2" -v n="$n" 'BEGIN {printf "%.1f", (b - a) / n}') $(( (t2 - t1) / n ))" >>"$work/figures"
done
awk '{i[$1] = $2; c[$1] = $3; t[$1] = $4}
  END {
    printf "%-38s %10s %10s %7s\n", "per task", "A", "B", "B/A"
    printf "%-38s %10d %10d %7.3f\n", "instructions in our callbacks", i["A"], i["B"], (i["A"] > 0 ? i["B"] / i["A"] : 0)
    printf "%-38s %10.1f %10.1f %7.3f\n", "Rust allocations", c["A"], c["B"], (c["A"] > 0 ? c["B"] / c["A"] : 0)
    printf "%-38s %10d %10d %7.3f\n", "instructions, whole program", t["A"], t["B"], t["B"] / t["A"]
  }' "$work/figures"

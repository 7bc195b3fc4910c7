#!/usr/bin/env bash
# Task graphs across nodes (issue 24, §4), REAL: StarPU-MPI's own
# distributed Cholesky (mpi/examples/matrix_decomposition/mpi_cholesky of
# StarPU 1.4.10, as `bash scripts/starpu14.sh native` builds it) under
# mpirun on this machine, 2, 3 and 4 ranks of one CPU worker and 2 ranks
# of two (oversubscribed: a rank count and a placement figure on a 2-core
# machine), the same policy on every rank:
# StarPU's dmdas (the reference), eager and lws, and our task-graph
# policies (plb-heft, dada, dada-cp; loaded with STARPU_SCHED_LIB).
# STARPU_MPI_NOBIND=1: StarPU-MPI's progress thread would otherwise take
# the core it binds to (docs/cluster.md). Every run:
#   * is checked by the program (-check: rank 0 gathers the factor and
#     compares L·Lᵀ with the matrix; it aborts on a mismatch);
#   * has its executed tasks counted on every rank (STARPU_WORKER_STATS)
#     and summed: it must equal the factorisation's task count,
#     nb + nb(nb-1) + nb(nb-1)(nb-2)/6 for nb blocks (every task executes
#     once, on its owner rank);
#   * for our policies, every rank's summary line (PLB_SUMMARY) must name
#     the policy and count the same tasks: our policy scheduled them.
# Repetitions are interleaved (each repetition runs every policy once),
# after one uncounted run of each (StarPU's models calibrated, ours
# learned, in one private STARPU_HOME per rank count). A failed check or a
# wrong count fails the script.
# usage: bash scripts/exp-mpi-dag.sh [--quick] [--out DIR] [--reps N] [--size S] [--nblocks NB]
#   --quick: 2 ranks of one worker, 1 repetition, size 960 with 8 blocks (CI).
# Writes DIR/mpi-dag.csv (every run) and DIR/mpi-dag.md (medians, ratio to
# dmdas). DIR: results/cluster (target/exp-mpi-dag-quick with --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
out=results/cluster reps=5 size=1440 nblocks=12 quick=0
# RANKSxWORKERS per rank.
configs=(2x1 3x1 4x1 2x2)
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --out) out="$2"; shift ;;
    --reps) reps="$2"; shift ;;
    --size) size="$2"; shift ;;
    --nblocks) nblocks="$2"; shift ;;
    *) echo "usage: bash scripts/exp-mpi-dag.sh [--quick] [--out DIR] [--reps N] [--size S] [--nblocks NB]" >&2; exit 2 ;;
  esac
  shift
done
if [ "$quick" = 1 ]; then
  [ "$out" = results/cluster ] && out=target/exp-mpi-dag-quick
  reps=1 size=960 nblocks=8 configs=(2x1)
fi
for v in "$reps" "$size" "$nblocks"; do
  case "$v" in '' | *[!0-9]*) echo "exp-mpi-dag: --reps, --size and --nblocks take whole numbers" >&2; exit 2 ;; esac
done
# shellcheck source=scripts/lib/starpu14.sh
source scripts/lib/starpu14.sh
starpu14_native_ours exp-mpi-dag
prog="$prefix/lib/starpu/mpi/mpi_cholesky"
[ -x "$prog" ] || { echo "exp-mpi-dag: $prog not found (bash scripts/setup.sh --all)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "exp-mpi-dag: mpirun not found (bash scripts/setup.sh)" >&2; exit 1; }
starpus=(dmdas eager lws)
ours=(plb-heft dada dada-cp)
policies=("${starpus[@]}" "${ours[@]}")
expected=$((nblocks + nblocks * (nblocks - 1) + nblocks * (nblocks - 1) * (nblocks - 2) / 6))
mkdir -p "$out"
csv="$out/mpi-dag.csv"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mpirun_flags=(--oversubscribe)
[ "$(id -u)" = 0 ] && mpirun_flags+=(--allow-run-as-root)

# run RANKS WORKERS POLICY: one run; prints "time_ms tasks summaries
# executed-by-ours check".
run() {
  local np="$1" ncpu="$2" p="$3" schedlib="" log="$work/log"
  [[ " ${ours[*]} " == *" $p "* ]] && schedlib="$lib"
  if ! env -u PLB_EMULATE -u LD_PRELOAD mpirun "${mpirun_flags[@]}" -np "$np" \
    -x STARPU_SCHED="$p" -x STARPU_SCHED_LIB="$schedlib" -x STARPU_NCPU="$ncpu" -x STARPU_NOPENCL=0 \
    -x STARPU_NCUDA=0 -x STARPU_MPI_NOBIND=1 -x STARPU_WORKER_STATS=1 -x PLB_SUMMARY=1 \
    -x STARPU_SILENT=1 -x STARPU_HOME="$work/home-${np}x$ncpu" \
    -x LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$prog" -size "$size" -nblocks "$nblocks" -check >"$log" 2>&1; then
    echo "exp-mpi-dag: $p on $np ranks of $ncpu worker(s) failed:" >&2
    tail -15 "$log" >&2
    return 1
  fi
  awk -v p="$p" '
    /^Computation time \(in ms\):/ {t = $5}
    /^\t[0-9]+ task\(s\)$/ {n += $1}
    /^plb: policy=/ {for (i = 1; i <= NF; i++) {split($i, kv, "="); s[kv[1]] = kv[2]}
                     if (s["policy"] == p) {k++; ours += s["executed"]}}
    /comparing results/ {c = 1}
    END {print (t == "" ? "NA" : t), n + 0, k + 0, ours + 0, (c ? "checked" : "unchecked")}' "$log"
}

echo "ranks,workers_per_rank,policy,ours,rep,time_ms,tasks,expected_tasks,summaries,check" >"$csv"
echo "exp-mpi-dag: REAL, StarPU-MPI mpi_cholesky -size $size -nblocks $nblocks ($expected tasks), ranks x workers ${configs[*]}, $reps repetition(s)"
failed=0
for config in "${configs[@]}"; do
  np="${config%x*}" ncpu="${config#*x}"
  echo "exp-mpi-dag: $np ranks of $ncpu worker(s)" >&2
  for p in "${policies[@]}"; do run "$np" "$ncpu" "$p" >/dev/null || failed=1; done
  for ((r = 1; r <= reps; r++)); do
    for p in "${policies[@]}"; do
      if ! read -r t n k executed check < <(run "$np" "$ncpu" "$p"); then failed=1; continue; fi
      is_ours=0
      [[ " ${ours[*]} " == *" $p "* ]] && is_ours=1
      echo "$np,$ncpu,$p,$is_ours,$r,$t,$n,$expected,$k,$check" >>"$csv"
      if [ "$n" != "$expected" ] || [ "$check" != checked ] || [ "$t" = NA ]; then
        echo "exp-mpi-dag: $p on $np ranks of $ncpu worker(s), repetition $r: $n tasks executed (expected $expected), $check, time $t" >&2
        failed=1
      fi
      if [ "$is_ours" = 1 ] && { [ "$k" != "$np" ] || [ "$executed" != "$expected" ]; }; then
        echo "exp-mpi-dag: $p on $np ranks of $ncpu worker(s): $k of $np ranks printed our summary, counting $executed of $expected tasks" >&2
        failed=1
      fi
    done
  done
done
python3 - "$csv" "$out/mpi-dag.md" "$size" "$nblocks" "$expected" <<'EOF'
import csv, statistics, sys
from collections import defaultdict
path, md, size, nb, expected = sys.argv[1:]
times = defaultdict(list)
for r in csv.DictReader(open(path)):
    if r["time_ms"] != "NA":
        times[((int(r["ranks"]), int(r["workers_per_rank"])), r["policy"])].append(float(r["time_ms"]))
lines = [
    f"REAL: StarPU-MPI's distributed Cholesky (`mpi_cholesky -size {size} -nblocks {nb} -check`, StarPU 1.4.10) "
    f"under mpirun on this machine (2 cores: oversubscribed beyond 2 workers), the same policy on every rank; every run checked "
    f"by the program and {expected} tasks executed in all. Median computation time (ms) with min-max, and the "
    f"ratio to dmdas's median.",
    "",
    "| ranks | CPU workers per rank | policy | runs | median ms | min-max | vs dmdas |",
    "| ---: | ---: | --- | ---: | ---: | --- | ---: |",
]
for cfg in sorted({k[0] for k in times}):
    ref = statistics.median(times[(cfg, "dmdas")]) if times.get((cfg, "dmdas")) else None
    for (c, p), v in sorted(times.items(), key=lambda kv: (kv[0][0], statistics.median(kv[1]))):
        if c != cfg:
            continue
        m = statistics.median(v)
        ratio = f"{m / ref:.2f}x" if ref else "-"
        lines.append(f"| {cfg[0]} | {cfg[1]} | {p} | {len(v)} | {m:.1f} | {min(v):.1f}-{max(v):.1f} | {ratio} |")
open(md, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
echo "written: $csv, $out/mpi-dag.md"
exit "$failed"

#!/usr/bin/env bash
# Where the workers' time goes in one SIMULATED run (StarPU-SimGrid 1.4.10):
# StarPU's per-worker time split (STARPU_WORKER_STATS=1: executing, waiting
# for a data transfer, sleeping with no task), summed per worker kind.
# The program runs twice in one private STARPU_HOME and the second run is
# counted, as `plb simgrid` counts ours "after learning".
# It repeats `plb simgrid`'s set-up of a simulated machine
# (src/simgrid/run.rs, `simulated_machine`) and reads StarPU's worker
# statistics again (`worker_stats` there keeps only tasks and executing
# time); these columns in `plb simgrid`'s CSV would replace it.
#
# usage: scripts/simgrid-worker-states.sh [--quick] POLICY MACHINE APP N NBLOCKS [VAR=VALUE...]
#   POLICY   ours (loaded from PLB_SIMGRID_LIB, default
#            target/starpu14-simgrid/release/libstarpu_plb.so) or StarPU's
#   MACHINE  attila, idgraf, mirage or sirocco, optionally :ncuda=M
#   APP      cholesky or lu (StarPU's cholesky_implicit, lu_implicit_example_float)
#   --quick  instead of the arguments: plb-heft, attila, Cholesky 9600/960 (CI)
# Prints one CSV line per worker kind:
#   policy,machine,app,n,nblocks,makespan_ms,kind,workers,tasks,executing_ms,waiting_for_data_ms,sleeping_ms
# Set-up: bash scripts/setup.sh (StarPU 1.4.10's SimGrid build and our library against it).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --quick ]; then
    set -- plb-heft attila cholesky 9600 10
fi
[ $# -ge 5 ] || { sed -n 12,21p "$0" >&2; exit 2; }
policy=$1 machine=$2 app=$3 n=$4 nblocks=$5
shift 5
prefix=${PLB_CACHE:-$HOME/.cache/plb}/starpu-1.4.10/simgrid
lib=${PLB_SIMGRID_LIB:-target/starpu14-simgrid/release/libstarpu_plb.so}
case "$app" in
    cholesky) program=cholesky_implicit ;;
    lu) program=lu_implicit_example_float ;;
    *) echo "APP must be cholesky or lu" >&2; exit 2 ;;
esac
[ -x "$prefix/lib/starpu/examples/$program" ] || { echo "$prefix: no SimGrid build (bash scripts/setup.sh)" >&2; exit 2; }
[ -f "$lib" ] || { echo "$lib not found (bash scripts/setup.sh)" >&2; exit 2; }
lib=$(realpath "$lib")
env_machine=(STARPU_HOSTNAME="${machine%%:*}")
case "$machine" in *ncuda=*) env_machine+=(STARPU_NCUDA="${machine##*ncuda=}") ;; esac
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
for run in 1 2; do
    env -i PATH="$PATH" HOME="$HOME" STARPU_HOME="$home" "${env_machine[@]}" \
        STARPU_PERF_MODEL_DIR="$prefix/share/starpu/perfmodels/sampling" STARPU_NOPENCL=0 \
        STARPU_SCHED="$policy" STARPU_SCHED_LIB="$lib" STARPU_WORKER_STATS=1 "$@" \
        "$prefix/lib/starpu/examples/$program" -size "$n" -nblocks "$nblocks" > "$home/out-$run.txt" 2>&1 \
        || { tail -5 "$home/out-$run.txt" >&2; exit 1; }
done
python3 - "$home/out-2.txt" "$policy" "$machine" "$app" "$n" "$nblocks" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
policy, machine, app, n, nblocks = sys.argv[2:]
m = re.search(r"^\d+\s+(\d+(?:\.\d+)?)\s", text, re.M)
if not m:
    sys.exit("no makespan line in the program's output")
workers = re.findall(
    r"^(CUDA|CPU)\b.*\n\t(\d+) task\(s\)\n\ttime split: total [\d.]+ ms = executing: ([\d.]+) ms"
    r" \+ callback: [\d.]+ ms \+ waiting: ([\d.]+) ms \+ sleeping: ([\d.]+) ms",
    text, re.M)
if not workers:
    sys.exit("no worker time split (STARPU_WORKER_STATS) in the program's output")
kinds = {}
for kind, tasks, executing, waiting, sleeping in workers:
    k = kinds.setdefault(kind, [0, 0, 0.0, 0.0, 0.0])
    k[0] += 1
    k[1] += int(tasks)
    k[2] += float(executing)
    k[3] += float(waiting)
    k[4] += float(sleeping)
print("policy,machine,app,n,nblocks,makespan_ms,kind,workers,tasks,executing_ms,waiting_for_data_ms,sleeping_ms")
for kind, (w, t, e, wa, s) in kinds.items():
    print(f"{policy},{machine},{app},{n},{nblocks},{m.group(1)},{kind},{w},{t},{e:.0f},{wa:.0f},{s:.0f}")
EOF

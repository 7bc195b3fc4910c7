#!/usr/bin/env bash
# Issue 23, the few-task case: `static` with the speeds known (its models
# in the run's STARPU_HOME) and cold (PLB_MODEL_DIR=off: no model file, so
# its first epoch probes), against StarPU's eager, on StarPU's sgemm with
# 16 coarse tasks per iteration (2 iterations). EMULATED: 2 CPU workers,
# worker 0 four times slower (PLB_EMULATE="0:speed=0.25"), as
# `plb experiment dag --configs emulated`.
#
# One uncounted run of eager and of static first (static's models are then
# in the private STARPU_HOME), then REPS interleaved rounds of eager,
# static and static cold.
#
# usage: scripts/exp-static-cold.sh [--quick] [--reps N] [--out DIR]
#   PLB_LIBRARY=<our library for StarPU 1.3> (default target/release/libstarpu_plb.so)
#   STARPU_EXAMPLES_DIR=<StarPU's examples> (default Debian's)
# Writes DIR/static-cold.csv (policy,rep,ms: sgemm's own timing), DIR
# default results/real (target/exp-real-quick with --quick); prints the
# medians [min-max] and their ratios to eager's.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/exp-real.sh
source scripts/lib/exp-real.sh
exp_real_options "$@"
[ "$QUICK" = 1 ] && REPS=1
LIB=${PLB_LIBRARY:-target/release/libstarpu_plb.so}
EXAMPLES=${STARPU_EXAMPLES_DIR:-/usr/lib/x86_64-linux-gnu/starpu/examples}
[ -f "$LIB" ] || { echo "$LIB not found: build with cargo build --release or set PLB_LIBRARY=" >&2; exit 2; }
[ -x "$EXAMPLES/sgemm" ] || { echo "$EXAMPLES/sgemm not found: install starpu-examples (scripts/setup.sh) or set STARPU_EXAMPLES_DIR=" >&2; exit 2; }
LIB=$(realpath "$LIB")
HOME_DIR=$(mktemp -d)
trap 'rm -rf "$HOME_DIR"' EXIT

# run NAME SCHED [VAR=VALUE...]: one sgemm run; prints NAME,REP,ms.
run() {
    local name=$1 sched=$2 out
    shift 2
    out=$(env -i PATH="$PATH" HOME="$HOME" STARPU_HOME="$HOME_DIR" STARPU_SILENT=1 \
        STARPU_SCHED="$sched" STARPU_NCPU=2 STARPU_NOPENCL=0 STARPU_NCUDA=0 \
        PLB_EMULATE="0:speed=0.25" STARPU_PERF_MODEL_HOMOGENEOUS_CPU=0 \
        LD_PRELOAD="$LIB" "$@" "$EXAMPLES/sgemm" -size 2048 -nblocks 4 -iter 20)
    # sgemm prints "x y z ms GFlop/s".
    local ms
    ms=$(awk '$1 ~ /^[0-9]/ { print $4; exit }' <<<"$out")
    [ -n "$ms" ] || { echo "sgemm under $name printed no timing" >&2; exit 1; }
    echo "\"$name\",$rep,$ms"
}

CSV=$OUT/static-cold.csv
echo "policy,rep,ms" > "$CSV"
rep=0
run eager eager > /dev/null
run static static > /dev/null
for rep in $(seq 1 "$REPS"); do
    run eager eager >> "$CSV"
    run static static >> "$CSV"
    run "static (cold: PLB_MODEL_DIR=off)" static PLB_MODEL_DIR=off >> "$CSV"
    echo "exp-static-cold: round $rep/$REPS" >&2
done
python3 - "$CSV" <<'EOF'
import csv, statistics, sys
runs = {}
for r in csv.DictReader(open(sys.argv[1])):
    runs.setdefault(r["policy"], []).append(float(r["ms"]))
eager = statistics.median(runs["eager"])
for name, ms in runs.items():
    m = statistics.median(ms)
    print(f"{name}: {m:.0f} [{min(ms):.0f}-{max(ms):.0f}] ms, {m / eager:.2f}x eager")
EOF
echo "exp-static-cold: $CSV"

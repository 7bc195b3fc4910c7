#!/usr/bin/env bash
# Issue 23, cold start in a REAL run: `plb-heft`'s first run (no model file
# of ours: PLB_MODEL_DIR=off), with StarPU's calibrated predictions standing
# in where ours have none (the default) and with ours alone
# (PLB_STARPU_MODELS=off), against `plb-heft` after one learning run and
# StarPU's eager, dmda and dmdas, on StarPU 1.3's cholesky_implicit. REAL:
# 1 CPU worker + 1 PoCL OpenCL worker (STARPU_OPENCL_ON_CPUS=1), as
# `plb experiment dag --configs opencl`.
#
# In a private STARPU_HOME: 3 calibration runs of dmda
# (STARPU_CALIBRATE=1) and one learning run of plb-heft, none measured;
# then REPS interleaved rounds of every variant.
#
# usage: scripts/exp-heft-cold.sh [--quick] [--reps N] [--out DIR]
#   PLB_LIBRARY=<our library for StarPU 1.3> (default target/release/libstarpu_plb.so)
#   STARPU_EXAMPLES_DIR=<StarPU's examples> (default Debian's)
#   SIZE, NBLOCKS: the matrix (default 1920 and 8: 120 tasks, a small graph
#   where training tasks weigh most; 960 and 4 with --quick)
# Writes DIR/heft-cold.csv (policy,rep,ms: the example's own timing), DIR
# default results/real (target/exp-real-quick with --quick); prints the
# medians [min-max] and their ratios to dmda's.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/exp-real.sh
source scripts/lib/exp-real.sh
exp_real_options "$@"
SIZE=${SIZE:-1920}
NBLOCKS=${NBLOCKS:-8}
if [ "$QUICK" = 1 ]; then REPS=1 SIZE=960 NBLOCKS=4; fi
exp_real_example cholesky_implicit

# run NAME SCHED [VAR=VALUE...]: one cholesky_implicit run; prints NAME,REP,ms.
run() {
    local name=$1 sched=$2 out ms
    shift 2
    out=$(env -i PATH="$PATH" HOME="$HOME" STARPU_HOME="$HOME_DIR" STARPU_SILENT=1 \
        STARPU_SCHED="$sched" STARPU_NCUDA=0 STARPU_OPENCL_ON_CPUS=1 \
        STARPU_NCPU=1 STARPU_NOPENCL=1 LD_PRELOAD="$LIB" "$@" \
        "$EXAMPLES/cholesky_implicit" -size "$SIZE" -nblocks "$NBLOCKS")
    # cholesky_implicit prints "size ms GFlop/s".
    ms=$(awk '$1 ~ /^[0-9]/ { print $2; exit }' <<<"$out")
    [ -n "$ms" ] || { echo "cholesky_implicit under $name printed no timing" >&2; exit 1; }
    echo "\"$name\",$rep,$ms"
}

CSV=$OUT/heft-cold.csv
echo "policy,rep,ms" > "$CSV"
rep=0
for _ in 1 2 3; do run dmda dmda STARPU_CALIBRATE=1 > /dev/null; done
run plb-heft plb-heft > /dev/null
for rep in $(seq 1 "$REPS"); do
    run eager eager >> "$CSV"
    run dmda dmda >> "$CSV"
    run dmdas dmdas >> "$CSV"
    run "plb-heft" plb-heft >> "$CSV"
    run "plb-heft (cold)" plb-heft PLB_MODEL_DIR=off >> "$CSV"
    run "plb-heft (cold, ours alone)" plb-heft PLB_MODEL_DIR=off PLB_STARPU_MODELS=off >> "$CSV"
    echo "exp-heft-cold: round $rep/$REPS" >&2
done
exp_real_medians "$CSV" dmda
echo "exp-heft-cold: $CSV"

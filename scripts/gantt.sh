#!/usr/bin/env bash
# Issue 6 §2, experiment 6: a Gantt chart of one run per policy from
# PLB_TRACE (docs/usage.md, "Trace"): worker on y, time on x, one bar per
# block of the divisible-load API (`block` rows: from the block's start,
# end - compute - transfer, to its completion), coloured by worker, the
# block's units written in bars wide enough.
#
# One run of `plb app mm` per policy of ours (greedy, plb-hac, plb-hec,
# hdss, acosta) on 2 CPU workers with EMULATED heterogeneity
# PLB_EMULATE="0:speed=0.25; 1:latency=20ms" (worker 0 4x slower, worker 1
# +20 ms per task). StarPU's eager and dmda are not charted: the trace is
# written by our policy's hooks, so it is empty under StarPU's policies.
#
# usage: scripts/gantt.sh [--quick] [--app NAME] [--n N] [--out DIR]
#   PLB=<path to plb> (default target/release/plb)
# Writes DIR/gantt-<policy>.csv (the trace) and DIR/real-gantt-<policy>.png
# (DIR default results/real,
# target/exp-real-quick with --quick). --quick: a small size (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/exp-real.sh
source scripts/lib/exp-real.sh
OUT=
APP=mm
N=
QUICK=0
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --app) APP=$2; shift ;;
        --n) N=$2; shift ;;
        --out) OUT=$2; shift ;;
        *) echo "usage: $0 [--quick] [--app NAME] [--n N] [--out DIR]" >&2; exit 2 ;;
    esac
    shift
done
exp_real_out
if [ -z "$N" ]; then
    if [ "$QUICK" = 1 ]; then N=512; else N=2048; fi
fi
export STARPU_SILENT=1
unset STARPU_SCHED PLB_EMULATE LD_PRELOAD || true
start=$SECONDS
for p in greedy plb-hac plb-hec hdss acosta; do
    trace=$OUT/gantt-$p.csv
    rm -f "$trace"
    line=$(PLB_TRACE="$trace" PLB_EMULATE="$EMULATION" "$PLB" app "$APP" --n "$N" --sched "$p" --ncpu 2 2>/dev/null | grep '^plb-app:' || true)
    ms=$(sed -n 's/.* makespan_s=\([^ ]*\).*/\1/p' <<< "$line")
    if [ -z "$ms" ] || ! grep -q ' verify=ok' <<< "$line" || [ ! -s "$trace" ]; then
        echo "gantt: $APP under $p failed: ${line:-no summary line}" >&2; exit 1
    fi
    blocks=$(grep -c '^block,' "$trace" || true)
    echo "EMULATED $APP n=$N $p: makespan $ms s, $blocks blocks, trace $trace" >&2
    # gnuplot data: worker start end units (block rows only), times from
    # the first block's start.
    dat=$OUT/gantt-$p.dat
    awk -F, '$1 == "block" { r[++n] = $0; if (t0 == "" || $4 < t0) t0 = $4 }
        END { for (i = 1; i <= n; i++) { split(r[i], f, ","); printf "%s %.6f %.6f %s\n", f[3], f[4] - t0, f[5] - t0, f[6] } }' \
        "$trace" > "$dat"
    if command -v gnuplot > /dev/null; then
        gnuplot -e "dat='$dat'; png='$OUT/real-gantt-$p.png'; ttl='EMULATED: $APP n=$N under $p, 2 CPU workers (makespan $ms s, $blocks blocks)'" scripts/gantt.gp
    fi
done
command -v gnuplot > /dev/null || echo "gnuplot not found: no plots" >&2
echo "Gantt charts: $OUT/real-gantt-{greedy,plb-hac,plb-hec,hdss,acosta}.png; traces $OUT/gantt-*.csv; wall time $((SECONDS - start)) s"

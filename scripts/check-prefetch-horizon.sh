#!/usr/bin/env bash
# The default prefetch horizon (PLB_PREFETCH_HORIZON=auto) acts through the
# StarPU adapter where 3 or more accelerator memory nodes take part, and only
# there: plb-heft under StarPU-SimGrid on idgraf with 3 and with 2 of its
# GPUs, and with 3 and PLB_PREFETCH_HORIZON=off, each run's PLB_SUMMARY
# line read for prefetch_held= (placed tasks not prefetched at placement).
# Needs target/release/plb and the SimGrid build of our library
# (bash scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/prefetch-horizon-check}
rm -rf "$out"
target/release/plb simgrid --machines idgraf:ncuda=3,idgraf:ncuda=2 --cases cholesky:19200 \
  --policies 'plb-heft,plb-heft+PLB_PREFETCH_HORIZON=off' --no-cold --no-graph-bound --out "$out" >/dev/null
source scripts/lib/checks.sh
held() { # machine, policy label as in the run folder's name
  summary_field "$out" "$1-cholesky-19200-tile960-$2-0" prefetch_held
}
three=$(held idgraf:ncuda=3 plb-heft)
two=$(held idgraf:ncuda=2 plb-heft)
off=$(held idgraf:ncuda=3 plb-heft+PLB_PREFETCH_HORIZON=off)
echo "check-prefetch-horizon: prefetches held back: 3 GPUs $three, 2 GPUs $two, 3 GPUs with off $off"
verdict check-prefetch-horizon "expected some with 3 GPUs, none with 2 or with off" "$three" -gt 0 -a "$two" -eq 0 -a "$off" -eq 0

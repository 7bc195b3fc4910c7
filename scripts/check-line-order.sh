#!/usr/bin/env bash
# plb-heft's line order (PLB_LINE_ORDER, auto by default) acts through the
# StarPU adapter where the accelerators span 3 or more memory nodes, and
# only there: plb-heft under StarPU-SimGrid, LU 9600, on idgraf with its 8
# GPUs, the same with PLB_LINE_ORDER=arrival, and on idgraf with 2 GPUs,
# each run's PLB_SUMMARY line read for line_jumps= (placed tasks queued
# ahead of a task of their priority queued before them). Needs
# target/release/plb and the SimGrid build of our library (bash
# scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/line-order-check}
rm -rf "$out"
target/release/plb simgrid --machines idgraf,idgraf:ncuda=2 --cases lu:9600 \
  --policies 'plb-heft,plb-heft+PLB_LINE_ORDER=arrival' --no-cold --no-graph-bound --out "$out" >/dev/null
source scripts/lib/checks.sh
jumps() { # machine, policy label as in the run folder's name
  summary_field "$out" "$1-lu-9600-tile960-$2-0" line_jumps
}
eight=$(jumps idgraf plb-heft)
arrival=$(jumps idgraf plb-heft+PLB_LINE_ORDER=arrival)
two=$(jumps idgraf:ncuda=2 plb-heft)
echo "check-line-order: tasks queued ahead: idgraf with 8 GPUs $eight, with arrival $arrival, with 2 GPUs $two"
verdict check-line-order "expected some with 8 GPUs, none with arrival or with 2 GPUs" "$eight" -gt 0 -a "$arrival" -eq 0 -a "$two" -eq 0

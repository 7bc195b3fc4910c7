#!/usr/bin/env bash
# plb-heft's CPU offload (PLB_CPU_OFFLOAD, on by default) acts through the
# StarPU adapter where CPU workers are plentiful, and only there: plb-heft
# under StarPU-SimGrid, LU 19200, on sirocco with 1 GPU (23 CPU workers),
# the same with PLB_CPU_OFFLOAD=off, and on idgraf with its 8 GPUs (4 CPU
# workers, fewer than 2 per GPU), each run's PLB_SUMMARY line read for
# cpu_offloads= (tasks sent to a CPU worker rather than to the accelerator
# finishing them first). Needs target/release/plb and the SimGrid build of
# our library (bash scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/cpu-offload-check}
rm -rf "$out"
target/release/plb simgrid --machines sirocco:ncuda=1,idgraf --cases lu:19200 \
  --policies 'plb-heft,plb-heft+PLB_CPU_OFFLOAD=off' --no-cold --no-graph-bound --out "$out" >/dev/null
source scripts/lib/checks.sh
offloads() { # machine, policy label as in the run folder's name
  summary_field "$out" "$1-lu-19200-tile960-$2-0" cpu_offloads
}
on=$(offloads sirocco:ncuda=1 plb-heft)
off=$(offloads sirocco:ncuda=1 plb-heft+PLB_CPU_OFFLOAD=off)
few=$(offloads idgraf plb-heft)
echo "check-cpu-offload: tasks offloaded: sirocco with 1 GPU $on, with off $off, idgraf with 8 GPUs and 4 CPU workers $few"
verdict check-cpu-offload "expected some on sirocco with 1 GPU, none with off or on idgraf" "$on" -gt 0 -a "$off" -eq 0 -a "$few" -eq 0

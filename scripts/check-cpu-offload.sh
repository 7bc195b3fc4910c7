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
offloads() { # machine, policy label as in the run folder's name
  local f="$out/runs/$1-lu-19200-tile960-$2-0/stderr.txt"
  [ -f "$f" ] || { echo "check-cpu-offload: no $f" >&2; exit 1; }
  grep -o 'plb: policy=plb-heft .*' "$f" | grep -o 'cpu_offloads=[0-9]*' | cut -d= -f2
}
on=$(offloads sirocco:ncuda=1 plb-heft)
off=$(offloads sirocco:ncuda=1 plb-heft+PLB_CPU_OFFLOAD=off)
few=$(offloads idgraf plb-heft)
echo "check-cpu-offload: tasks offloaded: sirocco with 1 GPU $on, with off $off, idgraf with 8 GPUs and 4 CPU workers $few"
if [ "$on" -gt 0 ] && [ "$off" -eq 0 ] && [ "$few" -eq 0 ]; then
  echo "check-cpu-offload: ok"
else
  echo "check-cpu-offload: FAIL: expected some on sirocco with 1 GPU, none with off or on idgraf" >&2
  exit 1
fi

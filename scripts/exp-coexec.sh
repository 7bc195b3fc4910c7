#!/usr/bin/env bash
# Issue 13: one data-parallel kernel co-executed on every PU, as in the
# Sigmoid paper. Every balancer of ours (static, dynamic, hguided,
# adaptive, sigmoid, plb-hac, plb-hec, hdss, acosta, greedy) and StarPU's
# eager and calibrated dmda (equal tasks) on binomial and nbody (regular),
# mandelbrot and raytrace (irregular):
#   real runs      pocl: 1 CPU worker + 1 PoCL OpenCL worker (REAL devices);
#                  emu4, emu10, latency: 2 CPU workers, EMULATED 1:4, 1:10
#                  and a latency-bound accelerator (PLB_EMULATE);
#   simulated      single nodes A, B, D of the PLB-HAC platform (SIMULATED),
#                  irregular kernels with their per-row cost profile, and
#                  the BestHG sweep.
# Metrics: balance, speedup over the fastest PU alone, maximum achievable
# speedup (from solo runs), co-execution efficiency, MODELLED energy and
# EDP normalised to the fastest PU alone (RAPL/NVML detection reported).
#
# usage: scripts/exp-coexec.sh [--quick] [any `plb experiment coexec` option]
#   PLB=<path to plb> (default target/release/plb)
# Writes DIR/coexec.{csv,md}, DIR/besthg-sweep.md, DIR/traces/*.csv and the
# PNG plots (DIR: results/coexec; target/exp-coexec-quick with --quick).
# --quick: small sizes, 1 repetition, configurations pocl and emu4 (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
PLB=${PLB:-target/release/plb}
[ -x "$PLB" ] || cargo build --release -q
out=results/coexec
for a in "$@"; do
    [ "$a" = --quick ] && out=target/exp-coexec-quick
done
case " $* " in
    *" --out "*) "$PLB" experiment coexec "$@" ;;
    *) "$PLB" experiment coexec --out "$out" "$@" ;;
esac

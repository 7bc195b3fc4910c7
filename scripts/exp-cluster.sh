#!/usr/bin/env bash
# Issue 14: partitioning across nodes (docs/cluster.md).
#   REAL runs      plb app mm-mpi under mpirun on this machine, 2 to 4
#                  ranks with EMULATED per-rank heterogeneity (speed
#                  factors, latencies) and one rank with a PoCL OpenCL
#                  worker; every algorithm (fpm-hier, plb-hac,
#                  multiple-cpm, single-cpm, homogeneous), 3 repetitions
#                  interleaved: makespan, INPA rounds and convergence,
#                  shares against the ideal ones, traffic CMA vs strips;
#   SIMULATED      the paper's Fig. 5 on its 90 Grenoble nodes
#                  (platforms/grenoble.txt), and the FPM partitioning's cost
#                  on 10 to 1,000 nodes of 8 devices.
# usage: scripts/exp-cluster.sh [--quick] [any `plb experiment cluster` option]
#   PLB=<path to plb> (default target/release/plb)
# Writes DIR/cluster.md, DIR/cluster-real.csv, DIR/cluster-sim-fig5.{csv,png}
# (DIR: results/cluster; target/exp-cluster-quick with --quick).
# --quick: 2 ranks, 3 algorithms, 1 repetition, 3 values of N (CI, a few seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
PLB=${PLB:-target/release/plb}
[ -x "$PLB" ] || cargo build --release -q
out=results/cluster
for a in "$@"; do
    [ "$a" = --quick ] && out=target/exp-cluster-quick
done
case " $* " in
    *" --out "*) "$PLB" experiment cluster "$@" ;;
    *) "$PLB" experiment cluster --out "$out" "$@" ;;
esac

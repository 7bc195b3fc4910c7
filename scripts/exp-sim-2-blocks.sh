#!/usr/bin/env bash
# Reproduces, SIMULATED on the papers' platforms, issue 6 §2 experiment 2: block-size distribution among the PUs at the end of the training against the optimum (PLB-HAC Fig. 5b, PLB-HeC Fig. 6).
# Usage: bash scripts/exp-sim-2-blocks.sh [--quick] [--reps N]
#   full:    results/sim/exp2-blocks*.csv and docs/img/sim-blocks*.png (see docs/results.md)
#   --quick: reduced sizes, 1 repetition (CI), written under target/exp-sim-quick/ instead
# Runs target/release/plb simulate exp2 (built with cargo); needs gnuplot (scripts/setup.sh). Every number in the CSV is simulated
# virtual time on true curves from published peaks (docs/simulator.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/exp-sim.sh
source scripts/lib/exp-sim.sh
exp_sim 2 blocks "$@"
gnuplot -e "exp='2'; csv='$csv'; out='$out'" scripts/plot-sim.gnuplot
echo "exp-sim-2: wrote $csv and $out*.png"

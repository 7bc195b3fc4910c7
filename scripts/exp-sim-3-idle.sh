#!/usr/bin/env bash
# Reproduces, SIMULATED on the papers' platforms, issue 6 §2 experiment 3: idle time per PU class (PLB-HAC Fig. 5a, PLB-HeC Fig. 7).
# Usage: bash scripts/exp-sim-3-idle.sh [--quick] [--reps N]
#   full:    results/sim/exp3-idle*.csv and docs/img/sim-idle*.png (see docs/results.md)
#   --quick: reduced sizes, 1 repetition (CI), written under target/exp-sim-quick/ instead
# Runs target/release/plb simulate exp3 (built with cargo); needs gnuplot (scripts/setup.sh). Every number in the CSV is simulated
# virtual time on true curves from published peaks (docs/simulator.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/exp-sim.sh
source scripts/lib/exp-sim.sh
exp_sim 3 idle "$@"
gnuplot -e "exp='3'; csv='$csv'; out='$out'" scripts/plot-sim.gnuplot
awk -F, '!/^#/ && NR > 3 { printf "SIMULATED %-8s %-18s %-12s %s idle %6.2f %% [%.2f, %.2f]\n", $1, $2 "/" $3, $4, $5, $8, $10, $11 }' "$csv"
echo "exp-sim-3: wrote $csv and $out*.png"

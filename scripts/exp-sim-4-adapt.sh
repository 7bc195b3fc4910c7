#!/usr/bin/env bash
# Reproduces, SIMULATED on the papers' platforms, issue 6 §2 experiment 4: adaptability, a competing load makes GPU A 2x slower at mid-run, block sizes over time per PU (PLB-HAC Fig. 6).
# Usage: bash scripts/exp-sim-4-adapt.sh [--quick] [--reps N]
#   full:    results/sim/exp4-adapt*.csv and docs/img/sim-adapt*.png (see docs/results.md)
#   --quick: reduced sizes, 1 repetition (CI), written under target/exp-sim-quick/ instead
# Runs target/release/plb simulate exp4 (built with cargo); needs gnuplot (scripts/setup.sh). Every number in the CSV is simulated
# virtual time on true curves from published peaks (docs/simulator.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/exp-sim.sh
source scripts/lib/exp-sim.sh
exp_sim 4 adapt "$@"
summary="${csv%.csv}-summary.csv"
change=$(awk -F, '!/^#/ && NR > 3 { print $3; exit }' "$summary")
gnuplot -e "exp='4'; csv='$csv'; out='$out'; change='$change'" scripts/plot-sim.gnuplot
awk -F, '!/^#/ && NR > 3 { printf "SIMULATED %-12s makespan %.3f s (x%.3f the no-change optimum)  GPU A share before %.1f %% after %.1f %% (optimum %.1f -> %.1f %%)\n", $1, $8, $12, $16, $20, $6, $7 }' "$summary"
echo "exp-sim-4: wrote $csv and $out*.png"

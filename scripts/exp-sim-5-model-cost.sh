#!/usr/bin/env bash
# Reproduces, SIMULATED on the papers' platforms, issue 6 §2 experiment 5: cost of the model evaluation (fits + solve) per step, IPOPT against the fast solver, versus the number of PUs.
# Usage: bash scripts/exp-sim-5-model-cost.sh [--quick] [--reps N]
#   full:    results/sim/exp5-model-cost*.csv and docs/img/sim-model-cost*.png (see docs/results.md)
#   --quick: reduced sizes, 1 repetition (CI), written under target/exp-sim-quick/ instead
# Runs target/release/plb simulate exp5 (built with cargo); needs gnuplot (scripts/setup.sh). Every number in the CSV is simulated
# virtual time on true curves from published peaks (docs/simulator.md), except the
# policy costs, which are wall-clock times measured on the machine running this script.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/exp-sim.sh
source scripts/lib/exp-sim.sh
exp_sim 5 model-cost "$@"
sed -i "1i # machine: $(nproc) vCPUs, load average $(cut -d" " -f1-3 /proc/loadavg) after the run (shared with other jobs)" "$csv"
gnuplot -e "exp='5'; csv='$csv'; out='$out'; solve='${csv%.csv}-solve.csv'" scripts/plot-sim.gnuplot
awk -F, '!/^#/ && NR > 4 { printf "MEASURED %4d PUs %-8s %-6s %5.1f steps  %.3f ms per step [%.3f, %.3f]  worst call %.3f ms\n", $1, $2, $3, $5, $6, $8, $9, $10 }' "$csv"
echo "exp-sim-5: wrote $csv and $out*.png"

#!/usr/bin/env bash
# Reproduces, SIMULATED on the papers' platforms, issue 6 §2 experiment 1: speedup over greedy and makespan / optimum versus the number of machines (1-5) and the input size, MM, GRN, k-means, Black-Scholes, every policy (PLB-HAC Fig. 4, PLB-HeC Figs. 4-5).
# Usage: bash scripts/exp-sim-1-speedup.sh [--quick] [--reps N]
#   full:    results/sim/exp1-speedup*.csv and docs/img/sim-speedup*.png (see docs/results.md)
#   --quick: reduced sizes, 1 repetition (CI), written under target/exp-sim-quick/ instead
# Runs target/release/plb simulate exp1 (built with cargo); needs gnuplot (scripts/setup.sh). Every number in the CSV is simulated
# virtual time on true curves from published peaks (docs/simulator.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/exp-sim.sh
source scripts/lib/exp-sim.sh
exp_sim 1 speedup "$@"
gnuplot -e "exp='1'; csv='$csv'; out='$out'" scripts/plot-sim.gnuplot
# Key numbers: every policy on the full platforms at the largest inputs.
awk -F, '!/^#/ && NR > 3 { if ($5+0 > m[$1]) m[$1] = $5+0; if ($3+0 > s[$1 FS $2]) s[$1 FS $2] = $3+0; row[NR] = $0 } END { for (i in row) { split(row[i], f, ","); if (f[5]+0 == m[f[1]] && f[3]+0 == s[f[1] FS f[2]]) printf "SIMULATED %-8s %-13s %-12s %2d PUs  speedup over greedy %.3f [%.3f, %.3f]  makespan/opt %.3f [%.3f, %.3f]\n", f[1], f[2] "/" f[3], f[7], f[6], f[18], f[20], f[21], f[14], f[16], f[17] } }' "$csv" | sort
echo "exp-sim-1: wrote $csv and $out*.png"

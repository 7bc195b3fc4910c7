#!/usr/bin/env bash
# Reproduces, SIMULATED on the papers' platforms, issue 6 §2 experiment 5: cost of the model evaluation (fits + solve) per step, IPOPT against the fast solver, versus the number of PUs.
# Usage: bash scripts/exp-sim-5-model-cost.sh [--quick] [--reps N]
#   full:    results/sim/exp5-model-cost*.csv and docs/img/sim-model-cost*.png (see docs/results/simulated.md)
#   --quick: reduced sizes, 1 repetition (CI), written under target/exp-sim-quick/ instead
# Needs cargo and gnuplot (scripts/setup.sh). Every number in the CSV is simulated
# virtual time on true curves from published peaks (docs/simulator.md), except the\n# policy costs, which are wall-clock times measured on the machine running this
set -euo pipefail
cd "$(dirname "$0")/.."
opts=()
quick=0
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1; opts+=(--quick) ;;
        --reps) [ $# -ge 2 ] || { echo "usage: $0 [--quick] [--reps N]" >&2; exit 2; }; opts+=(--reps "$2"); shift ;;
        *) echo "usage: $0 [--quick] [--reps N]" >&2; exit 2 ;;
    esac
    shift
done
if [ "$quick" = 1 ]; then csv_dir=target/exp-sim-quick; img_dir=target/exp-sim-quick; else csv_dir=results/sim; img_dir=docs/img; fi
mkdir -p "$csv_dir" "$img_dir"
command -v gnuplot >/dev/null || { echo "exp-sim-5: gnuplot not found (scripts/setup.sh installs gnuplot-nox)" >&2; exit 1; }
cargo build --release -p plb-core --examples
sim="${CARGO_TARGET_DIR:-target}/release/examples/simulate"
csv="$csv_dir/exp5-model-cost.csv"
start=$(date +%s.%N)
"$sim" exp5 ${opts[@]+"${opts[@]}"} --out "$csv"
echo "exp-sim-5: simulation $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
sed -i "1i # machine: $(nproc) vCPUs, load average $(cut -d" " -f1-3 /proc/loadavg) after the run (shared with other jobs)" "$csv"
gnuplot -e "exp='5'; csv='$csv'; out='$img_dir/sim-model-cost'; solve='${csv%.csv}-solve.csv'" scripts/plot-sim.gnuplot
awk -F, '!/^#/ && NR > 4 { printf "MEASURED %4d PUs %-8s %-6s %5.1f steps  %.3f ms per step [%.3f, %.3f]  worst call %.3f ms\n", $1, $2, $3, $5, $6, $8, $9, $10 }' "$csv"
echo "exp-sim-5: wrote $csv and $img_dir/sim-model-cost*.png"

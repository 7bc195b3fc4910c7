#!/usr/bin/env bash
# Reproduces, SIMULATED on the papers' platforms, issue 6 §2 experiment 3: idle time per PU class (PLB-HAC Fig. 5a, PLB-HeC Fig. 7).
# Usage: bash scripts/exp-sim-3-idle.sh [--quick] [--reps N]
#   full:    results/sim/exp3-idle*.csv and docs/img/sim-idle*.png (see docs/results/simulated.md)
#   --quick: reduced sizes, 1 repetition (CI), written under target/exp-sim-quick/ instead
# Needs cargo and gnuplot (scripts/setup.sh). Every number in the CSV is simulated
# virtual time on true curves from published peaks (docs/simulator.md).
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
command -v gnuplot >/dev/null || { echo "exp-sim-3: gnuplot not found (scripts/setup.sh installs gnuplot-nox)" >&2; exit 1; }
cargo build --release -p plb-core --examples
sim="${CARGO_TARGET_DIR:-target}/release/examples/simulate"
csv="$csv_dir/exp3-idle.csv"
start=$(date +%s.%N)
"$sim" exp3 ${opts[@]+"${opts[@]}"} --out "$csv"
echo "exp-sim-3: simulation $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
gnuplot -e "exp='3'; csv='$csv'; out='$img_dir/sim-idle'" scripts/plot-sim.gnuplot
awk -F, '!/^#/ && NR > 3 { printf "SIMULATED %-8s %-18s %-12s %s idle %6.2f %% [%.2f, %.2f]\n", $1, $2 "/" $3, $4, $5, $8, $10, $11 }' "$csv"
echo "exp-sim-3: wrote $csv and $img_dir/sim-idle*.png"

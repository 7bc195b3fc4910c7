#!/usr/bin/env bash
# Reproduces, SIMULATED on the papers' platforms, issue 6 §2 experiment 4: adaptability, a competing load makes GPU A 2x slower at mid-run, block sizes over time per PU (PLB-HAC Fig. 6).
# Usage: bash scripts/exp-sim-4-adapt.sh [--quick] [--reps N]
#   full:    results/sim/exp4-adapt*.csv and docs/img/sim-adapt*.png (see docs/results/simulated.md)
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
command -v gnuplot >/dev/null || { echo "exp-sim-4: gnuplot not found (scripts/setup.sh installs gnuplot-nox)" >&2; exit 1; }
cargo build --release -p plb-core --examples
sim="${CARGO_TARGET_DIR:-target}/release/examples/simulate"
csv="$csv_dir/exp4-adapt.csv"
start=$(date +%s.%N)
"$sim" exp4 ${opts[@]+"${opts[@]}"} --out "$csv"
echo "exp-sim-4: simulation $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
summary="${csv%.csv}-summary.csv"
change=$(awk -F, '!/^#/ && NR > 3 { print $3; exit }' "$summary")
gnuplot -e "exp='4'; csv='$csv'; out='$img_dir/sim-adapt'; change='$change'" scripts/plot-sim.gnuplot
awk -F, '!/^#/ && NR > 3 { printf "SIMULATED %-12s makespan %.3f s (x%.3f the no-change optimum)  GPU A share before %.1f %% after %.1f %% (optimum %.1f -> %.1f %%)\n", $1, $8, $12, $16, $20, $6, $7 }' "$summary"
echo "exp-sim-4: wrote $csv and $img_dir/sim-adapt*.png"

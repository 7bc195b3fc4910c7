#!/usr/bin/env bash
# Regenerates docs/img/models.png: fits four synthetic processing units with
# plb-core (core/examples/fit_curves.rs) and plots their samples (compute +
# transfer time), the outliers the fitter left out, and the fitted
# E = F + G, drawn to 1.3x the largest size so the linear extrapolation
# shows. Needs gnuplot (Debian package gnuplot-nox).
# Usage: bash scripts/plot-models.sh [output.png]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/img/models.png}"
command -v gnuplot >/dev/null 2>&1 || {
  echo "plot-models: gnuplot not found; install the Debian package gnuplot-nox" >&2
  exit 1
}
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cargo run --release -q -p plb-core --example fit_curves -- "$tmp" >"$tmp/fits.txt"
mkdir -p "$(dirname "$out")"
gnuplot <<GP
set terminal pngcairo size 1400,1000 font "DejaVu Sans,11"
set output "$out"
set multiplot layout 2,2 title "Fitted performance models E = F + G of four synthetic PUs (simulated data)" font ",14"
set key top left box opaque
set grid
set xlabel "block size x (work units, thousands)"
set ylabel "time (s)"
set yrange [0:*]
set xrange [0:*]
do for [i=1:4] {
  set title system("cat '$tmp/title-".i.".txt'") font ",9" noenhanced
  plot "$tmp/curve-".i.".dat" using (\$1/1000):2 with lines lw 2 lc rgb "#1f77b4" title "fitted E(x)", \
       "$tmp/samples-".i.".dat" using (\$1/1000):2 with points pt 7 ps 0.8 lc rgb "#333333" title "samples", \
       "$tmp/outliers-".i.".dat" using (\$1/1000):2 with points pt 2 ps 1.6 lw 2 lc rgb "#d62728" title "outliers (left out)"
}
unset multiplot
GP
echo "plot-models: wrote $out"

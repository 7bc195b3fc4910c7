#!/usr/bin/env bash
# DADA's affinity trade-off from a `plb simgrid` CSV that ran dada and
# dada-cp at several PLB_DADA_ALPHA values (policies named dada,
# dada+PLB_DADA_ALPHA=A, dada-cp, dada-cp+PLB_DADA_ALPHA=A; plain names are
# the default alpha, 0.5): simulated makespan and GiB moved against alpha,
# one line per (machine, case, policy). SIMULATED (StarPU-SimGrid).
# Usage: bash scripts/plot-dada-alpha.sh SIMGRID.csv OUT.png
set -euo pipefail
csv=$1; png=$2
dat=$(mktemp); trap 'rm -f "$dat"' EXIT
# One block per (machine, case, policy), rows sorted by alpha.
awk -F, 'NR > 1 && ($5 ~ /^dada(-cp)?(\+PLB_DADA_ALPHA=[0-9.]+)?$/) {
  split($5, p, "+"); a = 0.5
  if (p[2] != "") { split(p[2], kv, "="); a = kv[2] }
  key = $1 " " $2 ":" $3 " " p[1]
  print key "\t" a "\t" $8 "\t" $10
}' "$csv" | sort -t$'\t' -k1,1 -k2,2n | awk -F'\t' '
  $1 != last { if (NR > 1) printf "\n\n"; printf "\"%s\"\n", $1; last = $1 }
  { print $2, $3, $4 }' > "$dat"
n=$(grep -c '^"' "$dat" || true)
[ "$n" -gt 0 ] || { echo "plot-dada-alpha: no dada runs in $csv" >&2; exit 1; }
gnuplot <<GP
set terminal pngcairo size 1200,500
set output '$png'
set multiplot layout 1,2 title "SIMULATED (StarPU-SimGrid): DADA's affinity share alpha (PLB_DADA_ALPHA)" noenhanced
set key outside bottom center horizontal noenhanced font ',8'
set xlabel 'alpha'
set ylabel 'makespan / makespan at alpha = 0'
plot for [i=0:$((n-1))] '$dat' index i using 1:(\$2/(column(0)==0 ? (a0=\$2) : a0)) with linespoints title columnheader(1)
set ylabel 'GiB moved'
plot for [i=0:$((n-1))] '$dat' index i using 1:3 with linespoints title columnheader(1)
unset multiplot
GP
echo "plot-dada-alpha: $png"

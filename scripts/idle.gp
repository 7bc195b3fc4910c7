# Clustered bars: idle % per case and PU class (rows) and policy (columns).
# gnuplot -e "dat='FILE'; png='OUT.png'; ttl='TITLE'" scripts/idle.gp
# FILE: header "case policy1 policy2 ...", then one row per case.
set terminal pngcairo size 1100,520
set output png
set title ttl noenhanced
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel 'idle % of the makespan (mean)'
set yrange [0:100]
set key outside right noenhanced
set xtics noenhanced rotate by -20
set grid ytics
ncol = system("head -1 " . dat . " | wc -w") + 0
plot for [i=2:ncol] dat using i:xtic(1) title columnheader(i)

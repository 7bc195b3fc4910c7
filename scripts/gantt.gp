# Gantt chart of a PLB_TRACE's blocks (scripts/gantt.sh).
# gnuplot -e "dat='FILE'; png='OUT.png'; ttl='TITLE'" scripts/gantt.gp
# FILE rows: worker start_s end_s units
set terminal pngcairo size 1100,360
set output png
set title ttl noenhanced font ',10'
set xlabel 'time since the first block (s)'
set ylabel 'StarPU worker'
set yrange [-0.6:1.6]
set ytics ('worker 0 (4x slower)' 0, 'worker 1 (+20 ms/task)' 1)
set xrange [0:*]
set grid xtics
unset key
set style fill solid 0.7 border lc rgb 'black'
stats dat using 3 nooutput
xmax = STATS_max
# bars: boxxyerror centred on the block, half height 0.3
plot dat using (($2 + $3) / 2):1:(($3 - $2) / 2):(0.3):($1 == 0 ? 0x4477aa : 0xcc6677) \
        with boxxyerror lc rgb variable, \
     '' using (($2 + $3) / 2):1:(($3 - $2) > 0.04 * xmax ? sprintf('%d', $4) : '') \
        with labels font ',7' tc rgb 'white'

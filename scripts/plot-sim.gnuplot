# Plots of the SIMULATED experiments of issue 6 §2 (scripts/exp-sim-*.sh).
# Usage: gnuplot -e "exp='1'; csv='results/sim/exp1.csv'; out='docs/img/sim-exp1'" scripts/plot-sim.gnuplot
#   exp1: out-<platform>.png (vs machines) and out-size-<platform>.png (vs input size)
#   exp2, exp3: out.png; exp4: out.png (change='<seconds>'); exp5: out.png (solve='<csv>')
# Every title says SIMULATED. Rows are selected with awk (lines must not be
# broken by filtered-out rows).

set datafile separator ','
set terminal pngcairo size 1600,820 font 'Sans,10' noenhanced
set grid
set key top left font ',8'

# `< awk` pipe over the CSV's data rows satisfying COND (awk syntax).
sel(cond) = sprintf("< awk -F, '!/^#/ && h++ && %s' %s", cond, csv)

balancers = 'greedy_W/64 hdss acosta plb-hec plb-hac'
bal_title(b) = b eq 'greedy_W/64' ? 'greedy (W/64)' : b eq 'hdss' ? 'HDSS' : b eq 'acosta' ? 'Acosta' : b eq 'plb-hec' ? 'PLB-HeC' : b eq 'plb-hac' ? 'PLB-HAC' : b
apps = 'mm grn kmeans blackscholes'
app_title(a) = a eq 'mm' ? 'MM' : a eq 'grn' ? 'GRN' : a eq 'kmeans' ? 'k-means' : 'Black-Scholes'

if (exp eq '1') {
    do for [plat in 'plb-hac plb-hec'] {
        pname = plat eq 'plb-hac' ? 'PLB-HAC machines A-E' : 'PLB-HeC machines A-D'
        # Versus the number of machines, at each application's largest size.
        set output sprintf('%s-%s.png', out, plat)
        set multiplot layout 2,4 title sprintf('SIMULATED: %s, largest input per application, mean and min/max over the repetitions (3 %% noise)', pname)
        set xlabel 'machines'
        set xtics 1
        do for [app in apps] {
            # The app's largest size on this platform, then its rows.
            big(b) = sprintf("< awk -F, 'NR==FNR { if (!/^#/ && $1==\"%s\" && $2==\"%s\" && $3+0 > m) m = $3+0; next } !/^#/ && $1==\"%s\" && $2==\"%s\" && $3+0==m && $7==\"%s\"' %s %s", plat, app, plat, app, b, csv, csv)
            set ylabel 'speedup over greedy (W/64)'
            set title sprintf('%s: speedup over greedy', app_title(app))
            plot for [b in balancers] big(b) using 5:18:20:21 with yerrorlines title bal_title(b)
        }
        do for [app in apps] {
            big(b) = sprintf("< awk -F, 'NR==FNR { if (!/^#/ && $1==\"%s\" && $2==\"%s\" && $3+0 > m) m = $3+0; next } !/^#/ && $1==\"%s\" && $2==\"%s\" && $3+0==m && $7==\"%s\"' %s %s", plat, app, plat, app, b, csv, csv)
            set ylabel 'makespan / optimum'
            set title sprintf('%s: makespan / one-block optimum', app_title(app))
            plot for [b in balancers] big(b) using 5:14:16:17 with yerrorlines title bal_title(b)
        }
        unset multiplot
        # Versus the input size, on every machine of the platform.
        set output sprintf('%s-size-%s.png', out, plat)
        set multiplot layout 2,4 title sprintf('SIMULATED: %s, all machines, versus input size (rows / genes / points / options), mean and min/max', pname)
        set logscale x
        set xtics auto
        set xlabel 'input size'
        do for [app in apps] {
            all(b) = sprintf("< awk -F, 'NR==FNR { if (!/^#/ && $1==\"%s\" && $5+0 > m) m = $5+0; next } !/^#/ && $1==\"%s\" && $2==\"%s\" && $5+0==m && $7==\"%s\"' %s %s", plat, plat, app, b, csv, csv)
            set ylabel 'speedup over greedy (W/64)'
            set title sprintf('%s: speedup over greedy', app_title(app))
            plot for [b in balancers] all(b) using 3:18:20:21 with yerrorlines title bal_title(b)
        }
        do for [app in apps] {
            all(b) = sprintf("< awk -F, 'NR==FNR { if (!/^#/ && $1==\"%s\" && $5+0 > m) m = $5+0; next } !/^#/ && $1==\"%s\" && $2==\"%s\" && $5+0==m && $7==\"%s\"' %s %s", plat, plat, app, b, csv, csv)
            set ylabel 'makespan / optimum'
            set title sprintf('%s: makespan / one-block optimum', app_title(app))
            plot for [b in balancers] all(b) using 3:14:16:17 with yerrorlines title bal_title(b)
        }
        unset multiplot
        unset logscale x
    }
}

if (exp eq '2') {
    # One panel per case (platform, app, size) found in the CSV.
    cases = system(sprintf("awk -F, '!/^#/ && h++ && !seen[$1\":\"$2\":\"$3]++ { printf \"%%s:%%s:%%s \", $1, $2, $3 }' %s", csv))
    n = words(cases)
    set terminal pngcairo size 1400,(300 * n + 60) font 'Sans,10' noenhanced
    set output out . '.png'
    set multiplot layout n,1 title 'SIMULATED: block size per PU at the end of the training (percent of one step), mean and sd over the repetitions'
    policies = 'optimum hdss acosta plb-hec plb-hac'
    pol_title(p) = p eq 'optimum' ? 'optimum (one block per PU)' : p eq 'acosta' ? 'Acosta (final loads)' : p eq 'hdss' ? 'HDSS (end of phase 1)' : p eq 'plb-hec' ? 'PLB-HeC (first execution step)' : 'PLB-HAC (first step giving every PU a block)'
    set style fill solid 0.8 border -1
    set boxwidth 0.15
    set ylabel '% of a step'
    set xtics rotate by -20 font ',8'
    set key top right
    do for [c in cases] {
        cp = system(sprintf("echo %s | cut -d: -f1", c))
        ca = system(sprintf("echo %s | cut -d: -f2", c))
        cs = system(sprintf("echo %s | cut -d: -f3", c))
        f(p) = sel(sprintf('$1=="%s" && $2=="%s" && $3=="%s" && $7=="%s"', cp, ca, cs, p))
        set title sprintf('%s, %s, size %s', cp, app_title(ca), cs)
        set xrange [-0.5:*]
        set offsets 0, 0.5, 0, 0
        plot for [i=1:5] f(word(policies, i)) using ($4 - 0.3 + 0.15 * (i - 1)):9:10 with boxerrorbars title pol_title(word(policies, i)), \
             f('optimum') using 4:(NaN):xtic(5) notitle
    }
    unset multiplot
}

if (exp eq '3') {
    cases = system(sprintf("awk -F, '!/^#/ && h++ && !seen[$1\":\"$2\":\"$3]++ { printf \"%%s:%%s:%%s \", $1, $2, $3 }' %s", csv))
    n = words(cases)
    cols = n > 1 ? 2 : 1
    rows = (n + cols - 1) / cols
    set terminal pngcairo size (700 * cols),(320 * rows + 60) font 'Sans,10' noenhanced
    set output out . '.png'
    set multiplot layout rows,cols title 'SIMULATED: idle time per PU class (percent of the makespan, mean over the PUs of the class), mean and min/max over the repetitions'
    bi(s) = s eq 'greedy_W/64' ? 0 : s eq 'hdss' ? 1 : s eq 'acosta' ? 2 : s eq 'plb-hec' ? 3 : 4
    set xtics ('greedy W/64' 0, 'HDSS' 1, 'Acosta' 2, 'PLB-HeC' 3, 'PLB-HAC' 4)
    set xrange [-0.5:4.5]
    set yrange [0:*]
    set style fill solid 0.8 border -1
    set boxwidth 0.25
    set ylabel 'idle %'
    set key top right
    kinds = 'cpu gpu phi'
    do for [c in cases] {
        cp = system(sprintf("echo %s | cut -d: -f1", c))
        ca = system(sprintf("echo %s | cut -d: -f2", c))
        cs = system(sprintf("echo %s | cut -d: -f3", c))
        f(k) = sel(sprintf('$1=="%s" && $2=="%s" && $3=="%s" && $5=="%s"', cp, ca, cs, k))
        set title sprintf('%s, %s, size %s', cp, app_title(ca), cs)
        plot for [i=1:3] f(word(kinds, i)) using (bi(strcol(4)) - 0.25 + 0.25 * (i - 1)):8 with boxes title word('CPU GPU Phi', i), \
             for [i=1:3] f(word(kinds, i)) using (bi(strcol(4)) - 0.25 + 0.25 * (i - 1)):8:10:11 with yerrorbars lc 'black' pt 0 notitle
    }
    unset multiplot
}

if (exp eq '4') {
    set terminal pngcairo size 1500,480 font 'Sans,10' noenhanced
    set output out . '.png'
    set multiplot layout 1,3 title sprintf('SIMULATED: MM on PLB-HAC machines A,B (CPU + GPU each); GPU A 2x slower from t = %s s (dashed line); block size over time, seed 1', change)
    set xlabel 'start of the block (simulated s)'
    set ylabel 'block size (rows)'
    set arrow 1 from change, graph 0 to change, graph 1 nohead dt 2 lw 2 lc 'black'
    set key top right
    pus = 'A/i7-5930K#0 A/K5200#0 B/i7-5930K#0 B/GTX-970#0'
    do for [b in 'plb-hac hdss greedy_W/64'] {
        set title bal_title(b)
        f(p) = sel(sprintf('$1=="%s" && $3=="%s"', b, p))
        plot for [p in pus] f(p) using 4:6 with steps lw 1.5 title p, \
             for [p in pus] f(p) using 4:6 with points pt 7 ps 0.4 lc 'gray' notitle
    }
    unset multiplot
}

if (exp eq '5') {
    set terminal pngcairo size 1000,650 font 'Sans,10' noenhanced
    set output out . '.png'
    set title "Model evaluation cost per step vs number of PUs: runs SIMULATED (synthetic platforms, k-means),\ntimes MEASURED (wall clock) on a shared 2-vCPU VM under load; mean and min/max over the repetitions"
    set logscale xy
    set xlabel 'PUs'
    set ylabel 'ms'
    set key top left
    set object 1 rect from graph 0, first 100 to graph 1, first 170 fc rgb '#dddddd' fs solid 0.5 noborder behind
    set label 1 'papers: 100-170 ms per solve (IPOPT, 10-12 PUs)' at graph 0.55, first 130 font ',8'
    f(b, s) = sel(sprintf('$2=="%s" && $3=="%s"', b, s))
    plot f('plb-hac', 'ipopt') using 1:6:8:9 with yerrorlines lw 2 title 'PLB-HAC, IPOPT: policy time per step (fits + solve)', \
         f('plb-hac', 'fast') using 1:6:8:9 with yerrorlines lw 2 title 'PLB-HAC, fast solver: policy time per step', \
         f('plb-hec', 'ipopt') using 1:6:8:9 with yerrorlines lw 2 title 'PLB-HeC, IPOPT: policy time per solve (fits + solve)', \
         f('plb-hec', 'fast') using 1:6:8:9 with yerrorlines lw 2 title 'PLB-HeC, fast solver: policy time per solve', \
         ('< grep -v "^[#p]" '.solve) using 1:3 with linespoints dt 2 title 'one IPOPT solve alone (bench, median)', \
         ('< grep -v "^[#p]" '.solve) using 1:5 with linespoints dt 2 title 'one fast solve alone (bench, median)'
}

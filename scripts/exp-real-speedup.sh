#!/usr/bin/env bash
# Issue 6 §2, experiment 1, REAL form: speedup over greedy of every policy
# (ours through the divisible-load API, StarPU's eager and dmda with equal
# tasks) for MM, Black-Scholes, GRN and k-means at 2-3 input sizes, real
# StarPU runs on this machine (`plb app`, results verified).
#
# Worker configurations (the "number of machines" axis of the papers cannot
# vary on one machine; the number of workers does, 1 vs 2):
#   2cpu-emu  2 CPU workers, EMULATED heterogeneity
#             PLB_EMULATE="0:speed=0.25; 1:latency=20ms"
#   1cpu-emu  1 CPU worker, EMULATED PLB_EMULATE="0:latency=20ms"
#   cpu+ocl   1 CPU worker + 1 PoCL OpenCL worker (real heterogeneity: a
#             second device type with its own memory node and transfers;
#             PoCL limited to one thread); no emulation
#
# usage: scripts/exp-real-speedup.sh [--quick] [--reps N] [--out DIR]
#   PLB=<path to plb> (default target/release/plb)
# Writes DIR/speedup-runs.csv (every run), DIR/speedup-summary.csv (mean,
# sd, min, max, speedup over greedy) and DIR/real-speedup-<config>.png
# (DIR default results/real; target/exp-real-quick with --quick).
# --quick: small sizes, 1 repetition (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/exp-real.sh
source scripts/lib/exp-real.sh
exp_real_options "$@"
POLICIES="greedy plb-hac plb-hec hdss acosta eager dmda"
EMU2=$EMULATION
EMU1="0:latency=20ms"
if [ "$QUICK" = 1 ]; then
    REPS=1
    # app:size pairs per configuration
    CASES_2="mm:256 blackscholes:100000 grn:60 kmeans:20000"
    CASES_1="mm:64"
    CASES_OCL="mm:256"
else
    CASES_2="mm:1024 mm:2048 blackscholes:1048576 blackscholes:4194304 grn:120 grn:200 kmeans:65536 kmeans:131072"
    # No k-means on one worker paying 20 ms per task: greedy's ~150 blocks
    # per pass x 20 passes would take a minute per run.
    CASES_1="mm:1024 blackscholes:1048576 grn:120"
    CASES_OCL="mm:1024 blackscholes:1048576 grn:120 kmeans:65536"
fi
export POCL_MAX_PTHREAD_COUNT=${POCL_MAX_PTHREAD_COUNT:-1} POCL_CPU_MAX_CU_NUM=${POCL_CPU_MAX_CU_NUM:-1}
export STARPU_SILENT=1
unset STARPU_SCHED PLB_TRACE PLB_EMULATE LD_PRELOAD || true
# StarPU's dmda is compared the way a StarPU user would run it: calibrated
# first (STARPU_CALIBRATE=1 runs, not measured) in a private STARPU_HOME,
# with one model per worker (STARPU_PERF_MODEL_HOMOGENEOUS_CPU=0) so that
# it can see the emulated difference between the two CPU workers, as ours do.
STARPU_HOME=$(mktemp -d "${TMPDIR:-/tmp}/plb-exp-real-home.XXXXXX")
export STARPU_HOME STARPU_PERF_MODEL_HOMOGENEOUS_CPU=0
trap 'rm -rf "$STARPU_HOME"' EXIT
CALIBRATION_RUNS=2

RUNS=$OUT/speedup-runs.csv
echo "form,config,app,n,policy,rep,makespan_s,units,verify" > "$RUNS"
total=0
for c in 2 1 OCL; do v=CASES_$c; total=$(( total + $(echo ${!v} | wc -w) )); done
total=$(( total * REPS * $(echo $POLICIES | wc -w) ))
k=0
start=$SECONDS
one() { # config form emulate flags... ; app n policy rep in globals
    local config=$1 form=$2 emu=$3; shift 3
    local line
    k=$((k + 1))
    line=$(PLB_EMULATE="$emu" "$PLB" app "$app" --n "$n" --sched "$p" "$@" 2>/dev/null | grep '^plb-app:' || true)
    local ms units verify
    ms=$(sed -n 's/.* makespan_s=\([^ ]*\).*/\1/p' <<< "$line")
    units=$(sed -n 's/.* units=\([^ ]*\).*/\1/p' <<< "$line" | tr ',' ' ')
    verify=$(sed -n 's/.* verify=\([^ ]*\).*/\1/p' <<< "$line")
    if [ -z "$ms" ] || [ "$verify" != ok ]; then
        echo "exp-real-speedup: $config $app n=$n $p failed: ${line:-no summary line}" >&2
        exit 1
    fi
    echo "$form,$config,$app,$n,$p,$rep,$ms,$units,$verify" >> "$RUNS"
    printf '  [%d/%d] %s %s %s n=%s rep %d %-8s makespan %s s (%d s elapsed)\n' \
        "$k" "$total" "$form" "$config" "$app" "$n" "$rep" "$p" "$ms" $((SECONDS - start)) >&2
}
calibrate() { # config emulate flags... ; app n in globals
    local emu=$2; shift 2
    if [[ " $POLICIES " == *" dmda "* ]]; then
        for _ in $(seq 1 "$CALIBRATION_RUNS"); do
            STARPU_CALIBRATE=1 PLB_EMULATE="$emu" "$PLB" app "$app" --n "$n" --sched dmda "$@" > /dev/null 2>&1 \
                || { echo "exp-real-speedup: calibration of dmda on $app n=$n failed" >&2; exit 1; }
        done
    fi
}
for c in $CASES_2; do app=${c%%:*}; n=${c##*:}; calibrate 2cpu-emu "$EMU2" --ncpu 2; done
for c in $CASES_1; do app=${c%%:*}; n=${c##*:}; calibrate 1cpu-emu "$EMU1" --ncpu 1; done
for c in $CASES_OCL; do app=${c%%:*}; n=${c##*:}; calibrate cpu+ocl "" --ncpu 1 --opencl; done
echo "exp-real-speedup: dmda calibrated ($CALIBRATION_RUNS STARPU_CALIBRATE=1 runs per case, STARPU_HOME=$STARPU_HOME)" >&2
for rep in $(seq 1 "$REPS"); do
    for c in $CASES_2; do app=${c%%:*}; n=${c##*:}
        for p in $POLICIES; do one 2cpu-emu EMULATED "$EMU2" --ncpu 2; done
    done
    for c in $CASES_1; do app=${c%%:*}; n=${c##*:}
        for p in $POLICIES; do one 1cpu-emu EMULATED "$EMU1" --ncpu 1; done
    done
    for c in $CASES_OCL; do app=${c%%:*}; n=${c##*:}
        for p in $POLICIES; do one cpu+ocl real "" --ncpu 1 --opencl; done
    done
done

# Mean, sample sd, min, max per (config, app, n, policy); speedup over greedy.
SUM=$OUT/speedup-summary.csv
awk -F, 'NR > 1 {
    key = $1 "," $2 "," $3 "," $4 "," $5
    if (!(key in cnt)) order[++nk] = key
    cnt[key]++; s[key] += $7; ss[key] += $7 * $7
    if (!(key in mn) || $7 < mn[key]) mn[key] = $7
    if (!(key in mx) || $7 > mx[key]) mx[key] = $7
}
END {
    print "form,config,app,n,policy,reps,mean_s,sd_s,min_s,max_s,speedup_vs_greedy"
    for (i = 1; i <= nk; i++) { k = order[i]; m[k] = s[k] / cnt[k] }
    for (i = 1; i <= nk; i++) {
        k = order[i]; split(k, f, ",")
        g = f[1] "," f[2] "," f[3] "," f[4] ",greedy"
        var = cnt[k] > 1 ? (ss[k] - cnt[k] * m[k] * m[k]) / (cnt[k] - 1) : 0
        if (var < 0) var = 0
        printf "%s,%d,%.6f,%.6f,%.6f,%.6f,%.3f\n", k, cnt[k], m[k], sqrt(var), mn[k], mx[k], (g in m) ? m[g] / m[k] : 0
    }
}' "$RUNS" > "$SUM"

echo
echo "Experiment 1, real form: speedup over greedy (greedy mean makespan / policy mean makespan); mean ± sd of $REPS run(s)"
echo "(2cpu-emu and 1cpu-emu: EMULATED heterogeneity; cpu+ocl: real CPU + PoCL OpenCL, no emulation)"
awk -F, -v pols="$POLICIES" 'NR > 1 {
    c = $2 " " $3 " n=" $4; if (!(c in seen)) { seen[c] = 1; rows[++nr] = c; form[c] = $1 }
    v[c, $5] = sprintf("%.3f±%.3f %.2fx", $7, $8, $11)
}
END {
    np = split(pols, P, " ")
    printf "%-9s %-32s", "form", "case"; for (j = 1; j <= np; j++) printf " | %-19s", P[j]; print ""
    for (i = 1; i <= nr; i++) {
        c = rows[i]; printf "%-9s %-32s", form[c], c
        for (j = 1; j <= np; j++) printf " | %-19s", v[c, P[j]]; print ""
    }
}' "$SUM"

if command -v gnuplot > /dev/null; then
    for config in 2cpu-emu 1cpu-emu cpu+ocl; do
        dat=$OUT/speedup-$config.dat
        awk -F, -v cfg="$config" -v pols="$POLICIES" 'NR > 1 && $2 == cfg {
            c = $3 ":" $4; if (!(c in seen)) { seen[c] = 1; rows[++nr] = c }; v[c, $5] = $11; form = $1
        }
        END {
            np = split(pols, P, " "); printf "case"; for (j = 1; j <= np; j++) printf " %s", P[j]; print ""
            for (i = 1; i <= nr; i++) { printf "%s", rows[i]; for (j = 1; j <= np; j++) printf " %s", v[rows[i], P[j]]; print "" }
        }' "$SUM" > "$dat"
        form=EMULATED; [ "$config" = cpu+ocl ] && form="real (CPU + PoCL OpenCL)"
        gnuplot -e "dat='$dat'; png='$OUT/real-speedup-$config.png'; ttl='$form, $config: speedup over greedy ($REPS rep.)'" scripts/speedup.gp
    done
    echo "plots: $OUT/real-speedup-2cpu-emu.png $OUT/real-speedup-1cpu-emu.png $OUT/real-speedup-cpu+ocl.png"
else
    echo "gnuplot not found: no plots" >&2
fi
echo "CSV: $RUNS (every run), $SUM (summary); wall time $((SECONDS - start)) s"

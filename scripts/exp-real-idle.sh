#!/usr/bin/env bash
# Issue 6 §2, experiment 3, REAL form: idle time per PU class, from the
# divisible-load summary of PLB_SUMMARY=1 (`plb: divisible ...` followed by
# one `plb:   worker=<id> busy=<%> idle=<%> units=<n>` line per worker;
# busy = reported compute + transfer time over the run's makespan).
#
# Real StarPU runs of `plb app` on this machine under our policies (greedy,
# plb-hac, plb-hec, hdss, acosta). StarPU's own eager and dmda are not
# listed: PLB_SUMMARY and PLB_TRACE are written by our policy's hooks, so
# they report nothing under StarPU's policies.
#
# PU classes:
#   2cpu-emu  EMULATED PLB_EMULATE="0:speed=0.25; 1:latency=20ms":
#             "slow-cpu" (worker 0, 4x slower) and "cpu+20ms" (worker 1)
#   cpu+ocl   real: "cpu" (worker 0) and "opencl" (worker 1, PoCL on the CPU)
#
# usage: scripts/exp-real-idle.sh [--quick] [--reps N] [--out DIR]
#   PLB=<path to plb> (default target/release/plb)
# Writes DIR/idle-runs.csv, DIR/idle-summary.csv (mean, sd, min, max of the
# idle % per class) and DIR/real-idle-<config>.png (DIR default results/real,
# target/exp-real-quick with --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/exp-real.sh
source scripts/lib/exp-real.sh
exp_real_options "$@"
POLICIES="greedy plb-hac plb-hec hdss acosta"
if [ "$QUICK" = 1 ]; then
    REPS=1; CASES="mm:256 kmeans:20000"
else
    CASES="mm:2048 blackscholes:4194304 grn:400 kmeans:1048576"
fi
export POCL_MAX_PTHREAD_COUNT=${POCL_MAX_PTHREAD_COUNT:-1} POCL_CPU_MAX_CU_NUM=${POCL_CPU_MAX_CU_NUM:-1}
export STARPU_SILENT=1
unset STARPU_SCHED PLB_TRACE PLB_EMULATE LD_PRELOAD || true

RUNS=$OUT/idle-runs.csv
echo "form,config,app,n,policy,rep,worker,class,busy_pct,idle_pct,units,makespan_s" > "$RUNS"
total=$(( $(echo $CASES | wc -w) * 2 * REPS * $(echo $POLICIES | wc -w) ))
k=0
start=$SECONDS
for rep in $(seq 1 "$REPS"); do
    for c in $CASES; do
        app=${c%%:*}; n=${c##*:}
        for config in 2cpu-emu cpu+ocl; do
            if [ "$config" = 2cpu-emu ]; then
                form=EMULATED; emu="$EMULATION"; flags="--ncpu 2"; classes="slow-cpu cpu+20ms"
            else
                form=real; emu=""; flags="--ncpu 1 --opencl"; classes="cpu opencl"
            fi
            for p in $POLICIES; do
                k=$((k + 1))
                # shellcheck disable=SC2086
                out=$(PLB_SUMMARY=1 PLB_EMULATE="$emu" "$PLB" app "$app" --n "$n" --sched "$p" $flags 2>&1 || true)
                line=$(grep '^plb-app:' <<< "$out" || true)
                ms=$(sed -n 's/.* makespan_s=\([^ ]*\).*/\1/p' <<< "$line")
                if [ -z "$ms" ] || ! grep -q ' verify=ok' <<< "$line"; then
                    echo "exp-real-idle: $config $app $p failed: $(tail -3 <<< "$out")" >&2; exit 1
                fi
                # worker lines after the divisible summary (the last pass's for k-means)
                awk -v classes="$classes" -v pre="$form,$config,$app,$n,$p,$rep" -v ms="$ms" '
                    /^plb: divisible / { delete row; nw = 0; on = 1; next }
                    on && /^plb:   worker=/ {
                        for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
                        sub("%", "", f["busy"]); sub("%", "", f["idle"])
                        row[nw++] = f["worker"] "," f["busy"] "," f["idle"] "," f["units"]; next }
                    on { on = 0 }
                    END { split(classes, C, " ")
                        for (w = 0; w < nw; w++) { split(row[w], r, ","); print pre "," r[1] "," C[r[1] + 1] "," r[2] "," r[3] "," r[4] "," ms } }
                ' <<< "$out" >> "$RUNS"
                printf '  [%d/%d] %s %s %s n=%s rep %d %-8s makespan %s s (%d s elapsed)\n' \
                    "$k" "$total" "$form" "$config" "$app" "$n" "$rep" "$p" "$ms" $((SECONDS - start)) >&2
            done
        done
    done
done

SUM=$OUT/idle-summary.csv
awk -F, 'NR > 1 {
    key = $1 "," $2 "," $3 "," $4 "," $5 "," $8
    if (!(key in cnt)) order[++nk] = key
    cnt[key]++; s[key] += $10; ss[key] += $10 * $10
    if (!(key in mn) || $10 < mn[key]) mn[key] = $10
    if (!(key in mx) || $10 > mx[key]) mx[key] = $10
}
END {
    print "form,config,app,n,policy,class,reps,idle_mean_pct,idle_sd_pct,idle_min_pct,idle_max_pct"
    for (i = 1; i <= nk; i++) {
        k = order[i]; m = s[k] / cnt[k]
        var = cnt[k] > 1 ? (ss[k] - cnt[k] * m * m) / (cnt[k] - 1) : 0; if (var < 0) var = 0
        printf "%s,%d,%.1f,%.1f,%.1f,%.1f\n", k, cnt[k], m, sqrt(var), mn[k], mx[k]
    }
}' "$RUNS" > "$SUM"

echo
echo "Experiment 3, real form: idle % per PU class (1 - busy/makespan), mean ± sd of $REPS run(s)"
echo "(2cpu-emu: EMULATED heterogeneity; cpu+ocl: real CPU + PoCL OpenCL)"
awk -F, -v pols="$POLICIES" 'NR > 1 {
    c = $1 " " $2 " " $3 " n=" $4 " " $6; if (!(c in seen)) { seen[c] = 1; rows[++nr] = c }
    v[c, $5] = sprintf("%5.1f ± %4.1f", $8, $9)
}
END {
    np = split(pols, P, " ")
    printf "%-44s", "case / class"; for (j = 1; j <= np; j++) printf " | %-13s", P[j]; print ""
    for (i = 1; i <= nr; i++) { printf "%-44s", rows[i]; for (j = 1; j <= np; j++) printf " | %-13s", v[rows[i], P[j]]; print "" }
}' "$SUM"

if command -v gnuplot > /dev/null; then
    for config in 2cpu-emu cpu+ocl; do
        dat=$OUT/idle-$config.dat
        awk -F, -v cfg="$config" -v pols="$POLICIES" 'NR > 1 && $2 == cfg {
            c = $3 ":" $4 ":" $6; if (!(c in seen)) { seen[c] = 1; rows[++nr] = c }; v[c, $5] = $8
        }
        END {
            np = split(pols, P, " "); printf "case"; for (j = 1; j <= np; j++) printf " %s", P[j]; print ""
            for (i = 1; i <= nr; i++) { printf "%s", rows[i]; for (j = 1; j <= np; j++) printf " %s", v[rows[i], P[j]]; print "" }
        }' "$SUM" > "$dat"
        form=EMULATED; [ "$config" = cpu+ocl ] && form="real (CPU + PoCL OpenCL)"
        gnuplot -e "dat='$dat'; png='$OUT/real-idle-$config.png'; ttl='$form, $config: idle % per PU class ($REPS rep.)'" scripts/idle.gp
    done
    echo "plots: $OUT/real-idle-2cpu-emu.png $OUT/real-idle-cpu+ocl.png"
else
    echo "gnuplot not found: no plots" >&2
fi
echo "CSV: $RUNS (every run and worker), $SUM (summary); wall time $((SECONDS - start)) s"

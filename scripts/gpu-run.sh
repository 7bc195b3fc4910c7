#!/usr/bin/env bash
# Runs on a GPU machine with nothing of ours installed: the kit that
# scripts/gpu-kit.sh built (StarPU 1.4.10 with CUDA, our library and `plb`
# against it, StarPU's Cholesky/LU/GEMM examples, every library they need
# except the CUDA driver and cuBLAS, which are the machine's). Writes, under
# --out:
#   machine.txt     the GPU, the CPUs and StarPU's view of the workers
#   codelets.csv    each of our applications with its CUDA codelet alone,
#                   its CPU codelet alone, and both under plb-hac: verified
#                   against the application's reference, timed (REAL)
#   graphs.csv      StarPU's Cholesky, LU and GEMM under every StarPU policy
#                   and our task-graph policies, repetitions interleaved,
#                   StarPU's models calibrated first and our learning run
#                   kept as the cold figure (REAL)
#   sampling.tar.gz the bus and kernel models StarPU measured (a sampled
#                   machine for StarPU's SimGrid mode: the same shape,
#                   SIMULATED, to set next to the real figures)
#   log.txt         every command and the tail of every failing run
# CSV rows are written as runs end, so a run cut short still returns what
# it measured; --budget stops starting new runs after that many seconds.
#
# Usage: bash scripts/gpu-run.sh [--kit FILE.tar.xz|DIR] [--out DIR]
#          [--budget SECONDS] [--reps N] [--quick] [--no-gpu]
#          [--cases APP:N/TILE,...] [--skip APP:POLICY,...] [--no-codelets]
#   --quick   small sizes (a check of the script itself)
#   --cases   instead of cholesky:19200/960,lu:19200/960,gemm:3840/960
#   --skip    policies not run on an application (e.g. lu:eager)
#   --no-gpu  no CUDA worker (STARPU_NCUDA=0): the whole script on a machine
#             without a GPU, cuBLAS taken from $PLB_CUDA_LIB
set -uo pipefail
cd "$(dirname "$0")/.."

kit=target/gpu-kit.tar.xz
out=${OUT:-target/gpu-run}
budget=420
reps=3
quick=0
gpu=1
case_list=""
skip_list=""
codelet_check=1
while [ $# -gt 0 ]; do
    case "$1" in
        --kit) kit=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --budget) budget=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        --no-gpu) gpu=0; shift ;;
        --cases) case_list=$2; shift 2 ;;
        --skip) skip_list=$2; shift 2 ;;
        --no-codelets) codelet_check=0; shift ;;
        *) echo "usage: bash scripts/gpu-run.sh [--kit FILE|DIR] [--out DIR] [--budget S] [--reps N] [--quick] [--no-gpu]" >&2; exit 2 ;;
    esac
done
[[ "$budget" =~ ^[0-9]+$ && "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-run: --budget and --reps take whole numbers" >&2; exit 2; }
start=$SECONDS
mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/log.txt"
: >"$log"
say() { echo "gpu-run: $*" | tee -a "$log" >&2; }
left() { echo $((budget - (SECONDS - start))); }

# The kit: a folder, or the archive gpu-kit.sh wrote (unpacked once).
if [ -f "$kit" ]; then
    dir=${TMPDIR:-/tmp}/plb-gpu-kit
    if [ ! -f "$dir/MANIFEST" ] || [ "$kit" -nt "$dir/MANIFEST" ]; then
        rm -rf "$dir" && mkdir -p "$dir" && tar -xJf "$kit" -C "$dir" ||
            { say "cannot unpack $kit"; exit 1; }
    fi
    kit=$dir
fi
[ -f "$kit/MANIFEST" ] || { say "no kit at $kit (build it with bash scripts/gpu-kit.sh)"; exit 1; }
kit=$(cd "$kit" && pwd)

# cuBLAS (libcublas.so.13, with libcublasLt) and the driver come from the
# machine: a CUDA toolkit, or the NVIDIA wheels of its Python.
find_cublas() {
    local d
    for d in ${PLB_CUDA_LIB:-} ${CUDA_HOME:+$CUDA_HOME/lib64} /usr/local/cuda/lib64 \
        /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64; do
        [ -f "$d/libcublas.so.13" ] && { echo "$d"; return; }
    done
    local py
    for py in python3 /opt/torch/.venv/bin/python3; do
        d=$("$py" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null) &&
            [ -f "$d/libcublas.so.13" ] && { echo "$d"; return; }
    done
    find / -xdev -name libcublas.so.13 -printf '%h\n' 2>/dev/null | head -n 1
}
cublas=$(find_cublas)
[ -n "$cublas" ] || { say "libcublas.so.13 not found (set PLB_CUDA_LIB)"; exit 1; }
# The kit's copies of common libraries only where the machine has none.
missing=${TMPDIR:-/tmp}/plb-gpu-missing-libs
rm -rf "$missing" && mkdir -p "$missing"
for f in "$kit"/lib/system/*; do
    [ -e "$f" ] || continue
    grep -q "^[[:space:]]*$(basename "$f") " < <(ldconfig -p 2>/dev/null) || ln -s "$f" "$missing/"
done
export LD_LIBRARY_PATH="$kit/lib:$cublas:$missing${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$kit/bin:$PATH"
work=${TMPDIR:-/tmp}/plb-gpu-work
rm -rf "$work" && mkdir -p "$work/home"
# StarPU's models and bus measurements, and our models, private to this run.
export STARPU_HOME="$work" HOME="$work/home"
export STARPU_WORKER_STATS=1 STARPU_BUS_STATS=1
# One BLAS thread per task, as StarPU advises: each CPU worker is one core
# (a threaded OpenBLAS shares one pool among all CPU workers).
export OPENBLAS_NUM_THREADS=1
unset STARPU_SCHED STARPU_SCHED_LIB STARPU_NCPU STARPU_NCUDA
[ "$gpu" = 1 ] || export STARPU_NCUDA=0
device=$([ "$gpu" = 1 ] && nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
device=${device:-none}
label=$([ "$gpu" = 1 ] && echo REAL || echo "REAL no-GPU check")

{
    echo "kit: $(head -n 3 "$kit/MANIFEST" | tr '\n' ' ')"
    echo "cuBLAS from: $cublas"
    echo "libraries the machine lacked, taken from the kit: $(ls "$missing" | tr '\n' ' ')"
    echo "GPU: $device"
    [ "$gpu" = 1 ] && nvidia-smi 2>&1 | head -n 15
    echo "CPUs: $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
    echo "memory: $(free -g | awk '/Mem/ {print $2}') GiB"
    echo "--- starpu_machine_display"
    STARPU_WORKER_STATS=0 STARPU_BUS_STATS=0 timeout 120 starpu_machine_display 2>&1 | head -n 80
} >"$out/machine.txt" 2>&1
say "machine: $device, $(nproc) CPUs, kit $kit, budget ${budget} s ($label)"
if [ "$gpu" = 1 ] && ! grep -q "CUDA 0" "$out/machine.txt"; then
    say "StarPU sees no CUDA worker (machine.txt): nothing to measure"
    cat "$out/machine.txt" >>"$log"
    exit 1
fi

# --- 1. Our applications' CUDA codelets, verified and timed -----------------
codelets="$out/codelets.csv"
echo "label,device,app,n,config,policy,workers,tasks,makespan_s,throughput,unit,verify,status" >"$codelets"
# A key=value field of the summary line (commas, as in workers=, become +).
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2" | head -n 1 | tr , +; }
app_run() { # app config policy ncpu-arg...
    local app=$1 config=$2 policy=$3 line status
    shift 3
    line=$(timeout 60 plb app "$app" --sched "$policy" "$@" 2>>"$log")
    status=$?
    line=$(grep '^plb-app:' <<<"$line" | tail -n 1)
    local verify
    verify=$(field verify "$line")
    echo "$label,$device,$app,$(field n "$line"),$config,$policy,$(field workers "$line"),$(field tasks "$line"),$(field makespan_s "$line"),$(field throughput "$line"),$(field unit "$line"),${verify:-none},$status" >>"$codelets"
    say "codelet $app $config $policy: status $status, verify ${verify:-none}, $(field makespan_s "$line") s, $(field workers "$line")"
}
apps=$(plb app list | awk '{print $1}')
[ "$codelet_check" = 1 ] || apps=""
for app in $apps; do
    [ "$(left)" -gt 0 ] || { say "budget spent: stopping before the codelets of $app"; break; }
    if [ "$gpu" = 1 ]; then
        STARPU_NCUDA=1 app_run "$app" cuda eager --ncpu 0
    fi
    STARPU_NCUDA=0 app_run "$app" cpu eager
    app_run "$app" all plb-hac
done

# --- 2. StarPU's task graphs under every policy ------------------------------
graphs="$out/graphs.csv"
echo "label,device,case,policy,run,rep,ms,gflops,gib_moved,tasks_cpu,tasks_cuda,status,wall_s" >"$graphs"
STARPU_POLICIES=(eager lws dmda dmdar dmdas dmdasd modular-heft modular-heft-prio modular-heteroprio heteroprio)
OUR_POLICIES=(plb-heft dada dada-cp)
if [ -n "$case_list" ]; then
    # cholesky:19200/960,lu:19200/960 -> "cholesky 19200 960" ...
    IFS=, read -r -a cases <<<"$(tr ':/' '  ' <<<"$case_list")"
elif [ "$quick" = 1 ]; then
    cases=("cholesky 1920 320" "lu 1920 320" "gemm 1280 320")
else
    cases=("cholesky 19200 960" "lu 19200 960" "gemm 3840 960")
fi
# --skip lu:eager,lu:lws: policies not run on an application (too slow to
# fit the budget; say so where the figures appear).
given_up=" $(tr , ' ' <<<"$skip_list") "
# graph_run CASE-WORDS POLICY RUN REP [ENV...]: one run, one CSV row.
graph_run() {
    local app=$1 n=$2 tile=$3 policy=$4 run=$5 rep=$6
    shift 6
    local b=$((n / tile)) prog args
    case "$app" in
        cholesky) prog=cholesky_implicit; args=(-size "$n" -nblocks "$b") ;;
        lu) prog=lu_implicit_example_float; args=(-size "$n" -nblocks "$b") ;;
        gemm) prog=sgemm; args=(-xyz "$n" -nblocks "$b" -iter 10) ;;
    esac
    case " $given_up " in *" $app:$policy "*) return 0 ;; esac
    local lib=()
    # Each of our policies keeps its own models (per application): its
    # cold run is then really its first.
    case " ${OUR_POLICIES[*]} " in *" $policy "*) lib=(STARPU_SCHED_LIB="$kit/lib/libstarpu_plb.so" PLB_SUMMARY=1
        PLB_MODEL_DIR="$work/models-$app-$policy") ;; esac
    local t0=$EPOCHREALTIME text status
    text=$(env STARPU_SCHED="$policy" "${lib[@]}" "$@" timeout 60 "$prog" "${args[@]}" 2>&1)
    status=$?
    local ms gflops gib cpu cuda
    # The result line follows the "# ... ms GFlop/s" header.
    read -r ms gflops < <(awk '/^#.*ms.*GFlop\/s/ { for (i = 2; i <= NF; i++) h[i-1] = $i; getline; for (i = 1; i <= NF; i++) { if (h[i] == "ms") m = $i; if (h[i] == "GFlop/s") g = $i } print m, g; exit }' <<<"$text")
    # StarPU prints "Total transfers: 1.2345 GB" (GiB: it divides by 2^30).
    gib=$(sed -n 's/^Total transfers: *\([0-9.]*\) *Gi*B.*/\1/p' <<<"$text" | head -n 1)
    read -r cpu cuda < <(awk '/^CPU/ {k = "cpu"} /^CUDA/ {k = "cuda"} /^[^ \t]/ && !/^(CPU|CUDA)/ {k = ""} /task\(s\)$/ && k != "" { n[k] += $1 } END { print n["cpu"] + 0, n["cuda"] + 0 }' <<<"$text")
    if [ "$app" = gemm ] && [ -n "$gflops" ]; then
        # sgemm prints one iteration's time rounded to the millisecond; the
        # whole run's time follows from its GFlop/s.
        ms=$(awk -v n="$n" -v g="$gflops" 'BEGIN { printf "%.3f", 2 * n * n * n * 10 / (g * 1e6) }')
    fi
    grep -q "plb: error" <<<"$text" && status=97
    [ -n "$ms" ] || [ "$status" != 0 ] || status=98
    [ "$run" != measured ] || [ -z "$ms" ] || measured_ms[$policy]=$ms
    echo "$label,$device,$app:$n/$tile,$policy,$run,$rep,$ms,$gflops,$gib,$cpu,$cuda,$status,$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')" >>"$graphs"
    say "$app:$n/$tile $policy ($run${rep:+ $rep}): ${ms:-?} ms, ${gib:-?} GiB moved, tasks cpu $cpu cuda $cuda, status $status"
    if [ "$status" = 124 ]; then
        # A run that hangs would spend the whole budget again: no more of
        # this policy on this application.
        given_up="$given_up $app:$policy"
        say "$policy timed out on $app: no more runs of it there"
    fi
    if [ "$status" != 0 ]; then
        echo "--- $app:$n/$tile $policy $run $rep: last lines" >>"$log"
        tail -n 15 <<<"$text" >>"$log"
    fi
    return 0
}
for c in "${cases[@]}"; do
    read -r app n tile <<<"$c"
    [ "$(left)" -gt 0 ] || { say "budget spent: skipping $app:$n/$tile"; continue; }
    # StarPU's models first: calibration runs (dmda, then heteroprio's own
    # auto-calibration), unmeasured.
    for k in 1 2; do graph_run "$app" "$n" "$tile" dmda calibration "$k" STARPU_CALIBRATE=1; done
    mkdir -p "$work/heteroprio-$app-$n-$tile"
    hp=(STARPU_HETEROPRIO_USE_AUTO_CALIBRATION=1 STARPU_HETEROPRIO_DATA_DIR="$work/heteroprio-$app-$n-$tile")
    for k in 1 2; do graph_run "$app" "$n" "$tile" heteroprio calibration "$k" "${hp[@]}"; done
    # Our policies' first run: no model yet (the cold figure), their
    # learning run for the measured ones.
    for p in "${OUR_POLICIES[@]}"; do graph_run "$app" "$n" "$tile" "$p" cold 1; done
    declare -A measured_ms=()
    for rep in $(seq 1 "$reps"); do
        [ "$(left)" -gt 0 ] || { say "budget spent: $app:$n/$tile stops after $((rep - 1)) repetition(s)"; break; }
        if [ "$rep" = 2 ]; then
            # A policy 10 times slower than the fastest in the first
            # repetition (eager and lws with slow CPU workers: 55x on the
            # H200's Cholesky) gets no more repetitions: its one run says
            # enough and more would spend the budget the other cases need.
            fastest=$(printf '%s\n' "${measured_ms[@]}" | sort -g | head -n 1)
            for p in "${!measured_ms[@]}"; do
                if awk -v a="${measured_ms[$p]}" -v b="$fastest" 'BEGIN { exit !(a > 10 * b) }'; then
                    given_up="$given_up $app:$p"
                    say "$p: ${measured_ms[$p]} ms on $app, over 10 times the fastest ($fastest ms): one repetition only"
                fi
            done
        fi
        for p in "${STARPU_POLICIES[@]}" "${OUR_POLICIES[@]}"; do
            if [ "$p" = heteroprio ]; then
                graph_run "$app" "$n" "$tile" "$p" measured "$rep" "${hp[@]}"
            else
                graph_run "$app" "$n" "$tile" "$p" measured "$rep"
            fi
        done
    done
done

# --- 3. What StarPU measured: a sampled machine for SimGrid ------------------
if [ -d "$work/.starpu/sampling" ]; then
    tar -czf "$out/sampling.tar.gz" -C "$work/.starpu" sampling
fi
say "done in $((SECONDS - start)) s: $codelets, $graphs"
fail=$(awk -F, 'NR > 1 && ($NF != 0 || ($12 != "ok" && $12 != "none")) {n++} END {print n + 0}' "$codelets")
gfail=$(awk -F, 'NR > 1 && $12 != 0 {n++} END {print n + 0}' "$graphs")
say "codelet runs not verified or failed: $fail; graph runs failed: $gfail"
[ "$fail" = 0 ] && [ "$gfail" = 0 ]

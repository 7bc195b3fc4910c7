# Sourced by scripts/exp-real-*.sh and scripts/gantt.sh (run from the
# repository root): what the real-run experiment scripts share.

# The heterogeneity every EMULATED 2-worker run uses (docs/results.md).
EMULATION="0:speed=0.25; 1:latency=20ms"
PLB=${PLB:-target/release/plb}

# exp_real_out: $OUT defaults to results/real (target/exp-real-quick when
# QUICK=1); checks that $PLB exists; creates $OUT.
exp_real_out() {
    [ -n "$OUT" ] || { if [ "$QUICK" = 1 ]; then OUT=target/exp-real-quick; else OUT=results/real; fi; }
    [ -x "$PLB" ] || { echo "$PLB not found: build with cargo build --release or set PLB=" >&2; exit 2; }
    mkdir -p "$OUT"
}

# exp_real_options "$@": parses --quick, --reps N (default 3) and --out DIR
# into QUICK, REPS and OUT, then runs exp_real_out.
exp_real_options() {
    OUT= REPS=3 QUICK=0
    while [ $# -gt 0 ]; do
        case "$1" in
            --quick) QUICK=1 ;;
            --reps) REPS=$2; shift ;;
            --out) OUT=$2; shift ;;
            *) echo "usage: $0 [--quick] [--reps N] [--out DIR]" >&2; exit 2 ;;
        esac
        shift
    done
    exp_real_out
}

# exp_real_medians CSV REFERENCE: prints each policy's median [min-max]
# of CSV (columns policy,rep,ms) and its ratio to REFERENCE's median.
exp_real_medians() {
    python3 - "$1" "$2" <<'EOF'
import csv, statistics, sys
runs = {}
for r in csv.DictReader(open(sys.argv[1])):
    runs.setdefault(r["policy"], []).append(float(r["ms"]))
ref = statistics.median(runs[sys.argv[2]])
for name, ms in runs.items():
    m = statistics.median(ms)
    print(f"{name}: {m:.0f} [{min(ms):.0f}-{max(ms):.0f}] ms, {m / ref:.2f}x {sys.argv[2]}")
EOF
}

# exp_real_example PROGRAM: sets LIB (our library for StarPU 1.3, absolute;
# PLB_LIBRARY, default target/release/libstarpu_plb.so) and EXAMPLES
# (STARPU_EXAMPLES_DIR, default Debian's), checks both and that
# EXAMPLES/PROGRAM exists; makes a private STARPU_HOME in HOME_DIR, removed
# on exit.
exp_real_example() {
    LIB=${PLB_LIBRARY:-target/release/libstarpu_plb.so}
    EXAMPLES=${STARPU_EXAMPLES_DIR:-/usr/lib/x86_64-linux-gnu/starpu/examples}
    [ -f "$LIB" ] || { echo "$LIB not found: build with cargo build --release or set PLB_LIBRARY=" >&2; exit 2; }
    [ -x "$EXAMPLES/$1" ] || { echo "$EXAMPLES/$1 not found: install starpu-examples (scripts/setup.sh) or set STARPU_EXAMPLES_DIR=" >&2; exit 2; }
    LIB=$(realpath "$LIB")
    HOME_DIR=$(mktemp -d)
    trap 'rm -rf "$HOME_DIR"' EXIT
}

# exp_real_run NAME COLUMN [VAR=VALUE...] -- PROGRAM [ARGS...]: one run of
# EXAMPLES/PROGRAM with our library preloaded, in the private STARPU_HOME
# (exp_real_example), in an environment holding only the variables given;
# prints "NAME",$rep,MS, MS being field COLUMN of the program's first line
# that starts with a number.
exp_real_run() {
    local name=$1 col=$2 out ms prog
    shift 2
    local vars=()
    while [ "$1" != "--" ]; do vars+=("$1"); shift; done
    shift
    prog=$1
    shift
    out=$(env -i PATH="$PATH" HOME="$HOME" STARPU_HOME="$HOME_DIR" STARPU_SILENT=1 \
        LD_PRELOAD="$LIB" "${vars[@]}" "$EXAMPLES/$prog" "$@")
    ms=$(awk -v c="$col" '$1 ~ /^[0-9]/ { print $c; exit }' <<<"$out")
    [ -n "$ms" ] || { echo "$prog under $name printed no timing" >&2; exit 1; }
    echo "\"$name\",$rep,$ms"
}

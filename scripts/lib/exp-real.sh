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

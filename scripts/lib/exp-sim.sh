# Sourced by scripts/exp-sim-*.sh (run from the repository root): the
# options, output folders, build and timed simulator run they share.
#
# exp_sim N NAME [--quick] [--reps N]: runs `plb simulate expN` into
# $csv (results/sim/expN-NAME.csv, or target/exp-sim-quick/ with --quick)
# and sets $out, the prefix of the plots (docs/img/sim-NAME, or under
# target/exp-sim-quick/ with --quick).

exp_sim() {
    local n=$1 name=$2
    shift 2
    local usage="usage: $0 [--quick] [--reps N]"
    local opts=() quick=0 csv_dir img_dir plb start
    while [ $# -gt 0 ]; do
        case "$1" in
            --quick) quick=1; opts+=(--quick) ;;
            --reps) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; opts+=(--reps "$2"); shift ;;
            *) echo "$usage" >&2; exit 2 ;;
        esac
        shift
    done
    if [ "$quick" = 1 ]; then
        csv_dir=target/exp-sim-quick; img_dir=target/exp-sim-quick
    else
        csv_dir=results/sim; img_dir=docs/img
    fi
    mkdir -p "$csv_dir" "$img_dir"
    command -v gnuplot >/dev/null || { echo "exp-sim-$n: gnuplot not found (scripts/setup.sh installs gnuplot-nox)" >&2; exit 1; }
    cargo build --release -p plb
    plb="${CARGO_TARGET_DIR:-target}/release/plb"
    csv="$csv_dir/exp$n-$name.csv"
    out="$img_dir/sim-$name"
    start=$(date +%s.%N)
    "$plb" simulate "exp$n" ${opts[@]+"${opts[@]}"} --out "$csv"
    echo "exp-sim-$n: simulation $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
}

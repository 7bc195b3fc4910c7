# Sourced by scripts/setup.sh, scripts/test.sh, scripts/simgrid.sh and the
# benchmark scripts (run from the repository root): our workspace built
# against the StarPU 1.4.10 prefixes of scripts/starpu14.sh, one target
# directory per prefix (the bindings' struct layouts differ between 1.3,
# 1.4 and SimGrid builds).
#
# with_starpu14 native|simgrid|smpi CMD...: runs CMD with PKG_CONFIG_PATH,
# CARGO_TARGET_DIR (target/starpu14-<t>) and LD_LIBRARY_PATH set for that
# prefix.

starpu14_prefix() {
    echo "${PLB_CACHE:-$HOME/.cache/plb}/starpu-1.4.10/$1"
}

with_starpu14() {
    local t=$1 prefix
    shift
    prefix=$(starpu14_prefix "$t")
    [ -f "$prefix/.plb-built" ] || { echo "StarPU 1.4.10 ($t) is not built: run bash scripts/starpu14.sh $t" >&2; return 1; }
    # core/ipopt-pkgconfig first: .cargo/config.toml's PKG_CONFIG_PATH is
    # replaced, not extended, by one set in the environment.
    PKG_CONFIG_PATH="$PWD/core/ipopt-pkgconfig:$prefix/lib/pkgconfig" \
        CARGO_TARGET_DIR="$PWD/target/starpu14-$t" \
        LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$@"
}

# starpu14_native_ours WHO: sets `prefix` (StarPU 1.4.10's native prefix)
# and `lib` (our library built against it); ends the calling script with
# WHO's message when either is missing.
starpu14_native_ours() {
    prefix=$(starpu14_prefix native)
    lib="$PWD/target/starpu14-native/release/libstarpu_plb.so"
    if [ ! -f "$prefix/.plb-built" ] || [ ! -f "$lib" ]; then
        echo "$1: StarPU 1.4.10's native build or our library for it is missing (bash scripts/setup.sh --all)" >&2
        exit 1
    fi
}

# The overhead benchmarks' figure in a run's output (awk rules setting `v`;
# the caller passes `-v fig=tasks|chol`): tasks_overhead's "Per task:" µs,
# or cholesky_implicit's time in ms.
# shellcheck disable=SC2034  # used by the scripts that source this file
OVERHEAD_FIGURE_AWK='
  fig == "tasks" && /^Per task:/ {v = $3}
  fig == "chol" && $1 ~ /^[0-9]+$/ && NF >= 3 {v = $2}'

# build_xcheck OUT: compiles scripts/simgrid-xcheck.c (the StarPU-SimGrid side
# of the simulator cross-check) into OUT against the SimGrid prefix and our
# library built for it (target/starpu14-simgrid/release), when OUT is older
# than either.
build_xcheck() {
    local out=$1 prefix lib
    prefix=$(starpu14_prefix simgrid)
    lib="$PWD/target/starpu14-simgrid/release"
    [ -f "$lib/libstarpu_plb.so" ] || { echo "no $lib/libstarpu_plb.so: run bash scripts/simgrid.sh --build-only" >&2; return 1; }
    if [ ! -x "$out" ] || [ scripts/simgrid-xcheck.c -nt "$out" ] || [ "$lib/libstarpu_plb.so" -nt "$out" ]; then
        mkdir -p "$(dirname "$out")"
        # shellcheck disable=SC2046  # pkg-config's flags are words
        cc -std=gnu11 -O2 -Wall -Werror -o "$out" scripts/simgrid-xcheck.c -I policy/include \
            $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs starpu-1.4) \
            -L"$lib" -lstarpu_plb -Wl,-rpath,"$lib" -Wl,-rpath,"$prefix/lib"
    fi
}

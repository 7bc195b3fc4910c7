#!/usr/bin/env bash
# Standalone runs of the StarPU-SimGrid side of the simulator cross-check
# (docs/simgrid-xcheck.md): builds scripts/simgrid-xcheck.c against the
# SimGrid prefix and our library built for it, then runs the workload on
# the attila samples with the given workers, bytes per unit and balancers.
# (`plb simgrid --xcheck`, through scripts/simgrid.sh, runs the standard
# case and our simulator together; this script is for the variants.)
#
# Usage: scripts/simgrid-xcheck.sh [NCPU NCUDA BYTES_PER_UNIT BALANCER...]
#   defaults: 2 1 32768 greedy:W/64
# Needs bash scripts/simgrid.sh --build-only first. Environment: XCHECK_OUT
#   (where the program is built, default target/xcheck).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/starpu14.sh
source scripts/lib/starpu14.sh
prefix=$(starpu14_prefix simgrid)
ncpu="${1:-2}" ncuda="${2:-1}" bytes="${3:-32768}"
shift 3 2>/dev/null || shift $#
balancers=("$@")
[ ${#balancers[@]} -gt 0 ] || balancers=(greedy:W/64)
out="${XCHECK_OUT:-$PWD/target/xcheck}"
prog="$out/plb-xcheck"
build_xcheck "$prog"
# A private copy of the samples and a private STARPU_HOME per run: nothing
# StarPU writes reaches the cache.
samples="$out/sampling"
[ -d "$samples" ] || cp -r "$prefix/share/starpu/perfmodels/sampling" "$samples"
for b in "${balancers[@]}"; do
  home=$(mktemp -d)
  echo "# SIMULATED (StarPU-SimGrid, machine attila:ncpu=$ncpu:ncuda=$ncuda) balancer $b, 10000 units, $bytes bytes/unit"
  (cd "$home" && env -u LD_PRELOAD STARPU_HOME="$home" STARPU_HOSTNAME=attila \
    STARPU_PERF_MODEL_DIR="$samples" STARPU_NCPU="$ncpu" STARPU_NCUDA="$ncuda" \
    STARPU_NOPENCL=0 STARPU_SCHED=eager \
    "$prog" 10000 "$b" 100e-6 1e-3 30e-6 50e-6 "$bytes" 2>"$home/stderr") ||
    { grep -v 'INFO\]' "$home/stderr" | tail -5 >&2; exit 1; }
  rm -rf "$home"
done

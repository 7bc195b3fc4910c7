#!/usr/bin/env bash
# The C example of the distributed divisible-load API (issue 24, §2):
# builds examples/dist_mm.c, a StarPU-MPI program that includes only
# policy/include/plb_distributed.h (and StarPU-MPI), against StarPU 1.3
# (Debian; our library target/release/libstarpu_plb.so) and, with
# --starpu 1.4, against the project's StarPU 1.4.10 build, then runs it
# under mpirun on this machine (REAL) and checks every run:
#   * 2, 3 and 4 ranks of 2 CPU workers each, the partitioning by FPM
#     (fpm-hier) and by PLB-HAC's models over StarPU-MPI collectives (and
#     once over MPI's), each rank's share computed by its node's own
#     PLB-HAC: rank 0's summary line must say ranks=Q, coverage=exact and
#     verified=ok (each rank checks its own columns and entries, rank 0 the
#     tiling), and the exit status must be 0;
#   * a rank whose node kernel fails: every rank ends (exit status not 0),
#     rank 0 names the rank, that rank says why;
#   * a rank that never joins, with either kind of collectives: the others
#     end at the deadline's floor (--timeout 3) with "no answer within 3 s"
#     (rank 0 or rank 2, whichever ends the job first).
# usage: bash scripts/dist-c-example.sh [--starpu 1.3|1.4] [--build-only]
# The program is target/dist-example-1.x/plb-dist-mm (rebuilt when older
# than its source, the headers or the library).
set -euo pipefail
cd "$(dirname "$0")/.."
series=1.3 build_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --starpu) series="$2"; shift ;;
    --build-only) build_only=1 ;;
    *) echo "usage: bash scripts/dist-c-example.sh [--starpu 1.3|1.4] [--build-only]" >&2; exit 2 ;;
  esac
  shift
done
command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
  { echo "dist-c-example: mpicc and mpirun not found (bash scripts/setup.sh)" >&2; exit 1; }
libpath=""
case "$series" in
  1.3)
    libdir="$PWD/target/release"
    [ -f "$libdir/libstarpu_plb.so" ] || cargo build --release -p starpu-plb
    ;;
  1.4)
    # shellcheck source=scripts/lib/starpu14.sh
    source scripts/lib/starpu14.sh
    starpu14_native_ours dist-c-example
    libdir="$(dirname "$lib")"
    export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    libpath="$prefix/lib"
    ;;
  *) echo "dist-c-example: --starpu takes 1.3 or 1.4" >&2; exit 2 ;;
esac
module="starpumpi-$series"
pkg-config --exists "$module" || { echo "dist-c-example: pkg-config does not find $module" >&2; exit 1; }
out="target/dist-example-$series"
prog="$out/plb-dist-mm"
mkdir -p "$out"
src=examples/dist_mm.c
if [ ! -x "$prog" ] || [ "$src" -nt "$prog" ] || [ policy/include/plb_distributed.h -nt "$prog" ] ||
  [ policy/include/plb_divisible.h -nt "$prog" ] || [ "$libdir/libstarpu_plb.so" -nt "$prog" ]; then
  # pkg-config quotes some flags for a shell (1.4: -DSTARPU_OPENCL_DATADIR=\"...\").
  eval "cflags=($(pkg-config --cflags "$module"))"
  eval "libs=($(pkg-config --libs "$module"))"
  mpicc -O2 -std=gnu11 -Wall -Wextra -Werror "${cflags[@]}" -Ipolicy/include \
    "$src" -o "$prog" "${libs[@]}" -L"$libdir" -lstarpu_plb -Wl,-rpath,"$libdir" -lm
fi
echo "dist-c-example: built $prog (StarPU $series)"
[ "$build_only" = 1 ] && exit 0

flags=(--oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# run NP ARGS...: the program under mpirun, 2 CPU workers per rank; its
# output in $log, its exit status returned.
run() {
  local np="$1"; shift
  env -u PLB_EMULATE -u LD_PRELOAD -u STARPU_SCHED mpirun "${flags[@]}" -np "$np" \
    -x STARPU_NCPU=2 -x STARPU_NOPENCL=0 -x STARPU_NCUDA=0 -x STARPU_MPI_NOBIND=1 \
    -x STARPU_SILENT=1 -x LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$prog" 512 64 "$@" >"$log" 2>&1
}
fail() { echo "dist-c-example: $1" >&2; tail -20 "$log" >&2; exit 1; }

# check NP ALGO COMM: one verified run.
check() {
  local np="$1" algo="$2" comm="$3" line want
  run "$np" --algorithm "$algo" --comm "$comm" || fail "$np ranks, $algo, $comm: exit status not 0"
  line=$(grep '^plb-dist-mm:' "$log") || fail "$np ranks, $algo, $comm: no summary line"
  for want in "ranks=$np " "algorithm=$algo " "comm=$comm " "coverage=exact" "verified=ok"; do
    [[ "$line" == *"$want"* ]] || fail "$np ranks, $algo, $comm: '$want' missing"
  done
  echo "REAL (this machine, StarPU $series) $line"
}
for np in 2 3 4; do
  for algo in fpm-hier plb-hac; do check "$np" "$algo" starpu-mpi; done
done
check 3 fpm-hier mpi

if run 3 --fail-kernel 1; then fail "a failing kernel on rank 1: exit status 0"; fi
grep -q 'failed on rank(s) \[1\]' "$log" || fail "a failing kernel: rank 0 does not name rank 1"
grep -q 'rank 1: node partitioning (IDPA) failed: the application.s node kernel returned -1' "$log" ||
  fail "a failing kernel: rank 1 does not say why"
echo "dist-c-example: a failing node kernel on rank 1 ends every rank, rank 1 named: ok"

for comm in starpu-mpi mpi; do
  if run 3 --stall 1 --timeout 3 --comm "$comm"; then fail "a rank that never joins ($comm): exit status 0"; fi
  # Rank 0 (in the round's gather) and the others (in its broadcast) each
  # time out; the first to end the job may keep the others from saying so.
  grep -Eq 'rank [02]: partitioning round: no answer within 3 s' "$log" ||
    fail "a rank that never joins ($comm): no rank times out"
  echo "dist-c-example: a rank that never joins ends the job at the deadline ($comm collectives): ok"
done

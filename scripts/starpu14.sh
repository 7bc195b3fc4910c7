#!/usr/bin/env bash
# Builds StarPU 1.4.10 from Debian's source package into two prefixes,
# cached outside the work tree (idempotent: a second run does nothing and
# says so):
#   $PLB_CACHE/starpu-1.4.10/native   CPU + OpenCL workers, MPI, examples
#   $PLB_CACHE/starpu-1.4.10/simgrid  StarPU's SimGrid mode (simulated
#                                     machines from sampled perf models),
#                                     examples (cholesky, lu, sgemm, ...)
#   $PLB_CACHE/starpu-1.4.10/smpi     SimGrid mode with StarPU-MPI over
#                                     SimGrid's SMPI (smpicc): only with
#                                     `smpi`, not part of `all`
#   $PLB_CACHE/starpu-1.4.10/cuda     CPU + CUDA workers (cuBLAS, OpenBLAS),
#                                     examples: only with `cuda`, for the
#                                     GPU kit (scripts/gpu-kit.sh); built
#                                     here against CUDA 13.0 from PyPI
#                                     wheels (scripts/lib/cuda.sh), machine
#                                     code for the H100/H200 (sm_90), no GPU
#                                     needed to build
# PLB_CACHE defaults to ~/.cache/plb. The source comes from Debian's own
# archive: a deb-src-only entry for sid (no binary package ever comes from
# it; Debian's StarPU 1.3 binaries stay as they are); the build
# dependencies are bookworm's binary packages.
# Usage: bash scripts/starpu14.sh [native|simgrid|smpi|cuda|all (default: native and simgrid)]
set -euo pipefail
VERSION=1.4.10+dfsg-2
UPSTREAM=1.4.10
cache="${PLB_CACHE:-$HOME/.cache/plb}"
root="$cache/starpu-$UPSTREAM"
src="$cache/src/starpu-$UPSTREAM+dfsg"
which="${1:-all}"
say() { echo "starpu14: $*"; }
patches="$(cd "$(dirname "$0")" && pwd)/patches"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

case "$which" in native | simgrid | smpi | cuda | all) ;; *)
  echo "usage: bash scripts/starpu14.sh [native|simgrid|smpi|cuda|all]" >&2
  exit 2
  ;;
esac
targets=(native simgrid)
[ "$which" = all ] || targets=("$which")

# A prefix is current when its stamp records this version and these
# configure flags (changing the flags below rebuilds that prefix).
common=(--disable-fortran --disable-build-doc --disable-starpupy --disable-cuda
  --disable-hip --enable-maxcpus=64 --disable-fxt --disable-socl)
cuda_dir=""
if [ "$which" = cuda ]; then
  # shellcheck source=scripts/lib/cuda.sh
  source "$(dirname "$0")/lib/cuda.sh"
  cuda_dir=$(cuda_root)
fi
# Machine code for Hopper (H100, H200) and PTX for newer GPUs.
CUDA_NVCCFLAGS="-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"
flags_of() {
  case "$1" in
    cuda) echo "${common[*]/--disable-cuda/--enable-cuda} --with-cuda-dir=$cuda_dir --disable-mpi --disable-opencl --enable-blas-lib=openblas --enable-maxcudadev=4" ;;
    native) echo "${common[*]} --enable-mpi --enable-opencl --enable-quick-check" ;;
    simgrid) echo "${common[*]} --enable-simgrid --disable-mpi --disable-opencl --enable-maxcudadev=8" ;;
    smpi) echo "${common[*]} --enable-simgrid --enable-mpi --disable-shared --disable-opencl --enable-maxcudadev=8" ;;
  esac
}
stamped() { [ "$(head -1 "$root/$1/.plb-built" 2>/dev/null)" = "$VERSION $(flags_of "$1")" ]; }
current() {
  stamped "$1" && { [ "$1" != simgrid ] || [ -d "$root/simgrid/share/starpu/perfmodels/sampling/codelets" ]; }
}
done_all=1
for t in "${targets[@]}"; do current "$t" || done_all=0; done
if [ "$done_all" = 1 ]; then
  say "already built: ${targets[*]} under $root (delete a prefix to rebuild it)"
  exit 0
fi

# Build dependencies (bookworm binaries), installed only when missing.
deps=(dpkg-dev build-essential pkg-config libhwloc-dev libltdl-dev libglpk-dev
  mpi-default-dev libsimgrid-dev ocl-icd-opencl-dev opencl-headers libblas-dev)
[ "$which" != cuda ] || deps+=(libopenblas-dev)
missing=()
for p in "${deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
list=/etc/apt/sources.list.d/plb-starpu-src.sources
if [ ! -f "$src/configure" ] && ! grep -qs "Suites: sid" "$list"; then
  say "adding $list (deb-src only, suite sid) for StarPU's source package"
  printf '%s\n' "Types: deb-src" "URIs: http://deb.debian.org/debian" "Suites: sid" \
    "Components: main" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" |
    $SUDO tee "$list" >/dev/null
  missing+=(__update__)
fi
if [ ${#missing[@]} -gt 0 ]; then
  say "apt-get update"
  $SUDO apt-get update -qq
  real=()
  for p in "${missing[@]}"; do [ "$p" = __update__ ] || real+=("$p"); done
  if [ ${#real[@]} -gt 0 ]; then
    say "installing ${real[*]}"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${real[@]}"
  fi
fi

if [ ! -f "$src/configure" ]; then
  say "fetching the source package starpu=$VERSION"
  mkdir -p "$cache/src"
  (cd "$cache/src" && apt-get source -q "starpu=$VERSION")
fi
[ -f "$src/configure" ] || { echo "starpu14: $src/configure missing after apt-get source" >&2; exit 1; }

build() {
  local t="$1"
  local prefix="$root/$t" dir="$cache/build/starpu-$UPSTREAM-$t"
  local flags
  read -r -a flags <<<"$(flags_of "$t")"
  if stamped "$t"; then
    say "$t: already built in $prefix"
    return
  fi
  local t0=$SECONDS
  rm -rf "$dir" "$prefix"
  mkdir -p "$dir"
  say "$t: configure ${flags[*]}"
  local env=()
  if [ "$t" = cuda ]; then
    # StarPU's configure takes OpenBLAS from pkg-config's `openblas` and
    # `blas-openblas` modules; Debian ships only the first.
    mkdir -p "$dir/pkgconfig"
    printf '%s\n' "Name: blas-openblas" "Description: OpenBLAS" "Version: 0" "Libs: -lopenblas" \
      >"$dir/pkgconfig/blas-openblas.pc"
    # starpu.h includes cuSPARSE's and cuSOLVER's headers for their handle
    # types (neither library is in the wheels we install, and StarPU calls
    # them only when it can link them): one-type stubs, installed next to
    # starpu.h for the programs built against it.
    mkdir -p "$dir/stub"
    local header type
    for header in cusparse:cusparseHandle_t cusolverDn:cusolverDnHandle_t \
      cusolverSp:cusolverSpHandle_t cusolverRf:cusolverRfHandle_t; do
      type=${header#*:}
      printf '%s\n' "/* Stub: the one type StarPU's headers name (scripts/starpu14.sh). */" \
        "typedef struct ${type%_t}_st *$type;" >"$dir/stub/${header%%:*}.h"
    done
    echo "typedef int cusolverStatus_t;" >>"$dir/stub/cusolverDn.h"
    env=(PATH="$cuda_dir/bin:$PATH" NVCCFLAGS="$CUDA_NVCCFLAGS -I$dir/stub" CPPFLAGS="-I$dir/stub"
      PKG_CONFIG_PATH="$dir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
      LD_LIBRARY_PATH="$cuda_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  fi
  local tree="$src"
  if [ "$t" = cuda ]; then
    # CUDA 13 removed a field StarPU 1.4.10 reads: a patched copy of the
    # source (scripts/patches/), the shared source left as Debian ships it.
    tree="$src-cuda13"
    if [ ! -f "$tree/.plb-patched" ]; then
      rm -rf "$tree"
      cp -r "$src" "$tree"
      patch -d "$tree" -p1 -s <"$patches/starpu-1.4.10-cuda13.patch"
      touch "$tree/.plb-patched"
    fi
  fi
  (cd "$dir" && env "${env[@]}" "$tree/configure" --prefix="$prefix" "${flags[@]}" >configure.log 2>&1) ||
    { tail -30 "$dir/configure.log" >&2; echo "starpu14: $t: configure failed ($dir/configure.log)" >&2; exit 1; }
  say "$t: make -j2 (a few minutes)"
  (cd "$dir" && env "${env[@]}" make -j2 >make.log 2>&1) ||
    { tail -30 "$dir/make.log" >&2; echo "starpu14: $t: make failed ($dir/make.log)" >&2; exit 1; }
  say "$t: make install"
  (cd "$dir" && env "${env[@]}" make install >install.log 2>&1) ||
    { tail -30 "$dir/install.log" >&2; echo "starpu14: $t: make install failed" >&2; exit 1; }
  [ "$t" != cuda ] || cp "$dir"/stub/*.h "$prefix/include/starpu/1.4/"
  # The examples' binaries stay in the build tree; link them next to the prefix.
  ln -sfn "$dir/examples" "$prefix/examples"
  printf '%s\n%s\n' "$VERSION $(flags_of "$t")" "built $(date -u +%FT%TZ) in $((SECONDS - t0)) s" >"$prefix/.plb-built"
  say "$t: built in $((SECONDS - t0)) s -> $prefix"
}

for t in "${targets[@]}"; do build "$t"; done
# The samples of real machines (bus and kernel models) that SimGrid runs on,
# next to the SimGrid prefix: plb simgrid reads them from there.
if [[ " ${targets[*]} " == *" simgrid "* ]]; then
  samples="$root/simgrid/share/starpu/perfmodels/sampling"
  if [ ! -d "$samples/codelets" ]; then
    mkdir -p "$(dirname "$samples")"
    cp -r "$src/tools/perfmodels/sampling" "$samples"
    say "simgrid: sampled machines copied to $samples"
  fi
fi
say "PKG_CONFIG_PATH=$root/<prefix>/lib/pkgconfig selects a build; samples of real machines: $src/tools/perfmodels/sampling"

#!/usr/bin/env bash
# Installs, idempotently, every Debian package the build, the tests and the
# experiments need, then builds the workspace in release mode against
# Debian's StarPU 1.3.10, StarPU 1.4.10's SimGrid build from Debian's source
# package (scripts/starpu14.sh, cached) and our library against it: what the
# README's first command (`plb experiment`) needs.
# With --all (the test command): also StarPU 1.4.10's native and SMPI
# builds and our workspace against the native one.
# Usage: bash scripts/setup.sh [--all]   (root, or a user with sudo)
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
case "${1:-}" in
  "") ;;
  --all) all=1 ;;
  *) echo "usage: bash scripts/setup.sh [--all]" >&2; exit 2 ;;
esac

PACKAGES=(
  libstarpu-dev starpu-examples starpu-tools   # StarPU 1.3, its examples and tools
  coinor-libipopt-dev liblapack-dev libblas-dev libopenblas-dev  # IPOPT and BLAS/LAPACK
  libclang-dev cmake pkg-config build-essential  # bindgen, ipopt-sys, cc
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo  # a real OpenCL worker on the CPU
  gnuplot-nox                                   # plots (scripts/plot-*.sh)
  libopenmpi-dev openmpi-bin                    # StarPU-MPI runs (plb app mm-mpi, mpirun)
  xsltproc                                      # starpu_smpirun (StarPU-MPI under SimGrid's SMPI)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#PACKAGES[@]} Debian packages present"
fi

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found; install a Rust toolchain (rustup) first" >&2; exit 1; }

cargo build --release --workspace
echo "setup: built target/release/plb and target/release/libstarpu_plb.so"

# StarPU 1.4.10 from Debian's source package (cached under ~/.cache/plb, a
# few minutes the first time) and our library against it: the SimGrid build
# always (the main job's Cholesky on a SIMULATED GPU machine); with --all
# also the native build with our workspace against it, and SimGrid mode with
# StarPU-MPI over SMPI (static libraries) for the cluster simulator's
# cross-check (plb experiment cluster --smpi).
bash scripts/starpu14.sh simgrid
# shellcheck source=scripts/lib/starpu14.sh
source scripts/lib/starpu14.sh
with_starpu14 simgrid cargo build --release -p starpu-plb
echo "setup: built against StarPU 1.4.10 SimGrid: target/starpu14-simgrid/release/libstarpu_plb.so"
if [ "$all" = 1 ]; then
  bash scripts/starpu14.sh native
  bash scripts/starpu14.sh smpi
  with_starpu14 native cargo build --release --workspace
  echo "setup: built against StarPU 1.4.10 native: target/starpu14-native/release/"
  # Our library as a static library for StarPU-MPI programs under SMPI
  # (linked with the static StarPU: scripts/smpi-dist-mm.c, and StarPU-MPI's
  # mpi_cholesky for plb experiment cluster --smpi-dag).
  with_starpu14 smpi env PLB_EMBEDDED=1 cargo rustc --release -p starpu-plb --crate-type staticlib
  echo "setup: built against StarPU 1.4.10 SMPI: target/starpu14-smpi/release/libstarpu_plb.a"
else
  echo "setup: the test command (bash scripts/test.sh) also builds StarPU 1.4.10 native and SMPI (bash scripts/setup.sh --all)"
fi

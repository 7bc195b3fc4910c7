#!/usr/bin/env bash
# StarPU's applications on SIMULATED GPU machines (StarPU-SimGrid): builds
# StarPU 1.4.10 with SimGrid (scripts/starpu14.sh simgrid, cached), our
# library against it (target/starpu14-simgrid/) and plb, then runs
# `plb simgrid` with the arguments given (see `plb simgrid --help`).
# Usage: bash scripts/simgrid.sh [--build-only] [plb simgrid options...]
#   bash scripts/simgrid.sh --reps 3 --out results/simgrid
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
# shellcheck source=scripts/lib/starpu14.sh
source scripts/lib/starpu14.sh
bash scripts/starpu14.sh simgrid
with_starpu14 simgrid cargo build --release -p starpu-plb
# The cross-check's program (plb simgrid --xcheck).
build_xcheck "$PWD/target/starpu14-simgrid/plb-xcheck"
cargo build --release --bin plb
if [ "${1:-}" = --build-only ]; then exit 0; fi
exec target/release/plb simgrid "$@"

#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test: unit tests, the framework
# stress tests against real StarPU and the compatibility suite over
# StarPU's example applications, against StarPU 1.3.10 and 1.4.10, the
# StarPU-SimGrid check, and StarPU 1.4.10's own test suite under our
# policies (scripts/starpu-tests.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
# --all-targets: unit, integration and binary tests (no doc-tests: there are none).
echo "test: against StarPU 1.3.10 (Debian)"
cargo test --release --workspace --all-targets
# shellcheck source=scripts/lib/starpu14.sh
source scripts/lib/starpu14.sh
# Against StarPU 1.4.10: the tests that start StarPU (the policy crate's
# unit, registry, loading, stress, task-mode, divisible, settings and
# emulation tests), then the compatibility suite over 1.4's examples with
# the library loaded by STARPU_SCHED_LIB.
echo "test: against StarPU 1.4.10 ($(starpu14_prefix native))"
with_starpu14 native cargo test --release -p starpu-plb --all-targets
with_starpu14 native cargo test --release --test compat
# StarPU-SimGrid: a short Cholesky on the sampled machine attila under every
# policy, each run checked (every task executed, as many as under eager).
echo "test: StarPU-SimGrid ($(starpu14_prefix simgrid))"
target/release/plb simgrid --quick --out target/simgrid-check
# The cross-check of our simulator against StarPU-SimGrid (builds its C
# program; fails if the two makespans differ by more than 25%).
bash scripts/simgrid.sh --xcheck --out target/simgrid-xcheck
# StarPU 1.4.10's own test suite (tests/ of its source package: main,
# datawizard, sched_ctx, overlap, perfmodels, ...), native and SimGrid,
# under eager and under every policy of ours loaded by STARPU_SCHED_LIB, in
# its CI plan (--quick: every test under eager, greedy, plb-hac and dada, a
# subset under the others; docs/starpu14.md). Fails if a test that passes
# under eager does not pass under one of ours.
bash scripts/starpu-tests.sh --quick --out target/starpu-tests

#!/usr/bin/env bash
# Sets up (scripts/setup.sh --all) and runs every test: unit tests, the framework
# stress tests against real StarPU and the compatibility suite over
# StarPU's example applications, against StarPU 1.3.10 and 1.4.10, the
# StarPU-SimGrid check, and StarPU 1.4.10's own test suite under our
# policies (scripts/starpu-tests.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/parts.sh
source scripts/lib/parts.sh
parts_init test
part "set-up (scripts/setup.sh --all)" bash scripts/setup.sh --all
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
# --all-targets: unit, integration and binary tests (no doc-tests: there are none).
echo "test: against StarPU 1.3.10 (Debian)"
part "cargo test, StarPU 1.3.10" cargo test --release --workspace --all-targets
# The C example of the distributed API (examples/dist_mm.c, StarPU-MPI):
# 2, 3 and 4 ranks verified, a failing and a silent rank (REAL, this machine).
part "C example of the distributed API, StarPU 1.3.10" bash scripts/dist-c-example.sh
# shellcheck source=scripts/lib/starpu14.sh
source scripts/lib/starpu14.sh
# Against StarPU 1.4.10: the tests that start StarPU (the policy crate's
# unit, registry, loading, stress, task-mode, divisible, settings and
# emulation tests), then the compatibility suite over 1.4's examples with
# the library loaded by STARPU_SCHED_LIB.
echo "test: against StarPU 1.4.10 ($(starpu14_prefix native))"
part "cargo test -p starpu-plb, StarPU 1.4.10" with_starpu14 native cargo test --release -p starpu-plb --all-targets
part "compatibility suite, StarPU 1.4.10" with_starpu14 native cargo test --release --test compat
part "C example of the distributed API, StarPU 1.4.10" bash scripts/dist-c-example.sh --starpu 1.4
# StarPU-SimGrid: a short Cholesky on the sampled machine attila under every
# policy, each run checked (every task executed, as many as under eager).
echo "test: StarPU-SimGrid ($(starpu14_prefix simgrid))"
part "plb simgrid --quick" target/release/plb simgrid --quick --out target/simgrid-check
# StarPU-SimGrid stress (blocking drivers): Cholesky on idgraf with 12 CPU
# workers and its 8 GPUs under every policy of ours and eager, once per
# STARPU_SIMGRID_* cost setting so that the workers' interleavings differ;
# every run checked (every task executed, as many as under eager).
echo "test: StarPU-SimGrid stress, 12 CPUs + 8 GPUs, four cost settings"
read -r -a ours <<<"$(target/release/plb policies | awk '{print $1}' | tr '\n' ' ')"
# (A function called by `part` runs without errexit: failures are counted.)
simgrid_stress() {
  local cost list p failed=0
  for cost in "" "+STARPU_SIMGRID_SCHED_COST=1" \
    "+STARPU_SIMGRID_TASK_SUBMIT_COST=0+STARPU_SIMGRID_TASK_PUSH_COST=0+STARPU_SIMGRID_FETCHING_INPUT_COST=0" \
    "+STARPU_SIMGRID_TRANSFER_COST=0+STARPU_SIMGRID_CUDA_QUEUE_COST=0"; do
    list=""
    for p in "${ours[@]}" eager; do list="$list${list:+,}$p$cost"; done
    target/release/plb simgrid --machines idgraf:ncpu=12:ncuda=8 --cases cholesky:9600 \
      --policies "$list" --no-cold --out target/simgrid-stress || failed=1
  done
  return "$failed"
}
part "StarPU-SimGrid stress" simgrid_stress
# The default prefetch horizon acts through the adapter with 3 GPUs, not
# with 2, and not when turned off (PLB_SUMMARY's prefetch_held=).
part "prefetch horizon under StarPU-SimGrid" bash scripts/check-prefetch-horizon.sh
# plb-heft's CPU offload acts through the adapter on sirocco with 1 GPU,
# not when turned off, and not on idgraf's 8 GPUs with 4 CPU workers
# (PLB_SUMMARY's cpu_offloads=).
part "CPU offload under StarPU-SimGrid" bash scripts/check-cpu-offload.sh
# plb-heft's line order acts through the adapter on idgraf's 8 GPUs, not
# with PLB_LINE_ORDER=arrival, and not with 2 GPUs (PLB_SUMMARY's
# line_jumps=).
part "line order under StarPU-SimGrid" bash scripts/check-line-order.sh
# The cross-check of our simulator against StarPU-SimGrid (builds its C
# program; fails if the two makespans differ by more than 25%).
part "simulator cross-check (plb simgrid --xcheck)" bash scripts/simgrid.sh --xcheck --out target/simgrid-xcheck
# StarPU 1.4.10's own test suite (tests/ of its source package: main,
# datawizard, sched_ctx, overlap, perfmodels, ...), native and SimGrid,
# under eager and under every policy of ours loaded by STARPU_SCHED_LIB, in
# its CI plan (--quick: every test under eager, greedy, plb-hac and dada, a
# subset under the others; docs/starpu14.md). Fails if a test that passes
# under eager does not pass under one of ours.
part "StarPU 1.4.10's test suite (--quick)" bash scripts/starpu-tests.sh --quick --out target/starpu-tests

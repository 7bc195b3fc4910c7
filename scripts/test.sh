#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test: unit tests, the framework
# stress tests against real StarPU and the compatibility suite over
# StarPU's example applications.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
# --all-targets: unit, integration and binary tests (no doc-tests: there are none).
cargo test --release --workspace --all-targets

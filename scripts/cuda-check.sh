#!/usr/bin/env bash
# Compile-only check of the CUDA codelets (codelets/*.cu) on a machine
# without a GPU or a system CUDA toolkit: installs NVIDIA's CUDA compiler,
# runtime headers and cuBLAS from PyPI wheels (scripts/lib/cuda.sh, cached)
# and compiles every .cu file to an object with nvcc. Nothing
# is run: Debian's StarPU has no CUDA support and this machine has no GPU.
# Optional CI step: `PLB_CI_CUDA=1 bash .ci/run`.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib/cuda.sh
source scripts/lib/cuda.sh
root=$(cuda_root)
nvcc="$root/bin/nvcc"
includes=()
while IFS= read -r d; do includes+=("-I$d"); done < <(find "$root" -maxdepth 1 -type d -name include)
starpu_cflags=$(pkg-config --cflags starpu-1.4 2>/dev/null || pkg-config --cflags starpu-1.3)
out=target/cuda-check
mkdir -p "$out/stub"
# Debian's StarPU is built without CUDA, so STARPU_USE_CUDA is defined here
# by hand (without it every codelet body is compiled out); its headers then
# want cuSPARSE's, of which the codelets use nothing: a one-type stub.
[ -f "$root/include/cusparse.h" ] ||
    printf 'typedef struct cusparseContext *cusparseHandle_t;\n' >"$out/stub/cusparse.h"
"$nvcc" --version | tail -1
status=0
for cu in codelets/*.cu; do
    obj="$out/$(basename "${cu%.cu}").o"
    # shellcheck disable=SC2086 # pkg-config output is a list of flags
    if "$nvcc" -c -O3 -DPLB_HAVE_CUDA -DSTARPU_USE_CUDA -Icodelets -I"$out/stub" \
        $starpu_cflags "${includes[@]}" -o "$obj" "$cu" &&
        nm "$obj" | grep -q ' T '; then
        echo "cuda-check: $cu compiled ($obj, $(nm "$obj" | grep -c ' T ') codelet function(s))"
    else
        echo "cuda-check: $cu FAILED to compile" >&2
        status=1
    fi
done
exit $status

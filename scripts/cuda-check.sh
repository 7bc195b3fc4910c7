#!/usr/bin/env bash
# Compile-only check of the CUDA codelets (codelets/*.cu) on a machine
# without a GPU or a system CUDA toolkit: installs NVIDIA's CUDA compiler,
# runtime headers and cuBLAS from PyPI wheels into target/cuda-wheels
# (idempotent) and compiles every .cu file to an object with nvcc. Nothing
# is run: Debian's StarPU has no CUDA support and this machine has no GPU.
# Optional CI step: `PLB_CI_CUDA=1 bash .ci/run`.
set -euo pipefail
cd "$(dirname "$0")/.."

wheels=target/cuda-wheels
if ! command -v pip3 >/dev/null 2>&1; then
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
    $sudo_cmd apt-get install -y -q python3-pip >/dev/null
fi
find_nvcc() { find "$wheels" -name nvcc -type f -perm -u+x 2>/dev/null | head -n 1; }
if [ -z "$(find_nvcc)" ]; then
    echo "cuda-check: installing nvcc, CUDA runtime and cuBLAS wheels into $wheels"
    # The CUDA 13 wheels ship the nvcc driver itself (the -cu12 nvcc wheel
    # has only ptxas).
    pip3 install -q --break-system-packages --target "$wheels" \
        nvidia-cuda-nvcc nvidia-cuda-crt nvidia-nvvm nvidia-cuda-runtime nvidia-cublas
fi
nvcc=$(find_nvcc)
[ -n "$nvcc" ] || { echo "cuda-check: no nvcc in $wheels" >&2; exit 1; }
includes=()
while IFS= read -r d; do includes+=("-I$d"); done < <(find "$wheels/nvidia" -maxdepth 3 -type d -name include)
starpu_cflags=$(pkg-config --cflags starpu-1.4 2>/dev/null || pkg-config --cflags starpu-1.3)
out=target/cuda-check
mkdir -p "$out/stub"
# Debian's StarPU is built without CUDA, so STARPU_USE_CUDA is defined here
# by hand (without it every codelet body is compiled out); its headers then
# want cuSPARSE's, of which the codelets use nothing: a one-type stub.
[ -n "$(find "$wheels/nvidia" -name cusparse.h 2>/dev/null | head -n 1)" ] ||
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

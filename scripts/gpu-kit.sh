#!/usr/bin/env bash
# Builds here, without a GPU, everything a run on a lent GPU machine needs
# (that machine has CUDA's driver and cuBLAS but no package registry), into
# one archive, target/gpu-kit.tar.xz (under 64 MiB):
#   bin/   plb (our applications, their CUDA codelets compiled for sm_90),
#          StarPU's cholesky_implicit, lu_implicit_example_float and sgemm
#          examples, starpu_machine_display
#   lib/   StarPU 1.4.10 with CUDA, our policy library built against it,
#          and every shared library these need except the C library, the
#          C++ runtime, the CUDA driver and cuBLAS (the machine's own);
#          lib/system/: those most systems have (zlib, libgomp, ...), used
#          there only where missing
#   MANIFEST  versions and the commit it was built from
# Steps, each cached: CUDA 13.0 from PyPI wheels (scripts/lib/cuda.sh);
# StarPU 1.4.10 with CUDA (scripts/starpu14.sh cuda); our workspace against
# it (target/starpu14-cuda). Then on the GPU machine:
#   bash scripts/gpu-run.sh --kit target/gpu-kit.tar.xz --out "$OUT"
# Here, with no GPU, the same script runs every step with CUDA workers off:
#   bash scripts/gpu-kit.sh --check
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
case "${1:-}" in
    "") ;;
    --check) check=1 ;;
    *) echo "usage: bash scripts/gpu-kit.sh [--check]" >&2; exit 2 ;;
esac
say() { echo "gpu-kit: $*" >&2; }

# shellcheck source=scripts/lib/cuda.sh
source scripts/lib/cuda.sh
cuda=$(cuda_root)
bash scripts/starpu14.sh cuda
# shellcheck source=scripts/lib/starpu14.sh
source scripts/lib/starpu14.sh
prefix=$(starpu14_prefix cuda)

# Our workspace against it: plb with its CUDA codelets (machine code for
# Hopper, the H100 and H200), no MPI (not needed there, and Open MPI's
# libraries would not travel well).
say "building plb and the policy library against $prefix"
with_starpu14 cuda env NVCC="$cuda/bin/nvcc" \
    PLB_NVCC_FLAGS="-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90" \
    PLB_NO_MPI=1 LD_LIBRARY_PATH="$prefix/lib:$cuda/lib" \
    cargo build --release -p plb -p starpu-plb
built=target/starpu14-cuda/release
grep -q ' U cublasSgemm' <(nm -D "$built/plb") ||
    { say "$built/plb has no CUDA codelets (nvcc not used?)"; exit 1; }

kit=target/gpu-kit
rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/lib"
cp "$built/plb" "$kit/bin/"
cp "$built/libstarpu_plb.so" "$kit/lib/"
examples="$prefix/lib/starpu/examples"
for p in cholesky_implicit lu_implicit_example_float sgemm; do
    [ -x "$examples/$p" ] || { say "$examples/$p missing"; exit 1; }
    cp "$examples/$p" "$kit/bin/"
done
cp "$prefix/bin/starpu_machine_display" "$kit/bin/"
# Every shared library they load, but those the GPU machine has (glibc's,
# the C++ runtime, the CUDA driver, cuBLAS) and must keep its own of.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libgcc_s\.so|libstdc\+\+\.so|libcuda\.so|libcublas\.so|libcublasLt\.so|libnvidia)'
# Libraries most systems have: in lib/system/, which gpu-run.sh uses only
# for those the machine lacks (its own are newer and what its other
# libraries were built with).
common='^(libz|libbz2|liblzma|libudev|libgomp|libgfortran|libquadmath)\.so'
mkdir -p "$kit/lib/system"
for elf in "$kit"/bin/* "$kit"/lib/*.so; do
    LD_LIBRARY_PATH="$prefix/lib:$cuda/lib" ldd "$elf" | awk '$2 == "=>" {print $1, $3}'
done | sort -u | while read -r name path; do
    [[ "$name" =~ $skip ]] && continue
    [ -f "$path" ] || { say "$name not found (needed by the kit)"; exit 1; }
    if [[ "$name" =~ $common ]]; then cp -L "$path" "$kit/lib/system/$name"; else cp -L "$path" "$kit/lib/$name"; fi
done
strip --strip-unneeded "$kit"/bin/* "$kit"/lib/*.so* "$kit"/lib/system/* 2>/dev/null || true
{
    echo "PLB GPU kit, commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!results' || echo ' (with uncommitted changes)')"
    echo "StarPU 1.4.10 (CUDA, $(basename "$(dirname "$cuda")")/$(basename "$cuda"): $("$cuda/bin/nvcc" --version | tail -1)), built $(date -u +%FT%TZ)"
    echo "code for sm_90 (H100, H200) and compute_90 PTX"
    (cd "$kit" && find bin lib -type f | sort)
} >"$kit/MANIFEST"
say "kit: $(du -sh "$kit" | cut -f1) in $kit; packing"
tar -cJf target/gpu-kit.tar.xz -C "$kit" .
size=$(stat -c %s target/gpu-kit.tar.xz)
say "target/gpu-kit.tar.xz: $((size / 1048576)) MiB"
[ "$size" -lt $((60 * 1048576)) ] || { say "the kit is over 60 MiB: it would not travel"; exit 1; }

if [ "$check" = 1 ]; then
    # Everything a GPU run does, with no CUDA worker, at small sizes, from
    # the archive (as on the GPU machine).
    PLB_CUDA_LIB="$cuda/lib" bash scripts/gpu-run.sh --kit target/gpu-kit.tar.xz \
        --out target/gpu-run-check --quick --no-gpu --reps 1 --budget 600
fi

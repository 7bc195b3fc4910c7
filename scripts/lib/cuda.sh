# Sourced by scripts/cuda-check.sh, scripts/starpu14.sh (its `cuda` prefix)
# and scripts/gpu-kit.sh: NVIDIA's CUDA 13.0 compiler, runtime and cuBLAS
# from PyPI wheels, on a machine with no GPU and no system CUDA toolkit.
#
# The versions are pinned to CUDA 13.0, the version of the driver (580) of
# the GPU machines this project is lent: code that nvcc 13.0 compiles runs
# on that driver, and libcudart 13.0 needs no newer one.
#
# cuda_root: prints the toolkit's root (bin/nvcc, include/, lib/),
#   installing the wheels there first when missing (idempotent, cached under
#   ${PLB_CACHE:-~/.cache/plb}/cuda-13.0, about 800 MB, most of it cuBLAS).

CUDA_WHEELS=(nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88
    nvidia-cuda-cccl==13.0.85 nvidia-cuda-runtime==13.0.96 'nvidia-cublas>=13.0,<13.1')

cuda_root() {
    local dir="${PLB_CACHE:-$HOME/.cache/plb}/cuda-13.0" root
    root="$dir/nvidia/cu13"
    if [ ! -x "$root/bin/nvcc" ] || [ ! -f "$root/lib/libcublas.so.13" ] || [ ! -d "$root/include/cccl/nv" ]; then
        local pip=(pip3)
        command -v pip3 >/dev/null 2>&1 || pip=(python3 -m pip)
        if ! "${pip[@]}" --version >/dev/null 2>&1; then
            local sudo_cmd=""
            [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
            $sudo_cmd apt-get install -y -q python3-pip >/dev/null
            pip=(pip3)
        fi
        echo "cuda: installing ${CUDA_WHEELS[*]} into $dir (about 800 MB)" >&2
        # All at once into a fresh folder: pip --target does not merge
        # into a folder an earlier install made.
        rm -rf "$dir.new"
        "${pip[@]}" install -q --break-system-packages --target "$dir.new" "${CUDA_WHEELS[@]}" >&2 ||
            "${pip[@]}" install -q --target "$dir.new" "${CUDA_WHEELS[@]}" >&2 || return 1
        rm -rf "$dir"
        mv "$dir.new" "$dir"
    fi
    # The wheels ship only versioned libraries (libcudart.so.13); linkers
    # look for libcudart.so.
    local lib
    for lib in cudart cublas cublasLt; do
        [ -e "$root/lib/lib$lib.so" ] || ln -sfn "lib$lib.so.13" "$root/lib/lib$lib.so"
    done
    # CUDA 13 keeps libcu++'s headers under include/cccl, which nvcc adds
    # by itself; C compilers including cuda_fp16.h (through cuBLAS's
    # headers) look for <nv/target> under include/.
    [ -e "$root/include/nv" ] || ln -sfn cccl/nv "$root/include/nv"
    echo "$root"
}

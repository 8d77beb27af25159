#!/usr/bin/env bash
# cuda_toolchain.sh [DEST] — NVIDIA's CUDA 13 compiler, runtime and cuBLAS from
# PyPI, unpacked into DEST (default ggml/vendor/cuda-pypi, git-ignored) as a
# toolkit folder CMake's FindCUDAToolkit accepts. No GPU and no system CUDA are
# needed: `make cuda-check` uses it to compile the CUDA backend on any Linux
# x86-64 machine with pip, and the library it builds runs on a GPU machine with
# a CUDA 13 driver (the runtime and cuBLAS are found there, not bundled).
#
# The wheels are pinned to CUDA 13.0 so that the SASS and the runtime the
# library expects are no newer than the oldest CUDA 13 driver (580). The
# folder is rewritten only when the pinned set changes.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-ggml/vendor/cuda-pypi}
pins="nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cublas==13.0.2.14"
py=${PYTHON:-python3}
root=$dest/site/nvidia/cu13
if [ -f "$dest/PINS" ] && [ "$(cat "$dest/PINS")" = "$pins" ] && [ -x "$root/bin/nvcc" ]; then
	echo "$root"
	exit 0
fi
rm -rf "$dest"
mkdir -p "$dest/wheels" "$dest/site"
# shellcheck disable=SC2086
"$py" -m pip download --no-deps --only-binary=:all: -q -d "$dest/wheels" $pins >&2 ||
	{ echo "cuda_toolchain: pip could not download $pins" >&2; exit 1; }
for w in "$dest"/wheels/*.whl; do
	"$py" -m zipfile -e "$w" "$dest/site"
done
rm -rf "$dest/wheels"
[ -f "$root/bin/nvcc" ] || { echo "cuda_toolchain: no nvcc in $root" >&2; exit 1; }
chmod +x "$root"/bin/* "$root"/nvvm/bin/* 2>/dev/null || true
# Unversioned names for the linker, and a stub driver library: the backend is
# linked against libcuda.so.1 (its DT_NEEDED), which only a GPU machine's driver
# provides. The stub defines the driver functions ggml-cuda calls (its virtual
# memory pool), or the linker (--as-needed) would drop it and the library
# would not name libcuda.so.1 at all.
for lib in cudart cublas cublasLt; do
	ln -sf "lib$lib.so.13" "$root/lib/lib$lib.so"
done
mkdir -p "$root/lib/stubs"
for f in cuDeviceGet cuDeviceGetAttribute cuGetErrorString cuMemAddressFree cuMemAddressReserve cuMemCreate \
	cuMemGetAllocationGranularity cuMemMap cuMemRelease cuMemSetAccess cuMemUnmap; do
	echo "int $f(void) { return 0; }"
done >"$dest/stub.c"
${CC:-cc} -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$root/lib/stubs/libcuda.so" "$dest/stub.c"
# CMake looks for the toolkit's lib64 and targets/ layout too.
ln -sfn lib "$root/lib64"
echo "$pins" >"$dest/PINS"
echo "$root"

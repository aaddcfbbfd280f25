#!/bin/sh
# build.sh - builds native/build/emu/libra_cuda.so: the CUDA sources of
# native/cuda compiled for the host and run by a small emulator, so the CUDA
# kernels can be tested on a machine without a GPU (slowly: blocks run one after
# another, threads are fibers that switch at __syncthreads()).
#
#   native/cuda/emu/build.sh
#   LIBRA_NATIVE_DIR=native/build/emu deno test -A packages/native/kernels_test.ts --filter "cuda:"
#   LIBRA_NATIVE_DIR=native/build/emu LIBRA_SKIP_LARGE=1 deno test -A native/cuda/cuda_test.ts
#   LIBRA_CUBLAS_PATH=native/build/emu/libfake_cublas.so ...   (cuBLAS path, fake_cublas.c)
#
# It checks indexing, reduction trees, the sorting scatter-add, the tiled sgemm,
# the cuBLAS operand swap and every error path against the shared kernel cases.
# EMU_REVERSE=1 runs blocks and threads in reverse order (races show as changed
# results). It cannot see what only a GPU shows: races the fixed thread order
# hides, device math accuracy, FMA contraction, performance, real cuBLAS.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
OUT="$ROOT/native/build/emu"
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
mkdir -p "$OUT"
for f in "$ROOT"/native/cuda/*.cu; do
  python3 "$HERE/launch_rewrite.py" "$f" "$SRC/$(basename "$f" .cu).cpp"
done
g++ -O1 -std=c++17 -fPIC -shared -I"$HERE" -I"$ROOT/native/include" -I"$ROOT/native/cuda" \
  -o "$OUT/libra_cuda.so" "$HERE/emu.cpp" "$SRC"/*.cpp -ldl
gcc -O2 -shared -fPIC -o "$OUT/libfake_cublas.so" "$HERE/fake_cublas.c"
# the kernel tests compare cpu and cuda from the same folder
if [ -e "$ROOT/native/build/libra_cpu.so" ]; then cp "$ROOT/native/build/libra_cpu.so" "$OUT/"; fi
echo "built $OUT/libra_cuda.so (emulated CUDA)"

#!/usr/bin/env bash
# gpu_check.sh - one-shot check of the CUDA build on a machine with a GPU.
#
# Builds the native libraries (deno task build:native), then runs the native
# kernel tests, in which packages/native/kernels_test.ts holds every kernel of
# the table on cpu and cuda to the TypeScript reference, and native/cuda/cuda_test.ts
# checks determinism, device-side index errors, async copies and > 2^31 element
# indexing on cuda. When cuBLAS was used, the GEMM-based kernels run a second
# time on the tiled fallback (LIBRA_NO_CUBLAS=1). Prints a summary and exits
# non-zero when anything failed or when the cuda checks were skipped (no GPU).
# Meant to finish in well under 5 minutes on an H200.
#
# Usage: scripts/gpu_check.sh            (from anywhere inside the repository)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

if command -v deno >/dev/null 2>&1; then
  DENO=(deno)
else
  DENO=(npx -y deno@2.9.6)
fi
LOG=$(mktemp -d /tmp/gpu_check.XXXXXX)
START=$(date +%s)

echo "== machine"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
else
  echo "nvidia-smi not found (the cuda checks will say whether a device is usable)"
fi

# cuBLAS is optional (dlopen at libra_init). Make a pip- or toolkit-installed one findable.
use_cublas() {
  export LIBRA_CUBLAS_PATH="$1"
  export LD_LIBRARY_PATH="$(dirname "$1")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
if [ -z "${LIBRA_CUBLAS_PATH:-}" ]; then
  for pattern in /usr/local/cuda*/lib64/libcublas.so.1[23] /usr/lib/x86_64-linux-gnu/libcublas.so.1[23] \
    /usr/local/lib/python3*/dist-packages/nvidia/cublas/lib/libcublas.so.1[23] \
    /usr/lib/python3*/dist-packages/nvidia/cublas/lib/libcublas.so.1[23] \
    "$HOME"/.local/lib/python3*/site-packages/nvidia/cublas/lib/libcublas.so.1[23]; do
    for f in $pattern; do
      if [ -e "$f" ]; then
        use_cublas "$f"
        break 2
      fi
    done
  done
fi
# Anywhere else a Python environment keeps one (PyTorch's nvidia-cublas wheel, in a venv under /opt
# or with CUDA 13's nvidia/cu13/lib layout): search the usual roots, .so.13 first, shallowest first.
if [ -z "${LIBRA_CUBLAS_PATH:-}" ]; then
  for v in 13 12; do
    f=$(find /opt /usr/local /usr/lib "$HOME" -maxdepth 9 -name "libcublas.so.$v" 2>/dev/null |
      awk '{ print gsub("/", "/"), $0 }' | sort -n | head -1 | cut -d' ' -f2-)
    [ -n "$f" ] && break
  done
  if [ -n "$f" ]; then use_cublas "$f"; fi
fi
echo "cuBLAS candidate: ${LIBRA_CUBLAS_PATH:-none found (libcublas.so.13/.12 from the loader path if any)}"

echo "== build (deno task build:native)"
if ! "${DENO[@]}" task build:native 2>&1 | tee "$LOG/build.txt"; then
  echo "SUMMARY: build failed (see above)"
  exit 1
fi

echo "== cuda backend"
"${DENO[@]}" eval '
import { cudaBackend } from "./packages/native/mod.ts";
try {
  const b = cudaBackend();
  console.log(`device: ${b.deviceName}; build: ${b.buildInfo}`);
} catch (e) {
  console.log(`cuda backend unavailable: ${e.message}`);
}' 2>&1 | tee "$LOG/info.txt"

echo "== pass 1: native tests on cpu and cuda"
"${DENO[@]}" test -A --v8-flags=--expose-gc packages/native/ native/cuda/ 2>&1 | tee "$LOG/pass1.txt"
P1=${PIPESTATUS[0]}

P2=0
if grep -q "build: cuda (cublas)" "$LOG/info.txt"; then
  echo "== pass 2: GEMM-based kernels on the tiled sgemm fallback (LIBRA_NO_CUBLAS=1)"
  LIBRA_NO_CUBLAS=1 LIBRA_SKIP_LARGE=1 "${DENO[@]}" test -A packages/native/kernels_test.ts \
    native/cuda/cuda_test.ts --filter "/cuda: (matmul|conv2d)|^cuda /" 2>&1 | tee "$LOG/pass2.txt"
  P2=${PIPESTATUS[0]}
fi

echo
echo "================ SUMMARY ================"
cat "$LOG/info.txt"
for f in "$LOG"/pass*.txt; do
  # Deno's own result line, without colour codes
  line=$(sed 's/\x1b\[[0-9;]*m//g' "$f" | grep -E '^(ok|FAILED) \|' | tail -1)
  echo "$(basename "$f" .txt): ${line:-no result line (crashed?)}"
  sed 's/\x1b\[[0-9;]*m//g' "$f" | grep -E ' \.\.\. FAILED' | sed 's/^/  FAILED: /'
done
SKIPPED=0
if sed 's/\x1b\[[0-9;]*m//g' "$LOG/pass1.txt" | grep -q "skipping the cuda kernel checks"; then
  SKIPPED=1
  echo "WARNING: the cuda kernel checks were skipped (no usable GPU): nothing on the device was tested"
  if grep -q "driver version is insufficient" "$LOG/info.txt"; then
    echo "HINT: the NVIDIA driver is older than the CUDA 13 runtime linked into libra_cuda.so" \
      "(needs driver >= 580); use a newer driver or build with an nvcc matching the driver"
  fi
fi
echo "logs: $LOG; took $(($(date +%s) - START)) s"
if [ "$P1" -ne 0 ] || [ "$P2" -ne 0 ]; then exit 1; fi
if [ "$SKIPPED" -ne 0 ]; then exit 3; fi
exit 0

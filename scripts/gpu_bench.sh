#!/usr/bin/env bash
# gpu_bench.sh - the one-shot GPU session: scripts/gpu_check.sh, then live CUDA numbers, each
# measured with the stream-ordered pool allocator (the default) and with plain cudaMalloc /
# cudaFree (LIBRA_CUDA_SYNC_ALLOC=1), side by side:
#
#   1. alloc + free pairs of 4 KiB, 1 MiB and 64 MiB through the cuda backend (us a pair);
#   2. the live bench on cuda: mlp, gpt and resnet small under dtr-eq at ratios 1, 0.6, 0.4
#      (overheads at ratio 1.0 near 1.0 say the budget-free and budgeted steps agree);
#   3. benchmarks/vs_pytorch.ts --device cuda (skipped when PyTorch is absent).
#
# Logs go to the folder given (default: a new /tmp/gpu_bench.XXXXXX); the summary is printed.
# Needs a GPU, deno (or npx) and a built or buildable native library (gpu_check.sh builds it).
# On a machine without network: scripts/offline_bundle.sh here, then `source .offline/enter.sh` there.
# About 3-4 minutes on an H200.
#
# Usage: scripts/gpu_bench.sh [LOG_DIR]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
if command -v deno >/dev/null 2>&1; then DENO=(deno); else DENO=(npx -y deno@2.9.6); fi
LOG=${1:-$(mktemp -d /tmp/gpu_bench.XXXXXX)}
mkdir -p "$LOG"
START=$(date +%s)
clean() { sed 's/\x1b\[[0-9;]*m//g'; }
stamp() { echo "== [$(($(date +%s) - START)) s] $*"; }

stamp "gpu_check.sh"
bash scripts/gpu_check.sh >"$LOG/gpu_check.txt" 2>&1
CHECK=$?
sed -n '/== SUMMARY/,$p' "$LOG/gpu_check.txt"
if [ "$CHECK" -ne 0 ]; then
  echo "gpu_bench: gpu_check.sh exited $CHECK; no live numbers taken (logs: $LOG)"
  exit "$CHECK"
fi

MICRO='
import { cudaBackend } from "./packages/native/mod.ts";
const b = cudaBackend();
const row = [];
for (const bytes of [4096, 1 << 20, 64 << 20]) {
  for (let i = 0; i < 100; i++) b.free(b.alloc(bytes));
  const n = 5000, t0 = performance.now();
  for (let i = 0; i < n; i++) b.free(b.alloc(bytes));
  row.push(`${bytes} B ${((performance.now() - t0) * 1000 / n).toFixed(2)} us`);
}
console.log(`alloc+free pairs: ${row.join(", ")}`);'
BENCH=(benchmarks/main.ts --device cuda --models mlp,gpt,resnet --presets small --policies dtr-eq
  --ratios 1,0.6,0.4 --steps 6 --repeat 1 --traces none --time-limit 20)
VS=(benchmarks/vs_pytorch.ts --device cuda --models mlp,gpt,resnet --rounds 6)

for mode in pool sync; do
  if [ "$mode" = sync ]; then export LIBRA_CUDA_SYNC_ALLOC=1; else unset LIBRA_CUDA_SYNC_ALLOC; fi
  stamp "allocator: $mode"
  "${DENO[@]}" eval "$MICRO" 2>&1 | tee "$LOG/alloc_$mode.txt"
  timeout 150 "${DENO[@]}" run -A "${BENCH[@]}" --out "$LOG/bench_$mode" >"$LOG/bench_$mode.txt" 2>&1
  echo "live bench exit $?"
  clean <"$LOG/bench_$mode.txt" | grep -E "^live:|^runtime dispatch"
  timeout 120 "${DENO[@]}" run -A "${VS[@]}" --json "$LOG/vs_pytorch_$mode.json" \
    >"$LOG/vs_pytorch_$mode.txt" 2>&1
  echo "vs_pytorch exit $?"
  clean <"$LOG/vs_pytorch_$mode.txt" | grep -E "^(mlp|gpt|resnet) |ratio|skipped|rror" | head -12
done
unset LIBRA_CUDA_SYNC_ALLOC
stamp "done; logs: $LOG"

#!/usr/bin/env bash
# offline_bundle.sh - packs what a machine without network needs to run this repository's
# commands (a GPU machine for scripts/gpu_bench.sh, say): the deno binary in use here, xz-packed
# (about 30 MB of 96), and the npm packages of deno.json's imports, cached by `deno cache` into a
# fresh DENO_DIR and packed as a tarball (about 5 MB), plus `enter.sh` to unpack them there.
#
#   scripts/offline_bundle.sh .offline          # here, with network; .offline is git-ignored
#   # copy the checkout with .offline/ to the machine, then there:
#   source .offline/enter.sh && scripts/gpu_bench.sh
#
# enter.sh unpacks into /tmp/libra-offline and puts deno on PATH with DENO_DIR set (python3's
# lzma and tarfile do the unpacking when xz is missing).
set -euo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${1:-.offline}
DENO_BIN=$(command -v deno || true)
if [ -z "$DENO_BIN" ]; then
  echo "offline_bundle: deno is not on PATH (npm i -g deno@2.9.6)" >&2
  exit 2
fi
DENO_BIN=$(readlink -f "$DENO_BIN")
if ! head -c 4 "$DENO_BIN" | grep -q ELF; then
  echo "offline_bundle: $DENO_BIN is not the deno executable (a wrapper?); put the deno binary first on PATH" >&2
  exit 2
fi
mkdir -p "$OUT"
CACHE=$(mktemp -d /tmp/libra_offline_cache.XXXXXX)
trap 'rm -rf "$CACHE"' EXIT
echo "offline_bundle: caching the entry points' modules and npm packages"
ENTRIES=(scripts/build_native.ts benchmarks/main.ts benchmarks/vs_pytorch.ts apps/cli/main.ts)
while IFS= read -r f; do ENTRIES+=("$f"); done < <(ls packages/*/*_test.ts native/cuda/*_test.ts)
DENO_DIR="$CACHE" "$DENO_BIN" cache --quiet "${ENTRIES[@]}"
tar -C "$CACHE" -cf - npm | xz -T0 -6 >"$OUT/deno_npm.tar.xz"
echo "offline_bundle: packing $DENO_BIN"
xz -T0 -6 -c "$DENO_BIN" >"$OUT/deno.xz"
cat >"$OUT/enter.sh" <<'EOF'
# source me: unpacks deno and its npm cache into /tmp/libra-offline, sets PATH and DENO_DIR.
_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p /tmp/libra-offline/bin /tmp/libra-offline/deno_dir
if [ ! -x /tmp/libra-offline/bin/deno ]; then
  if command -v xz >/dev/null 2>&1; then
    xz -dc "$_here/deno.xz" >/tmp/libra-offline/bin/deno
    xz -dc "$_here/deno_npm.tar.xz" | tar -C /tmp/libra-offline/deno_dir -xf -
  else
    python3 - "$_here" <<'PY'
import lzma, shutil, sys, tarfile
here = sys.argv[1]
with lzma.open(f"{here}/deno.xz") as src, open("/tmp/libra-offline/bin/deno", "wb") as dst:
    shutil.copyfileobj(src, dst)
tarfile.open(f"{here}/deno_npm.tar.xz").extractall("/tmp/libra-offline/deno_dir")
PY
  fi
  chmod +x /tmp/libra-offline/bin/deno
fi
export PATH=/tmp/libra-offline/bin:$PATH DENO_DIR=/tmp/libra-offline/deno_dir DENO_NO_UPDATE_CHECK=1
deno --version | head -1
EOF
du -h "$OUT"/deno.xz "$OUT"/deno_npm.tar.xz
echo "offline_bundle: wrote $OUT/{deno.xz,deno_npm.tar.xz,enter.sh}; there: source $OUT/enter.sh"

#!/usr/bin/env bash
# CI check of the GPU script's bundle half (issue 19): builds gpu-bundle/ (scripts/run-gpu.sh
# bundle, a Release build in build-gpu or the folder given), checks that it and the tracked
# tree, which travel together to the lent GPU machine, stay under 64 MiB, and runs the device
# half here in its dry mode (env -i, LD_LIBRARY_PATH only: without a GPU every GPU step SKIPs
# with its reason, the host steps run, and a library the bundle lacks fails it).
#
#   scripts/check-gpu-bundle.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/run-gpu.sh bundle "${1:-build-gpu}"
limit=$((64 * 1024 * 1024))
bundle_bytes=$(du -sb gpu-bundle | awk '{print $1}')
tree_bytes=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
total=$((bundle_bytes + tree_bytes))
awk -v b="$bundle_bytes" -v t="$tree_bytes" 'BEGIN {
  printf "gpu bundle %.1f MiB + tracked tree %.1f MiB = %.1f MiB (limit 64 MiB)\n",
         b / 1048576, t / 1048576, (b + t) / 1048576 }'
if [ "$total" -ge "$limit" ]; then
  echo "check-gpu-bundle: FAIL: over 64 MiB; the device tool would refuse to carry it" >&2
  exit 1
fi
bash scripts/run-gpu.sh dry
echo "check-gpu-bundle: OK"

#!/usr/bin/env bash
# The main job: set up, build, and run kiln on real modules on the best device available
# (the GPU when a CUDA driver and a GPU are present, the host otherwise; kiln-run says
# which), compared with the reference evaluator.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
gelu=examples/gelu.hlo
layer_norm=../shared/hlo-corpus/xla/xla__backends__cpu__benchmarks__hlo__layer_norm_1x4096x768_bf16.hlo
echo "== kiln-opt --stats $gelu"
./build/kiln-opt --stats "$gelu"
for example in "$gelu" "$layer_norm"; do
  if [ ! -f "$example" ]; then
    echo "== $example: not found (the corpus lives in ../shared/hlo-corpus), skipped"
    continue
  fi
  # Through the PJRT plugin (libkiln_pjrt.so, dlopen'ed and driven through its table).
  echo "== kiln-run --backend=best --compare=reference --repeat=5 --timings $example"
  ./build/kiln-run --backend=best --compare=reference --repeat=5 --timings "$example"
done
echo "== kiln-pjrt-example $gelu (a C client of the plugin)"
./build/kiln-pjrt-example --repeat=5 "$gelu"

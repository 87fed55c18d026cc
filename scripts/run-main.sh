#!/usr/bin/env bash
# The main job: set up, build, and run kiln on an example module.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
example=examples/gelu.hlo
echo "== kiln-opt --stats $example"
./build/kiln-opt --stats "$example"
echo "== kiln-run --timings $example (reference evaluator on the host)"
./build/kiln-run --timings "$example"
echo "== kiln-run --fusions $example (the kernel compiled by kiln, run on the host, vs the evaluator)"
./build/kiln-run --fusions --timings "$example"

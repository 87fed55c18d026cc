#!/usr/bin/env bash
# Builds and runs the GPU suite (tests/gpu/*.c: the runtime on a device, the corpus end to
# end on the GPU), the hero-kernel bandwidth benchmark and the command-buffer benchmark. Fits one run
# on a lent GPU machine (a few minutes). Without a CUDA driver the suite prints
# "SKIP: <reason>" and exits 0.
#
#   scripts/run-gpu.sh [build-dir]   (default: build-gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
jobs="$(nproc)"
llvm_config="$(command -v llvm-config-19 || command -v llvm-config)"

echo "== build kiln_core and the benchmarks ($build)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$jobs" --target kiln_core bench_command_buffer bench_gpu_heroes

for src in tests/gpu/*.c; do
  name="$(basename "$src" .c)"
  echo "== build $name"
  cc -std=gnu11 -O2 -Wall -Wextra -Werror -Wno-unused-parameter -I. -Iinclude \
    $("$llvm_config" --cflags) -DKILN_SOURCE_DIR="\"$PWD\"" "$src" \
    "$build/libkiln_core.a" $("$llvm_config" --ldflags --libs) -lm -lpthread -ldl \
    -o "$build/$name"
done

status=0
for src in tests/gpu/*.c; do
  name="$(basename "$src" .c)"
  echo "== run $name"
  timeout 360 "$build/$name" || status=1
done

echo "== hero kernels: bandwidth vs device-to-device memcpy"
timeout 120 "$build/bench_gpu_heroes" || status=1

echo "== host command buffers"
timeout 60 "$build/bench_command_buffer" || status=1
exit $status

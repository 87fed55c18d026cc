#!/usr/bin/env bash
# Builds and runs the GPU suite (tests/gpu/*.c: the runtime on a device, the corpus end to
# end on the GPU), the hero-kernel bandwidth benchmark and the command-buffer benchmark. Fits one run
# on a lent GPU machine (a few minutes). Without a CUDA driver the suite prints
# "SKIP: <reason>" (exit 77, which ctest also reports as skipped) and this script exits 0.
#
#   scripts/run-gpu.sh [build-dir]   (default: build-gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
jobs="$(nproc)"

echo "== build the GPU suite and the benchmarks ($build)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
gpu_tests=$(for src in tests/gpu/*.c; do basename "$src" .c; done)
cmake --build "$build" -j"$jobs" --target $gpu_tests bench_command_buffer bench_gpu_heroes

status=0
for name in $gpu_tests; do
  echo "== run $name"
  rc=0
  timeout 360 "$build/$name" || rc=$?
  # 77: skipped (no CUDA driver or GPU; the reason is printed), as ctest reports it.
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then status=1; fi
done

echo "== hero kernels: bandwidth vs device-to-device memcpy"
timeout 120 "$build/bench_gpu_heroes" || status=1

echo "== host command buffers"
timeout 60 "$build/bench_command_buffer" || status=1
exit $status

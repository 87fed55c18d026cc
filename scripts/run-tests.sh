#!/usr/bin/env bash
# Sets up, builds and runs every test: the normal build, the ASan+UBSan build, and the
# parser fuzzer (60 s under ASan, seeded with the corpus).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs="$(nproc)"
bash scripts/check-format.sh  # the changed lines follow .clang-format

echo "== normal build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")

echo "== sanitizer build (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j"$jobs")

echo "== parser fuzzer (libFuzzer + ASan, ${KILN_FUZZ_SECONDS:-60} s)"
bash fuzz/run.sh "${KILN_FUZZ_SECONDS:-60}"

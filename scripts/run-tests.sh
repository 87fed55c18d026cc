#!/usr/bin/env bash
# Sets up, builds and runs every test: the normal build, 2,000 generated programs through
# kiln-fuzz, the GPU bundle check, the ASan+UBSan build, the fuzzers (60 s under ASan, seeded
# with the corpus) and the ThreadSanitizer stress tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's wall time and the CPU time of the processes it ran (the `times` builtin's
# children line), so CI's log shows where its minutes go.
step_name="" step_start=$SECONDS step_cpu=0
times_file="$(mktemp)"
step() {
  local now_cpu
  times > "$times_file"  # in this shell: a subshell's `times` would not see its children
  now_cpu=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/)
                           printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$times_file")
  [ -z "$step_name" ] || echo "[ci] $step_name: $((SECONDS - step_start)) s wall, $((now_cpu - step_cpu)) s CPU"
  step_name=$1 step_start=$SECONDS step_cpu=$now_cpu
  [ -z "$1" ] || echo "== $1"
}
trap 'step ""; rm -f "$times_file"; echo "[ci] total: $SECONDS s"' EXIT
step "set-up"
bash scripts/setup.sh
jobs="$(nproc)"
bash scripts/check-format.sh  # the changed lines follow .clang-format

step "normal build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
step "normal tests"
(cd build && ctest --output-on-failure -j"$jobs")

step "differential fuzzing: 2,000 generated programs (kiln-fuzz, one shard per core)"
# A fixed seed range, so a landing is reproducible; other ranges are a developer's command:
#   build/kiln-fuzz --programs=100000 --seed=S --out=DIR
fuzz_pids=()
for shard in 0 1; do
  build/kiln-fuzz --programs=1000 --seed=$((100000 + shard * 1000)) --quiet --out=build \
    > "build/kiln-fuzz-$shard.log" 2>&1 &
  fuzz_pids+=($!)
done
for pid in "${fuzz_pids[@]}"; do
  wait "$pid" || { cat build/kiln-fuzz-*.log; exit 1; }
done
tail -n 3 build/kiln-fuzz-*.log

step "GPU bundle (scripts/run-gpu.sh's half for here, from the normal build) and its dry run"
bash scripts/check-gpu-bundle.sh build

step "sanitizer build (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
step "sanitizer tests (ASan + UBSan)"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j"$jobs")

step "fuzzers (libFuzzer + ASan + UBSan, ${KILN_FUZZ_SECONDS:-60} s)"
bash fuzz/run.sh "${KILN_FUZZ_SECONDS:-60}"

# ThreadSanitizer: only the stress tests (tests/test_*stress*.c: one executable run from many
# threads), built at -O0 with just the targets they need, so the step costs about two minutes
# on two cores. A data race is a report, and a report fails the test (TSan's exit code 66).
step "ThreadSanitizer build: stress tests"
stress_targets="$(basename -s .c tests/test_*stress*.c | tr '\n' ' ')"
# PJRT stress clients (tests/pjrt/, built where OpenXLA's headers are in ../shared/abi) and
# the plugin they dlopen.
if [ -f ../shared/abi/xla/pjrt/c/pjrt_c_api.h ]; then
  stress_targets+=" kiln_pjrt $(basename -s .c tests/pjrt/test_*stress*.c | tr '\n' ' ')"
fi
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=thread >/dev/null
# shellcheck disable=SC2086
cmake --build build-tsan -j"$jobs" --target $stress_targets
step "ThreadSanitizer: stress tests"
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ctest --output-on-failure -R stress)

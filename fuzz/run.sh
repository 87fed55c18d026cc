#!/usr/bin/env bash
# Builds the parser fuzzer with clang-19 (libFuzzer + ASan + UBSan) and runs it for $1
# seconds (default 60), seeded with the HLO corpus. Fails on any crash, leak or hang.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
corpus_dir="${KILN_CORPUS_DIR:-$(cd .. && pwd)/shared/hlo-corpus}"
out=build-fuzz
mkdir -p "$out"
srcs=$(ls base/*.c compiler/hlo/*.c)
clang-19 -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -Wall -Wextra -Werror -Wno-unused-parameter -I. $srcs fuzz/fuzz_parser.c -lm -o "$out/fuzz_parser"
# Seeds: every corpus file, cut into pieces of at most 16 KiB so the fuzzer mutates
# realistic text at a useful speed.
seeds="$out/seeds"
rm -rf "$seeds" && mkdir -p "$seeds"
i=0
for f in "$corpus_dir"/xla/*.hlo "$corpus_dir"/real/* "$corpus_dir"/emitters/*.hlo; do
  [ -f "$f" ] || continue
  case "$f" in *.tsv|*.md) continue ;; esac
  head -c 16384 "$f" > "$seeds/seed_$i"
  i=$((i + 1))
done
work="$out/corpus-work"
mkdir -p "$work"
echo "fuzz: $i seed files, running for ${seconds}s"
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
  "$out/fuzz_parser" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=16384 -print_final_stats=1 "$work" "$seeds" 2>&1 | tail -n 25
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo "fuzz: FAILED (exit $status); reproducer files: $(ls crash-* leak-* timeout-* oom-* 2>/dev/null | tr '\n' ' ')"
  exit "$status"
fi
echo "fuzz: no crash, leak or hang in ${seconds}s"

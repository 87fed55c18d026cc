#!/usr/bin/env bash
# Builds the fuzzers with clang-19 (libFuzzer + ASan + UBSan) and runs them for $1 seconds in
# total (default 60): the HLO parser gets 60% of the budget, the FFI backend_config decoder
# (fuzz_ffi_attrs) and the protobuf inputs of the plugin (fuzz_hlo_proto: HloModuleProto,
# HloModuleProtoWithConfig, CompileOptionsProto) 20% each. Seeded from the HLO corpus (the
# proto seeds are the corpus modules encoded by the test encoder). Fails on any crash, leak
# or hang.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
parser_seconds=$(( seconds * 3 / 5 ))
[ "$parser_seconds" -ge 1 ] || parser_seconds=1
attrs_seconds=$(( seconds / 5 ))
[ "$attrs_seconds" -ge 1 ] || attrs_seconds=1
proto_seconds=$(( seconds - parser_seconds - attrs_seconds ))
[ "$proto_seconds" -ge 1 ] || proto_seconds=1
corpus_dir="${KILN_CORPUS_DIR:-$(cd .. && pwd)/shared/hlo-corpus}"
out=build-fuzz
mkdir -p "$out"
cflags=(-std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
        -Wall -Wextra -Werror -Wno-unused-parameter -I. -Iinclude)
clang-19 "${cflags[@]}" $(ls base/*.c compiler/hlo/*.c) fuzz/fuzz_parser.c -lm \
  -o "$out/fuzz_parser"
clang-19 "${cflags[@]}" $(ls base/*.c ffi/*.c) fuzz/fuzz_ffi_attrs.c -lm -ldl -lpthread \
  -o "$out/fuzz_ffi_attrs"
clang-19 "${cflags[@]}" $(ls base/*.c compiler/hlo/*.c compiler/frontend/*.c) \
  plugin/compile_options.c fuzz/fuzz_hlo_proto.c -lm -o "$out/fuzz_hlo_proto"
# The proto seed generator: the test encoder, without the fuzzer runtime.
clang-19 -std=gnu11 -O1 -Wall -Wextra -Werror -I. -Iinclude $(ls base/*.c compiler/hlo/*.c) \
  tools/common/proto_write.c tools/common/hlo_proto_encode.c fuzz/gen_hlo_proto_seeds.c -lm \
  -o "$out/gen_hlo_proto_seeds"

# Parser seeds: every corpus file, cut into pieces of at most 16 KiB so the fuzzer mutates
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
# Decoder seeds: every backend_config={...} in the corpus (to the end of its line; the
# fuzzer trims), plus a few covering every attribute kind.
attr_seeds="$out/attr-seeds"
rm -rf "$attr_seeds" && mkdir -p "$attr_seeds"
j=0
while IFS= read -r line; do
  printf '%s' "${line#backend_config=}" | head -c 4096 > "$attr_seeds/seed_$j"
  j=$((j + 1))
done < <(grep -rhoE 'backend_config=\{.*' "$corpus_dir" 2>/dev/null | sort -u | head -n 500)
printf '%s' '{i = 42 : i32, f = 1.5 : f32, s = "a\22b", b = true, a = array<i64: 1, 2>, d = {x = 0x10 : ui8}, t = dense<[1, 2]> : tensor<2xf64>}' \
  > "$attr_seeds/seed_kinds"

# Proto seeds: the corpus modules as HloModuleProto bytes (at most 64 KiB each), plus
# CompileOptionsProto messages.
proto_seeds="$out/proto-seeds"
rm -rf "$proto_seeds" && mkdir -p "$proto_seeds"
"$out/gen_hlo_proto_seeds" "$proto_seeds" 65536 "$corpus_dir"/xla/*.hlo "$corpus_dir"/real/*

status=0
run() { # name seconds work-dir seed-dir max-len
  local name=$1 secs=$2 work=$3 seed=$4 max_len=$5
  mkdir -p "$work"
  echo "fuzz: $name, $(ls "$seed" | wc -l) seed files, running for ${secs}s"
  set +e
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    "$out/$name" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -max_len="$max_len" -print_final_stats=1 "$work" "$seed" 2>&1 | tail -n 25
  local st=${PIPESTATUS[0]}
  set -e
  if [ "$st" -ne 0 ]; then
    echo "fuzz: $name FAILED (exit $st); reproducer files: $(ls crash-* leak-* timeout-* oom-* 2>/dev/null | tr '\n' ' ')"
    status=$st
  fi
}
run fuzz_parser "$parser_seconds" "$out/corpus-work" "$seeds" 16384
run fuzz_ffi_attrs "$attrs_seconds" "$out/attr-corpus-work" "$attr_seeds" 4096
run fuzz_hlo_proto "$proto_seconds" "$out/proto-corpus-work" "$proto_seeds" 65536
if [ "$status" -ne 0 ]; then exit "$status"; fi
echo "fuzz: no crash, leak or hang in ${seconds}s (parser ${parser_seconds}s, ffi attrs ${attrs_seconds}s, hlo proto ${proto_seconds}s)"

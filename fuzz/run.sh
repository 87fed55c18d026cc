#!/usr/bin/env bash
# Builds the fuzzers with clang-19 (libFuzzer + ASan + UBSan) and runs them for $1 seconds in
# total (default 60), split: the HLO parser 18%, the MLIR text reader (fuzz_mlir_text, seeded
# from the StableHLO test files) 9%, the MLIR bytecode reader (fuzz_mlir_bytecode, seeded from
# StableHLO's VHLO artifacts) 9%, the serialized-executable reader (fuzz_exec_deserialize,
# seeded with corpus modules compiled for the host and serialized by gen_executable_seeds) 9%,
# the FFI backend_config decoder (fuzz_ffi_attrs) 9%, the whole compile pipeline (fuzz_compile:
# passes, emitters, LLVM for the host, seeded with kiln-fuzz's generated programs and small
# corpus modules) 18%, the disk-cache entry loader (fuzz_cache_entry: corrupted entries
# refused) 9%, kiln's ELF loader for cached host objects (fuzz_host_elf, seeded with the
# objects of those compiled corpus modules) 4.5%, the PJRT plugin's serialized executables
# (fuzz_pjrt_deserialize: PJRT_Executable_DeserializeAndLoad and one bounded execute, seeded
# with corpus modules compiled and serialized through the plugin by gen_pjrt_seeds) 10%, and
# the protobuf inputs of the plugin (fuzz_hlo_proto: HloModuleProto, HloModuleProtoWithConfig,
# CompileOptionsProto) the rest. Seeded from the HLO corpus (the proto seeds are the corpus
# modules encoded by the test encoder). Fails on any crash, leak or hang.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
share() { # per mille of the total -> seconds, at least 1
  local v=$(( seconds * $1 / 1000 ))
  [ "$v" -ge 1 ] || v=1
  echo "$v"
}
parser_seconds=$(share 180)
mlir_seconds=$(share 90)
bytecode_seconds=$(share 90)
attrs_seconds=$(share 90)
compile_seconds=$(share 180)
cache_seconds=$(share 90)
exec_seconds=$(share 90)
elf_seconds=$(share 45)
pjrt_seconds=$(share 100)
proto_seconds=$(( seconds - parser_seconds - mlir_seconds - bytecode_seconds - attrs_seconds - compile_seconds - cache_seconds - exec_seconds - elf_seconds - pjrt_seconds ))
[ "$proto_seconds" -ge 1 ] || proto_seconds=1
corpus_dir="${KILN_CORPUS_DIR:-$(cd .. && pwd)/shared/hlo-corpus}"
out=build-fuzz
mkdir -p "$out"
cflags=(-std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
        -Wall -Wextra -Werror -Wno-unused-parameter -I. -Iinclude -I"$(llvm-config-19 --includedir)")
# Every layer (the plugin's too, for fuzz_pjrt_deserialize), compiled once in
# parallel into one archive that every fuzzer links (each pulls only the objects it needs): the
# objects instrumented for coverage, the targets linked with the fuzzer runtime. The layers the
# input readers live in (base, hlo, frontend, ffi) at -O1 for speed; the compile pipeline's at
# -O0 (a third of the compile time; fuzz_compile's time goes to LLVM, which is not instrumented).
obj="$out/objs"
rm -rf "$obj" && mkdir -p "$obj"
ls base/*.c compiler/hlo/*.c compiler/frontend/*.c ffi/*.c plugin/*.c \
   compiler/analysis/*.c compiler/eval/*.c compiler/passes/*.c compiler/codegen/*.c \
   compiler/backend/*.c compiler/thunks/*.c runtime/*.c runtime/host/*.c runtime/cuda/*.c |
  xargs -P "$(nproc)" -I{} sh -c 'case "$1" in base/*|compiler/hlo/*|compiler/frontend/*|ffi/*|plugin/*) o=-O1 ;; *) o=-O0 ;; esac
    clang-19 -std=gnu11 -g "$o" -fsanitize=fuzzer-no-link,address,undefined \
    -fno-sanitize-recover=all -Wall -Wextra -Werror -Wno-unused-parameter -I. -Iinclude \
    -I"$(llvm-config-19 --includedir)" -c "$1" -o "$2/$(echo "$1" | tr / _).o"' _ {} "$obj"
lib="$out/libkiln-fuzz.a"
rm -f "$lib" && ar rcs "$lib" "$obj"/*.o
llvm_libs=(-L"$(llvm-config-19 --libdir)" -lLLVM-19)
# The links (a second or two of one core each): as many at a time as there are cores; a
# failing one stops the script at its wait.
jobs_max="$(nproc)"
pids=()
spawn() {
  "$@" &
  pids+=($!)
  if [ "${#pids[@]}" -ge "$jobs_max" ]; then
    wait "${pids[0]}"
    pids=("${pids[@]:1}")
  fi
}
for name in fuzz_parser fuzz_ffi_attrs fuzz_hlo_proto fuzz_mlir_bytecode fuzz_mlir_text \
            fuzz_cache_entry fuzz_host_elf; do
  spawn clang-19 "${cflags[@]}" "fuzz/$name.c" "$lib" -lm -ldl -lpthread -o "$out/$name"
done
for name in fuzz_compile fuzz_exec_deserialize fuzz_pjrt_deserialize; do
  spawn clang-19 "${cflags[@]}" "fuzz/$name.c" "$lib" "${llvm_libs[@]}" -lm -ldl -lpthread \
    -o "$out/$name"
done
# The seed generators: the same objects, with the sanitizers but without the fuzzer runtime.
seedflags=(-std=gnu11 -g -O1 -fsanitize=address,undefined -Wall -Wextra -Werror -I. -Iinclude
           -I"$(llvm-config-19 --includedir)")
spawn clang-19 "${seedflags[@]}" tools/common/proto_write.c tools/common/hlo_proto_encode.c \
  fuzz/gen_hlo_proto_seeds.c "$lib" -lm -o "$out/gen_hlo_proto_seeds"
spawn clang-19 "${seedflags[@]}" fuzz/gen_executable_seeds.c "$lib" "${llvm_libs[@]}" -lm -ldl \
  -lpthread -o "$out/gen_executable_seeds"
spawn clang-19 "${seedflags[@]}" fuzz/gen_pjrt_seeds.c "$lib" "${llvm_libs[@]}" -lm -ldl -lpthread \
  -o "$out/gen_pjrt_seeds"
for pid in "${pids[@]}"; do wait "$pid"; done
exec_seeds="$out/exec-seeds"
elf_seeds="$out/elf-seeds"
rm -rf "$exec_seeds" "$elf_seeds" && mkdir -p "$exec_seeds" "$elf_seeds"
ASAN_OPTIONS=detect_leaks=0 "$out/gen_executable_seeds" --objects "$elf_seeds" "$exec_seeds" 65536 \
  $(find "$corpus_dir"/xla -name '*.hlo' -size -3k 2>/dev/null | sort | head -n 60) || true
pjrt_seeds="$out/pjrt-seeds"
rm -rf "$pjrt_seeds" && mkdir -p "$pjrt_seeds"
ASAN_OPTIONS=detect_leaks=0 KILN_LOG=error "$out/gen_pjrt_seeds" "$pjrt_seeds" 65536 \
  $(find "$corpus_dir"/xla -name '*.hlo' -size -3k 2>/dev/null | sort | head -n 60)
# Compile seeds: kiln-fuzz's generated programs (when the normal build is there) and the
# corpus modules under 4 KiB.
compile_seeds="$out/compile-seeds"
rm -rf "$compile_seeds" && mkdir -p "$compile_seeds"
if [ -x build/kiln-fuzz ]; then # (a process each, ~0.1 s: one per core at a time)
  seq 1 200 | xargs -P "$jobs_max" -I{} sh -c 'build/kiln-fuzz --print="$1" > "$2/gen_$1.hlo"' \
    _ {} "$compile_seeds"
fi
find "$corpus_dir"/xla -name '*.hlo' -size -4k -exec cp {} "$compile_seeds"/ \; 2>/dev/null || true
cache_seeds="$out/cache-seeds"
rm -rf "$cache_seeds" && mkdir -p "$cache_seeds"
printf '\001\100\001' > "$cache_seeds/seed_flip"
printf '\000KILNDC01' > "$cache_seeds/seed_raw"

# Bytecode seeds: StableHLO's portable artifacts (every VHLO version).
bc_seeds="$out/bytecode-seeds"
rm -rf "$bc_seeds" && mkdir -p "$bc_seeds"
cp "$(cd .. && pwd)"/shared/stablehlo/stablehlo/tests/vhlo/*.mlir.bc "$bc_seeds"/ 2>/dev/null || true

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
  # (cut in the shell: `printf | head -c` dies of SIGPIPE under pipefail on a long line)
  v="${line#backend_config=}"
  printf '%s' "${v:0:4096}" > "$attr_seeds/seed_$j"
  j=$((j + 1))
done < <(grep -rhoE 'backend_config=\{.*' "$corpus_dir" 2>/dev/null | sort -u | head -n 500)
printf '%s' '{i = 42 : i32, f = 1.5 : f32, s = "a\22b", b = true, a = array<i64: 1, 2>, d = {x = 0x10 : ui8}, t = dense<[1, 2]> : tensor<2xf64>}' \
  > "$attr_seeds/seed_kinds"

# Proto seeds: the corpus modules as HloModuleProto bytes (at most 16 KiB each, for speed), plus
# CompileOptionsProto messages.
proto_seeds="$out/proto-seeds"
rm -rf "$proto_seeds" && mkdir -p "$proto_seeds"
"$out/gen_hlo_proto_seeds" "$proto_seeds" 16384 "$corpus_dir"/xla/*.hlo "$corpus_dir"/real/*

# MLIR text seeds: every `// -----` part of the StableHLO interpreter tests, the JAX sample and
# the CHLO tests (first 16 KiB of each).
stablehlo_dir="${KILN_STABLEHLO_DIR:-$(cd "$corpus_dir/.." && pwd)/stablehlo}"
mlir_seeds="$out/mlir-seeds"
rm -rf "$mlir_seeds" && mkdir -p "$mlir_seeds"
k=0
for f in "$stablehlo_dir"/stablehlo/tests/interpret/*.mlir "$stablehlo_dir"/testdata-sample/*.mlir \
         "$stablehlo_dir"/stablehlo/tests/chlo/*.mlir; do
  [ -f "$f" ] || continue
  awk -v p="$mlir_seeds/seed_${k}_" 'BEGIN { RS = "// -----\n"; n = 0 }
    { f = p n++; printf "%s", substr($0, 1, 16384) > f; close(f) }' "$f"
  k=$((k + 1))
done
printf '%s' 'func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> { %0 = stablehlo.add %a, %a : tensor<2xf32> loc(#l)
  return %0 : tensor<2xf32> }
#l = loc("f.py":1:2)' > "$mlir_seeds/seed_small"
# Shardy as JAX sends it (no such file among the StableHLO tests): a mesh, a sharding hint and
# a shard_map's sdy.manual_computation.
printf '%s' 'sdy.mesh @mesh = <["x"=1]>
func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %h = "sdy.sharding_constraint"(%arg0) {sharding = #sdy.sharding<@mesh, [{"x"}]>} : (tensor<8xf32>) -> tensor<8xf32>
  %0 = "sdy.manual_computation"(%h) <{in_shardings = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>, manual_axes = #sdy<manual_axes{"x"}>, out_shardings = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>}> ({
  ^bb0(%arg1: tensor<8xf32>):
    %1 = stablehlo.multiply %arg1, %arg1 : tensor<8xf32>
    "sdy.return"(%1) : (tensor<8xf32>) -> ()
  }) : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}' > "$mlir_seeds/seed_shardy"

status=0
run() { # name seconds work-dir seed-dir max-len [timeout per input, s]
  local name=$1 secs=$2 work=$3 seed=$4 max_len=$5 timeout=${6:-10}
  mkdir -p "$work"
  echo "fuzz: $name, $(ls "$seed" | wc -l) seed files, running for ${secs}s"
  set +e
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    "$out/$name" -max_total_time="$secs" -timeout="$timeout" -rss_limit_mb=2048 \
    -artifact_prefix="$out/" -max_len="$max_len" -print_final_stats=1 "$work" "$seed" 2>&1 |
    tail -n 25
  local st=${PIPESTATUS[0]}
  set -e
  if [ "$st" -ne 0 ]; then
    echo "fuzz: $name FAILED (exit $st); reproducer files: $(ls "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-* 2>/dev/null | tr '\n' ' ')"
    status=$st
  fi
}
run fuzz_parser "$parser_seconds" "$out/corpus-work" "$seeds" 16384
run fuzz_mlir_text "$mlir_seconds" "$out/mlir-corpus-work" "$mlir_seeds" 16384
run fuzz_ffi_attrs "$attrs_seconds" "$out/attr-corpus-work" "$attr_seeds" 4096
run fuzz_hlo_proto "$proto_seconds" "$out/proto-corpus-work" "$proto_seeds" 16384
run fuzz_mlir_bytecode "$bytecode_seconds" "$out/bytecode-corpus-work" "$bc_seeds" 32768
# A generated program compiles in 1-3 s of CPU here (LLVM included), so 30 s per input: a
# 10 s bound fired on a seed at load 16 on 2 cores (12 s of wall time, 3 s of CPU).
run fuzz_compile "$compile_seconds" "$out/compile-corpus-work" "$compile_seeds" 8192 30
run fuzz_cache_entry "$cache_seconds" "$out/cache-corpus-work" "$cache_seeds" 4096
run fuzz_exec_deserialize "$exec_seconds" "$out/exec-corpus-work" "$exec_seeds" 65536
run fuzz_host_elf "$elf_seconds" "$out/elf-corpus-work" "$elf_seeds" 65536
# An input that loads runs once, lowered on that execute (LLVM for the host): 30 s as
# fuzz_compile.
run fuzz_pjrt_deserialize "$pjrt_seconds" "$out/pjrt-corpus-work" "$pjrt_seeds" 65536 30
if [ "$status" -ne 0 ]; then exit "$status"; fi
echo "fuzz: no crash, leak or hang in ${seconds}s (parser ${parser_seconds}s, mlir text ${mlir_seconds}s, ffi attrs ${attrs_seconds}s, hlo proto ${proto_seconds}s, mlir bytecode ${bytecode_seconds}s, compile ${compile_seconds}s, cache entries ${cache_seconds}s, serialized executables ${exec_seconds}s, host objects ${elf_seconds}s, plugin blobs ${pjrt_seconds}s)"

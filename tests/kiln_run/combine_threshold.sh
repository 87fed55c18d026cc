#!/bin/sh
# kiln-run --combine-threshold-bytes=N sets the collective combiners' size bound (as kiln-opt's
# flag) on the corpus's JAX mnist update for 8 replicas, whose six gradient all-reduces
# (two over 1 MiB) combine into 1 by default (30 MiB):
#   - --direct --compile-only (the count needs no run): the collective thunks kiln-run prints
#     are 1 by default and for 0 (the default), 3 under 1 MiB (the two big ones alone, the four
#     small ones together), 6 off (-1);
#   - through the plugin (the compile options' xla_gpu_*_combine_threshold_bytes): the thunk
#     dump (KILN_DUMP_TO) holds 6 all-reduce thunks off and 1 by default (an async pair counts
#     once: its start);
#   - a value that is not an integer is refused.
# usage: combine_threshold.sh KILN_RUN CORPUS_DIR (exit 77: the corpus file is missing)
set -u
run=$1
hlo=$2/real/paragraph-sim__hlo-examples__jax__mnist__hlo_files__hlo_before_optimizations_mnist_8_gpus.txt
test -r "$hlo" || exit 77
. "$(dirname "$0")/common.sh"

# The collective thunks of a direct compile with flags "$@".
direct() {
  out=$("$run" --direct --backend=host --compile-only "$@" "$hlo") || fail "kiln-run $*: $out"
  printf '%s\n' "$out" | sed -n 's/^ran on 8 host devices: .*(\([0-9]*\) collective thunks.*/\1/p'
}
for want in ":1" "--combine-threshold-bytes=0:1" "--combine-threshold-bytes=1048576:3" \
    "--combine-threshold-bytes=-1:6"; do
  flag=${want%:*}
  n=$(direct $flag)
  echo "direct ${flag:-(default)}: $n collective thunks"
  test "$n" = "${want##*:}" || fail "direct ${flag:-(default)}: want ${want##*:} collective thunks, got '$n'"
done

# The all-reduce thunks the plugin's compile dumped with flags "$@".
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
plugin() {
  rm -rf "$dir/d"
  out=$(KILN_DUMP_TO="$dir/d" "$run" --backend=host --host-devices=8 "$@" "$hlo") ||
    fail "kiln-run through the plugin $*: $out"
  cat "$dir"/d/*.97-thunks.txt | grep -c '^ *collective .* all-reduce\(-start\)\? world='
}
n=$(plugin --combine-threshold-bytes=-1)
echo "plugin --combine-threshold-bytes=-1: $n all-reduce thunks"
test "$n" = 6 || fail "plugin, combiners off: want 6 all-reduce thunks, got '$n'"
n=$(plugin)
echo "plugin (default): $n all-reduce thunks"
test "$n" = 1 || fail "plugin, default: want 1 all-reduce thunk, got '$n'"

if out=$("$run" --direct --backend=host --combine-threshold-bytes=1MiB "$hlo" 2>&1); then
  fail "--combine-threshold-bytes=1MiB was taken: $out"
fi
printf '%s\n' "$out" | grep -q 'combine-threshold-bytes=1MiB: expected an integer' ||
  fail "--combine-threshold-bytes=1MiB: unexpected message: $out"
echo "combine threshold: ok"

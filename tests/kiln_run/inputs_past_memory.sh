#!/bin/sh
# Inputs that cannot fit in memory: kiln-run refuses to make them with RESOURCE_EXHAUSTED
# naming what they need and what the machine has (it used to allocate them until the kernel's
# out-of-memory killer ended it: a corpus llama module needs 35 GiB of inputs), on the
# reference, through the plugin and --direct; exit status 1, not a signal's.
# usage: inputs_past_memory.sh KILN_RUN [CORPUS_DIR]
set -u
. "$(dirname "$0")/common.sh"
refused_everywhere "$1" "$(dirname "$0")/huge_parameter.hlo" \
  'RESOURCE_EXHAUSTED: fake args: the inputs need .* GiB (largest: parameter 0, f32\[1000000,1000000,1000\]' \
  'GiB of memory available on this machine'
# Two parameters of 0.6 x the memory available each: either alone fits (and the system would
# hand it out), both do not; refused before either is made.
kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
if [ -n "$kb" ]; then
  n=$((kb / 10 * 6 * 1024 / 4))
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  printf 'HloModule two\n\nENTRY main {\n  a = f32[%s] parameter(0)\n  b = f32[%s] parameter(1)\n  ROOT r = f32[%s] add(a, b)\n}\n' \
    "$n" "$n" "$n" > "$tmp/two.hlo"
  out=$("$1" --backend=host --direct "$tmp/two.hlo" 2>&1)
  rc=$?
  [ "$rc" -eq 1 ] || fail "two parameters of 0.6 x MemAvailable: exit status $rc, want 1: $out"
  printf '%s\n' "$out" | grep -q 'RESOURCE_EXHAUSTED: fake args: the inputs need' ||
    fail "two parameters of 0.6 x MemAvailable: not refused: $out"
fi
# The corpus case: a llama 405b training step's 35.5 GiB of inputs, where there is less.
llama="${2:-}/xla/xla__tools__benchmarks__hlo__hlo_llama31_405b_bf16_16x8.hlo"
if [ -n "${2:-}" ] && [ -r "$llama" ] && [ -n "$kb" ] && [ "$kb" -lt $((30 * 1024 * 1024)) ]; then
  out=$("$1" --backend=host --direct "$llama" 2>&1)
  rc=$?
  [ "$rc" -eq 1 ] || fail "llama31_405b_bf16_16x8: exit status $rc, want 1: $out"
  printf '%s\n' "$out" | grep -q 'RESOURCE_EXHAUSTED: fake args: the inputs need 35.[0-9]* GiB' ||
    fail "llama31_405b_bf16_16x8: not refused for its 35 GiB of inputs: $out"
fi
echo "inputs past memory: refused on every backend"

#!/bin/sh
# A constant whose contents the text elided: the reference, the plugin and --direct each exit 1
# with FAILED_PRECONDITION naming the constant, its shape and computation, and the XLA flag
# that prints large constants (the host used to say "UNIMPLEMENTED: constant allocation N: ...
# has no array contents", naming neither the cause nor the fix).
# usage: elided_constant.sh KILN_RUN [CORPUS_DIR]
set -u
. "$(dirname "$0")/common.sh"
refused_everywhere "$1" "$(dirname "$0")/elided_constant.hlo" \
  'FAILED_PRECONDITION: .*constant table f32\[200\] in computation main has elided contents' \
  '--xla_dump_large_constants'
# The corpus case: a JAX benchmark dumped without its constants (the passes rename them).
jax="${2:-}/xla/xla__backends__cpu__benchmarks__hlo__jax.issue.33666.linx.slow_0100.module_0013.hlo"
if [ -n "${2:-}" ] && [ -r "$jax" ]; then
  out=$("$1" --backend=host --direct "$jax" 2>&1)
  rc=$?
  [ "$rc" -eq 1 ] || fail "slow_0100.module_0013: exit status $rc, want 1: $out"
  printf '%s\n' "$out" | grep -q 'FAILED_PRECONDITION: constant .* f32\[200\] in computation .* has elided contents' ||
    fail "slow_0100.module_0013: no FAILED_PRECONDITION naming the elided constant: $out"
fi
echo "elided constant: refused on every backend"

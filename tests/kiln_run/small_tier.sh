#!/bin/sh
# kiln-run --direct --backend=host reports how many kernels of a module the host JIT's small
# tier compiled ("kernels K from F fusions (S small tier)", the compile's own count), on two
# modules of the corpus file frontend_attributes.hlo:
#   - module 0, frontend_attributes: its one elementwise kernel is straight-line and small,
#     0 < S <= K;
#   - module 7, frontend_attributes_topk: a sort kernel with a loop beside small ones,
#     0 < S < K;
#   - with KILN_HOST_LLVM_PIPELINE set (even to the default pipeline) every kernel takes the
#     full tier: S = 0 on both while K > 0.
# usage: small_tier.sh KILN_RUN CORPUS_DIR (exit 77: the corpus file is missing)
set -u
run=$1
hlo=$2/xla/xla__hlo__translate__hlo_to_mhlo__tests__frontend_attributes.hlo
test -r "$hlo" || exit 77
. "$(dirname "$0")/common.sh"

# "NAME K S" of module $1 (NAME "-" for module 0, which kiln-run prints no header for).
counts() {
  out=$("$run" --direct --backend=host --module="$1" "$hlo") || fail "kiln-run --module=$1: $out"
  printf '%s\n' "$out" | awk '
    BEGIN { name = "-" }
    /^module [0-9]+: / { name = $3 }
    /^ran on host.*kernels [0-9]+ from [0-9]+ fusions \([0-9]+ small tier\)/ {
      match($0, /kernels [0-9]+ from/); k = substr($0, RSTART + 8, RLENGTH - 13)
      match($0, /\([0-9]+ small tier\)/); s = substr($0, RSTART + 1, RLENGTH - 13)
      print name, k, s }'
}

c=$(counts 0)
echo "full and small tiers: $c"
set -- $c
test $# -eq 3 && test "$3" -gt 0 && test "$3" -le "$2" ||
  fail "frontend_attributes: want 0 < small-tier kernels <= kernels, got '$c'"
c=$(counts 7)
echo "full and small tiers: $c"
set -- $c
test $# -eq 3 && test "$1" = frontend_attributes_topk && test "$3" -gt 0 && test "$3" -lt "$2" ||
  fail "frontend_attributes_topk: want 0 < small-tier kernels < kernels, got '$c'"

KILN_HOST_LLVM_PIPELINE='default<O3>'
export KILN_HOST_LLVM_PIPELINE
for m in 0 7; do
  c=$(counts $m)
  echo "pipeline set: $c"
  set -- $c
  test $# -eq 3 && test "$2" -gt 0 && test "$3" -eq 0 ||
    fail "module $m with KILN_HOST_LLVM_PIPELINE set: want kernels > 0, none small tier, got '$c'"
done
echo "small tier counts: ok"

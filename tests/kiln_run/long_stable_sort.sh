#!/bin/sh
# A whole module with a stable sort of rows past 12,288 elements (JAX's argsort form: keys with
# many ties, an iota payload) runs as the merge sort, whose kernel declares scratch tensors
# that the thunk emitter backs with a temporary allocation: through the plugin and --direct,
# twice in a row (the second run reuses the execution context's scratch), the indices equal
# the evaluator's (an unstable order of the ties would differ).
# usage: long_stable_sort.sh KILN_RUN
set -u
run=$1
hlo=$(dirname "$0")/long_stable_argsort.hlo
fail() {
  echo "FAIL: $*"
  exit 1
}
for mode in "" --direct; do
  out=$("$run" --backend=host --compare=reference --repeat=2 $mode "$hlo" 2>&1) ||
    fail "kiln-run $mode: $out"
  printf '%s\n' "$out" | grep -E 'compare with reference'
  printf '%s\n' "$out" | grep -q 'compare with reference: 60000 elements, .*: matches the reference' ||
    fail "$mode: the indices do not match the reference: $out"
done
echo "long stable sort through whole modules: ok"

#!/bin/sh
# A whole module with a stable sort of rows past 12,288 elements (JAX's argsort form: keys with
# many ties, an iota payload) runs as the merge sort, whose kernel declares scratch tensors
# that the thunk emitter backs with a temporary allocation: through the plugin and --direct,
# twice in a row (the second run reuses the execution context's scratch), the indices equal
# the evaluator's (an unstable order of the ties would differ).
# usage: long_stable_sort.sh KILN_RUN
set -u
. "$(dirname "$0")/common.sh"
all_indices() {
  printf '%s\n' "$2" | grep -q 'compare with reference: 60000 elements' ||
    fail "$1: want all 60000 indices compared: $2"
}
compare_both_ways "$1" "$(dirname "$0")/long_stable_argsort.hlo" all_indices --repeat=2
echo "long stable sort through whole modules: ok"

#!/bin/sh
# A constant whose contents the text elided: the reference, the plugin and --direct each exit 1
# with FAILED_PRECONDITION naming the constant, its shape and computation, and the XLA flag
# that prints large constants (the host used to say "UNIMPLEMENTED: constant allocation N: ...
# has no array contents", naming neither the cause nor the fix).
# usage: elided_constant.sh KILN_RUN
set -u
. "$(dirname "$0")/common.sh"
refused_everywhere "$1" "$(dirname "$0")/elided_constant.hlo" \
  'FAILED_PRECONDITION: .*constant table f32\[200\] in computation main has elided contents' \
  '--xla_dump_large_constants'
echo "elided constant: refused on every backend"

#!/bin/sh
# kiln-run --collective-timeout-ms=N (and KILN_COLLECTIVE_TIMEOUT_MS=N) bound how long a
# participant of a multi-device run waits for a peer: on a module where replica 1 skips the
# all-reduce replica 0 runs, both the direct run and the run through the plugin (its client
# option collective_timeout_ms) fail with DEADLINE_EXCEEDED naming rank 1 and the bound, in
# under 10 s (the 30 s default would not); a bound of 0 is refused.
# usage: collective_timeout.sh KILN_RUN
set -u
run=$1
. "$(dirname "$0")/common.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
hlo=$dir/skip.hlo
cat > "$hlo" <<'HLO'
HloModule skip, replica_count=2

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

with_ar {
  p = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=add
}

without {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}

ENTRY e {
  x = f32[4] parameter(0)
  rid = u32[] replica-id()
  zero = u32[] constant(0)
  first = pred[] compare(rid, zero), direction=EQ
  ROOT r = f32[4] conditional(first, x, x), true_computation=with_ar, false_computation=without
}
HLO

# Runs kiln-run with "$@" on the module; it must fail with the deadline of `want` ms in < 10 s.
expect_deadline() {
  want=$1
  shift
  start=$(date +%s)
  out=$(timeout 60 "$run" --backend=host --host-devices=2 "$@" "$hlo" 2>&1) &&
    fail "kiln-run $*: succeeded: $out"
  took=$(($(date +%s) - start))
  printf '%s\n' "$out" | grep -q "DEADLINE_EXCEEDED.*rank(s) 1 did not arrive within $want ms" ||
    fail "kiln-run $*: want the $want ms deadline, got: $out"
  test "$took" -lt 10 || fail "kiln-run $*: took $took s"
  echo "kiln-run $*: DEADLINE_EXCEEDED after the $want ms bound (${took} s)"
}
expect_deadline 300 --direct --collective-timeout-ms=300
expect_deadline 300 --collective-timeout-ms=300
KILN_COLLECTIVE_TIMEOUT_MS=400 expect_deadline 400 --direct
KILN_COLLECTIVE_TIMEOUT_MS=400 expect_deadline 400

out=$("$run" --backend=host --host-devices=2 --collective-timeout-ms=0 "$hlo" 2>&1) &&
  fail "--collective-timeout-ms=0 was accepted"
printf '%s\n' "$out" | grep -q "collective-timeout-ms" || fail "--collective-timeout-ms=0: $out"
echo "--collective-timeout-ms=0 refused"

#!/bin/sh
# kiln-run --repeat=N keeps the first run's outputs: on the corpus module thunk_coverage__cpu
# (an rng-get-and-update-state counter moves on each run, as in XLA, so leaf 16 of a later
# run differs), --repeat=3 --compare=reference matches the evaluator's one run, through the
# plugin and --direct alike (before session 35 it compared the last run: a MISMATCH).
# usage: repeat_first_run.sh KILN_RUN CORPUS_DIR (exit 77: the corpus file is missing)
set -u
run=$1
hlo=$2/xla/xla__backends__cpu__tests__thunk_coverage__cpu.hlo
test -r "$hlo" || exit 77
fail() {
  echo "FAIL: $*"
  exit 1
}
for mode in "" --direct; do
  out=$("$run" --backend=host --compare=reference --repeat=3 $mode "$hlo" 2>&1) ||
    fail "kiln-run --repeat=3 $mode: $out"
  printf '%s\n' "$out" | grep -E '^run [0-9]|compare with reference'
  test "$(printf '%s\n' "$out" | grep -c '^run [0-9]')" -eq 3 || fail "$mode: want 3 runs: $out"
  printf '%s\n' "$out" | grep -q 'compare with reference: .*: matches the reference' ||
    fail "$mode: the first run does not match the reference: $out"
done
echo "repeat keeps the first run: ok"

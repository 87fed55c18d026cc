#!/bin/sh
# kiln-run --repeat=N keeps the first run's outputs: on the corpus module thunk_coverage__cpu
# (an rng-get-and-update-state counter moves on each run, as in XLA, so leaf 16 of a later
# run differs), --repeat=3 --compare=reference matches the evaluator's one run, through the
# plugin and --direct alike (before session 35 it compared the last run: a MISMATCH).
# usage: repeat_first_run.sh KILN_RUN CORPUS_DIR (exit 77: the corpus file is missing)
set -u
. "$(dirname "$0")/common.sh"
hlo=$2/xla/xla__backends__cpu__tests__thunk_coverage__cpu.hlo
test -r "$hlo" || exit 77
three_runs() {
  test "$(printf '%s\n' "$2" | grep -c '^run [0-9]')" -eq 3 || fail "$1: want 3 runs: $2"
}
compare_both_ways "$1" "$hlo" three_runs --repeat=3
echo "repeat keeps the first run: ok"

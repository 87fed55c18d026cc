#!/usr/bin/env bash
# kiln-fuzz --fork (issue 22): a worker that crashes or hangs is caught by the parent, the
# failure is reported with its seed, minimized (in new workers) to a small reproducer that
# still holds the trigger, the run goes on past it and exits 1; and scripts/fuzz-long.sh's
# merge adds two chunks' coverage tables up. The crash and the hang are the harness's own
# (--selftest-crash / --selftest-hang: the worker raises SIGSEGV / waits forever on a module
# whose text holds TEXT), so this checks the harness, not a compiler bug. Under ASan the
# sanitizer reports the SEGV and exits with status 1, which is a CRASH too.
# Usage: check_fork.sh KILN_FUZZ
set -euo pipefail
fuzz="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir"/*.log 2>/dev/null; exit 1; }

# Seeds 300042..300049 hold one entry multiply (seed 300046) and others (the generator of
# session 10; seeds 300040..300047 before).
rc=0
"$fuzz" --programs=8 --seed=300042 --selftest-crash=' multiply(v' --out="$dir" > "$dir/crash.log" 2>&1 ||
  rc=$?
[ "$rc" -eq 1 ] || fail "crash run exit $rc, want 1"
grep -q '^seed 300046: CRASH: ' "$dir/crash.log" || fail "no crash reported for seed 300046"
grep -q 'kiln-fuzz: 8 programs (seeds 300042..300049' "$dir/crash.log" || fail "the run stopped at the crash"
grep -q 'outcomes: passed [1-9].* CRASH [1-9]' "$dir/crash.log" || fail "no coverage after the crash"
repro="$dir/fuzz-300046.hlo"
[ -s "$repro" ] || fail "no reproducer"
grep -q ' multiply(v' "$repro" || fail "the minimizer lost the trigger"
# Shrunk: the multiply and its two operands, every dimension 1.
[ "$(grep -c ' = ' "$repro")" -le 3 ] || fail "not minimized: $(cat "$repro")"
if grep -E '\[[0-9,]*([2-9]|[1-9][0-9])[0-9,]*\]' "$repro"; then fail "dimensions not shrunk"; fi
"$fuzz" --no-fork "$repro" | grep -q 'passed' || fail "the reproducer does not run without the trigger"

# A hang: killed after the timeout, reported as TIMEOUT, the run goes on.
rc=0
"$fuzz" --programs=3 --seed=300045 --timeout=1 --no-minimize --selftest-hang=' multiply(v' \
  --out="$dir" > "$dir/hang.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "hang run exit $rc, want 1"
grep -q '^seed 300046: TIMEOUT: killed after 1 s' "$dir/hang.log" || fail "no timeout reported"
grep -q 'kiln-fuzz: 3 programs' "$dir/hang.log" || fail "the run stopped at the hang"

# Merged coverage: the two runs' tables add up to 11 programs.
"$fuzz" --merge-coverage "$dir/crash.log" "$dir/hang.log" > "$dir/merged.txt"
grep -q 'merged 2 coverage tables: 11 programs' "$dir/merged.txt" || fail "merge: $(tail -n 2 "$dir/merged.txt")"
echo "kiln-fuzz --fork: crash and hang caught, minimized, coverage merged"

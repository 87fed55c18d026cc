#!/usr/bin/env bash
# A long differential-fuzzing run for developers (issue 22):
#   scripts/fuzz-long.sh N [SEED] [JOBS] [OUT]
# runs N generated programs (seeds SEED .. SEED+N-1; default SEED 1000000, JOBS 2, OUT
# fuzz-long-<SEED>) through build/kiln-fuzz in chunks of KILN_FUZZ_CHUNK programs (default
# 1000), JOBS chunks at a time under `nice -n 19` (the machine is shared). The programs run in
# a forked worker (kiln-fuzz --fork), so a crash, abort or timeout is reported with its seed and
# minimized like a mismatch. Reproducers land in OUT/repro/, one log per chunk in OUT/logs/;
# a chunk that finished has OUT/logs/<first seed>.done, so rerunning the same command resumes
# an interrupted run. SIGTERM to the kiln-fuzz processes stops them after their current
# program: such a chunk's log becomes <first seed>.stopped.log (its table counts in the merge;
# a resumed run redoes the chunk). At the end the coverage tables of the chunks' logs are added up
# (kiln-fuzz --merge-coverage) and the failures listed; exits 1 when any program failed.
# KILN_FUZZ_BIN overrides the binary (copy it aside if you rebuild during the run);
# KILN_FUZZ_ARGS adds kiln-fuzz options (e.g. "--timeout=300 --no-minimize": at nice 19 on a
# loaded machine a program of 2 s of CPU can take over 120 s of wall time).
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:?usage: scripts/fuzz-long.sh N [SEED] [JOBS] [OUT]}"
seed="${2:-1000000}"
jobs="${3:-2}"
out="${4:-fuzz-long-$seed}"
chunk="${KILN_FUZZ_CHUNK:-1000}"
bin="${KILN_FUZZ_BIN:-build/kiln-fuzz}"
[ -x "$bin" ] || { echo "fuzz-long: no $bin (cmake --build build --target kiln-fuzz)" >&2; exit 2; }
mkdir -p "$out/logs" "$out/repro"
out="$(cd "$out" && pwd)"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
KILN_FUZZ_ARGS="${KILN_FUZZ_ARGS:-}"
export bin out KILN_FUZZ_ARGS
start=$(date +%s)
echo "fuzz-long: $n programs from seed $seed, $jobs jobs, chunks of $chunk, into $out ($(uptime))"
for ((s = seed; s < seed + n; s += chunk)); do
  c=$((seed + n - s < chunk ? seed + n - s : chunk))
  echo "$s $c"
done | xargs -P "$jobs" -L 1 sh -c '
  s=$1 c=$2 log="$out/logs/$1"
  [ -e "$log.done" ] && exit 0
  rm -f "$log.stopped.log"
  rc=0
  nice -n 19 "$bin" --fork --programs="$c" --seed="$s" --out="$out/repro" $KILN_FUZZ_ARGS > "$log.log" 2>&1 ||
    rc=$?
  if grep -q "stopped by a signal" "$log.log"; then
    mv "$log.log" "$log.stopped.log"  # counted in the tables; the chunk reruns on resume
  elif [ "$rc" -le 1 ]; then
    echo "$rc" > "$log.done"
  fi
  f="$log.log"
  [ -e "$f" ] || f="$log.stopped.log"
  echo "fuzz-long: seeds $s..$((s + c - 1)) exit $rc, $(tail -n 1 "$f")"
' sh
secs=$(($(date +%s) - start))
"$bin" --merge-coverage "$out"/logs/*.log | tee "$out/coverage.txt"
failed=0
grep -h '^seed ' "$out"/logs/*.log > "$out/failures.txt" || true
[ -s "$out/failures.txt" ] && failed=1
missing=0
for ((s = seed; s < seed + n; s += chunk)); do [ -e "$out/logs/$s.done" ] || missing=$((missing + 1)); done
echo "fuzz-long: $(wc -l < "$out/failures.txt") failures (listed in $out/failures.txt)," \
  "$missing chunks unfinished, $secs s this invocation, $(uptime)"
[ "$missing" -eq 0 ] || exit 2
exit "$failed"

#!/usr/bin/env bash
# Cold compile of the corpus by two kiln-run builds, module by module, in alternation (issue 20:
# "the whole corpus cold <= half of today's total").
#
# Usage: scripts/compile-vs-baseline.sh [--list-only] [--limit N] [--timeout S] [--out FILE]
#                                       OLD_KILN_RUN NEW_KILN_RUN [LIST]
#   LIST     "path<TAB>module index" lines, as `bench_compile --all --list FILE` writes the
#            host-compilable corpus modules; default: made with $BENCH_COMPILE
#            (./build/bench_compile) over $KILN_CORPUS_DIR.
#   --list-only  print the modules that would be timed and check both tools start; time nothing
#   --limit N    only the first N modules (a quick self-check: --limit 3)
#   --timeout S  per kiln-run process (default 300 s; a timeout counts as a failure)
#   --out FILE   also write the per-module rows there (tab-separated)
#
# Each module runs `kiln-run --backend=host --direct --compile-only --timings --values=0
# --module=I PATH` once with the old and once with the new build (old first on even rows, new
# first on odd ones, so load drifts hit both), each in a fresh, empty XDG_CACHE_HOME and
# KILN_CACHE_DIR (--direct uses no disk cache; the process starts with an empty in-memory kernel
# cache): a cold compile. Compile = everything until the executable can run (passes, kernel
# generation, LLVM, JIT load), read from kiln-run's "timings: compile + load W ms, CPU C ms"
# line (C: the process's CPU time over those steps, all threads). Both builds need
# --compile-only and that line: kiln-run has them since 2026-12-03; the old tree of issue 20
# (fb76c28^) gets them from scripts/baseline-old-kiln-run.patch (tools only; its binary is
# /work/baseline-old-kiln-run; to rebuild it: git worktree add --detach OLD fb76c28^, then in
# OLD git apply that patch and build the kiln-run target). The whole process's wall and CPU (/usr/bin/time: start-up,
# parse, generated inputs, compile) are printed beside. Modules that either build fails on
# are listed apart, not summed; so are multi-device modules the new build runs on N host
# devices (compiled for that world, not comparable: kiln-run prints no compile + load line
# there). Run it under nice -n 19 on a shared machine; the load is printed before and after.
set -u
limit=0 list_only=0 timeout_s=300 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --list-only) list_only=1; shift ;;
    --limit) limit=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    --*) echo "unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  sed -n '4,5p' "$0" >&2
  exit 2
fi
old=$1 new=$2 list=${3:-}
for t in "$old" "$new"; do
  if ! "$t" --help > /dev/null 2>&1 ||
    "$t" --backend=host --compile-only /nonexistent.hlo 2>&1 | grep -q "unknown flag"; then
    echo "$t does not run, or has no --compile-only (see scripts/baseline-old-kiln-run.patch)" >&2
    exit 1
  fi
done
work=$(mktemp -d /tmp/kiln-vs-baseline.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [ -z "$list" ]; then
  bc=${BENCH_COMPILE:-./build/bench_compile}
  echo "making the module list: $bc --all --list (compiles the corpus once)"
  "$bc" --all --list "$work/list" > "$work/bench_compile.log" 2>&1 || {
    echo "$bc failed:" >&2
    tail -5 "$work/bench_compile.log" >&2
    exit 1
  }
  list=$work/list
fi
[ -r "$list" ] || { echo "cannot read $list" >&2; exit 1; }
awk -F'\t' -v n="$limit" 'NF >= 2 && (n == 0 || NR <= n)' "$list" > "$work/modules"
count=$(wc -l < "$work/modules")
echo "old: $old"
echo "new: $new"
echo "modules: $count (from $list)"
if [ "$list_only" = 1 ]; then
  cat "$work/modules"
  exit 0
fi
echo "load before: $(uptime)"

# run TOOL PATH INDEX -> "status compile_wall compile_cpu proc_wall proc_cpu" (- when unknown)
run() {
  local tool=$1 path=$2 index=$3 d
  d=$(mktemp -d "$work/run.XXXXXX")
  XDG_CACHE_HOME=$d/xdg KILN_CACHE_DIR=$d/kiln /usr/bin/time -f '%e %U %S' -o "$d/time" \
    timeout "$timeout_s" "$tool" --backend=host --direct --compile-only --timings --values=0 \
    --module="$index" "$path" > "$d/out" 2>&1
  local rc=$?
  awk -v rc="$rc" '
    FILENAME ~ /time$/ && NF == 3 && $1 ~ /^[0-9.]+$/ { pw = $1; pc = ($2 + $3) * 1000 }
    FILENAME ~ /out$/ && /^timings: compile \+ load / { w = $5; c = $8 }
    FILENAME ~ /out$/ && /^kiln-run: / && err == "" { err = $0 }
    FILENAME ~ /out$/ && /^ran on [0-9]+ host devices/ { multi = "multi-device run, not timed: " $0 }
    END {
      st = (w == "") ? "fail" : (rc == 0 ? "ok" : "ok-run-rc" rc)
      if (w == "" && rc == 124) st = "timeout"
      if (err == "") err = multi
      gsub(/[ \t]+/, " ", err)
      printf "%s %s %s %s %s\t%s\n", st, w == "" ? "-" : w, c == "" ? "-" : c,
             pw == "" ? "-" : pw * 1000, pc == "" ? "-" : pc, substr(err, 1, 160)
    }' "$d/time" "$d/out"
  rm -rf "$d"
}

printf '%-70s %9s %9s %9s %9s %6s %6s %9s %9s\n' module old_ms new_ms old_cpu new_cpu \
  r_wall r_cpu old_proc new_proc
: > "$work/rows"
i=0
while IFS=$'\t' read -r path index _; do
  if [ $((i % 2)) = 0 ]; then
    ro=$(run "$old" "$path" "$index"); rn=$(run "$new" "$path" "$index")
  else
    rn=$(run "$new" "$path" "$index"); ro=$(run "$old" "$path" "$index")
  fi
  i=$((i + 1))
  label="${path#"${KILN_CORPUS_DIR:-/work/shared/hlo-corpus}"/}#$index"
  # row: label, old status/wall/cpu/proc wall/proc cpu, new the same, old error, new error
  printf '%s\t%s\t%s\t%s\t%s\n' "$label" "${ro%%$'\t'*}" "${rn%%$'\t'*}" "${ro#*$'\t'}" \
    "${rn#*$'\t'}" >> "$work/rows"
  tail -1 "$work/rows" | awk -F'\t' '{
    split($2, o, " "); split($3, n, " ")
    rw = (o[1] ~ /^ok/ && n[1] ~ /^ok/ && o[2] > 0) ? sprintf("%.2f", n[2] / o[2]) : "-"
    rc = (o[1] ~ /^ok/ && n[1] ~ /^ok/ && o[3] > 0 && n[3] != "-") ? sprintf("%.2f", n[3] / o[3]) : "-"
    printf "%-70.70s %9s %9s %9s %9s %6s %6s %9s %9s%s\n", $1, o[1] ~ /^ok/ ? o[2] : o[1],
      n[1] ~ /^ok/ ? n[2] : n[1], o[3], n[3], rw, rc, o[5], n[5],
      (o[1] ~ /^ok/ && n[1] ~ /^ok/) ? "" : "  (not summed)"
  }'
done < "$work/modules"
echo "load after: $(uptime)"
[ -n "$out" ] && cp "$work/rows" "$out"

awk -F'\t' -v ratios="$work/ratios" '
  { split($2, o, " "); split($3, n, " ") }
  o[1] ~ /^ok/ && n[1] ~ /^ok/ {
    m++; ow += o[2]; nw += n[2]; op += o[5]; np += n[5]
    if (o[3] != "-" && n[3] != "-") { cm++; oc += o[3]; nc += n[3] }
    printf "%.4f\t%.1f\t%.1f\t%s\t%s\t%s\n", (o[2] > 0 ? n[2] / o[2] : 0), o[2], n[2], o[3],
      n[3], $1 > ratios
    next
  }
  { f++; fails = fails sprintf("  old %-9s new %-9s %s\n      old: %s\n      new: %s\n", o[1], n[1],
      $1, $4 == "" ? "-" : $4, $5 == "" ? "-" : $5) }
  END {
    printf "\ntotals over %d modules both builds compiled (%d listed apart):\n", m, f
    printf "  cold compile + load wall: old %.1f ms, new %.1f ms, new/old %.3f (goal <= 0.5)\n",
      ow, nw, (ow > 0 ? nw / ow : 0)
    if (cm > 0)
      printf "  cold compile + load CPU (all threads, %d modules): old %.1f ms, new %.1f ms, new/old %.3f\n",
        cm, oc, nc, (oc > 0 ? nc / oc : 0)
    printf "  whole kiln-run process CPU (start-up, parse, inputs, compile + load): old %.1f ms, new %.1f ms, new/old %.3f\n",
      op, np, (op > 0 ? np / op : 0)
    if (f > 0) printf "modules not summed (status old / new; first error line):\n%s", fails
  }' "$work/rows"
if [ -s "$work/ratios" ]; then
  echo "the ten highest new/old compile wall ratios (new slowest relative to old):"
  sort -t$'\t' -k1,1gr "$work/ratios" | head -10 |
    awk -F'\t' '{ printf "  %6.2fx  old %9.1f ms  new %9.1f ms  (CPU %s -> %s ms)  %s\n", $1, $2, $3, $4, $5, $6 }'
fi

# Shared by the kiln-run test scripts (sourced: `. "$(dirname "$0")/common.sh"`).

fail() {
  echo "FAIL: $*"
  exit 1
}

# compare_both_ways RUN HLO CHECK [ARGS...]: `RUN --backend=host --compare=reference ARGS...
# HLO` through the plugin, then with --direct; fails unless each exits 0 and matches the
# reference, then runs `CHECK MODE OUTPUT` (a function of the caller's; "" skips it).
compare_both_ways() {
  cbw_run=$1 cbw_hlo=$2 cbw_check=$3
  shift 3
  for cbw_mode in "" --direct; do
    cbw_out=$("$cbw_run" --backend=host --compare=reference "$@" $cbw_mode "$cbw_hlo" 2>&1) ||
      fail "kiln-run $* $cbw_mode: $cbw_out"
    printf '%s\n' "$cbw_out" | grep -E '^run [0-9]|compare with reference'
    printf '%s\n' "$cbw_out" | grep -q 'compare with reference: .*: matches the reference' ||
      fail "$cbw_mode: the outputs do not match the reference: $cbw_out"
    [ -z "$cbw_check" ] || "$cbw_check" "$cbw_mode" "$cbw_out"
  done
}

# refused_everywhere RUN HLO PATTERN...: `RUN MODE HLO` on the reference, through the plugin
# and with --direct each exit with status 1 (an error status, not a signal's) and print every
# PATTERN (grep basic regular expressions).
refused_everywhere() {
  re_run=$1 re_hlo=$2
  shift 2
  for re_mode in --backend=reference --backend=host "--backend=host --direct"; do
    re_out=$("$re_run" $re_mode "$re_hlo" 2>&1)
    re_rc=$?
    [ "$re_rc" -eq 1 ] || fail "kiln-run $re_mode: exit status $re_rc, want 1: $re_out"
    for re_pattern in "$@"; do
      printf '%s\n' "$re_out" | grep -q -- "$re_pattern" ||
        fail "kiln-run $re_mode: no '$re_pattern' in: $re_out"
    done
  done
}

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

#!/bin/sh
# The full-size training step (4 layers, d_model 256, 8 x 128 tokens, 32,000 words) on the
# host, dots as gemm thunks vs every dot an elemental kernel (KILN_GEMM_LIBRARY=none), in
# the same run: prints each variant's fastest of $REPEAT runs ($GEMM_REPEAT for the gemm
# thunks, default $REPEAT; the first run of a process is slower) and the ratio.
#
#   sh examples/transformer/compare.sh            # f32 and bf16
#   DTYPES=f32 REPEAT=5 sh examples/transformer/compare.sh
#   REPEAT=1 GEMM_REPEAT=3 sh examples/transformer/compare.sh   # one elemental step (minutes)
set -e
here=$(dirname "$0")
kiln_run=${KILN_RUN:-$here/../../build/kiln-run}
repeat=${REPEAT:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gemm_repeat=${GEMM_REPEAT:-$repeat}
# the run time of the timings line: the minimum over --repeat (or the one run)
min_ms() { sed -n 's/^timings: .* run \([0-9.]*\) ms.*/\1/p' "$1"; }
for dt in ${DTYPES:-f32 bf16}; do
  /usr/bin/python3 "$here/gen_train_step.py" --dtype="$dt" > "$tmp/step.hlo"
  "$kiln_run" --backend=host --direct --timings --repeat="$gemm_repeat" "$tmp/step.hlo" > "$tmp/gemm.txt"
  KILN_GEMM_LIBRARY=none "$kiln_run" --backend=host --direct --timings --repeat="$repeat" \
    "$tmp/step.hlo" > "$tmp/elemental.txt"
  grep '^out0 ' "$tmp/gemm.txt" | sed "s/^/$dt loss (gemm):      /"
  grep '^out0 ' "$tmp/elemental.txt" | sed "s/^/$dt loss (elemental): /"
  g=$(min_ms "$tmp/gemm.txt")
  e=$(min_ms "$tmp/elemental.txt")
  awk -v dt="$dt" -v g="$g" -v e="$e" \
    'BEGIN { printf "%s: gemm thunks %.1f ms, elemental dots %.1f ms: %.1fx\n", dt, g, e, e / g }'
done

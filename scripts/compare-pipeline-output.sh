#!/bin/sh
# Compares what two builds of kiln print for the same inputs: `kiln-opt --pipeline` (the
# optimized module) and `kiln-buffers --pipeline` (its buffer assignment), stdout, stderr
# and exit status, file by file. For changes that must not change any pass's output.
#   scripts/compare-pipeline-output.sh BASE_DIR NEW_DIR [FILE...]
# BASE_DIR and NEW_DIR hold the kiln-opt and kiln-buffers binaries of each build; the files
# default to every .hlo and .txt file of /work/shared/hlo-corpus (KILN_CORPUS overrides).
# Prints each differing file and "N files identical, M differ"; exits 1 when any differs.
set -u
base=$1
new=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ $# -eq 0 ]; then
  corpus=${KILN_CORPUS:-/work/shared/hlo-corpus}
  find "$corpus" -type f \( -name '*.hlo' -o -name '*.txt' \) | sort > "$tmp/list"
else
  for f in "$@"; do echo "$f"; done > "$tmp/list"
fi
same=0
differ=0
while IFS= read -r f; do
  ok=1
  for tool in kiln-opt kiln-buffers; do
    for side in base new; do
      eval dir=\$$side
      timeout 300 "$dir/$tool" --pipeline "$f" > "$tmp/$side.out" 2>&1
      echo "exit $?" >> "$tmp/$side.out"
    done
    if ! cmp -s "$tmp/base.out" "$tmp/new.out"; then
      ok=0
      echo "differs ($tool): $f"
    fi
  done
  if [ $ok = 1 ]; then same=$((same + 1)); else differ=$((differ + 1)); fi
done < "$tmp/list"
echo "$same files identical, $differ differ"
[ $differ = 0 ]

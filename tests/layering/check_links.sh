#!/usr/bin/env bash
# The link half of the layer rule: no layer library calls a function (or uses a variable)
# that a layer it may not use defines. TABLE has one line per layer,
#   <layer> <static library> <layers it may use...>
# (written by CMakeLists.txt from the kiln_layer table). Exits 1, naming each symbol, the
# object that uses it and the layer that defines it, when one does; 0 otherwise.
#
#   check_links.sh TABLE [nm]
set -euo pipefail
table="$1"
nm="${2:-nm}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

layers=()
declare -A archive allowed
while read -r layer lib uses; do
  [ -n "$layer" ] || continue
  layers+=("$layer")
  archive[$layer]="$lib"
  allowed[$layer]=" $layer $uses "
  : > "$tmp/$layer.def.all"
  : > "$tmp/$layer.undef.all"
  "$nm" -g "$lib" | awk -v def="$tmp/$layer.def.all" -v undef="$tmp/$layer.undef.all" '
    $1 == "U" { print $2 > undef }
    NF == 3 && $2 != "U" { print $3 > def }'
  sort -u "$tmp/$layer.def.all" > "$tmp/$layer.def"
  sort -u "$tmp/$layer.undef.all" > "$tmp/$layer.undef"
done < "$table"

bad=0
for layer in "${layers[@]}"; do
  for other in "${layers[@]}"; do
    case "${allowed[$layer]}" in *" $other "*) continue ;; esac
    while read -r sym; do
      [ -n "$sym" ] || continue
      user="$("$nm" -A -g -u "${archive[$layer]}" | awk -v s="$sym" '$NF == s { print $1 }' |
              sed -E 's/^[^:]*:([^:]*):.*/\1/' | sort -u | tr '\n' ' ')"
      echo "layer $layer uses $sym from layer $other (in ${user% }), which it may not use"
      bad=1
    done < <(comm -12 "$tmp/$layer.undef" "$tmp/$other.def")
  done
done
if [ "$bad" -eq 0 ]; then
  echo "layers link only what they may use (${#layers[@]} layers checked)"
fi
exit "$bad"

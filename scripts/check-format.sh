#!/usr/bin/env bash
# Checks that the C lines a change touches follow the repository's .clang-format
# (clang-format 14 through `git clang-format`). The change is everything since BASE,
# uncommitted edits included, where BASE is $1, else $KILN_FORMAT_BASE, else the merge base
# with origin/main (or main): on a branch, its commits and edits; on main itself, everything
# since the last landed commit named in .ci/format-base (else only the uncommitted edits). Lines the change
# did not touch are not checked: much of the tree predates this check. Prints the fix and
# exits 1 when a touched line is misformatted, 0 otherwise. Before merging a branch into main,
# run it there (or pass main's commit as BASE).
#
#   scripts/check-format.sh [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format="$(command -v clang-format-14 || command -v clang-format || true)"
git_clang_format="$(command -v git-clang-format-14 || command -v git-clang-format || true)"
if [ -z "$clang_format" ] || [ -z "$git_clang_format" ]; then
  echo "check-format: clang-format (14) is not installed" >&2
  exit 1
fi

base="${1:-${KILN_FORMAT_BASE:-}}"
if [ -z "$base" ]; then
  for ref in origin/main main; do
    git rev-parse -q --verify "$ref^{commit}" >/dev/null || continue
    base="$(git merge-base HEAD "$ref" || true)"
    break
  done
fi
# On main itself (a CI clone), the change is everything since the last commit that landed
# before it, recorded in .ci/format-base (update it when a submission lands).
if { [ -z "$base" ] || [ "$(git rev-parse "$base")" = "$(git rev-parse HEAD)" ]; } &&
   [ -z "${1:-${KILN_FORMAT_BASE:-}}" ] && [ -f .ci/format-base ]; then
  landed="$(tr -d '[:space:]' < .ci/format-base)"
  if git rev-parse -q --verify "$landed^{commit}" >/dev/null; then base="$landed"; fi
fi
[ -n "$base" ] || base=HEAD

fix="$("$git_clang_format" --binary "$clang_format" --extensions c,h --diff "$base" 2>&1)"
if grep -q '^@@' <<<"$fix"; then
  echo "$fix"
  echo "check-format: lines changed since $(git rev-parse --short "$base") are not formatted" \
       "as .clang-format says; apply the diff above (git clang-format $base)" >&2
  exit 1
fi
echo "check-format: lines changed since $(git rev-parse --short "$base") are formatted"

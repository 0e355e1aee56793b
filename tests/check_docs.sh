#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every section of docs/design.md that a comment, man page or script cites
# (docs/design.md, "Name" or docs/design.md ("Name"), also across a line
# break) exists there as a heading (#, ## or ###), so a reader who follows a
# comment finds what it names (issue 57, item 4).
top=${srcdir:-.}
design=$top/docs/design.md
[ -f "$design" ] || { echo "FAIL - no $design"; exit 1; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
sed -n 's/^#\{1,3\} //p' "$design" | sort -u > "$tmp/headings"
fail=0 n=0
for f in $(cd "$top" && find lib include tools bench tests python man -type f \
             \( -name '*.[ch]' -o -name '*.in' -o -name '*.sh' -o -name '*.py' -o -name '*.[1-8]' \
                -o -name '*.am' -o -name '*.inc' \) ! -name check_docs.sh 2>/dev/null | sort); do
  # one line per file, comment leaders and line breaks folded to spaces
  tr '\n' ' ' < "$top/$f" | sed 's/[[:space:]]\*[[:space:]]/ /g; s/[[:space:]]#[[:space:]]/ /g; s/[[:space:]][[:space:]]*/ /g' |
    grep -oE 'design\.md(,|:)? \(?"[^"]{2,60}"' | sed -E 's/.*"([^"]+)"/\1/' | sort -u |
    while read -r h; do
      echo "$h" >> "$tmp/cited"
      grep -qxF "$h" "$tmp/headings" || echo "FAIL - $f cites docs/design.md, \"$h\": no such heading"
    done
done > "$tmp/out"
n=$(sort -u "$tmp/cited" 2>/dev/null | wc -l)
cat "$tmp/out"
grep -q '^FAIL' "$tmp/out" && fail=1
[ "$n" -gt 10 ] || { echo "FAIL - only $n cited sections found: the search is broken"; fail=1; }
[ $fail = 0 ] && echo "ok - the $n sections of docs/design.md that the sources cite are its headings"
exit $fail

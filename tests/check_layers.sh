#!/bin/sh
# The library's layers (docs/design.md, "Modules and layers"):
#
#   kernels  <-  util  <-  place, policy  <-  core  <-  admit  <-  api
#
# From nm over the built objects, draw "A.o uses a symbol B.o defines" and
# check that (1) no objects use each other in a circle (tsort names the
# loop) and (2) every edge between folders points down the stack; place
# and policy, side by side, use neither each other.
# Usage: tests/check_layers.sh [-v] [BUILD_LIBDIR]   (default: ./lib)
set -eu
verbose=0
[ "${1:-}" = -v ] && { verbose=1; shift; }
dir=${1:-lib}
objs=$(find "$dir" -path '*/.libs/*.o' ! -name 'lt[0-9]*-*' | sort)
if [ -z "$objs" ]; then
  echo "FAIL: no object files under $dir/*/.libs (build first)"
  exit 1
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for o in $objs; do
  layer=$(basename "$(dirname "$(dirname "$o")")")
  m=$(basename "$o" .o); m=$layer/${m#*_la-}
  nm --defined-only -g "$o" | awk -v m="$m" 'NF == 3 {print $3, m}' >> "$tmp/def"
  nm -u "$o" | awk -v m="$m" '{print $NF, m}' >> "$tmp/use"
done
awk 'NR == FNR {def[$1] = $2; next} ($1 in def) && def[$1] != $2 {print $2, def[$1]}' \
  "$tmp/def" "$tmp/use" | sort -u > "$tmp/edges"
nedges=$(wc -l < "$tmp/edges"); nobjs=$(echo "$objs" | wc -l)
[ "$verbose" = 1 ] && sed 's/^/edge: /' "$tmp/edges"
fail=0
if ! tsort "$tmp/edges" > /dev/null 2> "$tmp/loops"; then
  echo "cycle among:"
  sed -e 's/^tsort: //' -e '/input contains a loop/d' -e 's/^/  /' "$tmp/loops"
  fail=1
fi
awk 'BEGIN { r["kernels"] = 0; r["util"] = 1; r["place"] = 2; r["policy"] = 2;
             r["core"] = 3; r["admit"] = 4; r["api"] = 5 }
  { split($1, a, "/"); split($2, b, "/")
    if (a[1] == b[1]) next
    if (!(a[1] in r) || !(b[1] in r)) { print "unknown layer in: " $0; bad = 1; next }
    if (r[a[1]] <= r[b[1]]) { print "upward or sideways: " $1 " uses " $2; bad = 1 } }
  END { exit bad }' "$tmp/edges" || fail=1
if [ $fail = 1 ]; then
  echo "FAIL: $nedges edges between $nobjs objects break the layering (above)"
  exit 1
fi
echo "PASS: $nedges edges between $nobjs objects, no cycle, every edge points down"

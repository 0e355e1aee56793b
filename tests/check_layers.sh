#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The library's layers (docs/design.md, "Modules and layers"):
#
#   kernels  <-  util  <-  place, policy  <-  core  <-  admit  <-  api
#
# From nm over the built objects, draw "A.o uses a symbol B.o defines" and
# check that (1) no objects use each other in a circle (tsort names the
# loop) and (2) every edge between folders points down the stack; place
# and policy, side by side, use neither each other.
# Then the headers: (3) every header an object included (its .deps file)
# comes from its own layer or one below, and (4) each layer's include path
# (NF_CPPFLAGS_<LAYER> in Makefile.am, exported by make check as
# NF_LAYER_CC and NF_LAYER_CPPFLAGS_<LAYER>) finds one header of every layer
# at or below it and none above or beside it: an upward include fails to
# compile; (5) likewise each tool's and benchmark's include path
# (NF_LAYER_TOOLS: "program:layer ...", the program's flags in
# NF_TOOL_CPPFLAGS_<program>; layer "public": the public header alone,
# "none": not even that). A header counts as found when it is this tree's:
# a libnfcoll installed on the machine does not make a probe pass or fail.
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
rank='BEGIN { r["kernels"] = 0; r["util"] = 1; r["place"] = 2; r["policy"] = 2;
                r["core"] = 3; r["admit"] = 4; r["api"] = 5 }'
awk "$rank"'
  { split($1, a, "/"); split($2, b, "/")
    if (a[1] == b[1]) next
    if (!(a[1] in r) || !(b[1] in r)) { print "unknown layer in: " $0; bad = 1; next }
    if (r[a[1]] <= r[b[1]]) { print "upward or sideways: " $1 " uses " $2; bad = 1 } }
  END { exit bad }' "$tmp/edges" || fail=1
# (3) Included headers, as the compiler's dependency files recorded them.
deps=$(find "$dir" -path '*/.deps/*_la-*.Plo' | sort)
ndeps=0
for d in $deps; do
  grep -q '\.h' "$d" || continue
  ndeps=$((ndeps + 1))
  layer=$(basename "$(dirname "$(dirname "$d")")")
  grep -o 'lib/[a-z]*/[a-z_0-9]*\.h' "$d" | sort -u | sed "s|^|$layer |"
done > "$tmp/incs"
if [ "$ndeps" = 0 ]; then
  echo "note: no dependency files under $dir/*/.deps (dependency tracking off): included headers not checked"
fi
awk "$rank"'
  { split($2, b, "/"); if (!($1 in r) || !(b[2] in r)) next
    if ($1 != b[2] && r[$1] <= r[b[2]]) { print "upward or sideways include: " $1 " includes " $2; bad = 1 } }
  END { exit bad }' "$tmp/incs" || fail=1
# (4) Each layer's include path against one header per layer; (5) each
# tool's. probe LABEL LAYER FLAGS: LAYER's header and those below it found,
# the others missing.
nprobes=0
srcabs=$(cd "${srcdir:-.}" && pwd) bldabs=$(pwd)
probe() {
  for to in public kernels util place policy core admit api; do
    want=$(awk "$rank"' END { print (a == b || r[b] < r[a]) ? "found" : "missing" }' \
           a="$2" b=$to /dev/null)
    # found: preprocessed, with a header of this tree's (a relative path,
    # or one inside the source or build tree: a libnfcoll installed on the
    # machine, /usr/include/nfcoll.h, does not count)
    # shellcheck disable=SC2086 # flags are words
    if $NF_LAYER_CC -E $3 "$tmp/$to.c" > "$tmp/out" 2> "$tmp/err" &&
       grep -q "^# [0-9]* \"\([^/<]\|$srcabs/\|$bldabs/\)" "$tmp/out"; then
      got=found
    else
      got=missing
    fi
    nprobes=$((nprobes + 1))
    [ "$verbose" = 1 ] && echo "include: $1's path, $to's header: $got"
    if [ "$got" != "$want" ]; then
      echo "include path: $1's flags: $to's header $(cat "$tmp/$to.c") is $got, should be $want"
      [ "$got" = missing ] && sed 's/^/  /' "$tmp/err"
      fail=1
    fi
  done
}
rank="$rank"' BEGIN { r["public"] = -1; r["none"] = -2 }'
if [ -z "${NF_LAYER_CC:-}" ]; then
  echo "note: NF_LAYER_CC not set (run through make check): include paths not probed"
else
  for pair in public:nfcoll.h kernels:nf_kernels.h util:nf_util.h place:nf_placement.h \
              policy:nf_policy.h core:nf_ctx.h admit:nf_admit.h api:nf_api.h; do
    echo "#include \"${pair#*:}\"" > "$tmp/${pair%%:*}.c"
  done
  for from in kernels util place policy core admit api; do
    var=NF_LAYER_CPPFLAGS_$(echo $from | tr a-z A-Z)
    eval "flags=\${$var-unset}"
    if [ "$flags" = unset ]; then echo "$var not set"; fail=1; continue; fi
    probe "$from" "$from" "$flags"
  done
  if [ -z "${NF_LAYER_TOOLS:-}" ]; then
    echo "NF_LAYER_TOOLS not set: the tools' include paths are not probed"; fail=1
  fi
  for pair in ${NF_LAYER_TOOLS:-}; do
    prog=${pair%%:*}
    eval "flags=\${NF_TOOL_CPPFLAGS_$prog-unset}"
    if [ "$flags" = unset ]; then echo "NF_TOOL_CPPFLAGS_$prog not set"; fail=1; continue; fi
    probe "$prog" "${pair#*:}" "$flags"
  done
fi
if [ $fail = 1 ]; then
  echo "FAIL: the layering is broken (above; $nedges edges between $nobjs objects)"
  exit 1
fi
echo "PASS: $nedges edges between $nobjs objects, no cycle, every edge points down;" \
  "$ndeps objects include no header above them; $nprobes include-path probes as the layers say"

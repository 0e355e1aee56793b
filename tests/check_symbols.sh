#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The ABI (issue 59, item 3): libnfcoll.so exports exactly the symbols its
# linker version script lib/libnfcoll.sym names, each under the version
# node NFCOLL_0; every function nfcoll.h declares (NF_*, nf_*) is among
# them, and every NF_/nf_ symbol exported is declared there; the rest are
# the shim's MPI entry points (MPI_*, and mpi_* for Fortran); and the
# Debian symbols file (packaging/debian/libnfcoll0.symbols) lists them all.
top=${srcdir:-.}
lib=./lib/.libs/libnfcoll.so
hdr=./include/nfcoll.h
map=$top/lib/libnfcoll.sym
for t in nm objdump; do
  command -v $t >/dev/null 2>&1 || { echo "SKIP: no $t (binutils) to list the library's symbols"; exit 77; }
done
[ -f "$lib" ] || { echo "FAIL - $lib not built"; exit 1; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
nm -D --defined-only "$lib" | awk '$2 ~ /^[TWiV]$/ {sub(/@.*/, "", $3); print $3}' |
  sort -u > "$tmp/exported"
sed -n 's/^[[:space:]]*\([A-Za-z_][A-Za-z0-9_]*\);[[:space:]]*$/\1/p' "$map" | sort -u > "$tmp/map"
grep -oE '\b(NF|nf)_[A-Za-z0-9_]+[[:space:]]*\(' "$hdr" | sed 's/[[:space:](]//g' |
  grep -v '_t$' | sort -u > "$tmp/header"
grep -E '^(NF|nf)_' "$tmp/exported" > "$tmp/api"
report() { # report FILE WHAT: each line of FILE is a failure
  if [ -s "$1" ]; then echo "FAIL - $2: $(tr '\n' ' ' < "$1")"; fail=1; fi
}
comm -23 "$tmp/exported" "$tmp/map" > "$tmp/x"; report "$tmp/x" "exported, not in lib/libnfcoll.sym"
comm -13 "$tmp/exported" "$tmp/map" > "$tmp/x"; report "$tmp/x" "in lib/libnfcoll.sym, not exported (stale)"
comm -23 "$tmp/header" "$tmp/exported" > "$tmp/x"; report "$tmp/x" "declared in nfcoll.h, not exported"
comm -13 "$tmp/header" "$tmp/api" > "$tmp/x"; report "$tmp/x" "exported NF_/nf_ symbols nfcoll.h does not declare"
grep -vE '^(NF_|nf_|MPI_|mpi_)' "$tmp/exported" > "$tmp/x"; report "$tmp/x" "exported outside NF_, nf_, MPI_, mpi_"
objdump -T "$lib" | awk 'NF >= 7 && $4 == ".text" {print $(NF-1), $NF}' |
  awk '$1 != "NFCOLL_0" {print $2}' | sort -u > "$tmp/x"
report "$tmp/x" "exported without the version node NFCOLL_0"
# The Debian symbols file names the same symbols under the same node.
deb=$top/packaging/debian/libnfcoll0.symbols
if [ -f "$deb" ]; then
  sed -n 's/^ \([A-Za-z_][A-Za-z0-9_]*\)@NFCOLL_0 .*/\1/p' "$deb" | grep -vx NFCOLL_0 | sort -u > "$tmp/deb"
  comm -3 "$tmp/map" "$tmp/deb" > "$tmp/x"; report "$tmp/x" "lib/libnfcoll.sym and packaging/debian/libnfcoll0.symbols differ in"
fi
n=$(wc -l < "$tmp/exported"); h=$(wc -l < "$tmp/header")
[ "$n" -gt 50 ] && [ "$h" -gt 10 ] || { echo "FAIL - only $n exported, $h declared: the lists were not read"; fail=1; }
[ $fail = 0 ] && echo "ok - $n symbols exported under NFCOLL_0, as lib/libnfcoll.sym names them; the $h functions of nfcoll.h among them, and no other NF_/nf_ symbol"
exit $fail

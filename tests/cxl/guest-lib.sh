#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Shared by the guest scripts (tests/cxl/guest-*.sh): run from BUILDDIR
# inside a guest of tests/cxl/cxl-vm.sh. check NAME STATUS [DETAIL] prints
# PASS or FAIL and counts failures in $fails.
cd "$1" || { echo "FAIL: no build tree $1 in the guest"; exit 1; }
export HOME=/tmp OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun -np 2 --mca btl self,vader"
fails=0
check() { # NAME STATUS DETAIL
    if [ "$2" = 0 ]; then echo "PASS: $1"; else echo "FAIL: $1${3:+ ($3)}"; fails=$((fails + 1)); fi
}

# routes_identical NODE: every route's result on NODE (pages verified there
# by cxl_run from numa_maps and move_pages) hashes the same as with
# NFCOLL_CXL=off (ordinary memory), on both ranks.
routes_identical() {
    for route in fp32 binary ternary bf16; do
        off=$(NFCOLL_CXL=off $MPIRUN tests/cxl/cxl_run "$route" 2>&1); rc0=$?
        on=$($MPIRUN tests/cxl/cxl_run "$route" -e "$1" 2>&1); rc1=$?
        echo "$on" | sed 's/^/  /'
        h0=$(echo "$off" | sed -n 's/^PASS .*result hash \([0-9a-f]*\),.*/\1/p' | sort -u)
        h1=$(echo "$on" | sed -n 's/^PASS .*result hash \([0-9a-f]*\),.*/\1/p' | sort -u)
        [ $rc0 = 0 ] && [ $rc1 = 0 ] && [ -n "$h0" ] && [ "$h0" = "$h1" ] &&
            [ "$(echo "$on" | grep -c '^PASS cxl_run')" = 2 ]
        check "2-rank $route on node $1: pages there, result bit-identical to ordinary memory ($h1)" $? \
            "rc $rc0/$rc1, hashes '$h0' vs '$h1'"
    done
}

# json_field KEY: the value of "KEY" in nfcoll_info --json
json_field() {
    tools/nfcoll_info --json 2>/dev/null | sed -n "s/^ *\"$1\": \(.*\),\{0,1\}$/\1/p" | sed 's/,$//'
}

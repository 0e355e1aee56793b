#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs inside the emulated HMAT machine (tests/cxl/cxl-vm.sh hmat): node 1 is
# CPU-less memory that NUMA attributes describe as slower, and there is no
# CXL device. The library takes node 1 as a guess under prefer, refuses it
# under require, and honours it when named. Prints one PASS/FAIL line per
# check; exits 1 on any FAIL.
#   guest-hmat.sh BUILDDIR
. "$(dirname "$0")/guest-lib.sh"

numactl -H 2>/dev/null | sed 's/^/  guest: /'
[ "$(json_field cxl_node)" = 1 ] && [ "$(json_field cxl_evidence)" = '"guess"' ]
check 'nfcoll_info --json: "cxl_node": 1 by memory attributes, "cxl_evidence": "guess"' $? \
    "$(tools/nfcoll_info --json 2>/dev/null | grep cxl_)"

routes_identical 1

# A guess is not CXL memory: require refuses it, naming what it found.
out=$(NFCOLL_CXL=require $MPIRUN tests/cxl/cxl_run binary 2>&1); rc=$?
echo "$out" | sed 's/^/  /'
[ $rc != 0 ] && echo "$out" | grep -q 'NFCOLL_CXL=require but there is no usable CXL memory node: no CXL .*; found instead NUMA node 1 (memory attributes, a guess.*NFCOLL_CXL_NODE=1 takes it anyway'
check "NFCOLL_CXL=require fails on the HMAT-only machine, naming node 1 as a guess" $? "rc $rc"

# A CXL node too small, named (NFCOLL_CXL_NODE=1: require honours a named
# node). fill MB: a tmpfs bound to node 1 fills it to within MB (ordinary
# guest memory writes fast; the CXL device's does not). run ENV COUNT: one binary call of COUNT floats (4 COUNT bytes of
# residual per rank) under ENV, its output kept in $out.
mkdir -p /tmp/hog && mount -t tmpfs -o size=2g,mpol=bind:1 tmpfs /tmp/hog
fill() {
    rm -f /tmp/hog/fill
    free_mb=$(numactl -H | sed -n 's/^node 1 free: \([0-9]*\) MB/\1/p')
    dd if=/dev/zero of=/tmp/hog/fill bs=1M count=$((free_mb - $1)) 2>/dev/null
    echo "  guest: node 1 filled to $(numactl -H | sed -n 's/^node 1 free: //p') free"
}
run() {
    out=$(env NFCOLL_CXL_NODE=1 $1 timeout 120 $MPIRUN tests/cxl/cxl_run binary -n $2 2>&1); rc=$?
    echo "$out" | sed 's/^/  /'
}
refused() { # a clear error, no PASS, and neither a hang (124) nor a success
    [ $rc != 0 ] && [ $rc != 124 ] && ! echo "$out" | grep -q '^PASS cxl_run' &&
        echo "$out" | grep -q 'error: CXL memory node 1 .*(NFCOLL_CXL=require)'
}
# Under prefer the call is still right (what did not fit is in local DRAM)
# with a warning; under require it is a clear error (at setup or in the
# call, whichever finds the node full first), not a hang and not the OOM
# killer.
fill 48
run NFCOLL_CXL=prefer 8388608
[ $rc = 0 ] && [ "$(echo "$out" | grep -c '^PASS cxl_run')" = 2 ] &&
    [ "$(echo "$out" | grep -c 'warning: CXL memory node 1 .*local DRAM')" -ge 1 ]
check "CXL node too small, prefer: right results, what did not fit in local DRAM, warned" $? "rc $rc"
run NFCOLL_CXL=require 8388608
refused
check "CXL node too small, require: a clear error naming the shortfall, no hang" $? "rc $rc"
# Room for the aggregation buffer but not for the residuals: the call runs
# on every rank (no hang) and the rank that cannot place its residual
# returns the error after it.
fill 112
run NFCOLL_CXL=require 16777216
refused
check "CXL node too small for the residuals, require: a clear error, no hang" $? "rc $rc"
rm -f /tmp/hog/fill

exit $((fails != 0))

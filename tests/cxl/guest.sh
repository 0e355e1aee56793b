#!/bin/sh
# Runs inside the emulated CXL machine (tests/cxl/cxl-vm.sh): node 1 is the
# CPU-less CXL node. Prints one PASS/FAIL line per check; exits 1 on any FAIL.
#   guest.sh BUILDDIR
cd "$1" || { echo "FAIL: no build tree $1 in the guest"; exit 1; }
export HOME=/tmp OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun -np 2 --mca btl self,vader"
fails=0
check() { # NAME STATUS DETAIL
    if [ "$2" = 0 ]; then echo "PASS: $1"; else echo "FAIL: $1${3:+ ($3)}"; fails=$((fails + 1)); fi
}

numactl -H 2>/dev/null | sed 's/^/  guest: /'
out=$(tools/nfcoll_info --json 2>/dev/null)
echo "$out" | grep -q '"cxl_node": 1,' ; check 'nfcoll_info --json reports "cxl_node": 1' $? \
    "$(echo "$out" | grep cxl_)"

for route in binary fp32; do
    out=$($MPIRUN tests/cxl/cxl_run "$route" -e 1 2>&1); rc=$?
    echo "$out" | sed 's/^/  /'
    [ $rc = 0 ] && [ "$(echo "$out" | grep -c '^PASS cxl_run')" = 2 ]
    check "2-rank $route NF_Allreduce: correct, buffer and residual pages 100 % on node 1" $? "rc $rc"
done

out=$(NFCOLL_CXL=require $MPIRUN tests/cxl/cxl_run binary -e 1 2>&1); rc=$?
echo "$out" | sed 's/^/  /'
check "NFCOLL_CXL=require succeeds on the emulated CXL machine" $rc

# A CXL node too small. fill MB: a tmpfs bound to node 1 fills it to within
# MB. run ENV COUNT: one binary call of COUNT floats (4 COUNT bytes of
# residual per rank) under ENV, its output kept in $out.
mkdir -p /tmp/hog && mount -t tmpfs -o size=2g,mpol=bind:1 tmpfs /tmp/hog
fill() {
    rm -f /tmp/hog/fill
    free_mb=$(numactl -H | sed -n 's/^node 1 free: \([0-9]*\) MB/\1/p')
    dd if=/dev/zero of=/tmp/hog/fill bs=1M count=$((free_mb - $1)) 2>/dev/null
    echo "  guest: node 1 filled to $(numactl -H | sed -n 's/^node 1 free: //p') free"
}
run() {
    out=$(env $1 timeout 120 $MPIRUN tests/cxl/cxl_run binary -n $2 2>&1); rc=$?
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

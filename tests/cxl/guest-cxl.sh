#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs inside the emulated CXL machine (tests/cxl/cxl-vm.sh cxl): the HMAT
# node 1 (CPU-less, slower, not CXL) and a CXL type-3 device that
# tests/cxl/cxl-online.sh turns into node 2. The library must choose node 2
# by CXL evidence, place there, and give the same bits as ordinary memory.
# Prints one PASS/FAIL line per check; exits 1 on any FAIL.
#   guest-cxl.sh BUILDDIR
. "$(dirname "$0")/guest-lib.sh"
. "$(dirname "$0")/cxl-online.sh"

nf_cxl_online || exit 1
numactl -H 2>/dev/null | sed 's/^/  guest: /'
tools/nfcoll_info -t 2>&1 | sed 's/^/  guest: /'
node=$NF_CXL_NODE
[ "$(json_field cxl_node)" = "$node" ] && [ "$(json_field cxl_reason)" = '"CXL bus"' ] &&
    [ "$(json_field cxl_evidence)" = '"device"' ] &&
    tools/nfcoll_info --json | grep -q '"memdevs": \[{"name": "mem0"'
check "nfcoll_info chooses node $node by the CXL bus (mem0 -> region0 -> dax0.0), not the HMAT node 1" $?

routes_identical "$node"

out=$(NFCOLL_CXL=require $MPIRUN tests/cxl/cxl_run binary -e "$node" 2>&1); rc=$?
echo "$out" | sed 's/^/  /'
check "NFCOLL_CXL=require succeeds on node $node" $rc

out=$(NFCOLL_CXL_NODE=1 $MPIRUN tests/cxl/cxl_run binary -e 1 2>&1); rc=$?
echo "$out" | sed 's/^/  /'
check "NFCOLL_CXL_NODE=1 is obeyed over the CXL device" $rc

# A buffer larger than the CXL node: the node is first shrunk to one memory
# block (kmem onlined it movable; the blocks are empty again after the
# runs above) so the buffer fits the guest's ordinary memory. Under prefer
# the call is right and what did not fit is in local DRAM, warned; under
# require a clear error naming the node and the bytes. Nothing is written to
# the device (a few MB/s under TCG): the capacity check refuses before the
# first touch (the aggregation buffer, a byte per element, still fits and
# is written there: about 12 s). ternary: no reference array to fill;
# NFCOLL_RESIDUAL_MAX raised so that the residual is asked for at all.
for b in $(ls -d /sys/devices/system/node/node"$node"/memory[0-9]* | sort -V | tail -n +2); do
    echo offline >"$b/state" || echo "  guest: cannot offline $b"
done
free_kb=$(sed -n 's/.*MemFree: *\([0-9]*\) kB/\1/p' /sys/devices/system/node/node"$node"/meminfo)
count=$(( (free_kb + 16384) * 1024 / 4 ))
echo "  guest: node $node has $free_kb kB free; one ternary call of $count floats"
out=$(NFCOLL_RESIDUAL_MAX=1G NFCOLL_CXL=prefer timeout 300 $MPIRUN tests/cxl/cxl_run ternary -n $count 2>&1); rc=$?
echo "$out" | sed 's/^/  /'
[ $rc = 0 ] && [ "$(echo "$out" | grep -c '^PASS cxl_run')" = 2 ] &&
    echo "$out" | grep -q "warning: CXL memory node $node .*local DRAM"
check "larger than the CXL node, prefer: the call succeeds in local DRAM, warned" $? "rc $rc"
out=$(NFCOLL_RESIDUAL_MAX=1G NFCOLL_CXL=require timeout 300 $MPIRUN tests/cxl/cxl_run ternary -n $count 2>&1); rc=$?
echo "$out" | sed 's/^/  /'
[ $rc != 0 ] && [ $rc != 124 ] && ! echo "$out" | grep -q '^PASS cxl_run' &&
    echo "$out" | grep -q "error: CXL memory node $node .*(NFCOLL_CXL=require)"
check "larger than the CXL node, require: a clear error naming the shortfall, no hang" $? "rc $rc"

exit $((fails != 0))

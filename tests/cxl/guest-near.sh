#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs inside the emulated two-CPU-node machine (tests/cxl/cxl-vm.sh cxl2):
# CPU 0 on node 0, CPU 1 on node 1, the CXL device's host bridge on node 1,
# its memory onlined as node 2 (CPU-less). The reducer must run on CPU 1,
# near the device, and say so. Exits 1 on any FAIL.
#   guest-near.sh BUILDDIR
. "$(dirname "$0")/guest-lib.sh"
. "$(dirname "$0")/cxl-online.sh"

nf_cxl_online || exit 1
echo "  guest: mem0's numa_node: $(cat /sys/bus/cxl/devices/mem0/numa_node)"
# From CPU 0 (as rank 0 is bound), the reducer must move to CPU 1.
out=$(taskset -c 0 tools/nfcoll_info -t 2>&1)
echo "$out" | sed 's/^/  guest: /'
echo "$out" | grep -q "^reducer: CPUs 1: the CPUs of NUMA node 1, the CXL device's host node"
check "nfcoll_info: the reducer runs on CPU 1, near the CXL device's host node 1" $?

out=$(NFCOLL_STATS=1 $MPIRUN --bind-to core tests/cxl/cxl_run binary -e "$NF_CXL_NODE" 2>&1); rc=$?
echo "$out" | sed 's/^/  /'
[ $rc = 0 ] && [ "$(echo "$out" | grep -c '^PASS cxl_run')" = 2 ] &&
    echo "$out" | grep -q "reducer: CPUs 1: the CPUs of NUMA node 1, the CXL device's host node"
check "2 ranks bound to CPUs 0 and 1: stats show the reducer on CPU 1 near the device" $? "rc $rc"

exit $((fails != 0))

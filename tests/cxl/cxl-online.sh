#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Inside a guest with the emulated CXL device (tests/cxl/cxl-vm.sh, machines
# cxl and cxl2): turn the device into a NUMA node the way a site onlines a
# CXL memory expander, with the ndctl package's tools: a region on the
# memdev, a devdax namespace on it, and the DAX device onlined as system RAM
# by kmem. Prints the new node; exit 1 with the failing step.
#   . tests/cxl/cxl-online.sh   (sets NF_CXL_NODE)
nf_cxl_online() {
    cxl create-region -t pmem -d decoder0.0 -m mem0 -w 1 -g 256 >/tmp/cxl-region.json ||
        { echo "FAIL: cxl create-region"; return 1; }
    ndctl create-namespace -m devdax -r region0 -f >/tmp/cxl-ns.json ||
        { echo "FAIL: ndctl create-namespace"; return 1; }
    daxctl reconfigure-device --mode=system-ram dax0.0 >/tmp/cxl-dax.json ||
        { echo "FAIL: daxctl reconfigure-device"; return 1; }
    NF_CXL_NODE=$(cat /sys/bus/dax/devices/dax0.0/target_node)
    echo "  guest: CXL device onlined as NUMA node $NF_CXL_NODE"
}

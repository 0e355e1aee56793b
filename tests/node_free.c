/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * LD_PRELOAD for tests/mpi_faults_cxl.sh: numa_node_size64 reports
 * NF_NODE_FREE bytes free on every node (its total stays the real one),
 * so that under NFCOLL_CXL=require with NFCOLL_CXL_NODE=0 a one-node
 * machine has a "full" CXL node: placements larger than that are refused
 * before any page is touched. Unset, the call is passed through.
 * Test code only: libnfcoll has no such hook.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <stdlib.h>

/* The build hides symbols by default: this one must interpose. */
__attribute__((visibility("default"))) long long numa_node_size64(int node, long long *freep);

long long numa_node_size64(int node, long long *freep)
{
    static long long (*real)(int, long long *);
    const char *e = getenv("NF_NODE_FREE");
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "numa_node_size64");
    long long total = real != NULL ? real(node, freep) : -1;
    if (e != NULL && freep != NULL && total >= 0)
        *freep = atoll(e);
    return total;
}

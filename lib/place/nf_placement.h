/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Topology and placement: which NUMA node is the CXL memory node, binding
 * memory to it, verifying where pages landed, and running the reducer near
 * it. Knows hwloc and libnuma, not MPI.
 */
#ifndef NF_PLACEMENT_H
#define NF_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>
#include <hwloc.h>

#include "nfcoll.h"
#include "nf_settings.h"

/* How sure the choice is: CXL evidence (the CXL bus, hwloc's own CXL
 * marks), the user's word, or a guess from NUMA attributes or tiers. */
typedef enum nf_cxl_evidence {
    NF_CXL_EV_NONE = 0,
    NF_CXL_EV_EXPLICIT,
    NF_CXL_EV_DEVICE, /* the CXL bus or hwloc's CXL marks */
    NF_CXL_EV_GUESS,  /* memory attributes or tiers, no CXL device seen */
} nf_cxl_evidence_t;

/* Result of the (pure) CXL node choice. */
typedef struct nf_cxl_choice {
    int node;           /* OS index of the chosen node, -1 for none */
    const char *reason; /* static text: "explicit", "CXL bus", "CXL-DRAM subtype",
                           "CXL-NVM subtype", "DAX under the CXL root",
                           "memory attributes", "memory tier", "none" */
    nf_cxl_evidence_t evidence;
    int near_node;      /* the CXL device's own NUMA node (its host bridge's),
                           -1 unknown: the reducer runs on its CPUs */
    char detail[448];   /* human-readable why (the device chain, attribute
                           values, tiers; guesses say so) */
    char bus[160];      /* what the CXL bus holds ("" when not read) */
} nf_cxl_choice_t;

/*
 * Pick the CXL node of topo in the order of docs/design.md, "Placement":
 * explicit_node >= 0 is taken as is when it names a NUMA node of topo (else
 * NF_ERR_NO_DEVICE with detail saying so); then CXL evidence (the Linux CXL
 * bus, then hwloc's CXL subtypes and DAX parents); then guesses from memory
 * attributes and tiers, never taking a node known to be other memory (NFIT
 * persistent memory, HBM). initiators (may be NULL = whole machine) are the
 * CPUs of the calling ranks: among several CXL nodes the one whose device
 * is near them wins, then the most free memory; among guesses, the best
 * attributes from them. Pure: reads topo and, for a topology of this system
 * (or under NF_TEST_SYSFS, a sysfs root for tests), sysfs.
 */
nf_status_t nf_topo_choose_cxl(hwloc_topology_t topo, int explicit_node,
                               hwloc_const_cpuset_t initiators, nf_cxl_choice_t *out);

/* The sysfs root the choice reads for topo: NF_TEST_SYSFS (tests), else ""
 * for this system's topology, else NULL (a topology from elsewhere, such
 * as HWLOC_XMLFILE: nothing of this machine's sysfs applies). */
const char *nf_topo_sysroot(hwloc_topology_t topo);

/* One NUMA node as the choice sees it (for nfcoll_info -t and the tests). */
typedef struct nf_topo_node {
    int os_index;
    uint64_t bytes;             /* local memory */
    int cpuless;                /* no PU takes it as its default node */
    int local;                  /* default node of some initiator PU */
    uint64_t latency;           /* best HMAT latency from the initiators, 0 = unknown */
    uint64_t bandwidth;         /* best HMAT bandwidth (MiB/s) from them, 0 = unknown */
    const char *subtype;        /* hwloc subtype ("CXL-DRAM") or NULL; owned by topo */
    hwloc_const_cpuset_t locality; /* hwloc locality (initiators for CPU-less); owned by topo */
} nf_topo_node_t;

int nf_topo_node_count(hwloc_topology_t topo);
/* OS index of the logical-th NUMA node, -1 past the end. */
int nf_topo_node_os(hwloc_topology_t topo, int logical);
/* NF_ERR_INVALID when os_index is not a NUMA node of topo. */
nf_status_t nf_topo_node_info(hwloc_topology_t topo, int os_index,
                              hwloc_const_cpuset_t initiators, nf_topo_node_t *out);

/* Load this machine's topology (or HWLOC_XMLFILE) the way placement does, and
 * the CPUs this process may run on (NULL when the topology is not this
 * system). Free with hwloc_topology_destroy / hwloc_bitmap_free. */
nf_status_t nf_topo_load(hwloc_topology_t *topo, hwloc_cpuset_t *initiators);

/* What placement is asked to do; the caller resolves it from NFCOLL_CXL,
 * NFCOLL_CXL_NODE and the policy's cxl_node (the environment wins). */
typedef struct nf_place_config {
    nf_cxl_mode_t mode; /* require, prefer or off */
    int node;           /* OS index named by the user, -1 to choose */
    int asked;          /* the user asked for placement (a mode set, a node
                           named): failing to honour it warns; else local
                           DRAM is the normal case, said at verbose 1 */
} nf_place_config_t;

/* The configuration settings s and a policy's cxl_node (-1: none) ask for. */
void nf_place_config_from(const nf_settings_t *s, int policy_node, nf_place_config_t *out);

/* Set the configuration nf_place_init uses (before it; the default is
 * prefer, no node, not asked). */
void nf_place_configure(const nf_place_config_t *cfg);

/* Process-wide placement state, set up once from the configuration.
 * NF_ERR_NO_DEVICE when the mode is require and there is no usable node
 * (already logged). Idempotent and thread-safe. */
nf_status_t nf_place_init(void);
void nf_place_finalize(void);

/* Chosen node (-1: local DRAM, unbound), why (a static reason as in
 * nf_cxl_choice_t, or "off"), and the human-readable detail. */
int nf_place_node(void);
const char *nf_place_reason(void);
const char *nf_place_detail(void);
nf_cxl_evidence_t nf_place_evidence(void);
/* "none" / "explicit" / "device" / "guess" */
const char *nf_cxl_evidence_name(nf_cxl_evidence_t e);
/* Where the reducer runs and why ("CPUs 1: near mem0 (host node 1)"), or
 * "" when it is not moved. */
const char *nf_place_reducer(void);
/* Memory of the chosen node in bytes, 0 when there is none. */
uint64_t nf_place_node_bytes(void);

/*
 * Bind [addr, addr + len) (page aligned, not yet written) to the chosen node,
 * touch every page, then verify with move_pages. *frac gets the fraction of
 * pages found on the node (1.0 when no node is chosen and nothing was
 * asked). Too little free memory on the node, or pages that landed
 * elsewhere because it filled meanwhile, are NF_ERR_CAPACITY under
 * NFCOLL_CXL=require, with a message naming the node and the bytes, and one
 * warning under prefer (the rest is local DRAM).
 */
nf_status_t nf_place_bind_touch(void *addr, size_t len, double *frac);

/* Private zero memory, mapped but not placed or touched: nf_place_bind_touch
 * places it at its first write (a residual's second buffer, needed from its
 * second call on). Reads before that see zeros and cost no memory. */
void *nf_place_map(size_t len);
/* Private, placed, zeroed memory: nf_place_map + nf_place_bind_touch. */
void *nf_place_alloc(size_t len, double *frac);
void nf_place_free(void *p, size_t len);

/* Run the reducer on CPUs nearest the node without disturbing the caller's
 * binding: enter saves and narrows this thread's affinity when that helps,
 * leave restores it. Both are no-ops when the node has local CPUs in the
 * caller's set or when there is no node. */
typedef struct nf_place_pin {
    int active;
    unsigned long saved[16]; /* the caller's cpu_set_t (128 bytes), opaque here */
} nf_place_pin_t;
void nf_place_reducer_enter(nf_place_pin_t *pin);
void nf_place_reducer_leave(nf_place_pin_t *pin);

#endif

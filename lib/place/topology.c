/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which NUMA node is the CXL memory node: a pure function of an hwloc
 * topology (plus, for Linux memory tiers, a sysfs tree), so XML fixtures
 * test it. docs/design.md, "Placement", gives the order; the helpers below are shared
 * with nfcoll_info so the tool shows exactly what the library decided from.
 */
#include "config.h"

#include <dirent.h>
#include <numa.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_cxlbus.h"
#include "nf_placement.h"

#define NF_TOPO_MAX_INIT 64 /* initiators per target we look at */

static hwloc_obj_t nf_topo_node_by_os(hwloc_topology_t topo, int os)
{
    hwloc_obj_t n = NULL;
    while ((n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)) != NULL)
        if ((int)n->os_index == os)
            return n;
    return NULL;
}

/* The non-memory object a NUMA node hangs from (skipping memory caches). */
static hwloc_obj_t nf_topo_attach(hwloc_obj_t numa)
{
    hwloc_obj_t p = numa->parent;
    while (p != NULL && hwloc_obj_type_is_memory(p->type))
        p = p->parent;
    return p;
}

/* The NUMA node a PU allocates from by default: among the nodes hanging from
 * its nearest ancestor that has any, the lowest OS index (Linux numbers the
 * CPU nodes before CPU-less ones sharing their locality). */
static hwloc_obj_t nf_topo_pu_node(hwloc_topology_t topo, hwloc_obj_t pu)
{
    for (hwloc_obj_t a = pu->parent; a != NULL; a = a->parent) {
        hwloc_obj_t best = NULL, n = NULL;
        while ((n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)) != NULL)
            if (nf_topo_attach(n) == a && (best == NULL || n->os_index < best->os_index))
                best = n;
        if (best != NULL)
            return best;
    }
    return NULL;
}

/* hwloc gives a CPU-less node the locality of its initiators, so "CPU-less"
 * means: no PU takes this node as its default node. */
static void nf_topo_cpu_nodes(hwloc_topology_t topo, hwloc_const_cpuset_t initiators,
                              hwloc_nodeset_t all, hwloc_nodeset_t mine)
{
    hwloc_obj_t pu = NULL;
    hwloc_bitmap_zero(all);
    hwloc_bitmap_zero(mine);
    while ((pu = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, pu)) != NULL) {
        hwloc_obj_t n = nf_topo_pu_node(topo, pu);
        if (n == NULL)
            continue;
        hwloc_bitmap_set(all, n->os_index);
        if (initiators == NULL || hwloc_bitmap_isset(initiators, pu->os_index))
            hwloc_bitmap_set(mine, n->os_index);
    }
}

/* Best value of attr for target from any stored initiator that overlaps
 * initiators (NULL: any). 0 when hwloc has none. */
static uint64_t nf_topo_attr(hwloc_topology_t topo, hwloc_memattr_id_t attr,
                             hwloc_obj_t target, hwloc_const_cpuset_t initiators)
{
    struct hwloc_location locs[NF_TOPO_MAX_INIT];
    hwloc_uint64_t vals[NF_TOPO_MAX_INIT];
    unsigned nr = NF_TOPO_MAX_INIT;
    uint64_t best = 0;
    int lower_is_better = (attr == HWLOC_MEMATTR_ID_LATENCY);

    if (hwloc_memattr_get_initiators(topo, attr, target, 0, &nr, locs, vals) != 0)
        return 0;
    if (nr > NF_TOPO_MAX_INIT)
        nr = NF_TOPO_MAX_INIT;
    for (unsigned i = 0; i < nr; i++) {
        hwloc_const_cpuset_t c = locs[i].type == HWLOC_LOCATION_TYPE_CPUSET
                                     ? locs[i].location.cpuset
                                     : locs[i].location.object->cpuset;
        if (c == NULL || vals[i] == 0)
            continue;
        if (initiators != NULL && !hwloc_bitmap_intersects(c, initiators))
            continue;
        if (best == 0 || (lower_is_better ? vals[i] < best : vals[i] > best))
            best = vals[i];
    }
    return best;
}

nf_status_t nf_topo_node_info(hwloc_topology_t topo, int os_index,
                              hwloc_const_cpuset_t initiators, nf_topo_node_t *out)
{
    hwloc_obj_t n = nf_topo_node_by_os(topo, os_index);
    if (n == NULL)
        return NF_ERR_INVALID;
    hwloc_nodeset_t all = hwloc_bitmap_alloc(), mine = hwloc_bitmap_alloc();
    if (all == NULL || mine == NULL) {
        hwloc_bitmap_free(all);
        hwloc_bitmap_free(mine);
        return NF_ERR_NO_MEMORY;
    }
    nf_topo_cpu_nodes(topo, initiators, all, mine);
    out->os_index = os_index;
    out->bytes = n->attr->numanode.local_memory;
    out->cpuless = !hwloc_bitmap_isset(all, os_index);
    out->local = hwloc_bitmap_isset(mine, os_index);
    out->latency = nf_topo_attr(topo, HWLOC_MEMATTR_ID_LATENCY, n, initiators);
    out->bandwidth = nf_topo_attr(topo, HWLOC_MEMATTR_ID_BANDWIDTH, n, initiators);
    out->subtype = n->subtype;
    out->locality = n->cpuset;
    hwloc_bitmap_free(all);
    hwloc_bitmap_free(mine);
    return NF_OK;
}

int nf_topo_node_count(hwloc_topology_t topo)
{
    return hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
}

int nf_topo_node_os(hwloc_topology_t topo, int logical)
{
    hwloc_obj_t n = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)logical);
    return n != NULL ? (int)n->os_index : -1;
}

static void nf_topo_set(nf_cxl_choice_t *out, int node, const char *reason,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void nf_topo_set(nf_cxl_choice_t *out, int node, const char *reason,
                        const char *fmt, ...)
{
    va_list ap;
    out->node = node;
    out->reason = reason;
    va_start(ap, fmt);
    vsnprintf(out->detail, sizeof(out->detail), fmt, ap);
    va_end(ap);
}

static nf_status_t nf_topo_explicit(hwloc_topology_t topo, int node, nf_cxl_choice_t *out)
{
    if (nf_topo_node_by_os(topo, node) != NULL) {
        nf_topo_set(out, node, "explicit", "NUMA node %d was named by NFCOLL_CXL_NODE or the policy", node);
        out->evidence = NF_CXL_EV_EXPLICIT;
        return NF_OK;
    }
    char list[64] = "";
    hwloc_bitmap_list_snprintf(list, sizeof(list), hwloc_topology_get_topology_nodeset(topo));
    nf_topo_set(out, -1, "none", "NUMA node %d does not exist (this machine has node%s %s)",
                node, nf_topo_node_count(topo) > 1 ? "s" : "", list);
    return NF_ERR_NO_DEVICE;
}

/* The sysfs root a topology can be read against: NF_TEST_SYSFS (tests),
 * else "" for this system's topology, else NULL (a topology from elsewhere
 * says nothing about our sysfs). */
const char *nf_topo_sysroot(hwloc_topology_t topo)
{
    const char *root = getenv("NF_TEST_SYSFS");
    if (root != NULL)
        return root;
    return hwloc_topology_is_thissystem(topo) ? "" : NULL;
}

/* Free memory of node n, libnuma's (numa_node_size64), else its size. */
static uint64_t nf_topo_free(hwloc_obj_t n)
{
    long long fr = -1;
    if (numa_available() < 0 || numa_node_size64((int)n->os_index, &fr) < 0)
        fr = -1;
    return fr >= 0 ? (uint64_t)fr : n->attr->numanode.local_memory;
}

/* Is any memdev of m on a node in nodes? Its first host node into *near
 * (one in nodes when there is one), -1 when none is known. */
static int nf_topo_bus_near(const nf_cxl_mem_t *m, hwloc_const_nodeset_t nodes, int *near)
{
    *near = -1;
    for (int i = 0; i < m->nmem; i++) {
        int h = m->mem[i].host_node;
        if (h >= 0 && hwloc_bitmap_isset(nodes, (unsigned)h)) {
            *near = h;
            return 1;
        }
        if (h >= 0 && *near < 0)
            *near = h;
    }
    return 0;
}

/* The Linux CXL bus: DAX devices below the CXL root onlined as system RAM
 * on a NUMA node of topo. Near the calling CPUs first, then the most free
 * memory, then the lowest node. */
static int nf_topo_bus(hwloc_topology_t topo, hwloc_const_nodeset_t mine, nf_cxl_choice_t *out)
{
    const char *root = nf_topo_sysroot(topo);
    nf_cxl_bus_t *bus;
    const nf_cxl_mem_t *best = NULL;
    int best_near = 0, best_host = -1, cands = 0, nnear = 0;
    uint64_t best_free = 0;
    if (root == NULL || (bus = malloc(sizeof(*bus))) == NULL)
        return 0;
    nf_cxl_bus_read(root, bus);
    nf_cxl_bus_summary(bus, out->bus, sizeof(out->bus));
    for (int i = 0; i < bus->n; i++) {
        const nf_cxl_mem_t *m = &bus->mem[i];
        hwloc_obj_t n = m->system_ram ? nf_topo_node_by_os(topo, m->node) : NULL;
        int host, near;
        if (n == NULL || n->attr->numanode.local_memory == 0)
            continue;
        near = nf_topo_bus_near(m, mine, &host);
        uint64_t fr = nf_topo_free(n);
        cands++, nnear += near;
        if (best == NULL || near > best_near || (near == best_near && fr > best_free))
            best = m, best_near = near, best_free = fr, best_host = host;
    }
    if (best != NULL) {
        char chain[320];
        nf_cxl_chain_format(best, chain, sizeof(chain));
        /* which rule decided among several */
        const char *why = cands < 2                 ? ""
                          : best_near && nnear == 1 ? "; the CXL node whose device is near this process's CPUs"
                          : best_near ? "; of the CXL nodes whose devices are near this process's CPUs, "
                                        "the one with the most free memory"
                                      : "; the CXL node with the most free memory";
        nf_topo_set(out, best->node, "CXL bus", "%s%s", chain, why);
        out->evidence = NF_CXL_EV_DEVICE;
        out->near_node = best_host;
    }
    free(bus);
    return best != NULL;
}

/* hwloc's own CXL marks: the NUMA subtypes CXL-DRAM and CXL-NVM of hwloc
 * 2.10 and later (the subtype field exists since 2.0, so XML from a newer
 * hwloc carries them here too), else (hwloc 2.9) a DAX device whose parent
 * runs through the CXL root. The first marked node with memory. */
static int nf_topo_marks(hwloc_topology_t topo, nf_cxl_choice_t *out)
{
    hwloc_obj_t n = NULL;
    while ((n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)) != NULL) {
        if (n->attr->numanode.local_memory == 0)
            continue;
        if (n->subtype != NULL && strcmp(n->subtype, "CXL-DRAM") == 0) {
            nf_topo_set(out, (int)n->os_index, "CXL-DRAM subtype",
                        "hwloc marks NUMA node %u as CXL-DRAM", n->os_index);
        } else if (n->subtype != NULL && strcmp(n->subtype, "CXL-NVM") == 0) {
            nf_topo_set(out, (int)n->os_index, "CXL-NVM subtype",
                        "hwloc marks NUMA node %u as CXL-NVM", n->os_index);
        } else {
            const char *parent = hwloc_obj_get_info_by_name(n, "DAXParent");
            const char *dax = hwloc_obj_get_info_by_name(n, "DAXDevice");
            if (parent == NULL || strstr(parent, "ACPI0017:") == NULL)
                continue;
            nf_topo_set(out, (int)n->os_index, "DAX under the CXL root",
                        "hwloc: NUMA node %u is DAX device %s below the CXL root (%s)",
                        n->os_index, dax != NULL ? dax : "?", parent);
        }
        out->evidence = NF_CXL_EV_DEVICE;
        return 1;
    }
    return 0;
}

/* Memory known not to be CXL, never taken by a guess: NFIT persistent
 * memory (a DAX device below ACPI0012, by hwloc or sysfs) and on-package
 * high-bandwidth memory. */
static int nf_topo_not_cxl(hwloc_topology_t topo, int os)
{
    hwloc_obj_t n = nf_topo_node_by_os(topo, os);
    const char *root = nf_topo_sysroot(topo);
    const char *parent = n != NULL ? hwloc_obj_get_info_by_name(n, "DAXParent") : NULL;
    if (n == NULL)
        return 1;
    if (parent != NULL && strstr(parent, "ACPI0012:") != NULL)
        return 1;
    if (n->subtype != NULL && (strcmp(n->subtype, "MCDRAM") == 0 || strcmp(n->subtype, "HBM") == 0))
        return 1;
    return root != NULL && nf_cxl_bus_nvdimm_node(root, os);
}

/* Lower latency wins, then higher bandwidth. */
static int nf_topo_better(const nf_topo_node_t *a, const nf_topo_node_t *b)
{
    if (a->latency != 0 && b->latency != 0 && a->latency != b->latency)
        return a->latency < b->latency;
    return a->bandwidth > b->bandwidth;
}

typedef struct nf_topo_scan {
    nf_topo_node_t ref;  /* best local DRAM node from the initiators */
    nf_topo_node_t best; /* best slower CPU-less candidate */
    int have_ref, have_best, ncpuless;
} nf_topo_scan_t;

static void nf_topo_scan(hwloc_topology_t topo, hwloc_const_cpuset_t initiators, nf_topo_scan_t *s)
{
    int nn = nf_topo_node_count(topo);
    nf_topo_node_t info;
    memset(s, 0, sizeof(*s));
    for (int i = 0; i < nn; i++) {
        if (nf_topo_node_info(topo, nf_topo_node_os(topo, i), initiators, &info) != NF_OK)
            continue;
        if (info.local && (!s->have_ref || nf_topo_better(&info, &s->ref)))
            s->ref = info, s->have_ref = 1;
        s->ncpuless += info.cpuless && info.bytes > 0;
    }
    for (int i = 0; s->have_ref && i < nn; i++) {
        if (nf_topo_node_info(topo, nf_topo_node_os(topo, i), initiators, &info) != NF_OK ||
            !info.cpuless || info.bytes == 0 || nf_topo_not_cxl(topo, info.os_index))
            continue;
        int slower = (info.latency != 0 && s->ref.latency != 0 && info.latency > s->ref.latency) ||
                     (info.bandwidth != 0 && s->ref.bandwidth != 0 && info.bandwidth < s->ref.bandwidth);
        if (slower && (!s->have_best || nf_topo_better(&info, &s->best)))
            s->best = info, s->have_best = 1;
    }
}

enum { NF_TIER_NONE = -1 };

/* Linux memory tiers: memory_tierN/nodelist, a larger N is slower. The
 * node's N, or NF_TIER_NONE when no tier lists it. */
static int nf_topo_tier_of(const char *dir, int node)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int tier = NF_TIER_NONE;
    if (d == NULL)
        return NF_TIER_NONE;
    while ((e = readdir(d)) != NULL) {
        int t;
        char path[512], list[256];
        if (sscanf(e->d_name, "memory_tier%d", &t) != 1)
            continue;
        snprintf(path, sizeof(path), "%s/%s/nodelist", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(list, sizeof(list), f) != NULL) {
            list[strcspn(list, "\n")] = '\0';
            hwloc_bitmap_t b = hwloc_bitmap_alloc();
            if (b != NULL && hwloc_bitmap_list_sscanf(b, list) == 0 && hwloc_bitmap_isset(b, node))
                tier = t;
            hwloc_bitmap_free(b);
        }
        fclose(f);
    }
    closedir(d);
    return tier;
}

static int nf_topo_tiers(hwloc_topology_t topo, hwloc_const_cpuset_t initiators, nf_cxl_choice_t *out)
{
    const char *root = nf_topo_sysroot(topo);
    char dir[400];
    int nn = nf_topo_node_count(topo), ref = -1, best = -1, best_tier = -1;
    nf_topo_node_t info;
    if (root == NULL)
        return 0;
    snprintf(dir, sizeof(dir), "%s/sys/devices/virtual/memory_tiering", root);
    for (int i = 0; i < nn; i++) {
        int os = nf_topo_node_os(topo, i), t;
        if (nf_topo_node_info(topo, os, initiators, &info) != NF_OK || (t = nf_topo_tier_of(dir, os)) < 0)
            continue;
        if (info.local && (ref < 0 || t < ref))
            ref = t;
    }
    for (int i = 0; ref >= 0 && i < nn; i++) {
        int os = nf_topo_node_os(topo, i), t;
        if (nf_topo_node_info(topo, os, initiators, &info) != NF_OK || !info.cpuless ||
            info.bytes == 0 || (t = nf_topo_tier_of(dir, os)) <= ref || nf_topo_not_cxl(topo, os))
            continue;
        if (best < 0 || t < best_tier)
            best = os, best_tier = t;
    }
    if (best < 0)
        return 0;
    nf_topo_set(out, best, "memory tier",
                "a guess, no CXL device found: CPU-less NUMA node %d is in memory tier %d, "
                "local DRAM in tier %d", best, best_tier, ref);
    out->evidence = NF_CXL_EV_GUESS;
    return 1;
}

/* No CXL evidence: memory attributes, then tiers, said to be a guess. */
static void nf_topo_guess(hwloc_topology_t topo, hwloc_const_cpuset_t initiators,
                          nf_topo_scan_t *s, nf_cxl_choice_t *out)
{
    nf_topo_scan(topo, initiators, s);
    if (s->have_best) {
        nf_topo_set(out, s->best.os_index, "memory attributes",
                    "a guess, no CXL device found: CPU-less NUMA node %d: latency %llu, "
                    "bandwidth %llu MiB/s vs local node %d: %llu, %llu MiB/s",
                    s->best.os_index, (unsigned long long)s->best.latency,
                    (unsigned long long)s->best.bandwidth, s->ref.os_index,
                    (unsigned long long)s->ref.latency, (unsigned long long)s->ref.bandwidth);
        out->evidence = NF_CXL_EV_GUESS;
        return;
    }
    if (nf_topo_tiers(topo, initiators, out))
        return;
    if (nf_topo_node_count(topo) <= 1)
        nf_topo_set(out, -1, "none", "one NUMA node only");
    else if (s->ncpuless == 0)
        nf_topo_set(out, -1, "none", "%d NUMA nodes, none of them CPU-less", nf_topo_node_count(topo));
    else
        nf_topo_set(out, -1, "none",
                    "%d CPU-less NUMA node(s), none of them CXL memory by the CXL bus or hwloc, "
                    "none slower than local DRAM by memory attributes or tiers",
                    s->ncpuless);
}

nf_status_t nf_topo_choose_cxl(hwloc_topology_t topo, int explicit_node,
                               hwloc_const_cpuset_t initiators, nf_cxl_choice_t *out)
{
    nf_topo_scan_t s;
    nf_status_t st = NF_OK;
    memset(out, 0, sizeof(*out));
    nf_topo_set(out, -1, "none", "out of memory choosing the CXL node");
    out->near_node = -1;
    hwloc_nodeset_t all = hwloc_bitmap_alloc(), mine = hwloc_bitmap_alloc();
    if (all == NULL || mine == NULL) {
        hwloc_bitmap_free(all);
        hwloc_bitmap_free(mine);
        return NF_ERR_NO_MEMORY;
    }
    if (initiators != NULL && hwloc_bitmap_iszero(initiators))
        initiators = NULL;
    nf_topo_cpu_nodes(topo, initiators, all, mine);
    if (explicit_node >= 0)
        st = nf_topo_explicit(topo, explicit_node, out);
    else if (!nf_topo_bus(topo, mine, out) && !nf_topo_marks(topo, out))
        nf_topo_guess(topo, initiators, &s, out);
    hwloc_bitmap_free(all);
    hwloc_bitmap_free(mine);
    return st;
}

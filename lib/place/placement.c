/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Placement: bind the aggregation buffer and the residuals to the CXL node,
 * first-touch them, verify where the pages landed, and run the reducer on
 * CPUs near that node. Everything expensive (topology, cpusets, node masks)
 * happens once in nf_place_init; the per-call reducer pinning is at most two
 * sched_setaffinity calls, and none unless it helps.
 */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hwloc/glibc-sched.h>

#include "nf_log.h"
#include "nf_placement.h"
#include "nf_settings.h"

#define NF_VERIFY_BATCH 1024 /* pages per move_pages query */

static struct {
    pthread_mutex_t lock;
    int inited;
    nf_status_t status;
    nf_place_config_t cfg; /* from nf_place_configure */
    nf_cxl_mode_t mode;
    int node;
    const char *reason;
    nf_cxl_evidence_t evidence;
    char detail[768];
    char reducer[160];    /* where the reducer runs and why, "" unmoved */
    struct bitmask *mask; /* just node */
    int pin;              /* reducer pinning pays off */
    cpu_set_t pin_to;     /* where the reducer runs */
} nf_pl = {.lock = PTHREAD_MUTEX_INITIALIZER,
           .cfg = {.mode = NF_CXL_PREFER, .node = -1, .asked = 0},
           .node = -1, .reason = "none"};

nf_status_t nf_topo_load(hwloc_topology_t *topo, hwloc_cpuset_t *initiators)
{
    hwloc_topology_t t;
    hwloc_cpuset_t cpus = NULL;
    if (hwloc_topology_init(&t) != 0) {
        nf_log_error("hwloc_topology_init failed: %m");
        return NF_ERR_NO_MEMORY;
    }
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (hwloc_topology_load(t) != 0) {
        nf_log_error("cannot load the hwloc topology: %m");
        hwloc_topology_destroy(t);
        return NF_ERR_IO;
    }
    if (hwloc_topology_is_thissystem(t)) {
        cpus = hwloc_bitmap_alloc();
        if (cpus != NULL && hwloc_get_cpubind(t, cpus, HWLOC_CPUBIND_PROCESS) != 0)
            hwloc_bitmap_copy(cpus, hwloc_topology_get_allowed_cpuset(t));
    }
    *topo = t;
    *initiators = cpus;
    return NF_OK;
}

void nf_place_config_from(const nf_settings_t *s, int policy_node, nf_place_config_t *out)
{
    out->mode = s->cxl;
    out->node = s->cxl_node >= 0 ? s->cxl_node : policy_node;
    out->asked = nf_setting_raw(NF_SET_CXL) != NULL || out->node >= 0;
}

void nf_place_configure(const nf_place_config_t *cfg)
{
    pthread_mutex_lock(&nf_pl.lock);
    nf_pl.cfg = *cfg;
    pthread_mutex_unlock(&nf_pl.lock);
}

/* Pin the reducer when the caller's CPUs are not all near the memory: to
 * the caller's CPUs that are near, else to the near CPUs the process may
 * use. why says what "near" is (the device's host node, the node's
 * locality). */
static void nf_place_pin_setup(hwloc_topology_t topo, hwloc_const_cpuset_t locality,
                               const char *why)
{
    hwloc_cpuset_t mine = hwloc_bitmap_alloc(), to = hwloc_bitmap_alloc();
    char list[64];
    nf_pl.pin = 0;
    nf_pl.reducer[0] = '\0';
    if (mine == NULL || to == NULL || locality == NULL || hwloc_bitmap_iszero(locality) ||
        hwloc_get_cpubind(topo, mine, HWLOC_CPUBIND_THREAD) != 0 ||
        hwloc_bitmap_isincluded(mine, locality))
        goto out;
    hwloc_bitmap_and(to, mine, locality);
    if (hwloc_bitmap_iszero(to))
        hwloc_bitmap_and(to, locality, hwloc_topology_get_allowed_cpuset(topo));
    if (hwloc_bitmap_iszero(to))
        goto out;
    hwloc_cpuset_to_glibc_sched_affinity(topo, to, &nf_pl.pin_to, sizeof(cpu_set_t));
    nf_pl.pin = 1;
    hwloc_bitmap_list_snprintf(list, sizeof(list), to);
    snprintf(nf_pl.reducer, sizeof(nf_pl.reducer), "CPUs %s: %s", list, why);
    nf_log_info(1, "the reducer runs on %s", nf_pl.reducer);
out:
    hwloc_bitmap_free(mine);
    hwloc_bitmap_free(to);
}

/* Near the memory: the CPUs of the CXL device's own node when the bus
 * names it, else the node's hwloc locality. */
static void nf_place_reducer_near(hwloc_topology_t topo, hwloc_const_cpuset_t init,
                                  const nf_cxl_choice_t *c)
{
    nf_topo_node_t info;
    char why[96];
    if (c->near_node >= 0 && nf_topo_node_info(topo, c->near_node, init, &info) == NF_OK &&
        !hwloc_bitmap_iszero(info.locality)) {
        snprintf(why, sizeof(why), "the CPUs of NUMA node %d, the CXL device's host node",
                 c->near_node);
        nf_place_pin_setup(topo, info.locality, why);
    } else if (nf_topo_node_info(topo, c->node, init, &info) == NF_OK) {
        snprintf(why, sizeof(why), "the CPUs hwloc puts near NUMA node %d", c->node);
        nf_place_pin_setup(topo, info.locality, why);
    }
}

/* Decide the node; on failure under require, log and return the error. */
static nf_status_t nf_place_choose(const nf_place_config_t *s)
{
    hwloc_topology_t topo;
    hwloc_cpuset_t init;
    nf_cxl_choice_t c;
    nf_status_t st = nf_topo_load(&topo, &init);
    if (st != NF_OK)
        return s->mode == NF_CXL_REQUIRE ? st : NF_OK;
    st = nf_topo_choose_cxl(topo, s->node, init, &c);
    snprintf(nf_pl.detail, sizeof(nf_pl.detail), "%s", c.detail);
    nf_pl.reason = c.reason;
    if (c.node >= 0 && numa_available() < 0) {
        snprintf(nf_pl.detail, sizeof(nf_pl.detail), "NUMA node %d found, but the kernel has no NUMA support", c.node);
        c.node = -1, nf_pl.reason = "none", st = NF_ERR_NO_DEVICE;
    }
    if (c.node >= 0 && s->mode == NF_CXL_REQUIRE && c.evidence == NF_CXL_EV_GUESS) {
        snprintf(nf_pl.detail, sizeof(nf_pl.detail),
                 "%s; found instead NUMA node %d (%s, %s); NFCOLL_CXL_NODE=%d takes it anyway",
                 c.bus[0] ? c.bus : "no CXL device found", c.node, c.reason, c.detail, c.node);
        c.node = -1, nf_pl.reason = "none", st = NF_ERR_NO_DEVICE;
    }
    nf_pl.evidence = c.node >= 0 ? c.evidence : NF_CXL_EV_NONE;
    if (c.node >= 0) {
        nf_pl.node = c.node;
        nf_pl.mask = numa_allocate_nodemask();
        numa_bitmask_setbit(nf_pl.mask, (unsigned)c.node);
        nf_place_reducer_near(topo, init, &c);
        nf_log_info(1, "CXL memory node %d (%s: %s)", c.node, c.reason, c.detail);
    }
    hwloc_bitmap_free(init);
    hwloc_topology_destroy(topo);
    if (c.node >= 0)
        return NF_OK;
    if (s->mode == NF_CXL_REQUIRE) {
        nf_log_error("NFCOLL_CXL=require but there is no usable CXL memory node: %s%s%s",
                     nf_pl.detail, c.bus[0] && strstr(nf_pl.detail, c.bus) == NULL ? "; CXL bus: " : "",
                     c.bus[0] && strstr(nf_pl.detail, c.bus) == NULL ? c.bus : "");
        return NF_ERR_NO_DEVICE;
    }
    /* Local DRAM is the normal case on most machines: a warning only when
     * the user asked for placement (NFCOLL_CXL=prefer set, a node named)
     * and it cannot be honoured, once per job (rank 0, or a named node
     * that does not exist); else it is said at verbose level 1. */
    if (s->asked && (st != NF_OK || nf_log_rank() <= 0))
        nf_log_warn_once("%s; the aggregation buffer stays in local DRAM", nf_pl.detail);
    else
        nf_log_info(1, "%s; the aggregation buffer stays in local DRAM", nf_pl.detail);
    return NF_OK;
}

nf_status_t nf_place_init(void)
{
    pthread_mutex_lock(&nf_pl.lock);
    if (!nf_pl.inited) {
        const nf_place_config_t *s = &nf_pl.cfg;
        nf_pl.mode = s->mode;
        nf_pl.node = -1;
        nf_pl.pin = 0;
        nf_pl.reducer[0] = '\0';
        if (s->mode == NF_CXL_OFF) {
            nf_pl.reason = "off";
            snprintf(nf_pl.detail, sizeof(nf_pl.detail), "NFCOLL_CXL=off: not looking for a CXL node");
            nf_pl.status = NF_OK;
        } else {
            nf_pl.status = nf_place_choose(s);
        }
        nf_pl.inited = 1;
    }
    nf_status_t st = nf_pl.status;
    pthread_mutex_unlock(&nf_pl.lock);
    return st;
}

void nf_place_finalize(void)
{
    pthread_mutex_lock(&nf_pl.lock);
    if (nf_pl.mask != NULL)
        numa_free_nodemask(nf_pl.mask);
    nf_pl.mask = NULL;
    nf_pl.inited = 0;
    nf_pl.node = -1;
    nf_pl.pin = 0;
    nf_pl.reason = "none";
    nf_pl.evidence = NF_CXL_EV_NONE;
    nf_pl.detail[0] = '\0';
    nf_pl.reducer[0] = '\0';
    pthread_mutex_unlock(&nf_pl.lock);
}

int nf_place_node(void) { return nf_pl.node; }
const char *nf_place_reason(void) { return nf_pl.reason; }
const char *nf_place_detail(void) { return nf_pl.detail; }
nf_cxl_evidence_t nf_place_evidence(void) { return nf_pl.evidence; }
const char *nf_place_reducer(void) { return nf_pl.reducer; }

const char *nf_cxl_evidence_name(nf_cxl_evidence_t e)
{
    static const char *const names[] = {"none", "explicit", "device", "guess"};
    return (unsigned)e < sizeof(names) / sizeof(names[0]) ? names[e] : "none";
}

uint64_t nf_place_node_bytes(void)
{
    long long bytes = nf_pl.node >= 0 ? numa_node_size64(nf_pl.node, NULL) : 0;
    return bytes > 0 ? (uint64_t)bytes : 0;
}

/* Fraction of the pages of [addr, addr + len) that sit on node; -1 when
 * move_pages cannot tell (EPERM in some containers). */
static double nf_place_verify(char *addr, size_t len, size_t page, int node)
{
    void *pages[NF_VERIFY_BATCH];
    int status[NF_VERIFY_BATCH];
    size_t n = len / page, on = 0;
    for (size_t i = 0; i < n; i += NF_VERIFY_BATCH) {
        size_t b = n - i < NF_VERIFY_BATCH ? n - i : NF_VERIFY_BATCH;
        for (size_t j = 0; j < b; j++)
            pages[j] = addr + (i + j) * page;
        if (move_pages(0, (unsigned long)b, pages, NULL, status, 0) != 0) {
            nf_log_warn_once("move_pages could not verify the placement on NUMA node %d: %m",
                             node);
            return -1.0;
        }
        for (size_t j = 0; j < b; j++)
            on += status[j] == node;
    }
    return n != 0 ? (double)on / (double)n : 1.0;
}

/* Under require, too little free memory is an error; under prefer the
 * memory stays unbound (local DRAM) with one warning. */
static nf_status_t nf_place_capacity(size_t len, int *bind)
{
    long long free_bytes = 0;
    *bind = 1;
    if (numa_node_size64(nf_pl.node, &free_bytes) < 0 || free_bytes < 0 || (size_t)free_bytes >= len)
        return NF_OK;
    if (nf_pl.mode == NF_CXL_REQUIRE) {
        nf_log_error("CXL memory node %d has %lld bytes free, %zu are needed (NFCOLL_CXL=require)",
                     nf_pl.node, free_bytes, len);
        return NF_ERR_CAPACITY;
    }
    nf_log_warn_once("CXL memory node %d has %lld bytes free, %zu are needed: using local DRAM "
                     "(NFCOLL_CXL=prefer)", nf_pl.node, free_bytes, len);
    *bind = 0;
    return NF_OK;
}

/* Fault every page in, writable: one madvise instead of a page fault per
 * page and a second write of memory the kernel has just zeroed (fresh
 * mappings are zero). memset where the kernel lacks MADV_POPULATE_WRITE. */
static void nf_place_touch(void *addr, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    if (madvise(addr, len, MADV_POPULATE_WRITE) == 0)
        return;
#endif
    memset(addr, 0, len);
}

/* Pages that did not land on the node: under require an error (the caller
 * gives the memory back; said once, every refusal returns it), under
 * prefer one warning. */
static nf_status_t nf_place_short(size_t len, double frac)
{
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (nf_pl.mode == NF_CXL_REQUIRE) {
        if (!atomic_flag_test_and_set(&said))
            nf_log_error("CXL memory node %d is full: only %.1f %% of %zu bytes fit "
                         "(NFCOLL_CXL=require)", nf_pl.node, 100.0 * frac, len);
        else
            nf_log_info(1, "CXL memory node %d is full: only %.1f %% of %zu bytes fit "
                        "(NFCOLL_CXL=require)", nf_pl.node, 100.0 * frac, len);
        return NF_ERR_CAPACITY;
    }
    nf_log_warn_once("CXL memory node %d is full: %.1f %% of %zu bytes went to local DRAM "
                     "(NFCOLL_CXL=prefer)", nf_pl.node, 100.0 * (1.0 - frac), len);
    return NF_OK;
}

nf_status_t nf_place_bind_touch(void *addr, size_t len, double *frac)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int bind;
    nf_status_t st = nf_place_init();
    if (st != NF_OK)
        return st;
    len = (len + page - 1) / page * page;
    if (nf_pl.node < 0 || len == 0) {
        nf_place_touch(addr, len);
        *frac = 1.0;
        return NF_OK;
    }
    if ((st = nf_place_capacity(len, &bind)) != NF_OK)
        return st;
    /* Touched under the preferred policy in every mode: ranks filling the
     * node at once can each see room that is gone when their pages fault,
     * and a strict binding would then end in the OOM killer. What landed is
     * verified below; under require the binding is made strict after. */
    if (bind && mbind(addr, len, MPOL_PREFERRED, nf_pl.mask->maskp, nf_pl.mask->size + 1,
                      MPOL_MF_MOVE) != 0) {
        if (nf_pl.mode == NF_CXL_REQUIRE) {
            nf_log_error("mbind of %zu bytes to CXL memory node %d failed: %m", len, nf_pl.node);
            return NF_ERR_IO;
        }
        nf_log_warn_once("mbind to CXL memory node %d failed: %m; using local DRAM", nf_pl.node);
    }
    nf_place_touch(addr, len);
    *frac = nf_place_verify(addr, len, page, nf_pl.node);
    if (*frac < 0.0) { /* cannot tell where the pages are (warned) */
        *frac = 0.0;
        if (nf_pl.mode == NF_CXL_REQUIRE) {
            nf_log_error("cannot verify that %zu bytes are on CXL memory node %d "
                         "(NFCOLL_CXL=require)", len, nf_pl.node);
            return NF_ERR_IO;
        }
        return NF_OK;
    }
    if (*frac < 1.0 && bind)
        return nf_place_short(len, *frac);
    if (nf_pl.mode == NF_CXL_REQUIRE &&
        mbind(addr, len, MPOL_BIND, nf_pl.mask->maskp, nf_pl.mask->size + 1, 0) != 0)
        nf_log_warn_once("cannot make the binding to CXL memory node %d strict: %m", nf_pl.node);
    return NF_OK;
}

void *nf_place_map(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        nf_log_error("mmap of %zu bytes failed: %m", len);
        return NULL;
    }
    return p;
}

void *nf_place_alloc(size_t len, double *frac)
{
    void *p = nf_place_map(len);
    if (p == NULL)
        return NULL;
    if (nf_place_bind_touch(p, len, frac) != NF_OK) {
        munmap(p, len);
        return NULL;
    }
    return p;
}

void nf_place_free(void *p, size_t len)
{
    if (p != NULL)
        munmap(p, len);
}

_Static_assert(sizeof(((nf_place_pin_t *)0)->saved) >= sizeof(cpu_set_t), "pin save area too small");

/* The calling thread's own binding is saved and restored: under
 * MPI_THREAD_MULTIPLE, or after the application rebinds, the binding seen
 * at init is not this thread's. Three system calls, only while pinning is
 * active (a CXL node whose CPUs are not the caller's). */
void nf_place_reducer_enter(nf_place_pin_t *pin)
{
    cpu_set_t *saved = (cpu_set_t *)(void *)pin->saved;
    pin->active = 0;
    if (!nf_pl.pin)
        return;
    if (sched_getaffinity(0, sizeof(cpu_set_t), saved) == 0 &&
        sched_setaffinity(0, sizeof(cpu_set_t), &nf_pl.pin_to) == 0)
        pin->active = 1;
    else
        nf_log_warn_once("cannot move the reducer near CXL memory node %d: %m", nf_pl.node);
}

void nf_place_reducer_leave(nf_place_pin_t *pin)
{
    const cpu_set_t *saved = (const cpu_set_t *)(const void *)pin->saved;
    if (pin->active && sched_setaffinity(0, sizeof(cpu_set_t), saved) != 0)
        nf_log_warn_once("cannot restore the caller's CPU binding: %m");
    pin->active = 0;
}

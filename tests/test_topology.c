/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CXL node choice (lib/topology.c) against hwloc XML fixtures, and the
 * placement modes (lib/placement.c) on this machine. Table-driven.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* RTLD_NEXT */
#endif
#include "config.h"

#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nf_placement.h"
#include "nf_settings.h"

#ifndef NF_FIXTURES
#define NF_FIXTURES "tests/fixtures"
#endif

/* libnuma's numa_node_size64 as the fixture trees say: the library asks
 * libnuma for a node's free memory, and libnuma reads the real
 * /sys/devices/system/node; here the MemFree of NF_TEST_SYSFS's
 * nodeN/meminfo, which tests/fixtures/mkcxlsys.sh writes (the total: 0).
 * This definition, in the program, takes the place of libnuma's; without
 * NF_TEST_SYSFS it is libnuma's own. */
long long numa_node_size64(int node, long long *freep);
long long numa_node_size64(int node, long long *freep)
{
    const char *root = getenv("NF_TEST_SYSFS");
    char path[600], line[256];
    long long kb = -1;
    if (root == NULL) {
        long long (*real)(int, long long *);
        *(void **)&real = dlsym(RTLD_NEXT, "numa_node_size64");
        return real != NULL ? real(node, freep) : -1;
    }
    snprintf(path, sizeof(path), "%s/sys/devices/system/node/node%d/meminfo", root, node);
    FILE *f = fopen(path, "re");
    while (f != NULL && kb < 0 && fgets(line, sizeof(line), f) != NULL) {
        const char *p = strstr(line, "MemFree:");
        if (p != NULL && sscanf(p + 8, "%lld", &kb) != 1)
            kb = -1;
    }
    if (f != NULL)
        fclose(f);
    if (kb < 0)
        return -1;
    if (freep != NULL)
        *freep = kb * 1024;
    return 0;
}

/* The fixture sysfs trees of the CXL bus (tests/fixtures/mkcxlsys.sh), made
 * at start: their symlinks cannot travel in the release tarball. */
static char cxlsys[512];

static int make_cxlsys(void)
{
    char cmd[1200];
    const char *tmp = getenv("TMPDIR");
    snprintf(cxlsys, sizeof(cxlsys), "%s/nf_cxlsys.XXXXXX", tmp != NULL ? tmp : "/tmp");
    if (mkdtemp(cxlsys) == NULL) {
        perror("test_topology: mkdtemp");
        return -1;
    }
    snprintf(cmd, sizeof(cmd), "sh '%s/mkcxlsys.sh' '%s'", NF_FIXTURES, cxlsys);
    if (system(cmd) != 0) {
        fprintf(stderr, "test_topology: %s failed\n", cmd);
        return -1;
    }
    return 0;
}

static void remove_cxlsys(void)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cxlsys);
    if (system(cmd) != 0)
        fprintf(stderr, "test_topology: cannot remove %s\n", cxlsys);
}

typedef struct topo_case {
    const char *xml;        /* fixture file */
    int explicit_node;      /* -1: choose */
    const char *initiators; /* cpu list, NULL: whole machine */
    const char *sysfs;      /* NF_TEST_SYSFS below fixtures, NULL: unset */
    nf_status_t status;
    int node;
    const char *reason;
    const char *detail_has; /* substring of detail, or NULL */
    nf_cxl_evidence_t evidence;
    int near;               /* the device's host node, -1 */
} topo_case_t;

static const topo_case_t topo_cases[] = {
    {"one-node.xml", -1, NULL, NULL, NF_OK, -1, "none", "one NUMA node", NF_CXL_EV_NONE, -1},
    {"one-node.xml", 0, NULL, NULL, NF_OK, 0, "explicit", NULL, NF_CXL_EV_EXPLICIT, -1},
    {"dram-cxl.xml", -1, NULL, NULL, NF_OK, 1, "memory attributes", "latency 250", NF_CXL_EV_GUESS, -1},
    {"dram-cxl.xml", -1, "0", NULL, NF_OK, 1, "memory attributes", "local node 0", NF_CXL_EV_GUESS, -1},
    {"dram-cxl.xml", 0, NULL, NULL, NF_OK, 0, "explicit", NULL, NF_CXL_EV_EXPLICIT, -1},
    {"two-cxl.xml", -1, "0-1", NULL, NF_OK, 2, "memory attributes", "latency 250", NF_CXL_EV_GUESS, -1},
    {"two-cxl.xml", -1, "2-3", NULL, NF_OK, 3, "memory attributes", "latency 200", NF_CXL_EV_GUESS, -1},
    {"two-cxl.xml", -1, NULL, NULL, NF_OK, 3, "memory attributes", NULL, NF_CXL_EV_GUESS, -1},
    {"two-socket.xml", -1, NULL, NULL, NF_OK, -1, "none", "none of them CPU-less", NF_CXL_EV_NONE, -1},
    {"cpuless-fast.xml", -1, NULL, NULL, NF_OK, -1, "none", "none slower", NF_CXL_EV_NONE, -1},
    {"cpuless-noattr.xml", -1, NULL, NULL, NF_OK, -1, "none", "none slower", NF_CXL_EV_NONE, -1},
    {"cpuless-noattr.xml", -1, NULL, "tiers", NF_OK, 1, "memory tier", "tier 22", NF_CXL_EV_GUESS, -1},
    {"dram-cxl.xml", 7, NULL, NULL, NF_ERR_NO_DEVICE, -1, "none", "node 7 does not exist", NF_CXL_EV_NONE, -1},
    {"one-node.xml", 1, NULL, NULL, NF_ERR_NO_DEVICE, -1, "none", "has node 0", NF_CXL_EV_NONE, -1},
    /* The emulated machine of tests/cxl with its CXL device onlined (its
     * hwloc 2.9 XML and a sysfs tree of the same shape): node 1 is a
     * CPU-less HMAT node that is not CXL, node 2 the CXL memory. */
    {"cxl-dev.xml", -1, NULL, "cxlsys/one", NF_OK, 2, "CXL bus",
     "mem0 (serial 0x0, 512 MiB pmem) -> region0 (pmem 512 MiB, 1 way, 256 B granularity) -> dax0.0",
     NF_CXL_EV_DEVICE, -1},
    {"cxl-dev.xml", -1, NULL, NULL, NF_OK, 2, "DAX under the CXL root", "ACPI0017:00/root0",
     NF_CXL_EV_DEVICE, -1},
    {"cxl-dev.xml", 1, NULL, "cxlsys/one", NF_OK, 1, "explicit", NULL, NF_CXL_EV_EXPLICIT, -1},
    /* A memdev with no region is no node; hwloc's DAX parent still is. */
    {"cxl-dev.xml", -1, NULL, "cxlsys/memdev", NF_OK, 2, "DAX under the CXL root", NULL,
     NF_CXL_EV_DEVICE, -1},
    /* Two CXL nodes: the one whose device is near the CPUs, else the one
     * with the most free memory. In "two", dax1.0 has no resource file (it
     * is root's only): its region is found from node 3's memory blocks. In
     * "twohost1" mem0's host node is 1, known but not the CPUs' node 0: not
     * near, so free memory decides. */
    {"cxl-two.xml", -1, NULL, "cxlsys/two", NF_OK, 3, "CXL bus", "near this process", NF_CXL_EV_DEVICE, 0},
    {"cxl-two.xml", -1, NULL, "cxlsys/twofar", NF_OK, 2, "CXL bus", "most free memory", NF_CXL_EV_DEVICE, -1},
    {"cxl-two.xml", -1, NULL, "cxlsys/twohost1", NF_OK, 3, "CXL bus", "most free memory",
     NF_CXL_EV_DEVICE, -1},
    /* NFIT persistent memory onlined as RAM is not CXL, not even a guess. */
    {"dram-cxl.xml", -1, NULL, "cxlsys/nvdimm", NF_OK, -1, "none", "none of them CXL", NF_CXL_EV_NONE, -1},
    {"dram-cxl.xml", -1, NULL, "cxlsys/memdev", NF_OK, 1, "memory attributes", "a guess", NF_CXL_EV_GUESS, -1},
};

static hwloc_topology_t load_fixture(const char *name)
{
    char path[512];
    hwloc_topology_t topo;
    snprintf(path, sizeof(path), "%s/%s", NF_FIXTURES, name);
    ck_assert_int_eq(hwloc_topology_init(&topo), 0);
    ck_assert_msg(hwloc_topology_set_xml(topo, path) == 0, "cannot read %s", path);
    ck_assert_int_eq(hwloc_topology_load(topo), 0);
    return topo;
}

START_TEST(test_choose)
{
    const topo_case_t *c = &topo_cases[_i];
    char root[1024];
    hwloc_topology_t topo = load_fixture(c->xml);
    hwloc_bitmap_t init = NULL;
    nf_cxl_choice_t out;
    if (c->sysfs != NULL && strncmp(c->sysfs, "cxlsys/", 7) == 0) {
        snprintf(root, sizeof(root), "%s/%s", cxlsys, c->sysfs + 7);
        setenv("NF_TEST_SYSFS", root, 1);
    } else if (c->sysfs != NULL) {
        snprintf(root, sizeof(root), "%s/%s", NF_FIXTURES, c->sysfs);
        setenv("NF_TEST_SYSFS", root, 1);
    } else {
        unsetenv("NF_TEST_SYSFS");
    }
    if (c->initiators != NULL) {
        init = hwloc_bitmap_alloc();
        ck_assert_int_eq(hwloc_bitmap_list_sscanf(init, c->initiators), 0);
    }
    nf_status_t st = nf_topo_choose_cxl(topo, c->explicit_node, init, &out);
    ck_assert_msg(st == c->status, "%s: status %d, expected %d (%s)", c->xml, st, c->status, out.detail);
    ck_assert_msg(out.node == c->node, "%s: node %d, expected %d (%s)", c->xml, out.node, c->node, out.detail);
    ck_assert_str_eq(out.reason, c->reason);
    ck_assert_msg(out.evidence == c->evidence, "%s: evidence %s, expected %s", c->xml,
                  nf_cxl_evidence_name(out.evidence), nf_cxl_evidence_name(c->evidence));
    ck_assert_int_eq(out.near_node, c->near);
    if (c->detail_has != NULL)
        ck_assert_msg(strstr(out.detail, c->detail_has) != NULL, "%s: detail '%s' lacks '%s'",
                      c->xml, out.detail, c->detail_has);
    hwloc_bitmap_free(init);
    hwloc_topology_destroy(topo);
}
END_TEST

/* hwloc 2.9 does not detect CXL-DRAM itself, but its XML carries the subtype
 * (obj->subtype exists since 2.0), so the fixture runs on every version. */
START_TEST(test_subtype)
{
    hwloc_topology_t topo = load_fixture("cxl-subtype.xml");
    nf_cxl_choice_t out;
    hwloc_obj_t n = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, 1);
    if (n == NULL || n->subtype == NULL) {
        printf("SKIP: this hwloc (API 0x%x) drops NUMA subtypes from XML\n", HWLOC_API_VERSION);
        hwloc_topology_destroy(topo);
        return;
    }
    ck_assert_int_eq(nf_topo_choose_cxl(topo, -1, NULL, &out), NF_OK);
    ck_assert_int_eq(out.node, 1);
    ck_assert_str_eq(out.reason, "CXL-DRAM subtype");
    hwloc_topology_destroy(topo);
}
END_TEST

START_TEST(test_node_info)
{
    hwloc_topology_t topo = load_fixture("dram-cxl.xml");
    nf_topo_node_t a, b;
    ck_assert_int_eq(nf_topo_node_count(topo), 2);
    ck_assert_int_eq(nf_topo_node_info(topo, 0, NULL, &a), NF_OK);
    ck_assert_int_eq(nf_topo_node_info(topo, 1, NULL, &b), NF_OK);
    ck_assert(!a.cpuless && a.local && a.latency == 100 && a.bandwidth == 204800);
    ck_assert(b.cpuless && !b.local && b.latency == 250 && b.bandwidth == 61440);
    ck_assert_int_eq(nf_topo_node_info(topo, 9, NULL, &a), NF_ERR_INVALID);
    hwloc_topology_destroy(topo);
}
END_TEST

/* Placement modes on this machine. NFCOLL_CXL_NODE=0 names a node every
 * Linux machine has, so require succeeds and pages must land there. */
typedef struct place_case {
    const char *mode, *node;
    nf_status_t status;
    int chosen;
} place_case_t;

static const place_case_t place_cases[] = {
    {"off", NULL, NF_OK, -1},
    {"prefer", "4095", NF_OK, -1},
    {"require", "4095", NF_ERR_NO_DEVICE, -1},
    {"require", "0", NF_OK, 0},
    {"prefer", "0", NF_OK, 0},
};

static void place_env(const char *mode, const char *node)
{
    setenv("NFCOLL_CXL", mode, 1);
    if (node != NULL)
        setenv("NFCOLL_CXL_NODE", node, 1);
    else
        unsetenv("NFCOLL_CXL_NODE");
    unsetenv("HWLOC_XMLFILE");
    nf_settings_reset();
    nf_place_finalize();
    nf_place_config_t pc;
    nf_place_config_from(nf_settings_load(), -1, &pc);
    nf_place_configure(&pc);
}

START_TEST(test_place_modes)
{
    const place_case_t *c = &place_cases[_i];
    size_t len = 1 << 20;
    double frac = -1.0;
    nf_place_pin_t pin;
    place_env(c->mode, c->node);
    ck_assert_int_eq(nf_place_init(), c->status);
    ck_assert_int_eq(nf_place_node(), c->chosen);
    if (c->status != NF_OK)
        return;
    float *p = nf_place_alloc(len, &frac);
    ck_assert_ptr_nonnull(p);
    ck_assert(frac == 1.0);
    ck_assert(p[0] == 0.0f && p[len / sizeof(float) - 1] == 0.0f);
    nf_place_reducer_enter(&pin);
    nf_place_reducer_leave(&pin);
    nf_place_free(p, len);
    nf_place_finalize();
}
END_TEST

START_TEST(test_place_capacity)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    double frac;
    void *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(p != MAP_FAILED);
    place_env("require", "0");
    ck_assert_int_eq(nf_place_init(), NF_OK);
    /* Far more than any node has: refused before anything is touched. */
    ck_assert_int_eq(nf_place_bind_touch(p, (size_t)1 << 60, &frac), NF_ERR_CAPACITY);
    munmap(p, page);
    nf_place_finalize();
}
END_TEST

/* Under require a guess is not CXL memory: the error names what was found
 * instead; CXL evidence (here hwloc's DAX parent) is. The topologies are
 * fixtures, so only the choice is checked, nothing is bound. */
START_TEST(test_place_evidence)
{
    unsetenv("NF_TEST_SYSFS");
    place_env("require", NULL);
    setenv("HWLOC_XMLFILE", NF_FIXTURES "/dram-cxl.xml", 1);
    ck_assert_int_eq(nf_place_init(), NF_ERR_NO_DEVICE);
    ck_assert_int_eq(nf_place_node(), -1);
    ck_assert_msg(strstr(nf_place_detail(), "found instead NUMA node 1 (memory attributes, a guess") != NULL,
                  "detail: %s", nf_place_detail());
    nf_place_finalize();
    place_env("prefer", NULL);
    setenv("HWLOC_XMLFILE", NF_FIXTURES "/dram-cxl.xml", 1);
    ck_assert_int_eq(nf_place_init(), NF_OK);
    ck_assert_int_eq(nf_place_node(), 1);
    ck_assert_str_eq(nf_cxl_evidence_name(nf_place_evidence()), "guess");
    nf_place_finalize();
    place_env("require", NULL);
    setenv("HWLOC_XMLFILE", NF_FIXTURES "/cxl-dev.xml", 1);
    ck_assert_int_eq(nf_place_init(), NF_OK);
    ck_assert_int_eq(nf_place_node(), 2);
    ck_assert_str_eq(nf_place_reason(), "DAX under the CXL root");
    ck_assert_str_eq(nf_cxl_evidence_name(nf_place_evidence()), "device");
    nf_place_finalize();
    unsetenv("HWLOC_XMLFILE");
}
END_TEST

static Suite *topo_suite(void)
{
    Suite *s = suite_create("topology");
    TCase *t = tcase_create("choose");
    tcase_add_loop_test(t, test_choose, 0, (int)(sizeof(topo_cases) / sizeof(topo_cases[0])));
    tcase_add_test(t, test_subtype);
    tcase_add_test(t, test_node_info);
    suite_add_tcase(s, t);
    t = tcase_create("place");
    tcase_add_loop_test(t, test_place_modes, 0, (int)(sizeof(place_cases) / sizeof(place_cases[0])));
    tcase_add_test(t, test_place_capacity);
    tcase_add_test(t, test_place_evidence);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    if (make_cxlsys() != 0)
        return EXIT_FAILURE;
    SRunner *r = srunner_create(topo_suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    remove_cxlsys();
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

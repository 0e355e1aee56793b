/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nfcoll_info: version, build configuration, NFCOLL_* settings, and the NUMA
 * topology with the CXL node libnfcoll would use and why. A front end to the
 * library (settings table, kernel dispatch, topology/placement); it makes no
 * MPI call, so it runs without mpirun. With no option nothing is timed (the
 * output changes only with the machine); -b times the kernels and codecs.
 */
#include "config.h"

#include <getopt.h>
#include <numa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nf_checkpoint.h"
#include "nf_codec.h"
#include "nf_kernels.h"
#include "nf_cxlbus.h"
#include "nf_placement.h"
#include "nf_policy.h"
#include "nf_settings.h"
#include "nfcoll.h"

/* SHOW_TIMED: -b, the build with the kernels and codec timed (seconds,
 * about 100 MB); with no option the build is shown without them. */
enum { SHOW_VERSION = 1, SHOW_BUILD = 2, SHOW_CONFIG = 4, SHOW_TOPO = 8, SHOW_TIMED = 16,
       SHOW_DEFAULT = 15 };
enum { EXIT_OK = 0, EXIT_PROBLEM = 1, EXIT_USAGE = 2 };

static int json;
static int first; /* no comma before the next JSON member */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: nfcoll_info [-b] [-c] [-t] [--json]\n"
            "       nfcoll_info --checkpoint FILE [--json]\n"
            "       nfcoll_info -h | --help | -V | --version\n"
            "\n"
            "Show how libnfcoll was built and what it would do on this machine.\n"
            "With no option: the version, the build (nothing timed: see -b), the\n"
            "settings and the topology.\n"
            "\n"
            "  -b, --build     build configuration: MPI, hwloc, libnuma, SIMD kernels, and\n"
            "                  timed here (1 to 3 s, about 100 MB): per kernel the ISA\n"
            "                  chosen by timing (as at initialization), and each route's\n"
            "                  codec rate in ns per element (what nfcoll_replay --link\n"
            "                  predicts from)\n"
            "  -c, --config    every NFCOLL_* setting: default, current value, meaning\n"
            "  -t, --topology  NUMA nodes (size, CPUs, latency, bandwidth), the CXL bus\n"
            "                  (memdev -> region -> DAX device -> node), the CXL memory\n"
            "                  node libnfcoll would use with the reason and evidence, and\n"
            "                  the CPUs the reduction runs on\n"
            "      --json      the same as one JSON object (top-level \"cxl_node\" and\n"
            "                  \"cxl_reason\" are always present)\n"
            "  -k, --checkpoint FILE\n"
            "                  check a residual checkpoint file (NF_Residuals_save) whole and\n"
            "                  describe it: header and every residual's key, count and form;\n"
            "                  exit status 1 and the reason when it is not valid\n"
            "  -h, --help      this text\n"
            "  -V, -v, --version\n"
            "                  the libnfcoll version and the MPI it was built with\n"
            "\n"
            "Exit status: 0 shown, 1 a checkpoint not valid or no topology, 2 usage error.\n");
}

/* --version: as every nfcoll program and benchmark says it. */
static void print_version(void)
{
    printf("nfcoll_info (libnfcoll) %s\nbuilt with %s\n", nf_version(NULL, NULL, NULL),
           NF_MPI_VERSION_STRING);
}

static void jstr(const char *s)
{
    if (s == NULL) {
        fputs("null", stdout);
        return;
    }
    putchar('"');
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

/* "key": (the caller prints the value) */
static void jkey(const char *k)
{
    printf("%s\n  \"%s\": ", first ? "" : ",", k);
    first = 0;
}

static void show_version(void)
{
    const char *v = nf_version(NULL, NULL, NULL);
    if (json) {
        jkey("version");
        jstr(v);
    } else {
        printf("libnfcoll %s\n", v);
    }
}

/* hwloc's package version is only known at run time, from the topology's
 * root info; HWLOC_API_VERSION is the (coarser) API level. */
static void hwloc_versions(char *api, size_t na, char *run, size_t nr)
{
    hwloc_topology_t topo;
    hwloc_cpuset_t init;
    snprintf(api, na, "0x%08x", (unsigned)HWLOC_API_VERSION);
    snprintf(run, nr, "unknown");
    if (nf_topo_load(&topo, &init) != NF_OK)
        return;
    const char *v = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), "hwlocVersion");
    if (v != NULL)
        snprintf(run, nr, "%s", v);
    hwloc_bitmap_free(init);
    hwloc_topology_destroy(topo);
}

static void kernels_text(const nf_kernels_t *T, nf_isa_t cap, double ms)
{
    nf_isa_t isa;
    double ns;
    const char *name;
    int timed = 0;
    for (int i = 0; nf_kernels_choice(i, NULL, &ns) != NULL; i++)
        timed |= ns > 0;
    if (timed)
        printf("  kernel choice     %s: timed in %.1f ms under cap %s (ns per element, cold "
               "buffers)\n", T->name, ms, nf_isa_name(cap));
    else
        printf("  kernel choice     %s: nothing timed (one candidate under cap %s, "
               "NFCOLL_SIMD_TUNE=off, or no time left)\n", T->name, nf_isa_name(cap));
    for (int i = 0; (name = nf_kernels_choice(i, &isa, NULL)) != NULL; i++) {
        printf(timed ? "    %-12s %-7s" : "    %-12s %s", name, nf_isa_name(isa));
        for (int c = 0; c < NF_ISA_COUNT; c++)
            if ((ns = nf_kernels_measured(i, (nf_isa_t)c)) > 0)
                printf("  %s %.3f", nf_isa_name((nf_isa_t)c), ns);
        printf("\n");
    }
}

static void kernels_json(const nf_kernels_t *T, double ms)
{
    nf_isa_t isa;
    double ns;
    const char *name;
    printf(", \"kernels_table\": ");
    jstr(T->name);
    printf(", \"kernels_choice_ms\": %.3f, \"kernels\": [", ms);
    for (int i = 0; (name = nf_kernels_choice(i, &isa, NULL)) != NULL; i++) {
        printf("%s{\"kernel\": \"%s\", \"isa\": \"%s\", \"ns_per_elem\": {", i ? ", " : "", name,
               nf_isa_name(isa));
        for (int c = 0, n = 0; c < NF_ISA_COUNT; c++)
            if ((ns = nf_kernels_measured(i, (nf_isa_t)c)) > 0)
                printf("%s\"%s\": %.4f", n++ ? ", " : "", nf_isa_name((nf_isa_t)c), ns);
        printf("}}");
    }
    printf("]");
}

/* The codecs' cost with the table the library would take: what
 * nfcoll_replay --link predicts a call's time from (nf_codec.h). */
#define INFO_CODEC_RANKS 2
#define INFO_CODEC_REPS 5

static void codec_text(const nf_codec_rates_t *r)
{
    printf("  codec rate        ns per element of a call, pack + reduce (%u ranks) + finish, "
           "median of %d\n                    (stages at %zu Mi elements)\n", r->ranks,
           INFO_CODEC_REPS, nf_codec_size[NF_CODEC_SIZES - 1] >> 20);
    printf("    %-12s", "elements");
    for (int z = 0; z < NF_CODEC_SIZES; z++)
        printf(" %9zu Ki", nf_codec_size[z] >> 10);
    printf("\n");
    for (int c = 0; c < NF_CODEC_COUNT; c++) {
        printf("    %-12s", nf_codec_name((nf_codec_t)c));
        for (int z = 0; z < NF_CODEC_SIZES; z++)
            printf(" %12.3f", nf_codec_ns(r, (nf_codec_t)c, -1, nf_codec_size[z]) /
                                  (double)nf_codec_size[z]);
        const double *p = &r->ns[c][0][NF_CODEC_SIZES - 1];
        printf("   (%.3f + %.3f + %.3f)\n", p[0], r->ns[c][1][NF_CODEC_SIZES - 1],
               r->ns[c][2][NF_CODEC_SIZES - 1]);
    }
}

static void codec_json(const nf_codec_rates_t *r)
{
    static const char *const stage[NF_CODEC_STAGES] = {"pack", "reduce", "finish"};
    printf(", \"codec\": {\"ranks\": %u, \"repeats\": %d, \"elements\": [", r->ranks,
           INFO_CODEC_REPS);
    for (int z = 0; z < NF_CODEC_SIZES; z++)
        printf("%s%zu", z ? ", " : "", nf_codec_size[z]);
    printf("], \"ns_per_elem\": {");
    for (int c = 0; c < NF_CODEC_COUNT; c++) {
        printf("%s\"%s\": {", c ? ", " : "", nf_codec_name((nf_codec_t)c));
        for (int st = 0; st < NF_CODEC_STAGES; st++) {
            printf("%s\"%s\": [", st ? ", " : "", stage[st]);
            for (int z = 0; z < NF_CODEC_SIZES; z++)
                printf("%s%.4f", z ? ", " : "", r->ns[c][st][z]);
            printf("]");
        }
        printf("}");
    }
    printf("}}");
}

static void show_codec(const nf_kernels_t *T)
{
    nf_codec_rates_t r;
    if (nf_codec_measure(T, INFO_CODEC_RANKS, 1, INFO_CODEC_REPS, &r) != 0) {
        if (json)
            printf(", \"codec\": null");
        else
            printf("  codec rate        not measured: no memory for its buffers\n");
        return;
    }
    (json ? codec_json : codec_text)(&r);
}

/* Per kernel, the ISA the library would take: the same nf_kernels_tuned()
 * call under the same NFCOLL_SIMD cap, timed as at initialization. */
static void show_kernels(void)
{
    struct timespec t0, t1;
    nf_isa_t cap = (nf_isa_t)nf_settings_load()->simd_cap;
    nf_kernels_set_tune(nf_settings_load()->simd_tune);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const nf_kernels_t *T = nf_kernels_tuned(cap);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
    if (cap > nf_isa_detect())
        cap = nf_isa_detect();
    if (json)
        kernels_json(T, ms);
    else
        kernels_text(T, cap, ms);
    show_codec(T);
}

static void show_build(int timed)
{
    char hw_api[32], hw_run[32];
    nf_isa_t isa = nf_isa_detect();
    hwloc_versions(hw_api, sizeof(hw_api), hw_run, sizeof(hw_run));
    if (!json) {
        printf("Build configuration:\n"
               "  MPI               %s\n"
               "  hwloc             %s (API %s)\n"
               "  libnuma           %s\n"
               "  SIMD kernels      %s (built), %s (this CPU)\n",
               NF_MPI_VERSION_STRING, hw_run, hw_api, NF_NUMA_VERSION_STRING,
               NF_SIMD_BUILT, nf_isa_name(isa));
        if (timed)
            show_kernels();
        else
            printf("  kernel choice     not timed (nfcoll_info -b times each kernel's ISAs, as "
                   "at initialization,\n                    and each route's codec rate)\n");
        return;
    }
    jkey("build");
    printf("{\"mpi\": ");
    jstr(NF_MPI_VERSION_STRING);
    printf(", \"hwloc\": ");
    jstr(hw_run);
    printf(", \"hwloc_api\": \"%s\", \"libnuma\": ", hw_api);
    jstr(NF_NUMA_VERSION_STRING);
    printf(", \"simd_built\": ");
    jstr(NF_SIMD_BUILT);
    printf(", \"simd_detected\": ");
    jstr(nf_isa_name(isa));
    if (timed)
        show_kernels();
    printf("}");
}

static void show_config(void)
{
    size_t n;
    const nf_setting_desc_t *t = nf_settings_table(&n);
    nf_settings_load(); /* warns about malformed values, as the library would */
    if (json) {
        jkey("settings");
        printf("[");
    } else {
        printf("Settings (environment):\n");
    }
    for (size_t i = 0; i < n; i++) {
        const char *cur = nf_setting_raw((nf_setting_id_t)i);
        if (!json) {
            printf("  %-22s %-10s %s\n  %22s default '%s', accepts %s\n", t[i].name,
                   cur != NULL ? cur : "(unset)", t[i].doc, "", t[i].def, t[i].values);
            continue;
        }
        printf("%s\n    {\"name\": ", i == 0 ? "" : ",");
        jstr(t[i].name);
        printf(", \"default\": ");
        jstr(t[i].def);
        printf(", \"current\": ");
        jstr(cur);
        printf(", \"values\": ");
        jstr(t[i].values);
        printf(", \"doc\": ");
        jstr(t[i].doc);
        printf("}");
    }
    if (json)
        printf("\n  ]");
}

static void print_node(hwloc_topology_t topo, hwloc_const_cpuset_t init, int os, int cxl)
{
    nf_topo_node_t nd;
    char cpus[128] = "";
    long long free_b = -1;
    if (nf_topo_node_info(topo, os, init, &nd) != NF_OK)
        return;
    hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), nd.locality);
    if (hwloc_topology_is_thissystem(topo) && numa_available() >= 0)
        numa_node_size64(os, &free_b);
    if (!json) {
        printf("  node %d: %llu MiB", os, (unsigned long long)(nd.bytes >> 20));
        if (free_b >= 0)
            printf(" (%lld MiB free)", free_b >> 20);
        if (cpus[0] != '\0')
            printf(", %s %s", nd.cpuless ? "CPU-less, near CPUs" : "CPUs", cpus);
        else
            printf(", CPU-less, no CPU given as near");
        if (nd.subtype != NULL)
            printf(", subtype %s", nd.subtype);
        if (nd.latency != 0)
            printf(", latency %llu ns", (unsigned long long)nd.latency);
        if (nd.bandwidth != 0)
            printf(", bandwidth %llu MiB/s", (unsigned long long)nd.bandwidth);
        printf("%s\n", os == cxl ? "  <- CXL node" : "");
        return;
    }
    printf("\n    {\"os_index\": %d, \"bytes\": %llu, \"free_bytes\": ", os, (unsigned long long)nd.bytes);
    free_b >= 0 ? printf("%lld", free_b) : printf("null");
    printf(", \"cpus\": \"%s\", \"cpuless\": %s, \"subtype\": ", cpus, nd.cpuless ? "true" : "false");
    jstr(nd.subtype);
    printf(nd.latency != 0 ? ", \"latency_ns\": %llu" : ", \"latency_ns\": null", (unsigned long long)nd.latency);
    printf(nd.bandwidth != 0 ? ", \"bandwidth_mib_s\": %llu" : ", \"bandwidth_mib_s\": null",
           (unsigned long long)nd.bandwidth);
    printf(", \"cxl\": %s}", os == cxl ? "true" : "false");
}

/* The CXL bus's memory, one chain per DAX device: what the library's
 * choice read for topo (the same sysfs root: tests point NF_TEST_SYSFS at
 * a fixture tree; a topology from elsewhere has no bus here). */
static void print_cxl_bus(hwloc_topology_t topo)
{
    const char *root = nf_topo_sysroot(topo);
    nf_cxl_bus_t *bus = calloc(1, sizeof(*bus));
    char line[512];
    if (bus == NULL)
        return;
    if (root != NULL)
        nf_cxl_bus_read(root, bus);
    if (!json) {
        if (root != NULL)
            nf_cxl_bus_summary(bus, line, sizeof(line));
        else
            snprintf(line, sizeof(line), "not read (the topology is not this machine's)");
        printf("CXL bus: %s\n", line);
        for (int i = 0; i < bus->n; i++) {
            nf_cxl_chain_format(&bus->mem[i], line, sizeof(line));
            printf("  %s\n", line);
        }
        free(bus);
        return;
    }
    jkey("cxl_devices");
    printf("[");
    for (int i = 0; i < bus->n; i++) {
        const nf_cxl_mem_t *m = &bus->mem[i];
        printf("%s\n    {\"dax\": \"%s\", \"node\": %d, \"system_ram\": %s, \"dax_bytes\": %llu, "
               "\"region\": ", i ? "," : "", m->dax, m->node, m->system_ram ? "true" : "false",
               (unsigned long long)m->dax_bytes);
        jstr(m->region[0] ? m->region : NULL);
        printf(", \"mode\": ");
        jstr(m->mode[0] ? m->mode : NULL);
        printf(", \"region_bytes\": %llu, \"interleave_ways\": %u, \"interleave_granularity\": %u, "
               "\"memdevs\": [", (unsigned long long)m->region_bytes, m->ways, m->granularity);
        for (int j = 0; j < m->nmem; j++) {
            const nf_cxl_memdev_t *d = &m->mem[j];
            printf("%s{\"name\": \"%s\", \"serial\": ", j ? ", " : "", d->name);
            jstr(d->serial);
            printf(", \"pmem_bytes\": %llu, \"ram_bytes\": %llu, \"host_node\": ",
                   (unsigned long long)d->pmem_bytes, (unsigned long long)d->ram_bytes);
            d->host_node >= 0 ? printf("%d}", d->host_node) : printf("null}");
        }
        printf("]}");
    }
    printf(bus->n ? "\n  ]" : "]");
    free(bus);
}

/* The node comes from nf_place_init, i.e. exactly what the library decides
 * with the current NFCOLL_CXL and NFCOLL_CXL_NODE. */
static int show_topo(int mask)
{
    hwloc_topology_t topo;
    hwloc_cpuset_t init;
    char ic[128] = "all CPUs";
    nf_status_t st = nf_place_init();
    int cxl = nf_place_node(), nn;
    if (mask & SHOW_TOPO) {
        if (nf_topo_load(&topo, &init) != NF_OK)
            return 1;
        if (init != NULL)
            snprintf(ic, sizeof(ic), "CPUs "), hwloc_bitmap_list_snprintf(ic + 5, sizeof(ic) - 5, init);
        nn = nf_topo_node_count(topo);
        if (json) {
            jkey("numa_nodes");
            printf("[");
        } else {
            printf("NUMA nodes (latency and bandwidth as seen from %s):\n", ic);
        }
        for (int i = 0; i < nn; i++) {
            if (json && i > 0)
                printf(",");
            print_node(topo, init, nf_topo_node_os(topo, i), cxl);
        }
        if (json)
            printf("\n  ]");
        print_cxl_bus(topo);
        hwloc_bitmap_free(init);
        hwloc_topology_destroy(topo);
    }
    if (!json) {
        if (cxl >= 0)
            printf("CXL memory node: %d (%s: %s)\n", cxl, nf_place_reason(), nf_place_detail());
        else
            printf("CXL memory node: none (%s)%s\n", nf_place_detail(),
                   st != NF_OK ? ": libnfcoll would fail to initialize" : "");
        printf("evidence: %s%s\n", nf_cxl_evidence_name(nf_place_evidence()),
               nf_place_evidence() == NF_CXL_EV_GUESS
                   ? " (no CXL device seen; NFCOLL_CXL=require would refuse this node)" : "");
        printf("reducer: %s\n", nf_place_reducer()[0] ? nf_place_reducer()
                                : "on the caller's CPUs (already near the memory, or nothing placed)");
        return 0;
    }
    jkey("cxl_mode");
    jstr(nf_setting_raw(NF_SET_CXL) != NULL ? nf_setting_raw(NF_SET_CXL) : "prefer");
    jkey("cxl_node");
    cxl >= 0 ? printf("%d", cxl) : printf("null");
    jkey("cxl_reason");
    jstr(nf_place_reason());
    jkey("cxl_detail");
    jstr(nf_place_detail());
    jkey("cxl_status");
    jstr(nf_strerror(st));
    jkey("cxl_evidence");
    jstr(nf_cxl_evidence_name(nf_place_evidence()));
    jkey("reducer");
    jstr(nf_place_reducer()[0] ? nf_place_reducer() : NULL);
    return 0;
}

/* ---- nfcoll_info --checkpoint ---- */

typedef struct ckpt_list {
    nf_ckpt_entry_t *e;
    size_t n, cap;
    int head;           /* the header was read */
} ckpt_list_t;

/* The reader's sink: keep each entry, check its floats only. */
static float *ckpt_keep(void *arg, const nf_ckpt_head_t *h, const nf_ckpt_entry_t *e,
                        nf_status_t *st, char *why, size_t n)
{
    ckpt_list_t *l = arg;
    (void)h;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        nf_ckpt_entry_t *v = realloc(l->e, cap * sizeof(*v));
        if (v == NULL) {
            snprintf(why, n, "out of memory");
            *st = NF_ERR_NO_MEMORY;
            return NULL;
        }
        l->e = v, l->cap = cap;
    }
    l->e[l->n++] = *e;
    return NULL;
}

static void ckpt_entry_text(const nf_ckpt_entry_t *e)
{
    char key[NF_RES_NAME_MAX + 16];
    if (e->unbound)
        snprintf(key, sizeof(key), "unbound #%llu", (unsigned long long)e->order);
    else
        snprintf(key, sizeof(key), "region '%s'", e->name);
    printf("    %-32s %12zu floats  form %s", key, e->count, e->form == NF_RES_Y ? "Y" : e->form == NF_RES_TY ? "TY" : "E");
    if (e->form == NF_RES_Y)
        printf("  a_prev %a", (double)e->aprev);
    printf("\n");
}

static void ckpt_json(const char *path, const nf_ckpt_head_t *h, const ckpt_list_t *l,
                      nf_status_t st, const char *why)
{
    printf("{\n  \"checkpoint\": ");
    jstr(path);
    printf(",\n  \"valid\": %s,\n  \"error\": ", st == NF_OK ? "true" : "false");
    jstr(st == NF_OK ? NULL : why);
    if (l->head)
        printf(",\n  \"version\": %u, \"size\": %u, \"rank\": %u, \"save_id\": "
               "\"%016llx\", \"file_bytes\": %llu, \"bound_regions\": %u, "
               "\"residuals\": %u", h->version, h->size, h->rank, (unsigned long long)h->id,
               (unsigned long long)h->file_bytes, h->nregions, h->nentries);
    printf(",\n  \"entries\": [");
    for (size_t i = 0; i < l->n; i++) {
        const nf_ckpt_entry_t *e = &l->e[i];
        printf("%s\n    {\"kind\": \"%s\", \"name\": ", i ? "," : "",
               e->unbound ? "unbound" : "region");
        jstr(e->unbound ? NULL : e->name);
        printf(", \"order\": %llu, \"count\": %zu, \"form\": \"%s\", \"aprev\": %.9g}",
               (unsigned long long)e->order, e->count, e->form == NF_RES_Y ? "Y" : e->form == NF_RES_TY ? "TY" : "E",
               (double)e->aprev);
    }
    printf("\n  ]\n}\n");
}

/* Everything comes from the library's reader: what load would accept. */
static int show_checkpoint(const char *path)
{
    nf_ckpt_head_t h;
    ckpt_list_t l = {0};
    char why[512];
    memset(&h, 0, sizeof(h));
    nf_status_t st = nf_ckpt_read(path, &h, ckpt_keep, &l, why, sizeof(why));
    l.head = st == NF_OK || l.n > 0;
    if (json) {
        ckpt_json(path, &h, &l, st, why);
    } else {
        printf("Residual checkpoint %s: %s\n", path, st == NF_OK ? "valid" : "NOT valid");
        if (l.head)
            printf("  format version %u, rank %u of %u, save id %016llx, %llu bytes\n"
                   "  bound regions its residuals used when saved: %u\n  residuals: %u, in order of first use\n",
                   h.version, h.rank, h.size, (unsigned long long)h.id,
                   (unsigned long long)h.file_bytes, h.nregions, h.nentries);
        for (size_t i = 0; i < l.n; i++)
            ckpt_entry_text(&l.e[i]);
        if (st == NF_OK && h.version >= 2)
            printf("  the layers' state (warm-up, health, call index): %zu bytes\n",
                   h.state_len);
        if (st != NF_OK)
            fprintf(stderr, "nfcoll_info: %s: %s\n", path, why);
    }
    free(h.state);
    free(l.e);
    return st == NF_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"version", no_argument, NULL, 'V'}, {"build", no_argument, NULL, 'b'},
        {"config", no_argument, NULL, 'c'},  {"topology", no_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},    {"help", no_argument, NULL, 'h'},
        {"checkpoint", required_argument, NULL, 'k'}, {NULL, 0, NULL, 0}};
    int mask = 0, opt, rc = 0;
    const char *ckpt = NULL;
    while ((opt = getopt_long(argc, argv, "bcthk:Vv", longopts, NULL)) != -1) {
        switch (opt) {
        case 'k': ckpt = optarg; break;
        case 'b': mask |= SHOW_BUILD | SHOW_TIMED; break;
        case 'c': mask |= SHOW_CONFIG; break;
        case 't': mask |= SHOW_TOPO; break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return EXIT_OK;
        case 'V': case 'v': print_version(); return EXIT_OK;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "nfcoll_info: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return EXIT_USAGE;
    }
    if (ckpt != NULL)
        return show_checkpoint(ckpt);
    if (mask == 0)
        mask = SHOW_DEFAULT;
    /* The library takes the policy's cxl_node (NFCOLL_CXL_NODE still wins):
     * so does the answer here. A policy that does not load is reported. */
    nf_policy_t *pol = NULL;
    nf_place_config_t pc;
    const char *path = nf_settings_load()->policy;
    if (path != NULL)
        nf_policy_load(path, NULL, NULL, &pol);
    nf_place_config_from(nf_settings_load(), nf_policy_cxl_node(pol), &pc);
    nf_place_configure(&pc);
    first = 1;
    if (json)
        printf("{");
    if (mask & SHOW_VERSION)
        show_version();
    if (mask & SHOW_BUILD)
        show_build(mask & SHOW_TIMED);
    if (mask & SHOW_CONFIG)
        show_config();
    if (json || (mask & SHOW_TOPO))
        rc = show_topo(mask);
    if (json)
        printf("\n}\n");
    nf_place_finalize();
    nf_policy_free(pol);
    return rc;
}

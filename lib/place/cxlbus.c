/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Linux CXL bus in sysfs (nf_cxlbus.h). What kernel 6.1 shows for an
 * expander onlined the persistent-memory way (and 6.3+ the volatile way):
 *
 *   /sys/bus/dax/devices/dax0.0 -> .../ACPI0017:00/root0/.../dax0.0
 *       target_node, size, resource, driver -> .../kmem when onlined
 *   /sys/bus/cxl/devices/region0: resource, size, interleave_ways,
 *       interleave_granularity, target0..N-1 = endpoint decoders
 *   /sys/bus/cxl/devices/decoder2.0 -> .../endpoint2/decoder2.0: mode
 *   .../endpoint2/uport -> .../mem0
 *   /sys/bus/cxl/devices/mem0: serial, numa_node, pmem/size, ram/size
 *
 * ACPI0017 is the CXL root object: a DAX device below it is CXL memory. A
 * DAX device whose range lies inside a region's is that region's. Layout
 * seen in the emulated machine of tests/cxl (docs/design.md, "Placement").
 */
#include "config.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nf_cxlbus.h"

#define NF_CXL_ROOT_HID "/ACPI0017:"   /* CXL root (CXL 2.0, 9.14.1) */
#define NF_NVDIMM_ROOT_HID "/ACPI0012:" /* NFIT: persistent memory, not CXL */

static const char *nf_cxl_root(const char *root) { return root != NULL ? root : ""; }

/* src into dst[len], cut to fit (sysfs names are short). */
static void nf_cxl_copy(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);
    if (n >= len)
        n = len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* First line of root/rel (trailing newline removed); 0 when unreadable. */
static int nf_cxl_read(const char *root, const char *rel, char *buf, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s%s", nf_cxl_root(root), rel);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

static uint64_t nf_cxl_u64(const char *root, const char *rel, uint64_t dflt)
{
    char b[64], *end;
    if (!nf_cxl_read(root, rel, b, sizeof(b)))
        return dflt;
    unsigned long long v = strtoull(b, &end, 0);
    return end != b ? (uint64_t)v : dflt;
}

static int nf_cxl_int(const char *root, const char *rel, int dflt)
{
    char b[32], *end;
    if (!nf_cxl_read(root, rel, b, sizeof(b)))
        return dflt;
    long v = strtol(b, &end, 10);
    return end != b && v >= INT_MIN && v <= INT_MAX ? (int)v : dflt;
}

/* realpath of root/rel into out; 0 when it does not resolve. */
static int nf_cxl_real(const char *root, const char *rel, char out[PATH_MAX])
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s%s", nf_cxl_root(root), rel);
    return realpath(path, out) != NULL;
}

/* Basename of the symlink root/rel's target into out ("" when none). */
static void nf_cxl_link_base(const char *root, const char *rel, char *out, size_t len)
{
    char path[PATH_MAX], target[PATH_MAX];
    snprintf(path, sizeof(path), "%s%s", nf_cxl_root(root), rel);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    out[0] = '\0';
    if (n <= 0)
        return;
    target[n] = '\0';
    const char *b = strrchr(target, '/');
    nf_cxl_copy(out, len, b != NULL ? b + 1 : target);
}

/* The memdev behind endpoint decoder dec: the uport link of the port the
 * decoder sits in (".." after a symlink is the real parent). */
static void nf_cxl_memdev(const char *root, const char *dec, nf_cxl_memdev_t *m)
{
    char rel[PATH_MAX];
    memset(m, 0, sizeof(*m));
    m->host_node = -1;
    nf_cxl_copy(m->serial, sizeof(m->serial), "?");
    snprintf(rel, sizeof(rel), "/sys/bus/cxl/devices/%s/../uport", dec);
    nf_cxl_link_base(root, rel, m->name, sizeof(m->name));
    if (strncmp(m->name, "mem", 3) != 0) {
        m->name[0] = '\0';
        return;
    }
    char base[64 + sizeof(m->name)];
    snprintf(base, sizeof(base), "/sys/bus/cxl/devices/%s", m->name);
    snprintf(rel, sizeof(rel), "%s/serial", base);
    nf_cxl_read(root, rel, m->serial, sizeof(m->serial));
    snprintf(rel, sizeof(rel), "%s/numa_node", base);
    m->host_node = nf_cxl_int(root, rel, -1);
    snprintf(rel, sizeof(rel), "%s/pmem/size", base);
    m->pmem_bytes = nf_cxl_u64(root, rel, 0);
    snprintf(rel, sizeof(rel), "%s/ram/size", base);
    m->ram_bytes = nf_cxl_u64(root, rel, 0);
}

/* Attach m to the region whose range holds its DAX device's start. */
static void nf_cxl_region(const char *root, const char *name, uint64_t start, nf_cxl_mem_t *m)
{
    char rel[PATH_MAX];
    snprintf(rel, sizeof(rel), "/sys/bus/cxl/devices/%s/resource", name);
    uint64_t res = nf_cxl_u64(root, rel, UINT64_MAX);
    snprintf(rel, sizeof(rel), "/sys/bus/cxl/devices/%s/size", name);
    uint64_t size = nf_cxl_u64(root, rel, 0);
    if (res == UINT64_MAX || size == 0 || start < res || start - res >= size)
        return;
    nf_cxl_copy(m->region, sizeof(m->region), name);
    m->region_bytes = size;
    snprintf(rel, sizeof(rel), "/sys/bus/cxl/devices/%s/interleave_ways", name);
    m->ways = (unsigned)nf_cxl_u64(root, rel, 0);
    snprintf(rel, sizeof(rel), "/sys/bus/cxl/devices/%s/interleave_granularity", name);
    m->granularity = (unsigned)nf_cxl_u64(root, rel, 0);
    for (unsigned i = 0; i < m->ways && m->nmem < NF_CXL_MAX_WAYS; i++) {
        char dec[64];
        snprintf(rel, sizeof(rel), "/sys/bus/cxl/devices/%s/target%u", name, i);
        if (!nf_cxl_read(root, rel, dec, sizeof(dec)) || dec[0] == '\0')
            continue;
        if (m->mode[0] == '\0') {
            snprintf(rel, sizeof(rel), "/sys/bus/cxl/devices/%s/mode", dec);
            nf_cxl_read(root, rel, m->mode, sizeof(m->mode));
        }
        nf_cxl_memdev(root, dec, &m->mem[m->nmem]);
        if (m->mem[m->nmem].name[0] != '\0')
            m->nmem++;
    }
}

/* Names in root/dir starting with prefix, each passed to fn. */
static void nf_cxl_each(const char *root, const char *dir, const char *prefix,
                        void (*fn)(const char *root, const char *name, void *arg), void *arg)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s%s", nf_cxl_root(root), dir);
    DIR *d = opendir(path);
    struct dirent *e;
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            fn(root, e->d_name, arg);
    closedir(d);
}

static void nf_cxl_count_memdev(const char *root, const char *name, void *arg)
{
    nf_cxl_bus_t *bus = arg;
    /* "mem0", not "memdev..." or other names that share the prefix */
    if (name[3] < '0' || name[3] > '9')
        return;
    (void)root;
    if (bus->memdevs++ == 0 || atoi(name + 3) < atoi(bus->first_memdev + 3))
        nf_cxl_copy(bus->first_memdev, sizeof(bus->first_memdev), name);
}

static void nf_cxl_count_region(const char *root, const char *name, void *arg)
{
    nf_cxl_bus_t *bus = arg;
    (void)root;
    bus->regions += name[6] >= '0' && name[6] <= '9';
}

/* Lowest memory block of node, by name. */
static void nf_cxl_min_block(const char *root, const char *name, void *arg)
{
    unsigned long *lo = arg, b;
    (void)root;
    if (sscanf(name, "memory%lu", &b) == 1 && b < *lo)
        *lo = b;
}

/* The physical address where node's memory starts: its lowest memory
 * block times the block size (both world-readable, where the DAX device's
 * resource is root's only), UINT64_MAX when unknown. */
static uint64_t nf_cxl_node_start(const char *root, int node)
{
    char dir[64];
    unsigned long lo = (unsigned long)-1;
    char b[32];
    uint64_t bs = 0; /* block_size_bytes is hex without a prefix */
    if (nf_cxl_read(root, "/sys/devices/system/memory/block_size_bytes", b, sizeof(b)))
        bs = strtoull(b, NULL, 16);
    if (node < 0 || bs == 0)
        return UINT64_MAX;
    snprintf(dir, sizeof(dir), "/sys/devices/system/node/node%d", node);
    nf_cxl_each(root, dir, "memory", nf_cxl_min_block, &lo);
    return lo != (unsigned long)-1 ? (uint64_t)lo * bs : UINT64_MAX;
}

typedef struct nf_cxl_dax_arg {
    nf_cxl_bus_t *bus;
    uint64_t start;
} nf_cxl_dax_arg_t;

static void nf_cxl_match_region(const char *root, const char *name, void *arg)
{
    nf_cxl_dax_arg_t *a = arg;
    nf_cxl_mem_t *m = &a->bus->mem[a->bus->n];
    if (m->region[0] == '\0' && name[6] >= '0' && name[6] <= '9')
        nf_cxl_region(root, name, a->start, m);
}

static void nf_cxl_dax(const char *root, const char *name, void *arg)
{
    nf_cxl_bus_t *bus = arg;
    char rel[PATH_MAX], real[PATH_MAX], drv[32];
    if (bus->n >= NF_CXL_MAX_MEM)
        return;
    snprintf(rel, sizeof(rel), "/sys/bus/dax/devices/%s", name);
    if (!nf_cxl_real(root, rel, real) || strstr(real, NF_CXL_ROOT_HID) == NULL)
        return;
    nf_cxl_mem_t *m = &bus->mem[bus->n];
    memset(m, 0, sizeof(*m));
    nf_cxl_copy(m->dax, sizeof(m->dax), name);
    snprintf(rel, sizeof(rel), "/sys/bus/dax/devices/%s/target_node", name);
    m->node = nf_cxl_int(root, rel, -1);
    snprintf(rel, sizeof(rel), "/sys/bus/dax/devices/%s/size", name);
    m->dax_bytes = nf_cxl_u64(root, rel, 0);
    snprintf(rel, sizeof(rel), "/sys/bus/dax/devices/%s/driver", name);
    nf_cxl_link_base(root, rel, drv, sizeof(drv));
    m->system_ram = strcmp(drv, "kmem") == 0;
    snprintf(rel, sizeof(rel), "/sys/bus/dax/devices/%s/resource", name);
    nf_cxl_dax_arg_t a = {bus, nf_cxl_u64(root, rel, UINT64_MAX)};
    if (a.start == UINT64_MAX && m->system_ram) /* resource is root's only */
        a.start = nf_cxl_node_start(root, m->node);
    if (a.start != UINT64_MAX)
        nf_cxl_each(root, "/sys/bus/cxl/devices", "region", nf_cxl_match_region, &a);
    bus->n++;
}

/* By node, then DAX device name: the order does not depend on readdir's. */
static int nf_cxl_cmp(const void *a, const void *b)
{
    const nf_cxl_mem_t *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return strcmp(x->dax, y->dax);
}

void nf_cxl_bus_read(const char *root, nf_cxl_bus_t *out)
{
    char path[PATH_MAX];
    memset(out, 0, sizeof(*out));
    snprintf(path, sizeof(path), "%s/sys/bus/cxl", nf_cxl_root(root));
    out->present = access(path, F_OK) == 0;
    nf_cxl_each(root, "/sys/bus/cxl/devices", "mem", nf_cxl_count_memdev, out);
    nf_cxl_each(root, "/sys/bus/cxl/devices", "region", nf_cxl_count_region, out);
    nf_cxl_each(root, "/sys/bus/dax/devices", "dax", nf_cxl_dax, out);
    qsort(out->mem, (size_t)out->n, sizeof(out->mem[0]), nf_cxl_cmp);
}

typedef struct nf_cxl_nv_arg {
    int node, found;
} nf_cxl_nv_arg_t;

static void nf_cxl_nv_dax(const char *root, const char *name, void *arg)
{
    nf_cxl_nv_arg_t *a = arg;
    char rel[PATH_MAX], real[PATH_MAX];
    snprintf(rel, sizeof(rel), "/sys/bus/dax/devices/%s", name);
    if (!nf_cxl_real(root, rel, real) || strstr(real, NF_NVDIMM_ROOT_HID) == NULL)
        return;
    snprintf(rel, sizeof(rel), "/sys/bus/dax/devices/%s/target_node", name);
    a->found |= nf_cxl_int(root, rel, -1) == a->node;
}

int nf_cxl_bus_nvdimm_node(const char *root, int node)
{
    nf_cxl_nv_arg_t a = {node, 0};
    nf_cxl_each(root, "/sys/bus/dax/devices", "dax", nf_cxl_nv_dax, &a);
    return a.found;
}

/* "512 MiB", "1.5 GiB", "384 KiB" */
static void nf_cxl_size(uint64_t b, char *buf, size_t len)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 4)
        v /= 1024.0, u++;
    snprintf(buf, len, v == (double)(uint64_t)v ? "%.0f %s" : "%.1f %s", v, unit[u]);
}

void nf_cxl_chain_format(const nf_cxl_mem_t *m, char *buf, size_t len)
{
    size_t o = 0;
    char s[32];
    buf[0] = '\0';
#define NF_CXL_PUT(...)                                              \
    do {                                                             \
        if (o < len)                                                 \
            o += (size_t)snprintf(buf + o, len - o, __VA_ARGS__);    \
    } while (0)
    for (int i = 0; i < m->nmem; i++) {
        const nf_cxl_memdev_t *d = &m->mem[i];
        if (i == 2 && m->nmem > 3) { /* an interleave of many: the rest counted */
            NF_CXL_PUT(" + %d more", m->nmem - 2);
            break;
        }
        nf_cxl_size(d->pmem_bytes + d->ram_bytes, s, sizeof(s));
        NF_CXL_PUT("%s%s (serial %s, %s %s", i ? " + " : "", d->name, d->serial, s,
                   d->ram_bytes ? (d->pmem_bytes ? "ram+pmem" : "ram") : "pmem");
        if (d->host_node >= 0)
            NF_CXL_PUT(", host node %d", d->host_node);
        NF_CXL_PUT(")");
    }
    if (m->region[0] != '\0') {
        nf_cxl_size(m->region_bytes, s, sizeof(s));
        NF_CXL_PUT("%s%s (%s%s%s, %u way%s, %u B granularity)", m->nmem ? " -> " : "", m->region,
                   m->mode[0] ? m->mode : "", m->mode[0] ? " " : "", s, m->ways,
                   m->ways == 1 ? "" : "s", m->granularity);
    }
    nf_cxl_size(m->dax_bytes, s, sizeof(s));
    NF_CXL_PUT("%s%s (%s, %s) -> node %d", o ? " -> " : "", m->dax, s,
               m->system_ram ? "system-ram" : "not onlined", m->node);
#undef NF_CXL_PUT
}

void nf_cxl_bus_summary(const nf_cxl_bus_t *bus, char *buf, size_t len)
{
    int ram = 0;
    for (int i = 0; i < bus->n; i++)
        ram += bus->mem[i].system_ram;
    if (!bus->present) {
        snprintf(buf, len, "no CXL bus (the kernel's CXL drivers are not loaded, or there is "
                 "no CXL hardware)");
        return;
    }
    if (bus->memdevs == 0 && bus->n == 0) {
        snprintf(buf, len, "no CXL memory device on the CXL bus");
        return;
    }
    snprintf(buf, len, "%d CXL memdev%s%s%s%s, %d region%s, %d DAX device%s, %d onlined as system RAM",
             bus->memdevs, bus->memdevs == 1 ? "" : "s", bus->memdevs ? " (" : "",
             bus->first_memdev, bus->memdevs ? (bus->memdevs > 1 ? ", ...)" : ")") : "",
             bus->regions, bus->regions == 1 ? "" : "s", bus->n, bus->n == 1 ? "" : "s", ram);
}

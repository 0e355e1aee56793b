/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Linux CXL driver stack as sysfs shows it: which NUMA nodes are CXL
 * memory, by the chain memdev -> region -> DAX device -> node. Reads files
 * only (a root prefix lets tests point it at a fixture tree); knows neither
 * hwloc nor MPI. docs/design.md, "Placement", says how the choice uses it.
 */
#ifndef NF_CXLBUS_H
#define NF_CXLBUS_H

#include <stddef.h>
#include <stdint.h>

#define NF_CXL_MAX_MEM 16  /* DAX devices of CXL memory looked at */
#define NF_CXL_MAX_WAYS 16 /* memdevs of one region looked at */

/* One CXL memory device (a memdev: an expander's card). */
typedef struct nf_cxl_memdev {
    char name[32];   /* "mem0" */
    char serial[24]; /* as sysfs prints it ("0x0"), "?" when unreadable */
    uint64_t pmem_bytes, ram_bytes;
    int host_node;   /* the device's own locality (its numa_node), -1 unknown */
} nf_cxl_memdev_t;

/* One DAX device of CXL memory, and what it came from. */
typedef struct nf_cxl_mem {
    char dax[32];        /* "dax0.0" */
    int node;            /* its target NUMA node, -1 unknown */
    int system_ram;      /* kmem owns it: the node holds it as system RAM */
    uint64_t dax_bytes;
    char region[32];     /* the CXL region holding it, "" when none matched */
    char mode[8];        /* the region's decoders' mode: "pmem", "ram", "" */
    uint64_t region_bytes;
    unsigned ways, granularity;
    int nmem;            /* memdevs of the region found, <= NF_CXL_MAX_WAYS */
    nf_cxl_memdev_t mem[NF_CXL_MAX_WAYS];
} nf_cxl_mem_t;

/* What the CXL bus holds: the DAX devices below the CXL root, and how many
 * memdevs and regions exist at all (to say what was found instead). */
typedef struct nf_cxl_bus {
    int present;           /* /sys/bus/cxl exists (the CXL drivers are loaded) */
    int n;                 /* entries of mem */
    int memdevs, regions;  /* on /sys/bus/cxl */
    char first_memdev[32]; /* one of them by name, for messages */
    nf_cxl_mem_t mem[NF_CXL_MAX_MEM];
} nf_cxl_bus_t;

/* Read the CXL bus below root ("" or NULL: the real /sys). Never fails: a
 * machine without the CXL drivers has an empty bus. */
void nf_cxl_bus_read(const char *root, nf_cxl_bus_t *out);

/* Is the DAX device's sysfs path below an NVDIMM (ACPI0012, NFIT) root, i.e.
 * persistent memory that is not CXL? node gets its target node. */
int nf_cxl_bus_nvdimm_node(const char *root, int node);

/* "mem0 (serial 0x0, 512 MiB pmem, host node 1) -> region0 (512 MiB, 1 way,
 * 256 B granularity) -> dax0.0 (system-ram) -> node 2" into buf; of an
 * interleave of more than three memdevs, two and "+ N more". */
void nf_cxl_chain_format(const nf_cxl_mem_t *m, char *buf, size_t len);

/* "1 CXL memdev (mem0), 0 regions, 0 DAX devices, 0 onlined as system
 * RAM", or that there is no CXL bus at all. */
void nf_cxl_bus_summary(const nf_cxl_bus_t *bus, char *buf, size_t len);

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every NFCOLL_* environment setting, in one table: name, default, accepted
 * values and a one-line doc. nfcoll_info -c and libnfcoll.7 are written from
 * it. Parsed once (nf_settings_load); a malformed value warns once and keeps
 * the default. No MPI calls.
 */
#ifndef NF_SETTINGS_H
#define NF_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

typedef enum nf_setting_id {
    NF_SET_EF = 0,
    NF_SET_EF_DECAY,
    NF_SET_SCALE_BLOCK,
    NF_SET_TERNARY_GAMMA,
    NF_SET_SIMD,
    NF_SET_CXL,
    NF_SET_CXL_NODE,
    NF_SET_POLICY,
    NF_SET_STATS,
    NF_SET_TRACE,
    NF_SET_COUNT_BITS,
    NF_SET_VERBOSE,
    NF_SET_RANKS_PER_NODE,
    NF_SET_SIMD_TUNE,
    NF_SET_CALIBRATE,
    NF_SET_RESIDUAL_MAX,
    NF_SET_PROGRESS,
    NF_SET_PROGRESS_CPU,
    NF_SET_STALL_WARN,
    NF_SET_COUNT
} nf_setting_id_t;

typedef struct nf_setting_desc {
    const char *name;   /* "NFCOLL_EF" */
    const char *def;    /* default as text */
    const char *values; /* accepted values, for --help and warnings */
    const char *doc;    /* one line */
} nf_setting_desc_t;

typedef enum nf_cxl_mode { NF_CXL_PREFER = 0, NF_CXL_REQUIRE, NF_CXL_OFF } nf_cxl_mode_t;

/* Who runs nonblocking calls (NF_Iallreduce, MPI_Iallreduce): a library
 * thread, or the caller at issue. */
typedef enum nf_progress { NF_PROGRESS_THREAD = 0, NF_PROGRESS_OFF } nf_progress_t;

typedef struct nf_settings {
    int ef;              /* error feedback on low-bit routes: 1/0 */
    double ef_decay;     /* the residual's factor on reuse, in [0, 1] */
    int ef_decay_set;    /* 1: NFCOLL_EF_DECAY gave it (a valid value), 0: the default */
    uint64_t scale_block; /* binary: elements per scale, a multiple of NF_SCALE_BLOCK_UNIT;
                             0: one scale per segment */
    double gamma;        /* ternary gate factor, >= 0 */
    int simd_cap;        /* highest nf_isa_t allowed */
    nf_cxl_mode_t cxl;
    int cxl_node;        /* explicit OS node index, -1 = choose */
    const char *policy;  /* path or NULL */
    const char *stats;   /* NULL, "1" or a .json path */
    const char *trace;   /* path or NULL */
    unsigned count_bits; /* count lane width, 1..16 */
    int verbose;
    int ranks_per_node;  /* 0: real nodes; N: pretend nodes of N ranks (tests) */
    int simd_tune;       /* time each kernel's ISAs at init (init hands it to the tuner) */
    const char *calibrate; /* profile path of a calibration run, or NULL */
    uint64_t residual_max; /* bytes of residuals per process: NF_RESIDUAL_MAX_AUTO
                              (a quarter of the node), NF_RESIDUAL_MAX_OFF, or a size */
    nf_progress_t progress; /* NFCOLL_PROGRESS */
    int progress_cpu;    /* the progress threads' CPU (OS index), -1: the caller's CPUs */
    double stall_warn;   /* seconds a nonblocking call may wait for its peers before it
                            says so (NFCOLL_STALL_WARN); 0: never */
} nf_settings_t;

/* A binary scale block is whole 512-bit lines: a multiple of this many
 * elements (docs/design.md, "Protocol"). */
#define NF_SCALE_BLOCK_UNIT 512
#define NF_SCALE_BLOCK_MAX (1L << 30) /* elements: larger is one scale per segment anyway */

#define NF_RESIDUAL_MAX_AUTO 0
#define NF_RESIDUAL_MAX_OFF UINT64_MAX

/* The table, nf_setting_id_t order. */
const nf_setting_desc_t *nf_settings_table(size_t *n);

/* Current raw value from the environment (NULL when unset). */
const char *nf_setting_raw(nf_setting_id_t id);

/* Parse the environment (first call only; later calls return the cache). */
const nf_settings_t *nf_settings_load(void);

/* Drop the cache so the next load re-reads the environment (tests). */
void nf_settings_reset(void);

#endif

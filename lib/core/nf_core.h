/*
 * The MPI layer: per-communicator state, the node-shared aggregation buffer,
 * error-feedback residuals, the collective protocol and the stats counters.
 * Calls only PMPI_* (never MPI_*), so the PMPI shim can sit on top.
 */
#ifndef NF_CORE_H
#define NF_CORE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "nfcoll.h"
#include "nf_kernels.h"
#include "nf_log.h"
#include "nf_settings.h"

/* Elements per FP32 chunk: the fp32 route pipelines through the shared
 * buffer in chunks of this many floats (double-buffered). */
#define NF_FP32_CHUNK (128u * 1024u)

/* ---- process-wide state (init.c) ---- */
typedef struct nf_global {
    const nf_settings_t *settings;
    const nf_kernels_t *k;  /* kernels chosen at init */
    int comm_keyval;        /* caches nf_comm_t on communicators */
    MPI_Datatype line_type; /* one 64-byte line */
    int init_status;        /* NF_OK, or why libnfcoll is unusable */
    int disabled;           /* some rank could not initialize: every call goes pmpi */
} nf_global_t;

extern nf_global_t nf_g;

/* Idempotent, thread-safe; needs MPI initialized. NF_OK or a reason. */
nf_status_t nf_init(void);
void nf_finalize(void);

/* ---- node-shared segment (shm.c) ---- */
typedef struct nf_shm {
    void *base;
    size_t bytes;
    double resident_frac; /* pages verified on the placement node */
} nf_shm_t;

/* Collective over node: local rank 0 creates, binds and touches, the others
 * map. Every rank of node returns the same status. */
nf_status_t nf_shm_create(nf_shm_t *shm, size_t bytes, MPI_Comm node);
void nf_shm_destroy(nf_shm_t *shm);

/* ---- error-feedback residuals (residual.c) ---- */

/*
 * A residual is kept in one of two forms. NF_RES_Y (binary): the previous
 * call's y and a_i, from which the pack kernel rebuilds e exactly, so the
 * final pass has no update to write; two buffers, the next y goes into the
 * other one and becomes current only when the call completes (a call that
 * falls back to fp32 leaves the residual as it was). NF_RES_E (ternary, or
 * binary after ternary): e itself, updated by the finish kernels.
 */
typedef enum nf_res_form { NF_RES_Y = 0, NF_RES_E = 1 } nf_res_form_t;

typedef struct nf_residual {
    const void *key;      /* user buffer address */
    size_t count;         /* elements; a new count at the key resets it */
    float *buf[2];        /* page-aligned, placed like the aggregation buffer */
    size_t bytes;         /* mapped size of each buffer */
    unsigned cur;         /* buffer holding the state */
    nf_res_form_t form;
    float aprev;          /* NF_RES_Y: the previous call's a_i (as float) */
    double resident_frac;
} nf_residual_t;

typedef struct nf_residual_table {
    nf_residual_t *v;
    size_t n, cap;
    size_t last;          /* index of the last hit */
} nf_residual_table_t;

/* The residual for (key, count): found, reset after a count change, or new
 * and zero (form NF_RES_Y). NULL on allocation failure (logged). */
nf_residual_t *nf_residual_get(nf_residual_table_t *t, const void *key, size_t count);
/* e for the E-form kernels, converting a Y-form residual exactly. */
float *nf_residual_e(nf_residual_t *r);
void nf_residual_table_free(nf_residual_table_t *t);

/* ---- per-communicator state (comm.c) ---- */
typedef struct nf_comm {
    MPI_Comm user;       /* the communicator this state is cached on */
    MPI_Comm priv;       /* private duplicate: our traffic never meets the user's */
    MPI_Comm node;       /* ranks sharing memory with this one */
    MPI_Comm leaders;    /* local rank 0 of each node; MPI_COMM_NULL elsewhere */
    int rank, size;
    int lrank, lsize;    /* within node */
    int nnodes;
    int is_inter;
    unsigned k;          /* count planes: nf_count_planes(size) */
    int lowbit_ok;       /* capacity: size fits the count lanes */
    int broken;          /* shared buffer unusable: every call goes pmpi */
    int policy_agreed;   /* every rank holds the same policy */
    char name[MPI_MAX_OBJECT_NAME]; /* at first use, for policy rules */
    uint64_t admitted;   /* calls admitted on this communicator (policy index) */

    nf_shm_t shm;
    size_t cap_elems;    /* low-bit elements the segment holds */
    size_t slot_bytes;   /* per local rank */
    uint8_t *slots;      /* lsize slots */
    uint64_t *cnt;       /* 2 counters (plus, minus) of k planes per line */
    float *fp32_res;     /* 2 x NF_FP32_CHUNK result floats */
    void *xnode;         /* leaders: nnodes x exchange scratch (private) */
    size_t xnode_bytes;

    const void **ptrs;   /* max(lsize, nnodes) input pointers for kernels */
    double *scales;      /* size doubles: per-rank scales of the last call */
    nf_residual_table_t resid;
    struct nf_comm *next, *prev; /* live list, freed at finalize */
} nf_comm_t;

/* State for comm, created on first use (collective on comm). NULL only
 * when comm cannot be used at all (logged once). */
nf_comm_t *nf_comm_get(MPI_Comm comm);
/* Keyval delete callback: frees the state when the user frees comm. */
int nf_comm_delete_attr(MPI_Comm comm, int keyval, void *attr, void *extra);
/* Free every remaining state (finalize). */
void nf_comm_free_all(void);
/* Make sure the segment holds m low-bit elements (collective). */
nf_status_t nf_comm_reserve(nf_comm_t *c, size_t m);
/* Map the segment on first use (collective); 0 when usable, else marks
 * the communicator broken (one warning) and returns -1. */
int nf_comm_ready(nf_comm_t *c);

/* ---- admission (admission.c) ---- */
void nf_admission_init(const char *path);
void nf_admission_finalize(void);
/* Calls go through nf_admit: agreed at MPI_Init by the shim (any rank has a
 * policy or a trace), else this rank's own policy or trace. */
void nf_admission_engage(void);
int nf_admission_engaged(void);
/* Open the NFCOLL_TRACE file (env wins over the policy's trace). */
void nf_admission_trace_init(const char *env, int rank);
struct nf_policy;
const struct nf_policy *nf_admission_policy(void);
const char *nf_admission_stats_dest(void);
/* Hash the ranks compare: 0 without a policy, a fixed value if it failed to load. */
uint64_t nf_admission_hash(void);
/* Decide the route of an MPI_Allreduce from the policy and run it. */
int nf_admit(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm);

/* ---- stats report (stats.c) ---- */
/* Collective over comm: sum counters to rank 0, which prints a table
 * (dest NULL or "1") or writes JSON (any other dest: a path). */
void nf_stats_report(MPI_Comm comm, const char *dest);

/* Run a call on an admitted route (allreduce.c); ef < 0, gamma < 0 inherit. */
int nf_allreduce_on(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                    MPI_Op op, MPI_Comm comm, nf_route_t route, int ef, double gamma);

/* ---- protocol (coll.c) ---- */
typedef struct nf_call {
    const float *x;  /* input (recvbuf when MPI_IN_PLACE) */
    float *r;        /* output */
    size_t m;        /* elements */
    nf_residual_t *res; /* error feedback state, NULL when EF is off */
    double gamma;    /* ternary gate factor */
} nf_call_t;

/* Results of a low-bit attempt: NF_OK, or a fallback reason to run fp32. */
typedef enum nf_coll_result {
    NF_COLL_DONE = 0,
    NF_COLL_NONFINITE,  /* some rank had a NaN/Inf: caller runs fp32 */
    NF_COLL_ERROR       /* MPI failure (already logged) */
} nf_coll_result_t;

nf_coll_result_t nf_coll_binary(nf_comm_t *c, const nf_call_t *call);
nf_coll_result_t nf_coll_ternary(nf_comm_t *c, const nf_call_t *call);
nf_coll_result_t nf_coll_fp32(nf_comm_t *c, const nf_call_t *call);

/* ---- stats (stats.c) ---- */
void nf_stats_count(nf_route_t route, uint64_t bytes, unsigned n, unsigned k);
void nf_stats_fallback(nf_fallback_t reason);

/* Memory placed for libnfcoll and how much of it was verified on the
 * placement node (bytes * resident fraction), for the report. */
typedef enum nf_place_kind { NF_PLACED_BUFFER = 0, NF_PLACED_RESIDUAL = 1 } nf_place_kind_t;
void nf_stats_placed(nf_place_kind_t kind, size_t bytes, double resident_frac);

/* Traffic model of one call, per rank, in bytes (see libnfcoll.7). */
typedef struct nf_traffic {
    uint64_t upstream, total, ring;
} nf_traffic_t;
void nf_traffic_model(nf_route_t route, uint64_t bytes, unsigned n, unsigned k, nf_traffic_t *t);

#endif

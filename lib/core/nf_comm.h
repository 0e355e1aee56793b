/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-communicator state (comm.c): private duplicate, node and leader
 * split, the shared segment and its layout. Cached on the communicator with
 * an attribute, so it is freed with the communicator or at MPI_Finalize.
 */
#ifndef NF_COMM_H
#define NF_COMM_H

#include <mpi.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "nfcoll.h"
#include "nf_residual.h"
#include "nf_shm.h"
#include "nf_traffic.h" /* NF_HDR_WORDS: the words of the header every rank
                           publishes with each call (coll.c) */

/* Bytes of a small call's data per rank (fp32 elements, sign lines and
 * scales): calls that fit go through one flag barrier on a single node, each
 * rank reducing every rank's copy itself (coll.c). */
#define NF_SMALL_BYTES (8u * 1024u)

/* Bytes of a rank's control block at the start of the segment (nf_flags.h):
 * flags, header and two small-call areas, page-aligned. */
#define NF_CTL_BYTES (NF_SMALL_BYTES * 2u + 4096u)

/* Elements per FP32 chunk at most: the fp32 route pipelines through the
 * shared buffer in chunks (double-buffered) of up to this many floats. */
#define NF_FP32_CHUNK (128u * 1024u)

/* FP32 result buffers of one chunk each: two on one node, four across
 * nodes, where a chunk's result waits one more stage for the leader. */
#define NF_FP32_NRES_MAX 4u
#define nf_fp32_nres(c) ((c)->nnodes > 1 ? NF_FP32_NRES_MAX : 2u)

/* NF_FP32_CHUNK_XNODE, the floats per chunk across nodes at most:
 * nf_traffic.h, whose nf_traffic_internode_call() models the chunks. */
#define nf_fp32_chunk_max(c) \
    ((c)->nnodes > 1 ? (size_t)NF_FP32_CHUNK_XNODE : (size_t)NF_FP32_CHUNK)

/* Slots for the layers above (nf_comm_slot_register). */
#define NF_COMM_SLOTS 4

/* Elements per FP32 chunk of a new segment (16 KiB): a communicator whose
 * calls are this small never holds more; a larger fp32 pass grows the
 * chunk (agreed, comm.c) towards nf_fp32_chunk_max. Chunks are whole 4 KiB
 * pages of floats. */
#define NF_FP32_CHUNK_MIN (4u * 1024u)
#define NF_FP32_CHUNK_ALIGN (1024u)

/* Whether this communicator can use libnfcoll's routes, decided once for
 * every rank alike (agree.c). */
typedef enum nf_comm_use {
    NF_COMM_OK = 0,      /* fp32 and low-bit routes usable */
    NF_COMM_POLICY,      /* ranks differ in policy or name: admission says pmpi */
    NF_COMM_BROKEN       /* state or segment unusable: every call pmpi */
} nf_comm_use_t;

/* Two one-rank nodes: the verdict's tail messages (lib/core/xnode.c). Each
 * call's tails are one group, numbered; a rank never waits in a call for
 * its own tails to be received (MPI may send them only once the peer
 * receives them, and a peer whose verdict failed does not): it keeps them
 * in one of two slots until they complete or the peer's header says it
 * drained them. */
/* How far a state is set up (docs/design.md, "Communicator setup"). Its
 * private duplicate is made where every rank is in the same blocking call
 * on the communicator (nf_comm_get): NEW. The rest is collective on the
 * duplicate only, run by the progress engine in the communicator's order
 * (nf_comm_complete): BUILT. */
typedef enum nf_comm_setup {
    NF_COMM_NEW = 1, /* the duplicate only: no other field below is set */
    NF_COMM_BUILT    /* split, agreed; use says whether it is usable */
} nf_comm_setup_t;

typedef struct nf_tails {
    uint64_t sent;       /* my last group posted (0: none) */
    unsigned sent_pieces; /* how many of its tails were posted */
    uint64_t acked;      /* my last group the peer received */
    uint64_t got;        /* the peer's last group I received */
    uint64_t *stage;     /* two slots of my tails as sent, and one received */
    uint64_t group[2];   /* the group in each slot */
    int n[2];            /* its requests still to complete (0: slot free) */
    MPI_Request rq[2][NF_PAIR_TAILS];
} nf_tails_t;

typedef struct nf_comm {
    MPI_Comm user;       /* the communicator this state is cached on */
    MPI_Comm priv;       /* private duplicate: our traffic never meets the user's */
    MPI_Comm node;       /* ranks sharing memory with this one */
    MPI_Comm leaders;    /* local rank 0 of each node; MPI_COMM_NULL elsewhere */
    int rank, size;
    int lrank, lsize;    /* within node */
    int nnodes;
    int node_id;         /* leaders: my rank among them (my node's); else 0 */
    int is_inter;
    unsigned k;          /* count planes: nf_count_planes(size) */
    int lowbit_ok;       /* capacity: size fits the count lanes (agreed) */
    nf_comm_use_t use;   /* agreed */
    int threads_all;     /* every rank can run progress threads (nf_config_t.threads,
                            agreed when the state was made) */
    char name[MPI_MAX_OBJECT_NAME]; /* at first use, for policy rules */
    _Atomic nf_comm_setup_t setup; /* written by nf_comm_complete only */

    nf_shm_t shm;
    uint8_t *ctl;        /* lsize control blocks (nf_flags.h) */
    /* Another thread's look at the flags (nf_node_late) against a remap:
     * the mapper sets remap and waits for no probe; a prober counts
     * itself in and looks only while remap is clear. */
    atomic_int remap, probe;
    uint64_t gen;        /* node barrier generation; 0 for a new segment */
    uint64_t calls;      /* calls on this state: parity of the header and small areas */
    size_t cap_elems;    /* low-bit elements the segment holds */
    size_t fp32_chunk;   /* floats per fp32 chunk the segment holds */
    int fp32_stuck;      /* a growth of fp32_chunk failed (agreed): not tried again */
    size_t slot_bytes;   /* per local rank */
    uint8_t *slots;      /* lsize slots */
    uint64_t *cnt;       /* 2 counters (plus, minus) of k planes per line */
    float *fp32_res;     /* nf_fp32_nres x fp32_chunk result floats */
    void *xnode;         /* leaders: exchange scratch (private, nf_xnode_bytes) */
    nf_inline_hist_t ihist; /* one rank on every node: the needs of the last
                            calls' verdicts, which size the next one's area */
    nf_tails_t tails;    /* two one-rank nodes: the verdict's tail messages */
    unsigned varea;      /* words of this call's area (nf_inline_words; two one-rank
                            nodes: nf_pair_area_words of its own need) */
    int *xv;             /* 4 x nnodes counts and displacements (xnode.c) */
    size_t xnode_bytes;
    uint64_t *pcnt;      /* small and inline calls: private counters, NF_SMALL_BYTES lines
                            of k planes */
    unsigned kn;         /* planes of one node's counts: nf_count_planes(largest lsize) */

    const void **ptrs;   /* max(lsize, nnodes) input pointers for kernels */
    double *scales;      /* size x nscales: per-rank scales of the last call */
    double *mine;        /* nscales: this rank's */
    float *gate;         /* nscales: this rank's ternary gates */
    unsigned nscales;    /* capacity, low-bit segments per call */
    uint32_t *bmax;      /* nbmax: integer routes' block maxes, as float bits, agreed */
    float *bmf;          /* nbmax: the same as floats */
    size_t nbmax;        /* capacity (the largest call's blocks so far) */
    nf_residual_table_t resid;

    /* State the layers above keep per communicator (the progress engine's
     * queue, admission's decision cache), each in the slot it registered
     * (nf_comm_slot_register); core never looks inside. */
    void *_Atomic slot[NF_COMM_SLOTS];
    struct nf_comm *next, *prev; /* live list, freed at finalize */
} nf_comm_t;

/* A slot's callbacks. When the state is freed (the communicator's
 * deletion, MPI_Finalize): first every slot's quiesce (the progress
 * engine's waits for the calls queued on c), then every slot's release
 * (frees what the slot holds; state may be NULL: never set). In a residual
 * checkpoint (nf_checkpoint.h), the slot's state that a restored run needs
 * to continue bit for bit, as bytes under the slot's name: save fills
 * *buf (malloc'd; *len 0: nothing to keep); load checks buf (commit 0: no
 * change, why says what is wrong) or installs it (commit 1, after every
 * rank's check passed: only no memory can fail it, and then the slot
 * keeps its state whole and says so). Any callback may be NULL. */
typedef struct nf_comm_slot_ops {
    const char *name; /* the checkpoint's tag, 1..32 printable characters */
    void (*quiesce)(nf_comm_t *c, void *state);
    void (*release)(nf_comm_t *c, void *state);
    nf_status_t (*save)(nf_comm_t *c, void *state, unsigned char **buf, size_t *len);
    nf_status_t (*load)(nf_comm_t *c, const unsigned char *buf, size_t len, int commit,
                        char *why, size_t whylen);
} nf_comm_slot_ops_t;

/* Every slot's checkpoint state as one section: per slot with something to
 * keep, u8 name bytes, the name, u64 bytes, the bytes (little-endian
 * lengths). *buf malloc'd (NULL and 0 when nothing is kept). */
nf_status_t nf_comm_slots_save(nf_comm_t *c, unsigned char **buf, size_t *len);
/* Check (commit 0) or install (commit 1) such a section: each part goes
 * to the slot of its name (a name no slot has: NF_ERR_PARSE); at commit,
 * a slot with no part gets load(NULL, 0): it starts over. */
nf_status_t nf_comm_slots_load(nf_comm_t *c, const unsigned char *buf, size_t len, int commit,
                               char *why, size_t whylen);

/* Register a slot once per process (a layer's pthread_once); *slot is its
 * index into nf_comm_t.slot. NF_ERR_NO_MEMORY when all NF_COMM_SLOTS are
 * taken. ops must stay valid until MPI_Finalize. */
nf_status_t nf_comm_slot_register(const nf_comm_slot_ops_t *ops, int *slot);

/* State for comm, created here when comm has none: collective on comm,
 * and only where every rank of comm is in the same blocking call on it
 * (MPI_Init, a communicator constructor, a blocking allreduce): it makes
 * the private duplicate with PMPI_Comm_dup and agrees that every rank has
 * it. libnfcoll starts no collective on a communicator the program owns
 * anywhere else. NF_OK with *out set (NF_COMM_NEW, or BUILT for an
 * intercommunicator or a duplicate some rank could not make: broken);
 * else the MPI error that prevented it (logged once). */
nf_status_t nf_comm_get(MPI_Comm comm, nf_comm_t **out);
/* The state comm has, or *out NULL: local, never collective (a
 * nonblocking call's issue). */
nf_status_t nf_comm_lookup(MPI_Comm comm, nf_comm_t **out);
/* Set a NEW state up (split by node, buffers, agreement): collective on
 * the private duplicate, so every rank must run it at the same place in
 * the communicator's order of calls (the engine's setup step, nf_engine.h).
 * NF_OK at once for a BUILT state; on failure the state is broken, alike
 * on every rank. */
nf_status_t nf_comm_complete(nf_comm_t *c);

/* Changes whenever some state is freed: a cache of (MPI_Comm, nf_comm_t *)
 * taken at generation g is valid while the generation is still g (a freed
 * communicator's handle may be reused for a new one). */
extern _Atomic unsigned nf_comm_generation;
/* Keyval delete callback: frees the state when the user frees comm. */
int nf_comm_delete_attr(MPI_Comm comm, int keyval, void *attr, void *extra);
/* Create the attribute key the state hangs on (init), and free every
 * remaining state and the key (finalize). */
nf_status_t nf_comm_init(void);
void nf_comm_finalize(void);
/* Room for the scales of n low-bit segments per call (local). */
nf_status_t nf_comm_scales(nf_comm_t *c, unsigned n);
/* Room for n block maxes of the integer routes per call (local). */
nf_status_t nf_comm_bmax(nf_comm_t *c, size_t n);
/* Make sure the segment holds m low-bit elements (collective: every rank
 * passes the same m). NF_OK, or the segment is as it was on every rank. */
nf_status_t nf_comm_reserve(nf_comm_t *c, size_t m);
/* Grow the fp32 chunk towards n floats, up to nf_fp32_chunk_max
 * (collective: every rank passes the same n). NF_OK when the chunk did not
 * need to grow or grew; otherwise the segment and chunk are as they were on
 * every rank, and no later call tries again. */
nf_status_t nf_comm_reserve_fp32(nf_comm_t *c, size_t n);
/* Map the segment on first use (collective). NF_OK when usable; otherwise
 * the communicator is marked broken (one warning) and every later call
 * returns the same. */
nf_status_t nf_comm_ready(nf_comm_t *c);

#endif

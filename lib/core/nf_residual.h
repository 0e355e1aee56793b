/* SPDX-License-Identifier: BSD-3-Clause */
/* Error-feedback residuals, one per (communicator, buffer, count)
 * (residual.c). docs/design.md, "Error feedback". */
#ifndef NF_RESIDUAL_H
#define NF_RESIDUAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "nf_settings.h"
#include "nfcoll.h"

/*
 * A residual is kept in one of three forms. NF_RES_Y (binary): the previous
 * call's y and a_i; NF_RES_TY (ternary): its y, gate t and b_i. From these
 * the pack kernels rebuild e exactly, so the final pass has no update to
 * write; two buffers, the next y goes into the other one and becomes
 * current only when the call completes (a call that falls back to fp32
 * leaves the residual as it was). NF_RES_Q (the integer routes): its y,
 * the agreed max of each scale block (ablk) and the code's bits: e = y -
 * s * q (nf_kernels.h, int_y_ef). NF_RES_E: e itself, updated by the finish
 * kernels (binary after ternary, a residual converted from Y form).
 */
typedef enum nf_res_form { NF_RES_Y = 0, NF_RES_E = 1, NF_RES_TY = 2, NF_RES_Q = 3 } nf_res_form_t;

/* A residual belongs to a bound region (by name: a bucket rebuilt at
 * another address keeps it) or to an unbound buffer (by address). */
#define NF_RES_NAME_MAX 128

typedef struct nf_res_key {
    const void *addr;     /* unbound buffer, when name is NULL */
    const char *name;     /* region name (at most NF_RES_NAME_MAX - 1 bytes) */
    uint32_t id;          /* its interned id (nf_intern.h): the lookup's key;
                             0 with a name: interned by the lookup */
} nf_res_key_t;

typedef struct nf_residual {
    const void *addr;     /* key: address (name[0] == 0) */
    char name[NF_RES_NAME_MAX]; /* key: region name */
    uint64_t hash;        /* of the name (checkpoints) */
    uint32_t id;          /* the name's interned id, 0 when unbound: the key */
    size_t slot;          /* index in its table's v */
    size_t count;         /* elements; a new count at the key resets it */
    float *buf[2];        /* page-aligned, placed like the aggregation buffer
                             at their first write (zero until then) */
    int touched[2];       /* buf[i] placed and touched */
    size_t bytes;         /* mapped size of each buffer */
    unsigned cur;         /* buffer holding the state */
    nf_res_form_t form;
    float aprev;          /* NF_RES_Y: the previous call's a_i; NF_RES_TY: b_i (as float) */
    size_t block;         /* NF_RES_Y: 0, one a_i (aprev); else elements per scale
                             block, a_i of block b in ablk[b] (binary's scale_block);
                             NF_RES_Q: the integer route's block, its max in ablk[b] */
    float *ablk;          /* nf_residual_blocks(count) floats, allocated with the
                             buffers (any block fits: it is >= NF_RES_BLOCK_MIN) */
    unsigned kb;          /* NF_RES_Q: bits of the code (4, 3 or 2) */
    float tprev;          /* NF_RES_TY: the previous call's gate */
    double resident_frac;
    uint64_t first;       /* order of first use in its table: an unbound
                             buffer's key in a checkpoint (its address is not) */
    uint64_t stamp;       /* last use, on the process-wide clock (LRU) */
    int pending;          /* unbound, loaded from a checkpoint, waiting for the
                             next new unbound buffer of its count */
    atomic_int stale;     /* unbound, and a region was bound over its buffer since
                             its last call (nf_residual_forget): restarts at zero */
    size_t ubslot;        /* unbound: index in its table's ub */
    int refused;          /* NFCOLL_CXL=require refused its memory: no buffers;
                             kept in its table so that later lookups of the key
                             and count neither retry nor drop others for it */
} nf_residual_t;

/*
 * A communicator's residuals. Every table holding residuals is on one
 * process-wide list under one lock, so that NFCOLL_RESIDUAL_MAX bounds them
 * all: a lookup that needs memory drops the least recently used residual of
 * any table that no running call holds (one warning). A call holds the
 * residuals it looked up: those stamped since its first lookup. A
 * zero-filled table is a valid empty one; a table that ever held a
 * residual is on the list until nf_residual_table_free, which must run
 * before its memory goes.
 */
typedef struct nf_residual_table {
    nf_residual_t **v;    /* pointers stay valid while the table grows */
    size_t n, cap;
    size_t last;          /* index of the last hit (unbound buffers) */
    nf_residual_t **ub;   /* the residuals of unbound buffers among v, for
                             nf_residual_forget (a bind passes over these only) */
    size_t nub, ubcap;
    nf_residual_t **by_id; /* named residuals by interned id */
    uint32_t by_id_cap;
    uint64_t next_first;  /* the next residual's first */
    uint64_t call_start;  /* clock at the current call's first lookup */
    const void *call_thread; /* that call's thread and its call count */
    uint64_t call_seen;   /* (nf_stats_thread_calls) */
    unsigned pinned;      /* a checkpoint reads it: nothing is dropped */
    int linked;
    struct nf_residual_table *prev, *next;
} nf_residual_table_t;

/* The residual for (key, count): found, reset after a count change, a
 * pending one of that count (unbound keys), or new and zero (form
 * NF_RES_Y), with what this call may write placed and touched. NULL on
 * allocation failure or when NFCOLL_RESIDUAL_MAX cannot make room (logged;
 * *why NF_OK: the buffer runs without error feedback), or when placement
 * refuses its memory under NFCOLL_CXL=require (*why NF_ERR_CAPACITY,
 * logged once: the call still runs, then reports it; the refusal is
 * remembered for the key and count, so later calls get the same answer at
 * once). */
nf_residual_t *nf_residual_get(nf_residual_table_t *t, const nf_res_key_t *key, size_t count,
                               nf_status_t *why);
/* A call that keeps key's residual without using it (a health cool-down
 * runs fp32): a residual loaded for an unbound buffer of count elements is
 * adopted by key now, as nf_residual_get would, so that buffers adopt the
 * loaded residuals in the order the saved run used them. Creates, places
 * and stamps nothing. */
void nf_residual_claim(nf_residual_table_t *t, const nf_res_key_t *key, size_t count);
/* e for the E-form kernels, converting a Y- or TY-form residual exactly. */
float *nf_residual_e(nf_residual_t *r);
/* e of elements [j0, j0 + n) into out, whatever the form, without
 * converting (a checkpoint writes a blocked Y form as E form). */
void nf_residual_e_copy(const nf_residual_t *r, size_t j0, size_t n, float *out);
/* The smallest scale block of any route: the integer routes' (binary's
 * scale_block is a multiple of 512). */
#define NF_RES_BLOCK_MIN 32u
/* Scale blocks a residual of count elements can hold: one per
 * NF_RES_BLOCK_MIN elements. */
static inline size_t nf_residual_blocks(size_t count)
{
    return (count + NF_RES_BLOCK_MIN - 1) / NF_RES_BLOCK_MIN;
}
/* Sum |e| over the residual, whatever its form (health's error-feedback
 * signal; a plain pass, only when health is on). */
/* The state after a low-bit call: the buffer the call wrote (buf[cur ^ 1])
 * becomes the state. Binary's y: block 0 with one a_i (ai[0]), else one
 * a_i per block of block elements (ai[0 .. nsc-1]). Ternary's y with b_i
 * and the gate t. */
void nf_residual_commit_y(nf_residual_t *r, size_t block, const double *ai, unsigned nsc);
void nf_residual_commit_ty(nf_residual_t *r, float bi, float t);
/* The integer routes' y with each block's agreed max (nb of them, blocks of
 * block elements) and the code's bits. */
void nf_residual_commit_q(nf_residual_t *r, size_t block, unsigned kb, const float *M, size_t nb);
/* A residual made for a checkpoint's entry (nf_residual_make), its key and
 * state as saved: name "" for an unbound buffer's (pending, its order of
 * first use first), else the region's. Its buffer is filled by the caller. */
void nf_residual_restore(nf_residual_t *r, const char *name, uint64_t first, nf_res_form_t form,
                         float aprev, float tprev);
double nf_residual_l1(const nf_residual_t *r);
/* Start the residual over at zero (health, after error-feedback growth). */
void nf_residual_zero(nf_residual_t *r);
/* NF_Region_bind(base, ...) over [base, base + bytes): the memory holds new
 * contents. The residual of every unbound buffer overlapping it belonged to
 * a buffer that is gone (a DDP bucket rebuilt where a freed one was), and
 * restarts from zero at its next call, so that no run depends on where the
 * allocator put a new buffer. Passes over unbound buffers' residuals only
 * (a program of named regions binds at no cost). */
void nf_residual_forget(const void *base, size_t bytes);
void nf_residual_table_free(nf_residual_table_t *t);

/* ---- for checkpoints (checkpoint.c) ---- */

/* Keep t's residuals from being dropped while pinned (nested). The caller
 * owns t (its communicator's calls are ordered with the checkpoint). */
void nf_residual_table_pin(nf_residual_table_t *t, int on);

/* A zero residual of count elements outside any table, counted against
 * NFCOLL_RESIDUAL_MAX (nothing is dropped for it), its current buffer
 * placed and touched for loading into. NULL without memory, or when
 * NFCOLL_CXL=require refuses it (logged: the CXL node is full). */
nf_residual_t *nf_residual_make(size_t count);
void nf_residual_free(nf_residual_t *r);

/* Bytes of residuals held by the process, by t, and the bound (resolved
 * from NFCOLL_RESIDUAL_MAX; UINT64_MAX when off). */
void nf_residual_usage(const nf_residual_table_t *t, uint64_t *held, uint64_t *table,
                       uint64_t *max);

/* Replace t's residuals with the n in v (made by nf_residual_make; key,
 * first and state set) and free the old ones. t takes v itself (malloc'd
 * with room for cap, or NULL and 0), so this cannot fail. */
void nf_residual_table_replace(nf_residual_table_t *t, nf_residual_t **v, size_t n, size_t cap);

#endif

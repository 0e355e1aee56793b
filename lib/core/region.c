/* SPDX-License-Identifier: BSD-3-Clause */
/* The region registry (nf_region.h): the bound ranges in a treap ordered
 * by address (O(log n) bind, unbind and lookup in any order, expected),
 * under a read-write lock; names interned to ids at bind. Calls only read
 * it, and only when something is bound. */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "nf_intern.h"
#include "nf_log.h"
#include "nf_region.h"

typedef struct nf_rnode {
    uintptr_t lo, hi;     /* bytes [lo, hi) */
    uint32_t id;          /* interned name */
    uint32_t prio;        /* heap order: a hash of lo */
    struct nf_rnode *kid[2];
} nf_rnode_t;

static pthread_rwlock_t nf_reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static nf_rnode_t *nf_reg_root;
static size_t nf_reg_n;
static uintptr_t *nf_reg_at;  /* by id: where that name is bound, 0 if not */
static uint32_t nf_reg_at_cap;
static _Atomic unsigned nf_reg_gen;

static int nf_region_name_ok(const char *name)
{
    size_t n = 0;
    if (name == NULL)
        return 0;
    for (; name[n] != '\0'; n++)
        if (n >= NF_REGION_NAME_MAX - 1 || name[n] <= ' ' || name[n] > '~')
            return 0;
    return n > 0;
}

static uint32_t nf_rnode_prio(uintptr_t lo)
{
    uint64_t z = (uint64_t)lo + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(z ^ (z >> 31));
}

/* The first node whose end is above lo (regions do not overlap, so ends
 * are in the same order as starts), NULL when none. */
static const nf_rnode_t *nf_region_lower(uintptr_t lo)
{
    const nf_rnode_t *best = NULL;
    for (const nf_rnode_t *t = nf_reg_root; t != NULL;)
        if (t->hi > lo)
            best = t, t = t->kid[0];
        else
            t = t->kid[1];
    return best;
}

/* Insert n below *at, keeping the heap order by rotations on the way up. */
static void nf_rnode_insert(nf_rnode_t **at, nf_rnode_t *n)
{
    nf_rnode_t *t = *at;
    if (t == NULL) {
        *at = n;
        return;
    }
    int d = n->lo > t->lo;
    nf_rnode_insert(&t->kid[d], n);
    if (t->kid[d]->prio > t->prio) {
        nf_rnode_t *k = t->kid[d];
        t->kid[d] = k->kid[!d], k->kid[!d] = t, *at = k;
    }
}

/* Take the node starting at lo out from below *at; NULL when none. */
static nf_rnode_t *nf_rnode_remove(nf_rnode_t **at, uintptr_t lo)
{
    while (*at != NULL && (*at)->lo != lo)
        at = &(*at)->kid[lo > (*at)->lo];
    nf_rnode_t *t = *at;
    if (t == NULL)
        return NULL;
    while (t->kid[0] != NULL && t->kid[1] != NULL) { /* rotate it down to a leaf side */
        int d = t->kid[1]->prio > t->kid[0]->prio;
        nf_rnode_t *k = t->kid[d];
        t->kid[d] = k->kid[!d], k->kid[!d] = t, *at = k;
        at = &k->kid[!d];
    }
    *at = t->kid[t->kid[0] == NULL];
    return t;
}

/* Under the write lock. */
static nf_status_t nf_region_insert(uintptr_t lo, uintptr_t hi, uint32_t id, const char *name)
{
    const nf_rnode_t *next = nf_region_lower(lo);
    if (next != NULL && next->lo < hi)
        return NF_ERR_INVALID; /* overlaps */
    if (nf_id_array_grow(&nf_reg_at, &nf_reg_at_cap, id, sizeof(*nf_reg_at)) != 0)
        return NF_ERR_NO_MEMORY;
    if (nf_reg_at[id] != 0) {
        /* One name is one layer: its residual, health and statistics are
         * one state, which two ranges would share (docs/design.md,
         * "Regions"). */
        nf_log_error("NF_Region_bind: region '%s' is already bound at %#" PRIxPTR
                     ": unbind it first, or give this range another name", name,
                     nf_reg_at[id]);
        return NF_ERR_INVALID;
    }
    nf_rnode_t *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return NF_ERR_NO_MEMORY;
    n->lo = lo, n->hi = hi, n->id = id, n->prio = nf_rnode_prio(lo);
    nf_rnode_insert(&nf_reg_root, n);
    nf_reg_at[id] = lo;
    nf_reg_n++;
    return NF_OK;
}

nf_status_t nf_region_bind(const void *base, size_t count, const char *name)
{
    uintptr_t lo = (uintptr_t)base;
    if (base == NULL || count == 0 || !nf_region_name_ok(name) ||
        count > (UINTPTR_MAX - lo) / sizeof(float))
        return NF_ERR_INVALID;
    if (lo % sizeof(float) != 0) {
        nf_log_error("NF_Region_bind: region '%s' at %p is not aligned to a float (%zu "
                     "bytes): an MPI_FLOAT buffer cannot start there", name, base,
                     sizeof(float));
        return NF_ERR_INVALID;
    }
    uint32_t id = nf_intern(name);
    if (id == 0)
        return NF_ERR_NO_MEMORY;
    pthread_rwlock_wrlock(&nf_reg_lock);
    nf_status_t st = nf_region_insert(lo, lo + count * sizeof(float), id, name);
    if (st == NF_OK)
        atomic_fetch_add(&nf_reg_gen, 1u);
    pthread_rwlock_unlock(&nf_reg_lock);
    return st;
}

nf_status_t nf_region_unbind(const void *base)
{
    pthread_rwlock_wrlock(&nf_reg_lock);
    nf_rnode_t *n = nf_rnode_remove(&nf_reg_root, (uintptr_t)base);
    if (n != NULL) {
        nf_reg_at[n->id] = 0;
        nf_reg_n--;
        atomic_fetch_add(&nf_reg_gen, 1u);
    }
    pthread_rwlock_unlock(&nf_reg_lock);
    free(n);
    return n != NULL ? NF_OK : NF_ERR_INVALID;
}

unsigned nf_region_generation(void) { return atomic_load(&nf_reg_gen); }

int nf_region_any(const float *x, size_t m)
{
    uintptr_t lo = (uintptr_t)x;
    uintptr_t hi = m > (UINTPTR_MAX - lo) / sizeof(float) ? UINTPTR_MAX : lo + m * sizeof(float);
    if (atomic_load(&nf_reg_gen) == 0)
        return 0;
    pthread_rwlock_rdlock(&nf_reg_lock);
    const nf_rnode_t *next = nf_region_lower(lo);
    int any = next != NULL && next->lo < hi;
    pthread_rwlock_unlock(&nf_reg_lock);
    return any;
}

typedef struct nf_rwalk {
    uintptr_t lo, hi;
    nf_region_part_t *out;
    size_t n, max;
} nf_rwalk_t;

static void nf_part_of(nf_rwalk_t *w, const nf_rnode_t *r)
{
    if (w->n < w->max) {
        nf_region_part_t *p = &w->out[w->n];
        uintptr_t a = r->lo > w->lo ? r->lo : w->lo, b = r->hi < w->hi ? r->hi : w->hi;
        p->off = (a - w->lo) / sizeof(float);
        /* A region that does not start on a float of the buffer cannot be
         * a part of it: m = 0, and the caller treats the call as
         * mismatched. */
        p->m = (a - w->lo) % sizeof(float) != 0 ? 0 : (b - a) / sizeof(float);
        p->id = r->id;
        p->name = nf_intern_name(r->id);
        p->hash = nf_intern_hash(r->id);
    }
    w->n++;
}

/* In order, the nodes below t overlapping [w->lo, w->hi). */
static void nf_rwalk(nf_rwalk_t *w, const nf_rnode_t *t)
{
    while (t != NULL) {
        if (t->hi <= w->lo) { /* t and its left are below the range */
            t = t->kid[1];
            continue;
        }
        nf_rwalk(w, t->kid[0]);
        if (t->lo >= w->hi) /* t and its right are above it */
            return;
        nf_part_of(w, t);
        t = t->kid[1];
    }
}

size_t nf_region_parts(const float *x, size_t m, nf_region_part_t *out, size_t max)
{
    uintptr_t lo = (uintptr_t)x;
    nf_rwalk_t w = {.lo = lo, .hi = m > (UINTPTR_MAX - lo) / sizeof(float)
                                         ? UINTPTR_MAX : lo + m * sizeof(float),
                    .out = out, .max = max};
    if (atomic_load(&nf_reg_gen) == 0)
        return 0;
    pthread_rwlock_rdlock(&nf_reg_lock);
    nf_rwalk(&w, nf_reg_root);
    pthread_rwlock_unlock(&nf_reg_lock);
    return w.n;
}

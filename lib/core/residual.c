/* SPDX-License-Identifier: BSD-3-Clause */
/* Error-feedback residuals, one per (communicator, buffer address, count).
 * Placed like the aggregation buffer (they are what CXL memory is for).
 * Forms and double buffering: see nf_residual.h. A region's residual is
 * found by its interned id in an array (a fused call may hold thousands);
 * unbound buffers linearly with a last-hit shortcut: a training step
 * touches a handful of gradient buckets in the same order every step.
 *
 * Memory: all tables hang on one list under one lock, so one byte count
 * bounds them (NFCOLL_RESIDUAL_MAX). A program that reduces a freshly
 * allocated buffer every step makes a new residual every step; without the
 * bound that grows until the node runs out. The lock is taken once per
 * lookup (uncontended: a few tens of ns next to a collective call). */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nf_ctx.h"
#include "nf_intern.h"
#include "nf_kernels.h"
#include "nf_log.h"
#include "nf_placement.h"
#include "nf_residual.h"
#include "nf_stats.h"
#include "nf_util.h"

_Static_assert(NF_RES_BLOCK_MIN == NF_INT_BLOCK_MIN, "ablk holds a block max per int block");

static pthread_mutex_t nf_res_lock = PTHREAD_MUTEX_INITIALIZER;
static nf_residual_table_t *nf_res_tables; /* tables that ever held a residual */
static uint64_t nf_res_clock;              /* last-use stamps */
static uint64_t nf_res_held;               /* bytes mapped for all residuals */
static uint64_t nf_res_max;                /* the bound; 0 until resolved */

static size_t nf_res_page(void)
{
    static size_t page; /* asked once: it does not change */
    if (page == 0) {
        long p = sysconf(_SC_PAGESIZE);
        page = p > 0 ? (size_t)p : 4096;
    }
    return page;
}

/* Both buffers as mapped: what a residual costs the node, and what
 * NFCOLL_RESIDUAL_MAX bounds. The block scales (ablk: one float per 32
 * elements, 1/64 of the buffers, mapped apart) are bounded by the
 * buffers they go with and not counted, so that a bound of twice a
 * buffer's pages still holds that buffer's residual. */
static uint64_t nf_res_footprint(size_t bytes)
{
    size_t pg = nf_res_page();
    return 2 * (uint64_t)((bytes + pg - 1) / pg * pg);
}

/* Resolved at the first need, when placement knows its node: auto is a
 * quarter of the CXL node (residuals are placed there) or of the machine. */
static uint64_t nf_res_bound(void)
{
    if (nf_res_max != 0)
        return nf_res_max;
    const nf_settings_t *s = nf_ctx.cfg.settings != NULL ? nf_ctx.cfg.settings
                                                         : nf_settings_load();
    uint64_t max = s->residual_max;
    if (max == NF_RESIDUAL_MAX_AUTO) {
        uint64_t node = nf_place_node_bytes();
        long pages = sysconf(_SC_PHYS_PAGES);
        uint64_t mem = node > 0 ? node : pages > 0 ? (uint64_t)pages * nf_res_page() : 0;
        max = mem >= 4 ? mem / 4 : NF_RESIDUAL_MAX_OFF;
        nf_log_info(1, "residuals: at most %llu bytes per process (a quarter of %s)",
                    (unsigned long long)max, node > 0 ? "the CXL node" : "this machine");
    }
    nf_res_max = max;
    return max;
}

/* Under the lock. */
static void nf_res_account(uint64_t add, uint64_t sub)
{
    nf_res_held = nf_res_held + add - sub;
    nf_stats_residual_held(nf_res_held);
}

/* The block scales of a residual of bytes: mapped apart from the heap, so
 * that a program dropping residuals every step returns them to the system
 * at once (a heap keeps freed blocks: ASan's quarantine held megabytes). */
static size_t nf_res_ablk_bytes(size_t bytes)
{
    return (nf_residual_blocks(bytes / sizeof(float)) + 1) * sizeof(float);
}

static void nf_residual_release(nf_residual_t *r)
{
    nf_place_free(r->buf[0], r->bytes);
    nf_place_free(r->buf[1], r->bytes);
    r->buf[0] = r->buf[1] = NULL;
    if (r->ablk != NULL)
        munmap(r->ablk, nf_res_ablk_bytes(r->bytes));
    r->ablk = NULL;
}

/* Both buffers mapped, neither touched: a new residual is zero, and its
 * first call reads buf[0] (zero pages cost nothing) and writes buf[1]. Each
 * buffer is placed and touched before its first write (nf_res_touch), so
 * the first call on a new buffer faults in one buffer, not two. */
static nf_status_t nf_residual_alloc(nf_residual_t *r, size_t count)
{
    size_t bytes = count * sizeof(float);
    r->buf[0] = nf_place_map(bytes);
    r->buf[1] = r->buf[0] != NULL ? nf_place_map(bytes) : NULL;
    void *ab = mmap(NULL, nf_res_ablk_bytes(bytes), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); /* zero, as calloc */
    r->ablk = ab != MAP_FAILED ? ab : NULL;
    r->bytes = bytes;
    if (r->buf[1] == NULL || r->ablk == NULL) {
        nf_residual_release(r);
        return NF_ERR_NO_MEMORY;
    }
    r->count = count;
    r->refused = 0;
    r->cur = 0;
    r->touched[0] = r->touched[1] = 0;
    r->form = NF_RES_Y; /* zero y with a = 0 is the zero residual */
    r->aprev = r->tprev = 0.0f;
    r->block = 0;
    r->resident_frac = 1.0;
    return NF_OK;
}

/* Place and touch buffer i before its first write. */
static nf_status_t nf_res_touch(nf_residual_t *r, unsigned i)
{
    double frac = 1.0;
    if (r->touched[i])
        return NF_OK;
    nf_status_t st = nf_place_bind_touch(r->buf[i], r->bytes, &frac);
    if (st != NF_OK)
        return st;
    r->resident_frac = r->touched[i ^ 1u] ? (r->resident_frac + frac) / 2 : frac;
    r->touched[i] = 1;
    nf_stats_placed(NF_PLACED_RESIDUAL, r->bytes, frac);
    return NF_OK;
}

/* What this call may write: the next buffer, and the current one in E form
 * (updated in place). */
static nf_status_t nf_res_prepare(nf_residual_t *r)
{
    nf_status_t st = nf_res_touch(r, r->cur ^ 1u);
    if (st == NF_OK && r->form == NF_RES_E)
        st = nf_res_touch(r, r->cur);
    return st;
}

/* Under the lock: give back r's memory and r. */
static void nf_res_destroy(nf_residual_t *r)
{
    if (r->buf[0] != NULL)
        nf_res_account(0, nf_res_footprint(r->bytes));
    nf_residual_release(r);
    free(r);
}

/* The Y form's a_i of element j: the segment's, or its block's. */
static inline float nf_res_a(const nf_residual_t *r, size_t j)
{
    return r->block > 0 ? r->ablk[j / r->block] : r->aprev;
}

/* The Q form's e at element j, from its y: the kernels' rule (int_y_ef). */
static inline float nf_res_q_e(const nf_residual_t *r, size_t j, float y)
{
    float s, inv;
    nf_int_scale(r->ablk[j / r->block], r->kb, &s, &inv);
    return y - s * (float)nf_int_q(y, inv, r->kb);
}

/* Y form to E form: e = y - a where y's sign bit is clear, y + a where set,
 * the update the binary route would have stored (a: the segment's a_i, or
 * with scale_block the element's block's); TY form: y - b above the gate,
 * y + b below minus it, else y, the ternary route's. Exact, in place. */
double nf_residual_l1(const nf_residual_t *r)
{
    const float *b = r->buf[r->cur];
    double sum = 0.0;
    for (size_t j = 0; j < r->count; j++) {
        float y = b[j], a = fabsf(y);
        if (r->form == NF_RES_Y) /* e = y -+ a: | |y| - a | */
            sum += fabs((double)a - (double)nf_res_a(r, j));
        else if (r->form == NF_RES_TY) /* gated in: | |y| - b |, else |y| */
            sum += y > r->tprev || y < -r->tprev ? fabs((double)a - (double)r->aprev) : a;
        else if (r->form == NF_RES_Q)
            sum += fabsf(nf_res_q_e(r, j, y));
        else
            sum += a;
    }
    return sum;
}

void nf_residual_commit_y(nf_residual_t *r, size_t block, const double *ai, unsigned nsc)
{
    for (unsigned b = 0; block > 0 && b < nsc; b++)
        r->ablk[b] = (float)ai[b];
    r->cur ^= 1u;
    r->form = NF_RES_Y;
    r->block = block;
    r->aprev = block > 0 ? 0.0f : (float)ai[0];
}

void nf_residual_commit_ty(nf_residual_t *r, float bi, float t)
{
    r->cur ^= 1u;
    r->form = NF_RES_TY;
    r->aprev = bi;
    r->tprev = t;
}

void nf_residual_commit_q(nf_residual_t *r, size_t block, unsigned kb, const float *M, size_t nb)
{
    memcpy(r->ablk, M, nb * sizeof(float));
    r->cur ^= 1u;
    r->form = NF_RES_Q;
    r->block = block;
    r->kb = kb;
}

void nf_residual_restore(nf_residual_t *r, const char *name, uint64_t first, nf_res_form_t form,
                         float aprev, float tprev)
{
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->hash = name[0] != '\0' ? nf_hash_str(NF_HASH_INIT, name) : 0;
    r->pending = name[0] == '\0';
    r->first = first;
    r->form = form;
    r->aprev = aprev;
    r->tprev = tprev;
}

void nf_residual_zero(nf_residual_t *r)
{
    if (r->touched[r->cur])
        memset(r->buf[r->cur], 0, r->count * sizeof(float));
    r->form = NF_RES_Y; /* zero y with a = 0 is the zero residual */
    r->aprev = 0.0f;
    r->tprev = 0.0f;
    r->block = 0;
}

float *nf_residual_e(nf_residual_t *r)
{
    float *b = r->buf[r->cur];
    if (!r->touched[r->cur]) {
        /* never written: y = 0 and a = 0, so e = 0 already. The E form's
         * in-place update touches it first (nf_res_prepare, next call; the
         * only E-form writer in this call is a route that writes the other
         * buffer). */
    } else if (r->form != NF_RES_E) {
        nf_residual_e_copy(r, 0, r->count, b);
    }
    r->form = NF_RES_E;
    r->block = 0;
    return b;
}

void nf_residual_e_copy(const nf_residual_t *r, size_t j0, size_t n, float *out)
{
    const float *b = r->buf[r->cur] + j0;
    float a = r->aprev, t = r->tprev;
    if (!r->touched[r->cur]) { /* never written: zero */
        memset(out, 0, n * sizeof(float));
    } else if (r->form == NF_RES_Y) {
        for (size_t j = 0; j < n; j++) {
            a = nf_res_a(r, j0 + j);
            out[j] = signbit(b[j]) ? b[j] + a : b[j] - a;
        }
    } else if (r->form == NF_RES_TY) {
        for (size_t j = 0; j < n; j++)
            out[j] = b[j] > t ? b[j] - a : b[j] < -t ? b[j] + a : b[j];
    } else if (r->form == NF_RES_Q) {
        for (size_t j = 0; j < n; j++)
            out[j] = nf_res_q_e(r, j0 + j, b[j]);
    } else if (out != b) {
        memcpy(out, b, n * sizeof(float));
    }
}

/* ---------------------------------------------------------------- tables */

static void nf_res_link(nf_residual_table_t *t)
{
    if (t->linked)
        return;
    t->prev = NULL;
    t->next = nf_res_tables;
    if (nf_res_tables != NULL)
        nf_res_tables->prev = t;
    nf_res_tables = t;
    t->linked = 1;
}

static void nf_res_unlink(nf_residual_table_t *t)
{
    if (!t->linked)
        return;
    if (t->prev != NULL)
        t->prev->next = t->next;
    else
        nf_res_tables = t->next;
    if (t->next != NULL)
        t->next->prev = t->prev;
    t->linked = 0;
}

/* Take r out of t (the order of t->v carries no meaning). */
static void nf_res_remove(nf_residual_table_t *t, const nf_residual_t *r)
{
    size_t i = r->slot;
    if (i >= t->n || t->v[i] != r)
        return;
    t->v[i] = t->v[--t->n];
    t->v[i]->slot = i;
    t->last = t->n; /* no shortcut until the next hit */
    size_t u = r->ubslot;
    if (r->name[0] == '\0' && u < t->nub && t->ub[u] == r) {
        t->ub[u] = t->ub[--t->nub];
        t->ub[u]->ubslot = u;
    }
    if (r->id != 0 && r->id < t->by_id_cap && t->by_id[r->id] == r)
        t->by_id[r->id] = NULL;
}

/* Room in t->by_id for id. */
static nf_status_t nf_res_by_id_grow(nf_residual_table_t *t, uint32_t id)
{
    return nf_id_array_grow(&t->by_id, &t->by_id_cap, id, sizeof(*t->by_id));
}

/* A lookup on t from another call than the last one starts a new current
 * call: the residuals stamped before it are free to drop. */
static void nf_res_call(nf_residual_table_t *t)
{
    const void *thread;
    uint64_t calls = nf_stats_thread_calls(&thread);
    if (thread != t->call_thread || calls != t->call_seen) {
        t->call_thread = thread;
        t->call_seen = calls;
        t->call_start = nf_res_clock + 1;
    }
}

/* The least recently used residual that no call holds, over every table. */
static nf_residual_t *nf_res_victim(nf_residual_table_t **owner)
{
    nf_residual_t *best = NULL;
    for (nf_residual_table_t *t = nf_res_tables; t != NULL; t = t->next) {
        if (t->pinned)
            continue;
        for (size_t i = 0; i < t->n; i++) {
            nf_residual_t *r = t->v[i];
            if (r->stamp < t->call_start && !r->refused &&
                (best == NULL || r->stamp < best->stamp))
                best = r, *owner = t;
        }
    }
    return best;
}

/* Drop least recently used residuals until need more bytes fit the bound.
 * NF_ERR_CAPACITY when the residuals held by calls alone do not leave room. */
static nf_status_t nf_res_room(uint64_t need)
{
    uint64_t max = nf_res_bound();
    nf_residual_table_t *t = NULL;
    if (max == NF_RESIDUAL_MAX_OFF)
        return NF_OK;
    while (nf_res_held + need > max || nf_res_held + need < need) {
        nf_residual_t *r = nf_res_victim(&t);
        if (r == NULL) {
            nf_log_warn_once("NFCOLL_RESIDUAL_MAX=%llu bytes cannot hold the residuals of the "
                             "calls running now (%llu more bytes needed): buffers beyond it "
                             "run without error feedback", (unsigned long long)max,
                             (unsigned long long)need);
            return NF_ERR_CAPACITY;
        }
        nf_log_warn_once("error-feedback residuals reached NFCOLL_RESIDUAL_MAX=%llu bytes: "
                         "dropping the least recently used (their buffers restart error "
                         "feedback from zero)", (unsigned long long)max);
        nf_res_remove(t, r);
        nf_res_destroy(r);
        nf_stats_residual_dropped();
    }
    return NF_OK;
}

static int nf_residual_is(const nf_residual_t *r, const nf_res_key_t *key)
{
    return r->name[0] == '\0' && !r->pending && r->addr == key->addr;
}

static nf_residual_t *nf_res_find(nf_residual_table_t *t, const nf_res_key_t *key)
{
    if (key->name != NULL)
        return key->id < t->by_id_cap ? t->by_id[key->id] : NULL;
    if (t->last < t->n && nf_residual_is(t->v[t->last], key))
        return t->v[t->last];
    for (size_t i = 0; i < t->n; i++) {
        if (nf_residual_is(t->v[i], key)) {
            t->last = i;
            return t->v[i];
        }
    }
    return NULL;
}

/* The loaded unbound residual of this count first used earliest, now bound
 * to addr (docs/design.md, "Checkpoints"). */
static nf_residual_t *nf_res_adopt(nf_residual_table_t *t, const void *addr, size_t count)
{
    nf_residual_t *best = NULL;
    for (size_t i = 0; i < t->n; i++) {
        nf_residual_t *r = t->v[i];
        if (r->pending && r->count == count && (best == NULL || r->first < best->first))
            best = r;
    }
    if (best != NULL)
        best->pending = 0, best->addr = addr;
    return best;
}

/* The buffer changed shape: start over. r is stamped, so it is not dropped
 * to make room for itself. */
static nf_residual_t *nf_res_reshape(nf_residual_table_t *t, nf_residual_t *r, size_t count)
{
    nf_res_account(0, nf_res_footprint(r->bytes));
    nf_residual_release(r);
    if (nf_res_room(nf_res_footprint(count * sizeof(float))) != NF_OK ||
        nf_residual_alloc(r, count) != NF_OK) {
        nf_res_remove(t, r);
        free(r);
        return NULL;
    }
    nf_res_account(nf_res_footprint(r->bytes), 0);
    return r;
}

/* Room in *v (capacity *cap) for one more than n pointers. */
static nf_status_t nf_res_room_for(nf_residual_t ***v, size_t *cap, size_t n)
{
    if (n < *cap)
        return NF_OK;
    size_t c = *cap ? 2 * *cap : 16;
    nf_residual_t **w = realloc(*v, c * sizeof(*w));
    if (w == NULL)
        return NF_ERR_NO_MEMORY;
    *v = w, *cap = c;
    return NF_OK;
}

static nf_residual_t *nf_res_new(nf_residual_table_t *t, const nf_res_key_t *key,
                                 size_t count)
{
    if (key->name != NULL && nf_res_by_id_grow(t, key->id) != NF_OK)
        return NULL;
    if (nf_res_room_for(&t->v, &t->cap, t->n) != NF_OK ||
        (key->name == NULL && nf_res_room_for(&t->ub, &t->ubcap, t->nub) != NF_OK))
        return NULL;
    if (nf_res_room(nf_res_footprint(count * sizeof(float))) != NF_OK)
        return NULL;
    nf_residual_t *r = calloc(1, sizeof(*r));
    if (r == NULL || nf_residual_alloc(r, count) != NF_OK) {
        free(r);
        return NULL;
    }
    nf_res_account(nf_res_footprint(r->bytes), 0);
    r->addr = key->name == NULL ? key->addr : NULL;
    if (key->name != NULL) { /* once per region: the checkpoint's key */
        snprintf(r->name, sizeof(r->name), "%s", key->name);
        r->id = key->id, r->hash = nf_intern_hash(key->id);
        t->by_id[key->id] = r;
    }
    if (key->name == NULL) {
        r->ubslot = t->nub;
        t->ub[t->nub++] = r;
    }
    r->first = t->next_first++;
    r->stamp = ++nf_res_clock;
    nf_res_link(t);
    t->last = t->n;
    r->slot = t->n;
    t->v[t->n++] = r;
    return r;
}

#define NF_RES_REFUSED_MAX 64 /* refusals remembered per table */

/* Placement refused r's memory under require: give it back and keep r as
 * the refusal, so the key is not placed again (nor others dropped for it)
 * on every call. The oldest refusal beyond NF_RES_REFUSED_MAX is
 * forgotten: fresh buffers every step must not grow the table. */
static void nf_res_refuse(nf_residual_table_t *t, nf_residual_t *r)
{
    nf_residual_t *oldest = NULL;
    size_t k = 0;
    nf_res_account(0, nf_res_footprint(r->bytes));
    nf_residual_release(r);
    r->bytes = 0;
    r->refused = 1;
    for (size_t i = 0; i < t->n; i++) {
        nf_residual_t *q = t->v[i];
        k += (size_t)q->refused;
        if (q->refused && (oldest == NULL || q->stamp < oldest->stamp))
            oldest = q;
    }
    if (k > NF_RES_REFUSED_MAX) {
        nf_res_remove(t, oldest);
        free(oldest);
    }
}

void nf_residual_claim(nf_residual_table_t *t, const nf_res_key_t *key, size_t count)
{
    if (key->name != NULL) /* keyed by name: nothing to adopt */
        return;
    pthread_mutex_lock(&nf_res_lock);
    if (nf_res_find(t, key) == NULL)
        nf_res_adopt(t, key->addr, count);
    pthread_mutex_unlock(&nf_res_lock);
}

nf_residual_t *nf_residual_get(nf_residual_table_t *t, const nf_res_key_t *key, size_t count,
                               nf_status_t *why)
{
    nf_res_key_t k = *key;
    *why = NF_OK;
    if (k.name != NULL && k.id == 0 && (k.id = nf_intern(k.name)) == 0)
        return NULL; /* no memory for the name */
    key = &k;
    pthread_mutex_lock(&nf_res_lock);
    nf_res_call(t);
    nf_residual_t *r = nf_res_find(t, key);
    if (r == NULL && key->name == NULL)
        r = nf_res_adopt(t, key->addr, count);
    nf_status_t st = NF_OK;
    if (r != NULL) {
        r->stamp = ++nf_res_clock;
        if (atomic_exchange_explicit(&r->stale, 0, memory_order_relaxed) && !r->refused &&
            r->count == count)
            nf_residual_zero(r); /* another count is started over below */
        if (r->refused && r->count == count)
            st = NF_ERR_CAPACITY; /* refused before: the same answer, no retry */
        else if (r->count != count)
            r = nf_res_reshape(t, r, count);
    } else {
        r = nf_res_new(t, key, count);
    }
    if (st == NF_OK && r != NULL && (st = nf_res_prepare(r)) != NF_OK)
        nf_res_refuse(t, r); /* the node is full under require */
    if (st != NF_OK) {
        r = NULL;
        *why = st;
    }
    pthread_mutex_unlock(&nf_res_lock);
    return r;
}

void nf_residual_forget(const void *base, size_t bytes)
{
    uintptr_t lo = (uintptr_t)base, hi = lo + bytes;
    pthread_mutex_lock(&nf_res_lock);
    for (nf_residual_table_t *t = nf_res_tables; t != NULL; t = t->next) {
        for (size_t i = 0; i < t->nub; i++) {
            nf_residual_t *r = t->ub[i];
            uintptr_t a = (uintptr_t)r->addr;
            if (!r->pending && a < hi && lo < a + r->count * sizeof(float))
                atomic_store_explicit(&r->stale, 1, memory_order_relaxed); /* not zeroed
                                           here: a call in flight may hold it */
        }
    }
    pthread_mutex_unlock(&nf_res_lock);
}

void nf_residual_table_free(nf_residual_table_t *t)
{
    pthread_mutex_lock(&nf_res_lock);
    for (size_t i = 0; i < t->n; i++)
        nf_res_destroy(t->v[i]);
    free(t->v);
    free(t->by_id);
    free(t->ub);
    nf_res_unlink(t);
    memset(t, 0, sizeof(*t));
    pthread_mutex_unlock(&nf_res_lock);
}

/* ---------------------------------------------------------------- checkpoints */

void nf_residual_table_pin(nf_residual_table_t *t, int on)
{
    pthread_mutex_lock(&nf_res_lock);
    if (on)
        t->pinned++;
    else if (t->pinned > 0)
        t->pinned--;
    pthread_mutex_unlock(&nf_res_lock);
}

nf_residual_t *nf_residual_make(size_t count)
{
    nf_residual_t *r = calloc(1, sizeof(*r));
    if (r == NULL || nf_residual_alloc(r, count) != NF_OK) {
        free(r);
        return NULL;
    }
    if (nf_res_touch(r, r->cur) != NF_OK) { /* loaded into; the other at its first write */
        nf_residual_release(r);
        free(r);
        return NULL;
    }
    pthread_mutex_lock(&nf_res_lock);
    nf_res_account(nf_res_footprint(r->bytes), 0);
    pthread_mutex_unlock(&nf_res_lock);
    return r;
}

void nf_residual_free(nf_residual_t *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&nf_res_lock);
    nf_res_destroy(r);
    pthread_mutex_unlock(&nf_res_lock);
}

void nf_residual_usage(const nf_residual_table_t *t, uint64_t *held, uint64_t *table,
                       uint64_t *max)
{
    pthread_mutex_lock(&nf_res_lock);
    *held = nf_res_held;
    *table = 0;
    for (size_t i = 0; i < t->n; i++)
        *table += nf_res_footprint(t->v[i]->bytes);
    *max = nf_res_bound();
    pthread_mutex_unlock(&nf_res_lock);
}

void nf_residual_table_replace(nf_residual_table_t *t, nf_residual_t **v, size_t n, size_t cap)
{
    pthread_mutex_lock(&nf_res_lock);
    for (size_t i = 0; i < t->n; i++)
        nf_res_destroy(t->v[i]);
    free(t->v);
    t->v = v, t->n = n, t->cap = cap, t->last = n;
    t->next_first = 0, t->nub = 0;
    if (n > t->ubcap) { /* without memory, the loaded unbound ones cannot be forgotten */
        nf_residual_t **ub = realloc(t->ub, n * sizeof(*ub));
        if (ub != NULL)
            t->ub = ub, t->ubcap = n;
    }
    if (t->by_id_cap > 0)
        memset(t->by_id, 0, t->by_id_cap * sizeof(*t->by_id));
    for (size_t i = 0; i < n; i++) {
        v[i]->slot = i;
        v[i]->id = 0;
        if (v[i]->name[0] == '\0' && t->nub < t->ubcap) {
            v[i]->ubslot = t->nub;
            t->ub[t->nub++] = v[i];
        }
        /* A name interned without memory, or no room to index it: found
         * by no lookup (its region restarts from zero, as if dropped). */
        if (v[i]->name[0] != '\0' && (v[i]->id = nf_intern(v[i]->name)) != 0 &&
            nf_res_by_id_grow(t, v[i]->id) == NF_OK)
            t->by_id[v[i]->id] = v[i];
        v[i]->stamp = ++nf_res_clock;
        if (v[i]->first >= t->next_first)
            t->next_first = v[i]->first + 1;
    }
    /* No call holds them: the next lookup starts one. */
    t->call_start = nf_res_clock + 1;
    t->call_thread = NULL;
    nf_res_link(t);
    pthread_mutex_unlock(&nf_res_lock);
}

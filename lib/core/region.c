/* The region registry (nf_region.h): a sorted array of non-overlapping
 * ranges under a read-write lock; calls only read it, and only when
 * something is bound. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_region.h"
#include "nf_util.h"

typedef struct nf_region {
    uintptr_t lo, hi;     /* bytes [lo, hi) */
    char name[NF_REGION_NAME_MAX];
    uint64_t hash;
} nf_region_t;

static pthread_rwlock_t nf_reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static nf_region_t *nf_reg;
static size_t nf_reg_n, nf_reg_cap;
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

/* First region whose end is above lo. */
static size_t nf_region_lower(uintptr_t lo)
{
    size_t a = 0, b = nf_reg_n;
    while (a < b) {
        size_t mid = (a + b) / 2;
        if (nf_reg[mid].hi <= lo)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

static nf_status_t nf_region_insert(uintptr_t lo, uintptr_t hi, const char *name)
{
    size_t i = nf_region_lower(lo);
    if (i < nf_reg_n && nf_reg[i].lo < hi)
        return NF_ERR_INVALID; /* overlaps */
    if (nf_reg_n == nf_reg_cap) {
        size_t cap = nf_reg_cap ? 2 * nf_reg_cap : 64;
        nf_region_t *v = realloc(nf_reg, cap * sizeof(*v));
        if (v == NULL)
            return NF_ERR_NO_MEMORY;
        nf_reg = v, nf_reg_cap = cap;
    }
    memmove(&nf_reg[i + 1], &nf_reg[i], (nf_reg_n - i) * sizeof(*nf_reg));
    nf_region_t *r = &nf_reg[i];
    r->lo = lo, r->hi = hi;
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->hash = nf_hash_str(NF_HASH_INIT, name);
    nf_reg_n++;
    return NF_OK;
}

nf_status_t nf_region_bind(const void *base, size_t count, const char *name)
{
    uintptr_t lo = (uintptr_t)base;
    if (base == NULL || count == 0 || !nf_region_name_ok(name) ||
        count > (UINTPTR_MAX - lo) / sizeof(float))
        return NF_ERR_INVALID;
    pthread_rwlock_wrlock(&nf_reg_lock);
    nf_status_t st = nf_region_insert(lo, lo + count * sizeof(float), name);
    if (st == NF_OK)
        atomic_fetch_add(&nf_reg_gen, 1u);
    pthread_rwlock_unlock(&nf_reg_lock);
    return st;
}

nf_status_t nf_region_unbind(const void *base)
{
    nf_status_t st = NF_ERR_INVALID;
    pthread_rwlock_wrlock(&nf_reg_lock);
    size_t i = nf_region_lower((uintptr_t)base);
    if (i < nf_reg_n && nf_reg[i].lo == (uintptr_t)base) {
        memmove(&nf_reg[i], &nf_reg[i + 1], (nf_reg_n - i - 1) * sizeof(*nf_reg));
        nf_reg_n--;
        atomic_fetch_add(&nf_reg_gen, 1u);
        st = NF_OK;
    }
    pthread_rwlock_unlock(&nf_reg_lock);
    return st;
}

unsigned nf_region_generation(void) { return atomic_load(&nf_reg_gen); }

size_t nf_region_parts(const float *x, size_t m, nf_region_part_t *out, size_t max)
{
    uintptr_t lo = (uintptr_t)x, hi = lo + m * sizeof(float);
    size_t n = 0;
    if (atomic_load(&nf_reg_gen) == 0)
        return 0;
    pthread_rwlock_rdlock(&nf_reg_lock);
    for (size_t i = nf_region_lower(lo); i < nf_reg_n && nf_reg[i].lo < hi; i++, n++) {
        if (n >= max)
            continue;
        const nf_region_t *r = &nf_reg[i];
        uintptr_t a = r->lo > lo ? r->lo : lo, b = r->hi < hi ? r->hi : hi;
        /* A region that does not start on a float of the buffer cannot be
         * a part of it: the caller treats the call as mismatched. */
        out[n].off = (a - lo) / sizeof(float);
        out[n].m = (b - a) / sizeof(float);
        memcpy(out[n].name, r->name, sizeof(out[n].name));
        out[n].hash = r->hash;
    }
    pthread_rwlock_unlock(&nf_reg_lock);
    return n;
}

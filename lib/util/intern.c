/* SPDX-License-Identifier: BSD-3-Clause */
/* Interned names and integer-keyed maps (nf_intern.h). */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "nf_intern.h"
#include "nf_util.h"

/* ids index fixed chunks, so a reader never sees an array move. */
#define NF_IN_CHUNK_BITS 12
#define NF_IN_CHUNK (1u << NF_IN_CHUNK_BITS)
#define NF_IN_CHUNKS (NF_INTERN_MAX / NF_IN_CHUNK)

typedef struct nf_in_name {
    const char *name;
    uint64_t hash;
} nf_in_name_t;

static pthread_mutex_t nf_in_lock = PTHREAD_MUTEX_INITIALIZER;
static nf_in_name_t *_Atomic nf_in_chunk[NF_IN_CHUNKS];
static _Atomic uint32_t nf_in_next = 1;     /* the next id */
static uint32_t *nf_in_slot;                /* hash table of ids, 0: empty */
static size_t nf_in_cap;                    /* a power of two */

static nf_in_name_t *nf_in_entry(uint32_t id)
{
    nf_in_name_t *c = atomic_load_explicit(&nf_in_chunk[id >> NF_IN_CHUNK_BITS],
                                           memory_order_acquire);
    return c != NULL ? &c[id & (NF_IN_CHUNK - 1)] : NULL;
}

const char *nf_intern_name(uint32_t id)
{
    if (id == 0 || id >= atomic_load_explicit(&nf_in_next, memory_order_acquire))
        return NULL;
    return nf_in_entry(id)->name;
}

uint64_t nf_intern_hash(uint32_t id)
{
    if (id == 0 || id >= atomic_load_explicit(&nf_in_next, memory_order_acquire))
        return 0;
    return nf_in_entry(id)->hash;
}

uint32_t nf_intern_bound(void) { return atomic_load(&nf_in_next); }

/* Under the lock: the slot holding name's id, or the empty one for it. */
static uint32_t *nf_in_find(const char *name, uint64_t hash)
{
    for (size_t i = hash & (nf_in_cap - 1);; i = (i + 1) & (nf_in_cap - 1)) {
        uint32_t id = nf_in_slot[i];
        if (id == 0)
            return &nf_in_slot[i];
        const nf_in_name_t *e = nf_in_entry(id);
        if (e->hash == hash && strcmp(e->name, name) == 0)
            return &nf_in_slot[i];
    }
}

/* Under the lock: double the table at half full. */
static nf_status_t nf_in_grow(void)
{
    uint32_t n = atomic_load(&nf_in_next) - 1;
    if (nf_in_cap != 0 && 2 * ((size_t)n + 1) <= nf_in_cap)
        return NF_OK;
    size_t cap = nf_in_cap ? 2 * nf_in_cap : 1024;
    uint32_t *v = calloc(cap, sizeof(*v)), *old = nf_in_slot;
    if (v == NULL)
        return NF_ERR_NO_MEMORY;
    nf_in_slot = v, nf_in_cap = cap;
    for (uint32_t id = 1; id <= n; id++)
        *nf_in_find(nf_in_entry(id)->name, nf_in_entry(id)->hash) = id;
    free(old);
    return NF_OK;
}

static uint32_t nf_in_add(const char *name, uint64_t hash, uint32_t *slot)
{
    uint32_t id = atomic_load(&nf_in_next);
    if (id >= NF_INTERN_MAX)
        return 0;
    unsigned c = id >> NF_IN_CHUNK_BITS;
    if (atomic_load(&nf_in_chunk[c]) == NULL) {
        nf_in_name_t *v = calloc(NF_IN_CHUNK, sizeof(*v));
        if (v == NULL)
            return 0;
        atomic_store_explicit(&nf_in_chunk[c], v, memory_order_release);
    }
    char *copy = strdup(name);
    if (copy == NULL)
        return 0;
    nf_in_entry(id)->name = copy;
    nf_in_entry(id)->hash = hash;
    *slot = id;
    atomic_store_explicit(&nf_in_next, id + 1, memory_order_release);
    return id;
}

uint32_t nf_intern(const char *name)
{
    uint64_t hash = nf_hash_str(NF_HASH_INIT, name);
    uint32_t id = 0;
    pthread_mutex_lock(&nf_in_lock);
    if (nf_in_grow() == NF_OK) {
        uint32_t *slot = nf_in_find(name, hash);
        id = *slot != 0 ? *slot : nf_in_add(name, hash, slot);
    }
    pthread_mutex_unlock(&nf_in_lock);
    return id;
}

nf_status_t nf_id_array_grow(void *arr, uint32_t *cap, uint32_t id, size_t size)
{
    void *old;
    if (id < *cap)
        return NF_OK;
    if (id >= NF_INTERN_MAX)
        return NF_ERR_CAPACITY;
    uint32_t n = *cap ? *cap : 64;
    while (n <= id)
        n *= 2;
    memcpy(&old, arr, sizeof(old)); /* arr is a T **: no aliasing through void ** */
    char *p = realloc(old, (size_t)n * size);
    if (p == NULL)
        return NF_ERR_NO_MEMORY;
    memset(p + (size_t)*cap * size, 0, (size_t)(n - *cap) * size);
    memcpy(arr, &p, sizeof(p));
    *cap = n;
    return NF_OK;
}

/* ---------------------------------------------------------------- keymap */

static size_t nf_km_hash(uint64_t a, uint64_t b)
{
    uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15ull)) * 0xbf58476d1ce4e5b9ull;
    return (size_t)(h ^ (h >> 31));
}

static struct nf_keymap_slot *nf_km_find(const nf_keymap_t *m, uint64_t a, uint64_t b)
{
    for (size_t i = nf_km_hash(a, b) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        struct nf_keymap_slot *s = &m->slot[i];
        if (!s->used || (s->a == a && s->b == b))
            return s;
    }
}

uint32_t nf_keymap_get(const nf_keymap_t *m, uint64_t a, uint64_t b)
{
    if (m->cap == 0)
        return UINT32_MAX;
    const struct nf_keymap_slot *s = nf_km_find(m, a, b);
    return s->used ? s->v : UINT32_MAX;
}

nf_status_t nf_keymap_put(nf_keymap_t *m, uint64_t a, uint64_t b, uint32_t v)
{
    if (2 * (m->n + 1) > m->cap) {
        nf_keymap_t g = {.cap = m->cap ? 2 * m->cap : 64};
        if ((g.slot = calloc(g.cap, sizeof(*g.slot))) == NULL)
            return NF_ERR_NO_MEMORY;
        for (size_t i = 0; i < m->cap; i++)
            if (m->slot[i].used)
                *nf_km_find(&g, m->slot[i].a, m->slot[i].b) = m->slot[i];
        g.n = m->n;
        free(m->slot);
        *m = g;
    }
    struct nf_keymap_slot *s = nf_km_find(m, a, b);
    m->n += !s->used;
    *s = (struct nf_keymap_slot){.a = a, .b = b, .v = v, .used = 1};
    return NF_OK;
}

void nf_keymap_free(nf_keymap_t *m)
{
    free(m->slot);
    memset(m, 0, sizeof(*m));
}

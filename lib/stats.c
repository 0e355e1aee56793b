/* Per-route traffic counters. Relaxed atomics: calls on different
 * communicators may run on different threads. */
#include "config.h"

#include <stdatomic.h>
#include <string.h>

#include "nf_core.h"

typedef struct nf_route_ctr {
    _Atomic uint64_t calls, bytes, upstream, total, ring;
} nf_route_ctr_t;

static nf_route_ctr_t nf_ctr[NF_ROUTE_COUNT];
static _Atomic uint64_t nf_fallbacks[NF_FALLBACK_COUNT];

#define NF_ADD(a, v) atomic_fetch_add_explicit(&(a), (v), memory_order_relaxed)
#define NF_GET(a) atomic_load_explicit(&(a), memory_order_relaxed)

/*
 * Bytes per rank for a call of `bytes` of user data (low-bit routes: floats).
 * Ring FP32: reduce-scatter sends (n-1)/n of the vector
 * (upstream), allgather as much again. libnfcoll's routes write their
 * contribution into the shared buffer (upstream) and read the result lines
 * back (downstream): fp32 full floats; binary one sign line per 512
 * elements up and k count planes down; ternary two planes up, 2k down; one
 * double of scale up and n down.
 */
void nf_traffic_model(nf_route_t route, uint64_t bytes, unsigned n, unsigned k, nf_traffic_t *t)
{
    uint64_t fp32 = bytes;
    uint64_t lines = nf_lines(bytes / sizeof(float)) * NF_LINE_BYTES;
    uint64_t ring_up = n > 1 ? fp32 * (n - 1) / n : 0;
    t->ring = 2 * ring_up;
    switch (route) {
    case NF_ROUTE_FP32:
        t->upstream = n > 1 ? fp32 : 0;
        t->total = 2 * t->upstream;
        break;
    case NF_ROUTE_BINARY:
        t->upstream = lines + sizeof(double);
        t->total = t->upstream + k * lines + n * sizeof(double);
        break;
    case NF_ROUTE_TERNARY:
        t->upstream = 2 * lines + sizeof(double);
        t->total = t->upstream + 2 * k * lines + n * sizeof(double);
        break;
    default:
        t->upstream = ring_up;
        t->total = t->ring;
        break;
    }
}

void nf_stats_count(nf_route_t route, uint64_t bytes, unsigned n, unsigned k)
{
    nf_traffic_t t;
    nf_traffic_model(route, bytes, n, k, &t);
    nf_route_ctr_t *c = &nf_ctr[route];
    NF_ADD(c->calls, 1);
    NF_ADD(c->bytes, bytes);
    NF_ADD(c->upstream, t.upstream);
    NF_ADD(c->total, t.total);
    NF_ADD(c->ring, t.ring);
}

void nf_stats_fallback(nf_fallback_t reason)
{
    NF_ADD(nf_fallbacks[reason], 1);
}

NF_EXPORT nf_status_t nf_stats_get(nf_route_t route, nf_route_stats_t *s)
{
    if ((unsigned)route >= NF_ROUTE_COUNT || s == NULL)
        return NF_ERR_INVALID;
    nf_route_ctr_t *c = &nf_ctr[route];
    s->calls = NF_GET(c->calls);
    s->bytes = NF_GET(c->bytes);
    s->upstream_bytes = NF_GET(c->upstream);
    s->total_bytes = NF_GET(c->total);
    s->fp32_ring_bytes = NF_GET(c->ring);
    return NF_OK;
}

NF_EXPORT uint64_t nf_stats_fallbacks(nf_fallback_t reason)
{
    return (unsigned)reason < NF_FALLBACK_COUNT ? NF_GET(nf_fallbacks[reason]) : 0;
}

NF_EXPORT void nf_stats_reset(void)
{
    for (int r = 0; r < NF_ROUTE_COUNT; r++) {
        nf_route_ctr_t *c = &nf_ctr[r];
        atomic_store(&c->calls, 0);
        atomic_store(&c->bytes, 0);
        atomic_store(&c->upstream, 0);
        atomic_store(&c->total, 0);
        atomic_store(&c->ring, 0);
    }
    for (int f = 0; f < NF_FALLBACK_COUNT; f++)
        atomic_store(&nf_fallbacks[f], 0);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* Per-route traffic counters. Relaxed atomics: calls on different
 * communicators may run on different threads. */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "nf_ctx.h"
#include "nf_file.h"
#include "nf_kernels.h"
#include "nf_log.h"
#include "nf_placement.h"
#include "nf_regstats.h"
#include "nf_stats.h"

typedef struct nf_route_ctr {
    _Atomic uint64_t calls, bytes, upstream, total, ring, internode;
} nf_route_ctr_t;

static nf_route_ctr_t nf_ctr[NF_ROUTE_COUNT];
static _Atomic uint64_t nf_fallbacks[NF_FALLBACK_COUNT];
/* Placed bytes and bytes verified on the node, per kind (mapped, not
 * released: what the run asked of the CXL node over its life). */
static _Atomic uint64_t nf_placed[2][2];
/* Residual bytes held now and at most, and residuals dropped for the bound. */
static _Atomic uint64_t nf_res_now, nf_res_peak, nf_res_drops;
static __thread uint64_t nf_thread_calls;

#define NF_ADD(a, v) atomic_fetch_add_explicit(&(a), (v), memory_order_relaxed)
#define NF_GET(a) atomic_load_explicit(&(a), memory_order_relaxed)

void nf_stats_count(nf_route_t route, uint64_t bytes, unsigned n, unsigned k)
{
    nf_stats_count_scales(route, bytes, n, k, 1);
}

void nf_stats_count_scales(nf_route_t route, uint64_t bytes, unsigned n, unsigned k,
                           uint64_t nsc)
{
    nf_traffic_t t;
    nf_traffic_model_scales(route, bytes, n, k, nsc, &t);
    nf_route_ctr_t *c = &nf_ctr[route];
    NF_ADD(c->calls, 1);
    NF_ADD(c->bytes, bytes);
    NF_ADD(c->upstream, t.upstream);
    NF_ADD(c->total, t.total);
    NF_ADD(c->ring, t.ring);
    nf_thread_calls++;
}

uint64_t nf_stats_thread_calls(const void **thread)
{
    *thread = &nf_thread_calls;
    return nf_thread_calls;
}

void nf_stats_residual_held(size_t bytes)
{
    uint64_t peak = NF_GET(nf_res_peak);
    atomic_store_explicit(&nf_res_now, bytes, memory_order_relaxed);
    while (bytes > peak && !atomic_compare_exchange_weak_explicit(
                               &nf_res_peak, &peak, bytes, memory_order_relaxed,
                               memory_order_relaxed))
        ;
}

void nf_stats_residual_dropped(void) { NF_ADD(nf_res_drops, 1); }

void nf_stats_internode(nf_route_t route, uint64_t bytes)
{
    NF_ADD(nf_ctr[route].internode, bytes);
}

uint64_t nf_stats_read_internode(nf_route_t route)
{
    return NF_GET(nf_ctr[route].internode);
}

void nf_stats_placed(nf_place_kind_t kind, size_t bytes, double resident_frac)
{
    NF_ADD(nf_placed[kind][0], bytes);
    NF_ADD(nf_placed[kind][1], (uint64_t)((double)bytes * resident_frac + 0.5));
}

void nf_stats_fallback(nf_fallback_t reason)
{
    NF_ADD(nf_fallbacks[reason], 1);
}

void nf_stats_read(nf_route_t route, nf_route_stats_t *s)
{
    nf_route_ctr_t *c = &nf_ctr[route];
    s->calls = NF_GET(c->calls);
    s->bytes = NF_GET(c->bytes);
    s->upstream_bytes = NF_GET(c->upstream);
    s->total_bytes = NF_GET(c->total);
    s->fp32_ring_bytes = NF_GET(c->ring);
}

uint64_t nf_stats_read_fallbacks(nf_fallback_t reason)
{
    return NF_GET(nf_fallbacks[reason]);
}

void nf_stats_zero(void)
{
    nf_regstats_reset();
    for (int r = 0; r < NF_ROUTE_COUNT; r++) {
        nf_route_ctr_t *c = &nf_ctr[r];
        atomic_store(&c->calls, 0);
        atomic_store(&c->bytes, 0);
        atomic_store(&c->upstream, 0);
        atomic_store(&c->total, 0);
        atomic_store(&c->ring, 0);
        atomic_store(&c->internode, 0);
    }
    for (int f = 0; f < NF_FALLBACK_COUNT; f++)
        atomic_store(&nf_fallbacks[f], 0);
    for (int k = 0; k < 2; k++)
        atomic_store(&nf_placed[k][0], 0), atomic_store(&nf_placed[k][1], 0);
    atomic_store(&nf_res_peak, NF_GET(nf_res_now));
    atomic_store(&nf_res_drops, 0);
}

/* ---- report at MPI_Finalize ---- */

enum { NF_F_CALLS, NF_F_BYTES, NF_F_UP, NF_F_TOTAL, NF_F_RING, NF_F_INTERNODE, NF_F_N };

#define NF_V_PLACED (NF_ROUTE_COUNT * NF_F_N + NF_FALLBACK_COUNT)
#define NF_V_DROPS (NF_V_PLACED + 4)
#define NF_V_PEAK (NF_V_DROPS + 1) /* the largest of the ranks', not their sum */
#define NF_V_N (NF_V_PEAK + 1)

static void nf_stats_snapshot(uint64_t v[NF_V_N])
{
    for (int r = 0; r < NF_ROUTE_COUNT; r++) {
        nf_route_stats_t s;
        nf_stats_read((nf_route_t)r, &s);
        uint64_t *o = v + r * NF_F_N;
        o[NF_F_CALLS] = s.calls;
        o[NF_F_BYTES] = s.bytes;
        o[NF_F_UP] = s.upstream_bytes;
        o[NF_F_TOTAL] = s.total_bytes;
        o[NF_F_RING] = s.fp32_ring_bytes;
        o[NF_F_INTERNODE] = nf_stats_read_internode((nf_route_t)r);
    }
    for (int f = 0; f < NF_FALLBACK_COUNT; f++)
        v[NF_ROUTE_COUNT * NF_F_N + f] = nf_stats_read_fallbacks((nf_fallback_t)f);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 2; i++)
            v[NF_V_PLACED + 2 * k + i] = NF_GET(nf_placed[k][i]);
    v[NF_V_DROPS] = NF_GET(nf_res_drops);
    v[NF_V_PEAK] = NF_GET(nf_res_peak);
}

static double nf_pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* The routes' counters of a snapshot, and their inter-node bytes. */
static void nf_stats_routes(const uint64_t *v, nf_route_stats_t s[NF_ROUTE_COUNT],
                            uint64_t internode[NF_ROUTE_COUNT])
{
    for (int r = 0; r < NF_ROUTE_COUNT; r++) {
        const uint64_t *o = v + r * NF_F_N;
        s[r] = (nf_route_stats_t){.calls = o[NF_F_CALLS], .bytes = o[NF_F_BYTES],
                                  .upstream_bytes = o[NF_F_UP], .total_bytes = o[NF_F_TOTAL],
                                  .fp32_ring_bytes = o[NF_F_RING]};
        internode[r] = o[NF_F_INTERNODE];
    }
}

static void nf_stats_table(FILE *fp, const uint64_t *v, int nranks)
{
    nf_route_stats_t s[NF_ROUTE_COUNT];
    uint64_t internode[NF_ROUTE_COUNT];
    nf_stats_routes(v, s, internode);
    fprintf(fp, "libnfcoll stats: %d rank%s, summed over ranks; %% of what an FP32 ring "
            "allreduce would move\n", nranks, nranks == 1 ? "" : "s");
    nf_traffic_table(fp, s, internode, 0);
    fprintf(fp, "fallbacks:");
    for (int f = 0; f < NF_FALLBACK_COUNT; f++)
        fprintf(fp, " %s=%llu", nf_fallback_name((nf_fallback_t)f),
                (unsigned long long)v[NF_ROUTE_COUNT * NF_F_N + f]);
    fprintf(fp, "\n");
    const uint64_t *p = v + NF_V_PLACED;
    if (nf_place_node() >= 0)
        fprintf(fp, "placement: NUMA node %d (%s): ", nf_place_node(), nf_place_reason());
    else
        fprintf(fp, "placement: local DRAM (%s): ",
                nf_place_detail()[0] ? nf_place_detail() : "nothing placed");
    fprintf(fp, "aggregation buffers %llu B, %.1f%% verified there; residuals %llu B, "
            "%.1f%% verified there\n", (unsigned long long)p[0], p[0] ? nf_pct(p[1], p[0]) : 100.0,
            (unsigned long long)p[2], p[2] ? nf_pct(p[3], p[2]) : 100.0);
    if (nf_place_node() >= 0)
        fprintf(fp, "placement evidence: %s; reducer: %s\n", nf_cxl_evidence_name(nf_place_evidence()),
                nf_place_reducer()[0] ? nf_place_reducer() : "on the calling CPUs");
    fprintf(fp, "residuals: at most %llu B held by a rank, %llu dropped (NFCOLL_RESIDUAL_MAX)\n",
            (unsigned long long)v[NF_V_PEAK], (unsigned long long)v[NF_V_DROPS]);
    nf_regstats_table(fp);
    nf_regstats_health_table(fp);
    nf_regstats_why_table(fp);
}

static void nf_stats_json(FILE *fp, const uint64_t *v, int nranks)
{
    /* "routes" holds what the traffic model and a replay of the trace can
     * tell; the bytes handed to inter-node PMPI calls depend on the nodes
     * and are a sibling object, by route. */
    nf_route_stats_t s[NF_ROUTE_COUNT];
    uint64_t internode[NF_ROUTE_COUNT];
    nf_stats_routes(v, s, internode);
    fprintf(fp, "{\n  \"ranks\": %d,\n  \"routes\": {", nranks);
    nf_traffic_json(fp, s, "    ");
    fprintf(fp, "\n  },\n  \"internode_bytes\": {");
    for (int r = 0; r < NF_ROUTE_COUNT; r++)
        fprintf(fp, "%s\"%s\": %llu", r ? ", " : "", nf_route_name((nf_route_t)r),
                (unsigned long long)v[r * NF_F_N + NF_F_INTERNODE]);
    fprintf(fp, "},\n  \"fallbacks\": {");
    for (int f = 0; f < NF_FALLBACK_COUNT; f++)
        fprintf(fp, "%s\"%s\": %llu", f ? ", " : "", nf_fallback_name((nf_fallback_t)f),
                (unsigned long long)v[NF_ROUTE_COUNT * NF_F_N + f]);
    const uint64_t *p = v + NF_V_PLACED;
    fprintf(fp, "},\n  \"placement\": {\"node\": ");
    if (nf_place_node() >= 0)
        fprintf(fp, "%d", nf_place_node());
    else
        fprintf(fp, "null");
    fprintf(fp, ", \"reason\": \"%s\", \"buffer_bytes\": %llu, \"buffer_resident_bytes\": %llu, "
            "\"residual_bytes\": %llu, \"residual_resident_bytes\": %llu, \"residual_peak_bytes\": %llu, "
            "\"residuals_dropped\": %llu, \"evidence\": \"%s\", \"reducer\": \"%s\"},\n  \"regions\": ",
            nf_place_node() >= 0 ? nf_place_reason()
                                 : nf_place_detail()[0] ? nf_place_detail() : "nothing placed",
            (unsigned long long)p[0], (unsigned long long)p[1], (unsigned long long)p[2],
            (unsigned long long)p[3], (unsigned long long)v[NF_V_PEAK],
            (unsigned long long)v[NF_V_DROPS], nf_cxl_evidence_name(nf_place_evidence()),
            nf_place_reducer());
    nf_regstats_json(fp);
    fprintf(fp, ",\n  \"health\": ");
    nf_regstats_health_json(fp);
    fprintf(fp, ",\n  \"admission\": ");
    nf_regstats_why_json(fp);
    fprintf(fp, "\n}\n");
}

nf_status_t nf_stats_report(MPI_Comm comm, const char *dest)
{
    enum { N = NF_V_N };
    uint64_t mine[N], sum[N];
    int rank = 0, size = 1, rc;
    if ((rc = PMPI_Comm_rank(comm, &rank)) != MPI_SUCCESS ||
        (rc = PMPI_Comm_size(comm, &size)) != MPI_SUCCESS)
        return nf_mpi_status(rc);
    nf_stats_snapshot(mine);
    if ((rc = PMPI_Reduce(mine, sum, N, MPI_UINT64_T, MPI_SUM, 0, comm)) != MPI_SUCCESS ||
        (rc = PMPI_Reduce(&mine[NF_V_PEAK], &sum[NF_V_PEAK], 1, MPI_UINT64_T, MPI_MAX, 0,
                          comm)) != MPI_SUCCESS)
        return nf_mpi_status(rc);
    nf_status_t rs = nf_regstats_gather(comm); /* collective: before rank 0 returns */
    if (rs != NF_OK && rank == 0)
        nf_log_warn("per-region stats could not be gathered (%s)", nf_strerror(rs));
    if (rank != 0)
        return NF_OK;
    if (dest == NULL || strcmp(dest, "1") == 0) { /* rank 0 asked nothing: print */
        nf_stats_table(stderr, sum, size);
        return NF_OK;
    }
    nf_wfile_t f;
    nf_status_t st = nf_wfile_open(&f, dest);
    if (st != NF_OK) {
        nf_log_warn("cannot write NFCOLL_STATS file %s; printing instead", dest);
        nf_stats_table(stderr, sum, size);
        return st;
    }
    nf_stats_json(f.fp, sum, size);
    return nf_wfile_commit(&f);
}

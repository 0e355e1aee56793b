/* SPDX-License-Identifier: BSD-3-Clause */
/* The traffic model (nf_traffic.h). No MPI: nfcoll_replay uses it too. */
#include "config.h"

#include <stdio.h>

#include "nf_kernels.h"
#include "nf_route.h"
#include "nf_traffic.h"

/*
 * Bytes per rank for a call of `bytes` of user data (low-bit routes: floats).
 * Ring FP32: reduce-scatter sends (n-1)/n of the vector
 * (upstream), allgather as much again. libnfcoll's routes write their
 * contribution into the shared buffer (upstream) and read the result lines
 * back (downstream): fp32 full floats; binary one sign line per 512
 * elements up and k count planes down; ternary two planes up, 2k down; one
 * double of scale up and n down (binary with scale_block: one per block).
 * An integer route of kb bits: kb planes up and kb k down, each block's max
 * (4 bytes) up and the agreed one down, and one double each way (the
 * finite flag in the scale exchange); nsc is then its blocks.
 */
void nf_traffic_model(nf_route_t route, uint64_t bytes, unsigned n, unsigned k, nf_traffic_t *t)
{
    nf_traffic_model_scales(route, bytes, n, k, 1, t);
}

uint64_t nf_traffic_scales(nf_route_t route, uint64_t bytes, uint64_t block)
{
    uint64_t m = bytes / sizeof(float);
    if (nf_route_intk(route) > 0) {
        block = block > 0 ? block : NF_INT_BLOCK_DEFAULT;
        return (m + block - 1) / block;
    }
    return route == NF_ROUTE_BINARY && block > 0 && block < m ? (m + block - 1) / block : 1;
}

void nf_traffic_model_scales(nf_route_t route, uint64_t bytes, unsigned n, unsigned k,
                             uint64_t nsc, nf_traffic_t *t)
{
    uint64_t sc = nsc * sizeof(double);
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
        t->upstream = lines + sc;
        t->total = t->upstream + k * lines + n * sc;
        break;
    case NF_ROUTE_TERNARY:
        t->upstream = 2 * lines + sc;
        t->total = t->upstream + 2 * k * lines + n * sc;
        break;
    case NF_ROUTE_INT4:
    case NF_ROUTE_INT3:
    case NF_ROUTE_INT2: {
        uint64_t kb = nf_route_intk(route), bm = nsc * sizeof(uint32_t);
        t->upstream = kb * lines + bm + sizeof(double);
        t->total = t->upstream + kb * k * lines + bm + n * sizeof(double);
        break;
    }
    case NF_ROUTE_BF16: /* half of fp32's up, float results back */
        t->upstream = n > 1 ? fp32 / 2 : 0;
        t->total = t->upstream + (n > 1 ? fp32 : 0);
        break;
    default:
        t->upstream = ring_up;
        t->total = t->ring;
        break;
    }
}

/* Leaders' exchange of n units of `unit` bytes (xnode.c): whole, each
 * sends its n to the p - 1 others (an allgather, one step); split, its
 * block of the reduce-scatter goes out at `in` bytes a unit, the reduced
 * block at `out` bytes a unit (alltoallv then allgatherv, two steps). */
static void nf_wire_exchange(uint64_t n, uint64_t in, uint64_t out, unsigned p, int whole,
                             nf_wire_t *w)
{
    uint64_t mine = n / p;
    w->bytes += whole ? (p - 1) * n * in : (n - mine) * in + (p - 1) * mine * out;
    w->steps += whole ? 1 : 2;
}

/* The area for a need: whole lines, at least NF_INLINE_WORDS; needs past
 * NF_INLINE_MAX_WORDS ask for none. */
static unsigned nf_inline_area(uint64_t need)
{
    if (need > NF_INLINE_MAX_WORDS * 8u)
        return NF_INLINE_WORDS;
    uint64_t w = (need + NF_LINE_BYTES - 1) / NF_LINE_BYTES * NF_LINE_WORDS;
    return w > NF_INLINE_WORDS ? (unsigned)w : NF_INLINE_WORDS;
}

unsigned nf_inline_steady(uint64_t need) { return nf_inline_area(need); }

unsigned nf_inline_words(const nf_inline_hist_t *h)
{
    unsigned w = NF_INLINE_WORDS;
    for (unsigned i = 0; i < NF_INLINE_HIST; i++) {
        unsigned a = nf_inline_area(h->need[i]);
        w = a > w ? a : w;
    }
    return w;
}

void nf_inline_note(nf_inline_hist_t *h, uint64_t need)
{
    h->need[h->at] = need <= NF_INLINE_MAX_WORDS * 8u ? need : 0;
    h->at = (h->at + 1) % NF_INLINE_HIST;
}

static int nf_wire_lowbit(nf_route_t r) { return nf_route_lowbit(r); }
static int nf_wire_fp(nf_route_t r) { return r == NF_ROUTE_FP32 || r == NF_ROUTE_BF16; }

/* A call's parts summed as coll.c lays them out. */
typedef struct nf_wire_sum {
    uint64_t bytes, fl[2], lines, nsc; /* fl: fp32's floats, bf16's */
    uint64_t bmax;                     /* integer routes' block maxes */
    int pmpi;
} nf_wire_sum_t;

static void nf_wire_sum(const nf_wire_part_t *part, size_t n, nf_wire_sum_t *u)
{
    *u = (nf_wire_sum_t){.pmpi = n == 0};
    for (size_t i = 0; i < n; i++) {
        const nf_wire_part_t *g = &part[i];
        uint64_t m = g->bytes / sizeof(float);
        u->bytes += g->bytes;
        if (nf_wire_fp(g->route))
            u->fl[g->route == NF_ROUTE_BF16] += m;
        else if (nf_wire_lowbit(g->route) && nf_route_intk(g->route) > 0)
            u->lines += nf_routes[g->route].bits * nf_lines(m), u->nsc++, u->bmax += g->nsc;
        else if (nf_wire_lowbit(g->route))
            u->lines += nf_routes[g->route].bits * nf_lines(m), u->nsc += g->nsc;
        else
            u->pmpi = 1;
    }
}

uint64_t nf_traffic_inline_need_call(const nf_wire_part_t *part, size_t n)
{
    nf_wire_sum_t u;
    nf_wire_sum(part, n, &u);
    return u.pmpi || u.bmax > 0 ? NF_INLINE_NONE
                  : nf_traffic_inline_need(u.lines, nf_scale_lines(u.nsc), u.fl[0], u.fl[1]);
}

unsigned nf_traffic_area(const nf_wire_part_t *part, size_t n, unsigned p, unsigned r,
                         unsigned area)
{
    nf_wire_sum_t u;
    if (p != 2 || r != 1) /* the history's, on every node alike */
        return area;
    nf_wire_sum(part, n, &u); /* point-to-point: the call's own (pmpi: none) */
    return (unsigned)nf_pair_area_words(u.lines, nf_traffic_inline_need_call(part, n));
}

void nf_traffic_internode_call(const nf_wire_part_t *part, size_t n, unsigned p, unsigned r,
                               unsigned area, nf_wire_t *w)
{
    uint64_t size = (uint64_t)p * r;
    nf_wire_sum_t u;
    w->bytes = 0, w->steps = 0, w->stream = 0;
    if (p < 2 || r == 0)
        return;
    nf_wire_sum(part, n, &u);
    uint64_t *fl = u.fl, lines = u.lines, nsc = u.nsc;
    if (u.pmpi) { /* a ring over every rank: one ring edge per node */
        w->bytes = 2 * u.bytes * (size - 1) / size;
        w->steps = 2 * (unsigned)(size - 1);
        return;
    }
    uint64_t need = nf_traffic_inline_need(lines, nf_scale_lines(nsc), fl[0], fl[1]);
    area = nf_traffic_area(part, n, p, r, area);
    nf_wire_exchange(nf_verdict_words(r == 1, area), 8, 8, p, 1, w); /* the verdict */
    if (r == 1 && need <= area * 8u)
        return; /* the whole call rode with it */
    if (u.bmax > 0) { /* the integer routes' maxes: an allreduce over every rank */
        w->bytes += 2 * u.bmax * sizeof(uint32_t) * (size - 1) / size;
        w->steps += 2;
    }
    if (lines > 0) {
        unsigned k = nf_count_planes((unsigned)size), kn = nf_count_planes(r);
        uint64_t lb = NF_LINE_BYTES;
        uint64_t sl = nf_scale_lines(nsc);
        if (r == 1 && nf_traffic_counts_whole(lines, sl, kn, k, p)) {
            nf_wire_exchange(lines, kn * lb, k * lb, p, 1, w); /* the scales ride along */
            w->bytes += (p - 1) * sl * lb;
            w->stream = p == 2 && lines > NF_CPAIR_LINES ? lines : 0;
        } else {
            w->bytes += r * (size - r) * nsc * sizeof(double); /* every rank's scales */
            w->steps += 1;
            nf_wire_exchange(lines, kn * lb, k * lb, p,
                             nf_traffic_counts_whole(lines, 0, kn, k, p), w);
        }
    }
    /* fp32's pass, then bf16's (coll.c), each in chunks that grow to its
     * floats, up to the most (lib/core/comm.c). */
    for (int b = 0; b < 2; b++) {
        uint64_t chunk = fl[b] < NF_FP32_CHUNK_XNODE ? fl[b] : NF_FP32_CHUNK_XNODE;
        for (uint64_t done = 0; done < fl[b]; done += chunk) {
            uint64_t len = fl[b] - done < chunk ? fl[b] - done : chunk;
            nf_wire_exchange(len, 4, 4, p, len * sizeof(float) <= NF_XNODE_WHOLE_MAX || p == 2,
                             w);
        }
    }
}

void nf_traffic_internode(nf_route_t route, uint64_t bytes, unsigned p, unsigned r, uint64_t nsc,
                          nf_wire_t *w)
{
    nf_wire_part_t part = {route, bytes, nsc};
    nf_traffic_internode_call(&part, 1, p, r, nf_inline_steady(nf_traffic_inline_need_call(&part, 1)),
                              w);
}

void nf_traffic_count(nf_route_stats_t s[NF_ROUTE_COUNT], nf_route_t route, uint64_t bytes,
                      unsigned n, unsigned k)
{
    nf_traffic_count_scales(s, route, bytes, n, k, 1);
}

void nf_traffic_count_scales(nf_route_stats_t s[NF_ROUTE_COUNT], nf_route_t route,
                             uint64_t bytes, unsigned n, unsigned k, uint64_t nsc)
{
    nf_traffic_t t;
    nf_traffic_model_scales(route, bytes, n, k, nsc, &t);
    nf_route_stats_t *c = &s[route];
    c->calls++, c->bytes += bytes, c->upstream_bytes += t.upstream;
    c->total_bytes += t.total, c->fp32_ring_bytes += t.ring;
}

static double nf_traffic_pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void nf_traffic_line(FILE *fp, const char *name, const nf_route_stats_t *o,
                            const uint64_t *internode)
{
    fprintf(fp, "%-8s %10llu %14llu %14llu %7.2f%% %14llu %7.2f%%", name,
            (unsigned long long)o->calls, (unsigned long long)o->bytes,
            (unsigned long long)o->upstream_bytes,
            nf_traffic_pct(2 * o->upstream_bytes, o->fp32_ring_bytes),
            (unsigned long long)o->total_bytes,
            nf_traffic_pct(o->total_bytes, o->fp32_ring_bytes));
    if (internode != NULL)
        fprintf(fp, " %14llu", (unsigned long long)*internode);
    fputc('\n', fp);
}

void nf_traffic_table(FILE *fp, const nf_route_stats_t s[NF_ROUTE_COUNT],
                      const uint64_t *internode, int all)
{
    nf_route_stats_t sum = {0, 0, 0, 0, 0};
    fprintf(fp, "%-8s %10s %14s %14s %8s %14s %8s%s\n", "route", "calls", "bytes", "upstream",
            "%ring", "total", "%ring", internode != NULL ? "      internode" : "");
    for (int r = 0; r < NF_ROUTE_COUNT; r++) {
        const nf_route_stats_t *t = &s[r];
        nf_traffic_line(fp, nf_route_name((nf_route_t)r), t, internode ? &internode[r] : NULL);
        sum.calls += t->calls, sum.bytes += t->bytes, sum.upstream_bytes += t->upstream_bytes;
        sum.total_bytes += t->total_bytes, sum.fp32_ring_bytes += t->fp32_ring_bytes;
    }
    if (all)
        nf_traffic_line(fp, "all", &sum, NULL);
}

void nf_traffic_json(FILE *fp, const nf_route_stats_t s[NF_ROUTE_COUNT], const char *indent)
{
    for (int r = 0; r < NF_ROUTE_COUNT; r++) {
        const nf_route_stats_t *t = &s[r];
        fprintf(fp, "%s\n%s\"%s\": {\"calls\": %llu, \"bytes\": %llu, \"upstream_bytes\": %llu, "
                "\"total_bytes\": %llu, \"fp32_ring_bytes\": %llu}", r ? "," : "", indent,
                nf_route_name((nf_route_t)r), (unsigned long long)t->calls,
                (unsigned long long)t->bytes, (unsigned long long)t->upstream_bytes,
                (unsigned long long)t->total_bytes, (unsigned long long)t->fp32_ring_bytes);
    }
}

void nf_json_str(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(fp, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(fp, "\\u%04x", ch);
        else
            fputc(ch, fp);
    }
    fputc('"', fp);
}

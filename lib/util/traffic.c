/* The traffic model (nf_traffic.h). No MPI: nfcoll_replay uses it too. */
#include "config.h"

#include <stdio.h>

#include "nf_kernels.h"
#include "nf_traffic.h"

/*
 * Bytes per rank for a call of `bytes` of user data (low-bit routes: floats).
 * Ring FP32: reduce-scatter sends (n-1)/n of the vector
 * (upstream), allgather as much again. libnfcoll's routes write their
 * contribution into the shared buffer (upstream) and read the result lines
 * back (downstream): fp32 full floats; binary one sign line per 512
 * elements up and k count planes down; ternary two planes up, 2k down; one
 * double of scale up and n down (binary with scale_block: one per block).
 */
void nf_traffic_model(nf_route_t route, uint64_t bytes, unsigned n, unsigned k, nf_traffic_t *t)
{
    nf_traffic_model_scales(route, bytes, n, k, 1, t);
}

uint64_t nf_traffic_scales(nf_route_t route, uint64_t bytes, uint64_t block)
{
    uint64_t m = bytes / sizeof(float);
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

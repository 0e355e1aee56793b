/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nf_allreduce: osu_allreduce-style latency of NF_Allreduce_route per route.
 *
 *   mpirun -np 2 nf_allreduce [-r ROUTES] [-m [MIN:]MAX | -s SIZE,...] [-i ITERS]
 *                             [-x WARMUP] [-R REPEATS] [-c] [-F] [-h]
 *
 * Sizes are bytes of float data, powers of two from MIN to MAX, or those
 * -s lists (a protocol's bounds fall between powers of two). Each row is
 * OSU's: the per-rank average latency over the iterations, then the average,
 * minimum and maximum of that over the ranks; with -R the row is the repeat
 * whose average latency is the median. With -F, each size first times its
 * first call (new residuals, perhaps a larger segment) and its second (a
 * residual's other buffer is first written then) and prints them next to
 * the steady row, with the largest peak RSS over the ranks.
 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <nfcoll.h>

#include "bench_args.h"

#define LARGE_MESSAGE (64 * 1024)
#define MAX_SIZES 64

typedef struct opts {
    int routes[NF_ROUTE_COUNT];
    size_t min, max;
    size_t sizes[MAX_SIZES]; /* -s: these instead of MIN..MAX */
    int nsizes;
    int iters, iters_large, warmup, repeats, validate, first;
} opts_t;

static int rank, nranks;

static void usage(FILE *fp)
{
    fprintf(fp,
            "Usage: mpirun -np N nf_allreduce [options]\n"
            "  -r ROUTES    pmpi,fp32,binary,ternary,bf16 or all (default all)\n"
            "  -m [MIN:]MAX message sizes in bytes, powers of two; K/M/G suffixes\n"
            "               (default 4:4M)\n"
            "  -s SIZE,...  these message sizes in bytes instead (multiples of 4, up to 64\n"
            "               of them; K/M/G suffixes)\n"
            "  -i ITERS     iterations per size (default 1000; sizes > 64K: ITERS/10, at least 10)\n"
            "  -x WARMUP    warm-up iterations per size (default 10)\n"
            "  -R REPEATS   repeat each size, report the median repeat (default 1)\n"
            "  -c           validate results before timing (identical on all ranks,\n"
            "               exact sums for pmpi/fp32, sums of bf16-rounded inputs for bf16,\n"
            "               signs for binary/ternary)\n"
            "  -F           time each size's first and second calls (new residuals; one route\n"
            "               per run), print them and the peak RSS (largest over ranks)\n"
            "               after its row\n"
            "  -h           this help\n"
            "Environment: NFCOLL_EF, NFCOLL_SIMD, NFCOLL_CXL... (see libnfcoll(7)).\n");
}

static int parse_routes(char *s, opts_t *o)
{
    memset(o->routes, 0, sizeof(o->routes));
    for (char *tok = strtok(s, ","); tok != NULL; tok = strtok(NULL, ",")) {
        nf_route_t r;
        if (strcmp(tok, "all") == 0) {
            for (int i = 0; i < NF_ROUTE_COUNT; i++)
                o->routes[i] = 1;
        } else if (nf_route_parse(tok, &r) == NF_OK) {
            o->routes[r] = 1;
        } else {
            return -1;
        }
    }
    return 0;
}

/* -s's list into o->sizes, o->max its largest. */
static int parse_sizes(char *s, opts_t *o)
{
    o->nsizes = 0, o->max = 0;
    for (char *tok = strtok(s, ","); tok != NULL; tok = strtok(NULL, ",")) {
        size_t b;
        if (o->nsizes == MAX_SIZES || bench_size(tok, &b) != 0 || b == 0 || b % sizeof(float) ||
            b / sizeof(float) > INT32_MAX)
            return -1;
        o->sizes[o->nsizes++] = b;
        o->max = b > o->max ? b : o->max;
    }
    return o->nsizes > 0 ? 0 : -1;
}

static int parse_args(int argc, char **argv, opts_t *o)
{
    int c;
    *o = (opts_t){.min = 4, .max = 4 << 20, .iters = 1000, .warmup = 10, .repeats = 1};
    for (int i = 0; i < NF_ROUTE_COUNT; i++)
        o->routes[i] = 1;
    while ((c = getopt(argc, argv, "r:m:s:i:x:R:cFh")) != -1) {
        switch (c) {
        case 'r':
            if (parse_routes(optarg, o) != 0)
                return rank == 0 ? fprintf(stderr, "nf_allreduce: bad route list '%s'\n", optarg), -1 : -1;
            break;
        case 'm':
            o->nsizes = 0;
            if (bench_range(optarg, &o->min, &o->max) != 0) {
                if (rank == 0)
                    fprintf(stderr, "nf_allreduce: bad size range for -m\n");
                return -1;
            }
            break;
        case 's':
            if (parse_sizes(optarg, o) != 0) {
                if (rank == 0)
                    fprintf(stderr, "nf_allreduce: bad size list for -s (want up to %d byte "
                                    "counts, multiples of 4)\n", MAX_SIZES);
                return -1;
            }
            break;
        case 'i': o->iters = atoi(optarg); break;
        case 'x': o->warmup = atoi(optarg); break;
        case 'R': o->repeats = atoi(optarg); break;
        case 'c': o->validate = 1; break;
        case 'F': o->first = 1; break;
        case 'h': if (rank == 0) usage(stdout); return 1;
        default: if (rank == 0) usage(stderr); return -1;
        }
    }
    if (o->iters < 1 || o->warmup < 0 || o->repeats < 1) {
        if (rank == 0)
            fprintf(stderr, "nf_allreduce: -i and -R must be >= 1, -x >= 0\n");
        return -1;
    }
    if (o->min < sizeof(float))
        o->min = sizeof(float);
    o->iters_large = o->iters / 10 > 10 ? o->iters / 10 : 10;
    return 0;
}

/* Per-rank average over iters, then avg/min/max over ranks. */
static void time_size(nf_route_t route, const float *s, float *r, int count, int iters,
                      int warmup, double out[3])
{
    for (int i = 0; i < warmup; i++)
        NF_Allreduce_route(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, route);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++)
        NF_Allreduce_route(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, route);
    double lat = (MPI_Wtime() - t0) * 1e6 / iters, sum;
    MPI_Reduce(&lat, &out[1], 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&lat, &out[2], 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&lat, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    out[0] = sum / nranks;
}

/* The first call of this size on the timing buffers (new residuals: a
 * residual is kept per address and count, and routes share it, so run one
 * route per process for a clean figure; perhaps a larger segment): the
 * slowest rank's time in us. */
static double time_first(nf_route_t route, const float *s, float *r, int count)
{
    double lat, worst = 0.0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    NF_Allreduce_route(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, route);
    lat = (MPI_Wtime() - t0) * 1e6;
    MPI_Reduce(&lat, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return worst;
}

static double peak_rss_mib(void)
{
    struct rusage ru;
    double mine = 0.0, most = 0.0;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        mine = (double)ru.ru_maxrss / 1024.0;
    MPI_Reduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return most;
}

static int cmp_avg(const void *a, const void *b)
{
    double x = ((const double *)a)[0], y = ((const double *)b)[0];
    return (x > y) - (x < y);
}

/* Integer-valued inputs make every summation order exact; all ranks send
 * the same signs, so low-bit results must carry those signs. */
/* x rounded to bfloat16, nearest with ties to even (the inputs here are
 * finite). */
static float bf16_of(float x)
{
    uint32_t u, lo;
    memcpy(&u, &x, sizeof(u));
    lo = u & 0xffff0000u;
    u = (u & 0xffffu) > 0x8000u || ((u & 0xffffu) == 0x8000u && (lo & 0x10000u)) ? lo + 0x10000u
                                                                                  : lo;
    memcpy(&x, &u, sizeof(x));
    return x;
}

static int validate(nf_route_t route, int count)
{
    float *s = malloc((size_t)count * sizeof(float)), *r = malloc((size_t)count * sizeof(float));
    int bad = 0, anybad = 0;
    for (int j = 0; j < count; j++)
        s[j] = (float)(j % 7 - 3) * (float)(rank + 1) + (j % 7 == 3 ? 0.5f : 0.0f);
    NF_Allreduce_route(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, route);
    for (int j = 0; j < count && !bad; j++) {
        float sum = 0.0f;
        for (int i = 0; i < nranks; i++) {
            float v = (float)(j % 7 - 3) * (float)(i + 1) + (j % 7 == 3 ? 0.5f : 0.0f);
            sum += route == NF_ROUTE_BF16 ? bf16_of(v) : v;
        }
        if (route == NF_ROUTE_PMPI || route == NF_ROUTE_FP32 || route == NF_ROUTE_BF16)
            bad = r[j] != sum;
        else
            bad = !isfinite(r[j]) || (s[j] > 0 && r[j] < 0) || (s[j] < 0 && r[j] > 0);
    }
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    free(s);
    free(r);
    return anybad;
}

static void header(nf_route_t route)
{
    const char *ef = getenv("NFCOLL_EF");
    if (rank != 0)
        return;
    printf("# Route: %s\n", nf_route_name(route));
    if (route == NF_ROUTE_BINARY || route == NF_ROUTE_TERNARY)
        printf("# Error feedback: %s\n", ef != NULL ? ef : "on");
    printf("%-10s %18s %18s %18s %12s\n", "# Size", "Avg Latency(us)", "Min Latency(us)",
           "Max Latency(us)", "Iterations");
}

/* After the sweep, so the buffer has grown to the largest size. */
static void placement(nf_route_t route)
{
    nf_placement_info_t pi = {.node = -1, .reason = "n/a"};
    if (route == NF_ROUTE_PMPI)
        return;
    nf_status_t st = nf_placement_query(MPI_COMM_WORLD, &pi);
    if (rank != 0)
        return;
    if (st != NF_OK)
        printf("# Placement: unavailable (%s)\n", nf_strerror(st));
    else if (pi.node < 0)
        printf("# Placement: aggregation buffer %zu B in local DRAM (no CXL node: %s)\n",
               pi.bytes, pi.reason);
    else
        printf("# Placement: aggregation buffer %zu B on NUMA node %d (%s), %.0f%% of pages "
               "verified there\n", pi.bytes, pi.node, pi.reason, 100.0 * pi.resident_frac);
}

static void traffic(nf_route_t route, const nf_route_stats_t *before)
{
    nf_route_stats_t now, d;
    nf_stats_get(route, &now);
    d.calls = now.calls - before->calls;
    d.upstream_bytes = now.upstream_bytes - before->upstream_bytes;
    d.total_bytes = now.total_bytes - before->total_bytes;
    d.fp32_ring_bytes = now.fp32_ring_bytes - before->fp32_ring_bytes;
    if (rank != 0 || d.calls == 0)
        return;
    double ring = (double)d.fp32_ring_bytes;
    printf("# Traffic per rank over %llu calls: upstream %.3g B (%.2f%% of FP32 ring), "
           "total %.3g B (%.2f%% of FP32 ring)\n\n", (unsigned long long)d.calls,
           (double)d.upstream_bytes, ring > 0 ? 100.0 * 2 * d.upstream_bytes / ring : 0.0,
           (double)d.total_bytes, ring > 0 ? 100.0 * d.total_bytes / ring : 0.0);
}

static int run_route(nf_route_t route, const opts_t *o, float *s, float *r)
{
    nf_route_stats_t before;
    double (*rows)[3] = malloc((size_t)o->repeats * sizeof(*rows));
    header(route);
    nf_stats_get(route, &before);
    for (int si = 0;; si++) {
        size_t bytes = o->nsizes ? o->sizes[si] : o->min << si;
        if (o->nsizes ? si == o->nsizes : bytes > o->max)
            break;
        int count = (int)(bytes / sizeof(float));
        int iters = bytes > LARGE_MESSAGE ? o->iters_large : o->iters;
        if (o->validate && validate(route, count)) {
            if (rank == 0)
                printf("# VALIDATION FAILED: route %s size %zu\n", nf_route_name(route), bytes);
            free(rows);
            return 1;
        }
        double first = o->first ? time_first(route, s, r, count) : 0.0;
        double second = o->first ? time_first(route, s, r, count) : 0.0;
        for (int k = 0; k < o->repeats; k++)
            time_size(route, s, r, count, iters, o->warmup, rows[k]);
        qsort(rows, (size_t)o->repeats, sizeof(*rows), cmp_avg);
        double *med = rows[o->repeats / 2];
        double rss = o->first ? peak_rss_mib() : 0.0;
        if (rank == 0)
            printf("%-10zu %18.2f %18.2f %18.2f %12d\n", bytes, med[0], med[1], med[2], iters);
        if (rank == 0 && o->first)
            printf("# First call: %.2f us (%.2fx the steady average), second call: %.2f us "
                   "(%.2fx); peak RSS %.0f MiB\n", first, first / med[0], second,
                   second / med[0], rss);
        fflush(stdout);
    }
    placement(route);
    traffic(route, &before);
    free(rows);
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    int rc = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int pr = parse_args(argc, argv, &o);
    if (pr != 0) {
        MPI_Finalize();
        return pr > 0 ? 0 : 2;
    }
    size_t maxc = o.max / sizeof(float);
    float *s = malloc(maxc * sizeof(float)), *r = malloc(maxc * sizeof(float));
    for (size_t j = 0; j < maxc; j++)
        s[j] = sinf((float)j * 0.001f + (float)rank) * 0.01f;
    memset(r, 0, maxc * sizeof(float)); /* the user's page faults are not ours to time */
    if (rank == 0)
        printf("# libnfcoll %s NF_Allreduce latency, %d ranks, MPI_FLOAT MPI_SUM\n\n",
               nf_version(NULL, NULL, NULL), nranks);
    for (int route = 0; route < NF_ROUTE_COUNT && rc == 0; route++)
        if (o.routes[route])
            rc = run_route((nf_route_t)route, &o, s, r);
    free(s);
    free(r);
    MPI_Finalize();
    return rc;
}

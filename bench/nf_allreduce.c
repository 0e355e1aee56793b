/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nfcoll_allreduce: osu_allreduce-style latency of NF_Allreduce_route per route.
 *
 *   mpirun -np 2 nfcoll_allreduce [-r ROUTES] [-m [MIN:]MAX | -m SIZE,...] [-i ITERS]
 *                                 [-x WARMUP] [-R REPEATS] [-c] [-F] [-h] [-V]
 *
 * OSU's options keep OSU's letters and long names (--message-size,
 * --iterations, --warmup, --validation, --help, --version); the letters
 * mean the same in nfcoll_overlap (bench_args.h). Sizes are bytes of float
 * data, powers of two from MIN to MAX, or the list -m gives (a protocol's
 * bounds fall between powers of two). Each row is OSU's: the per-rank
 * average latency over the iterations, then the average, minimum and
 * maximum of that over the ranks; with -R the row is the repeat whose
 * average latency is the median. With -F, each size first times its first
 * call (new residuals, perhaps a larger segment) and its second (a
 * residual's other buffer is first written then) and prints them next to
 * the steady row, with the largest peak RSS over the ranks. The command
 * line is read before MPI_Init: --help, --version and a usage error need
 * no launcher (under one, rank 0 prints them).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <nfcoll.h>

#include "bench_args.h"

#define PROG "nfcoll_allreduce"
#define LARGE_MESSAGE (64 * 1024)

typedef struct opts {
    int routes[NF_ROUTE_COUNT];
    bench_sizes_t sizes;
    int iters, iters_large, warmup, repeats, validate, first;
} opts_t;

static int rank, nranks;

static void usage(FILE *fp)
{
    fprintf(fp,
            "Usage: mpirun -np N " PROG " [OPTION]...\n"
            "NF_Allreduce latency per libnfcoll route, as osu_allreduce measures it\n"
            "(MPI_FLOAT, MPI_SUM; OSU's options keep OSU's letters and long names).\n"
            "\n"
            "  -r, --routes ROUTES        pmpi,fp32,binary,ternary,bf16,int4,int3,int2 or all\n"
            "                             (default all)\n"
            "  -m, --message-size [MIN:]MAX\n"
            "                             message sizes in bytes, powers of two from MIN to\n"
            "                             MAX (default 4:4M); K/M/G suffixes\n"
            "  -m, --message-size SIZE,...\n"
            "                             these sizes instead (a comma makes a list: SIZE,\n"
            "                             for one; multiples of 4, up to %d of them)\n"
            "  -i, --iterations ITERS     iterations per size (default 1000; sizes > 64K:\n"
            "                             ITERS/10, at least 10)\n"
            "  -x, --warmup WARMUP        warm-up iterations per size (default 10)\n"
            "  -R, --repeats REPEATS      repeat each size, report the median repeat\n"
            "                             (default 1)\n"
            "  -c, --validation           validate results before timing (identical on all\n"
            "                             ranks, exact sums for pmpi/fp32, sums of\n"
            "                             bf16-rounded inputs for bf16, signs for\n"
            "                             binary/ternary/int4/int3/int2)\n"
            "  -F, --first-calls          time each size's first and second calls (new\n"
            "                             residuals; one route per run), print them and the\n"
            "                             peak RSS (largest over ranks) after its row\n"
            "  -h, --help                 this text\n"
            "  -V, -v, --version          the libnfcoll version and the MPI it was built with\n"
            "\n"
            "Exit status: 0 done, 1 a validation failed, 2 usage error.\n"
            "Environment: NFCOLL_EF, NFCOLL_SIMD, NFCOLL_CXL... (see libnfcoll(7)).\n",
            BENCH_MAX_SIZES);
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

/* Before MPI_Init (rank: the launcher's). 0: run; 1: done (help,
 * version); -1: usage error, said on rank 0. */
static int parse_args(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"routes", required_argument, NULL, 'r'},     {"message-size", required_argument, NULL, 'm'},
        {"iterations", required_argument, NULL, 'i'}, {"warmup", required_argument, NULL, 'x'},
        {"repeats", required_argument, NULL, 'R'},    {"validation", no_argument, NULL, 'c'},
        {"first-calls", no_argument, NULL, 'F'},      {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},          {NULL, 0, NULL, 0}};
    const char *bad = NULL;
    int c;
    *o = (opts_t){.sizes = {.min = 4, .max = 4 << 20}, .iters = 1000, .warmup = 10, .repeats = 1};
    for (int i = 0; i < NF_ROUTE_COUNT; i++)
        o->routes[i] = 1;
    opterr = rank == 0;
    while (bad == NULL && (c = getopt_long(argc, argv, "r:m:i:x:R:cFhVv", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (parse_routes(optarg, o) != 0)
                bad = "bad route list for -r (want pmpi,fp32,binary,ternary,bf16,int4,int3,int2 or all)";
            break;
        case 'm':
            if (bench_sizes_parse(optarg, &o->sizes) != 0)
                bad = "bad sizes for -m (want [MIN:]MAX, or up to 64 byte counts, multiples "
                      "of 4, with a comma)";
            break;
        case 'i':
            if (bench_count(optarg, 1, &o->iters) != 0)
                bad = "-i wants a whole number >= 1";
            break;
        case 'x':
            if (bench_count(optarg, 0, &o->warmup) != 0)
                bad = "-x wants a whole number >= 0";
            break;
        case 'R':
            if (bench_count(optarg, 1, &o->repeats) != 0)
                bad = "-R wants a whole number >= 1";
            break;
        case 'c': o->validate = 1; break;
        case 'F': o->first = 1; break;
        case 'h': if (rank == 0) usage(stdout); return 1;
        case 'V': case 'v': if (rank == 0) bench_version(stdout, PROG); return 1;
        default:
            if (rank == 0 && optopt == 's')
                fprintf(stderr, PROG ": the size list nf_allreduce took with -s is -m's now "
                                "(-m 4K,8K)\n");
            bad = "";
            break;
        }
    }
    if (bad == NULL && optind < argc) {
        if (rank == 0)
            fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        bad = "";
    }
    if (bad != NULL) {
        if (rank == 0 && *bad != '\0')
            fprintf(stderr, PROG ": %s\n", bad);
        if (rank == 0)
            usage(stderr);
        return -1;
    }
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

/* One call on bench_input's data, checked on every rank (bench_args.h):
 * 1 if any rank's result is wrong. The input is bound as a region named
 * after the route, so the call starts from a zero residual of its own (a
 * region's residual restarts when its count changes): keyed by address and
 * count, a residual that another route's validation left at the same
 * address would be added to the input, whose signs the check expects. */
static int validate(nf_route_t route, int count)
{
    float *s = malloc((size_t)count * sizeof(float)), *r = malloc((size_t)count * sizeof(float));
    int bad = s == NULL || r == NULL, anybad = 0;
    char name[64];
    snprintf(name, sizeof(name), "validate.%s", nf_route_name(route));
    for (int j = 0; j < count && !bad; j++)
        s[j] = bench_input((size_t)j, rank);
    if (!bad && count > 0)
        bad = NF_Region_bind(s, count, MPI_FLOAT, name) != MPI_SUCCESS;
    if (!bad) {
        NF_Allreduce_route(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, route);
        bad = bench_check(r, (size_t)count, rank, nranks, bench_check_of(route));
    }
    if (s != NULL && count > 0)
        NF_Region_unbind(s);
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
    if (route == NF_ROUTE_BINARY || route == NF_ROUTE_TERNARY || route >= NF_ROUTE_INT4)
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
        size_t bytes = bench_sizes_at(&o->sizes, si);
        if (bytes == 0)
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
    rank = bench_launch_rank();
    int pr = parse_args(argc, argv, &o);
    if (pr != 0)
        return pr > 0 ? BENCH_OK : BENCH_USAGE;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t maxc = o.sizes.max / sizeof(float);
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

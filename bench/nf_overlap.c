/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nfcoll_overlap: how much of a nonblocking allreduce hides behind
 * computation, in osu_iallreduce's convention (OSU Micro-Benchmarks 7.x).
 *
 *   mpirun -np 2 nfcoll_overlap [-r ROUTES] [-m [MIN:]MAX | -m SIZE,...] [-i ITERS]
 *                               [-x WARMUP] [-R REPEATS] [-c] [-s] [-h] [-V]
 *
 * OSU's options keep OSU's letters and long names (--message-size,
 * --iterations, --warmup, --validation, --help, --version); the letters
 * mean the same in nfcoll_allreduce (bench_args.h). Per size and route,
 * each rank times, averaged over the iterations:
 *   pure     start + wait with nothing between (pure communication);
 *   overall  start, compute for `pure` microseconds, wait;
 *   compute  the compute phase alone, inside `overall`;
 * and overlap % = max(0, 100 - 100 * (overall - compute) / pure): 100 when
 * the wait costs nothing after the computation, 0 when the communication
 * starts only at the wait. The row is the average over the ranks (OSU's
 * avg column); with -R, the repeat whose overall time is the median.
 *
 * The computation is a time-based busy loop on the calling thread, as in
 * OSU's dummy_compute, so overlap is wall-clock overlap even when cores are
 * shared: on a machine with as many cores as ranks, the library's progress
 * thread competes with it for a core (docs/benchmarks.md). With -s it
 * sleeps instead (a computation that leaves the core free: a GPU's, or
 * another core's): what the library overlaps when it has the CPU.
 *
 * Routes: mpi (PMPI_Iallreduce: MPI's own, which Open MPI 4.1 advances
 * only inside MPI calls), auto (NF_Iallreduce: the policy's admission), or
 * a libnfcoll route (NF_Iallreduce_route). The command line is read before
 * MPI_Init: --help, --version and a usage error need no launcher (under
 * one, rank 0 prints them).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nfcoll.h>

#include "bench_args.h"

#define PROG "nfcoll_overlap"

enum { ROUTE_MPI = -2, ROUTE_AUTO = -1, MAX_ROUTES = NF_ROUTE_COUNT + 2 };

typedef struct opts {
    int routes[MAX_ROUTES], nroutes;
    bench_sizes_t sizes;
    int iters, warmup, repeats;
    int validate; /* -c: check one call per route and size first */
    int sleep;    /* -s: the compute phase sleeps */
} opts_t;

static int rank, nranks;

static void usage(FILE *fp)
{
    fprintf(fp,
            "Usage: mpirun -np N " PROG " [OPTION]...\n"
            "How much of a nonblocking allreduce hides behind computation, as\n"
            "osu_iallreduce measures it (OSU's options keep OSU's letters and long names).\n"
            "\n"
            "  -r, --routes ROUTES        comma list of mpi (PMPI_Iallreduce), auto\n"
            "                             (NF_Iallreduce, the policy decides) and libnfcoll\n"
            "                             routes (pmpi,fp32,binary,...); default\n"
            "                             mpi,fp32,binary\n"
            "  -m, --message-size [MIN:]MAX\n"
            "                             message sizes in bytes, powers of two from MIN to\n"
            "                             MAX (default 1M:16M); K/M/G suffixes\n"
            "  -m, --message-size SIZE,...\n"
            "                             these sizes instead (a comma makes a list: SIZE,\n"
            "                             for one; multiples of 4, up to %d of them)\n"
            "  -i, --iterations ITERS     iterations per size (default 20)\n"
            "  -x, --warmup WARMUP        warm-up iterations per size (default 3)\n"
            "  -R, --repeats REPEATS      repeat each size, report the median repeat\n"
            "                             (default 1)\n"
            "  -c, --validation           check one call per route and size before timing\n"
            "                             (exact sums for mpi/pmpi/fp32, sums of bf16-rounded\n"
            "                             inputs for bf16, signs for binary/ternary/auto)\n"
            "  -s, --sleep                the compute phase sleeps instead of busy-looping\n"
            "                             (the core free)\n"
            "  -h, --help                 this text\n"
            "  -V, -v, --version          the libnfcoll version and the MPI it was built with\n"
            "\n"
            "Columns as osu_iallreduce's: Overall, Compute, Pure Comm. (us), Overlap (%%).\n"
            "Exit status: 0 done, 1 a call or a validation failed, 2 usage error.\n",
            BENCH_MAX_SIZES);
}

static int parse_routes(char *s, opts_t *o)
{
    o->nroutes = 0;
    for (char *tok = strtok(s, ","); tok != NULL; tok = strtok(NULL, ",")) {
        nf_route_t r;
        if (o->nroutes == MAX_ROUTES)
            return -1;
        if (strcmp(tok, "mpi") == 0)
            o->routes[o->nroutes++] = ROUTE_MPI;
        else if (strcmp(tok, "auto") == 0)
            o->routes[o->nroutes++] = ROUTE_AUTO;
        else if (nf_route_parse(tok, &r) == NF_OK)
            o->routes[o->nroutes++] = (int)r;
        else
            return -1;
    }
    return o->nroutes > 0 ? 0 : -1;
}

/* Before MPI_Init (rank: the launcher's). 0: run; 1: done (help,
 * version); -1: usage error, said on rank 0. */
static int parse_args(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"routes", required_argument, NULL, 'r'},     {"message-size", required_argument, NULL, 'm'},
        {"iterations", required_argument, NULL, 'i'}, {"warmup", required_argument, NULL, 'x'},
        {"repeats", required_argument, NULL, 'R'},    {"validation", no_argument, NULL, 'c'},
        {"sleep", no_argument, NULL, 's'},            {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},          {NULL, 0, NULL, 0}};
    const char *bad = NULL;
    char def[] = "mpi,fp32,binary";
    int c;
    *o = (opts_t){.sizes = {.min = 1 << 20, .max = 16 << 20}, .iters = 20, .warmup = 3,
                  .repeats = 1};
    parse_routes(def, o);
    opterr = rank == 0;
    while (bad == NULL && (c = getopt_long(argc, argv, "r:m:i:x:R:cshVv", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (parse_routes(optarg, o) != 0)
                bad = "bad route list for -r (want mpi, auto or libnfcoll routes, comma "
                      "separated)";
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
        case 's': o->sleep = 1; break;
        case 'h': if (rank == 0) usage(stdout); return 1;
        case 'V': case 'v': if (rank == 0) bench_version(stdout, PROG); return 1;
        default: bad = ""; break;
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
    return 0;
}

static const char *route_name(int route)
{
    return route == ROUTE_MPI ? "mpi" : route == ROUTE_AUTO ? "auto" : nf_route_name(route);
}

static int start(int route, float *x, int count, MPI_Request *req)
{
    if (route == ROUTE_MPI)
        return PMPI_Iallreduce(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, req);
    if (route == ROUTE_AUTO)
        return NF_Iallreduce(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, req);
    return NF_Iallreduce_route(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, route,
                               req);
}

/* OSU's dummy compute: busy for `us` microseconds of wall time; or, with
 * -s, asleep for as long. */
static void compute(double us, int sleep)
{
    volatile double acc = 0.0;
    double t0 = MPI_Wtime();
    if (sleep) {
        struct timespec ts = {(time_t)(us / 1e6), (long)(us - (long)(us / 1e6) * 1e6) * 1000L};
        while (nanosleep(&ts, &ts) != 0)
            ;
        return;
    }
    while ((MPI_Wtime() - t0) * 1e6 < us)
        for (int i = 0; i < 100; i++)
            acc += i * 0.5;
}

/* Gradient-like data, refreshed before every call: the sums never grow. */
static void fill(float *x, int count, int it)
{
    for (int i = 0; i < count; i++)
        x[i] = (float)(((i * 7 + it + rank) % 13) - 6) * 0.25f;
}

/* One repeat of a size: out[0..3] overall, compute, pure, overlap %,
 * averaged over the ranks (valid on rank 0). */
static int time_size(int route, float *x, int count, const opts_t *o, double out[4])
{
    MPI_Request req;
    double pure = 0.0, overall = 0.0, comp = 0.0, mine[4];
    for (int i = 0; i < o->warmup; i++) {
        fill(x, count, i);
        if (start(route, x, count, &req) != MPI_SUCCESS || MPI_Wait(&req, MPI_STATUS_IGNORE))
            return -1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < o->iters; i++) {
        fill(x, count, i);
        double t0 = MPI_Wtime();
        if (start(route, x, count, &req) != MPI_SUCCESS || MPI_Wait(&req, MPI_STATUS_IGNORE))
            return -1;
        pure += MPI_Wtime() - t0;
    }
    pure = pure * 1e6 / o->iters;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < o->iters; i++) {
        fill(x, count, i);
        double t0 = MPI_Wtime();
        if (start(route, x, count, &req) != MPI_SUCCESS)
            return -1;
        double c0 = MPI_Wtime();
        compute(pure, o->sleep);
        comp += MPI_Wtime() - c0;
        if (MPI_Wait(&req, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return -1;
        overall += MPI_Wtime() - t0;
    }
    mine[0] = overall * 1e6 / o->iters;
    mine[1] = comp * 1e6 / o->iters;
    mine[2] = pure;
    mine[3] = 100.0 - 100.0 * (mine[0] - mine[1]) / mine[2];
    if (mine[3] < 0.0)
        mine[3] = 0.0;
    MPI_Reduce(mine, out, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    for (int k = 0; k < 4; k++)
        out[k] /= nranks;
    return 0;
}

/* --validation: one call of route on bench_input's data (a buffer of its
 * own, as nfcoll_allreduce's), checked on every rank: 1 if any rank's
 * result is wrong, -1 if a call failed. */
static int validate(int route, int count)
{
    MPI_Request req;
    float *x = malloc((size_t)count * sizeof(float));
    int bad = x == NULL, anybad = 0;
    bench_check_t how = route == ROUTE_MPI ? BENCH_EXACT : route == ROUTE_AUTO
                                                            ? BENCH_SIGNS
                                                            : bench_check_of((nf_route_t)route);
    for (int j = 0; j < count && !bad; j++)
        x[j] = bench_input((size_t)j, rank);
    if (!bad) {
        if (start(route, x, count, &req) != MPI_SUCCESS ||
            MPI_Wait(&req, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            free(x);
            return -1;
        }
        bad = bench_check(x, (size_t)count, rank, nranks, how);
    }
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    free(x);
    return anybad;
}

static int cmp_overall(const void *a, const void *b)
{
    double x = ((const double *)a)[0], y = ((const double *)b)[0];
    return (x > y) - (x < y);
}

static int run(const opts_t *o)
{
    float *x = malloc(o->sizes.max);
    double(*rep)[4] = calloc((size_t)o->repeats, sizeof(*rep));
    if (x == NULL || rep == NULL) {
        fprintf(stderr, PROG ": rank %d: cannot allocate %zu bytes\n", rank, o->sizes.max);
        free(x), free(rep);
        return BENCH_FAILED;
    }
    if (rank == 0)
        printf("# " PROG ": %d ranks, %d iterations (+%d warm-up), median of %d repeats\n"
               "# %-8s %12s %12s %12s %15s %11s\n",
               nranks, o->iters, o->warmup, o->repeats, "route", "Size", "Overall(us)",
               "Compute(us)", "Pure Comm.(us)", "Overlap(%)");
    for (int k = 0; k < o->nroutes; k++) {
        size_t size;
        for (int si = 0; (size = bench_sizes_at(&o->sizes, si)) != 0; si++) {
            int count = (int)(size / sizeof(float)), v;
            if (o->validate && (v = validate(o->routes[k], count)) != 0) {
                if (v < 0)
                    fprintf(stderr, PROG ": rank %d: %s, %zu bytes: a call failed\n", rank,
                            route_name(o->routes[k]), size);
                else if (rank == 0)
                    printf("# VALIDATION FAILED: route %s size %zu\n", route_name(o->routes[k]),
                           size);
                free(x), free(rep);
                return BENCH_FAILED;
            }
            for (int r = 0; r < o->repeats; r++) {
                if (time_size(o->routes[k], x, count, o, rep[r]) != 0) {
                    fprintf(stderr, PROG ": rank %d: %s, %zu bytes: a call failed\n", rank,
                            route_name(o->routes[k]), size);
                    free(x), free(rep);
                    return BENCH_FAILED;
                }
            }
            qsort(rep, (size_t)o->repeats, sizeof(*rep), cmp_overall);
            const double *m = rep[o->repeats / 2];
            if (rank == 0)
                printf("  %-8s %12zu %12.2f %12.2f %15.2f %11.2f\n", route_name(o->routes[k]),
                       size, m[0], m[1], m[2], m[3]);
            fflush(stdout);
        }
    }
    free(x), free(rep);
    return BENCH_OK;
}

int main(int argc, char **argv)
{
    int provided, rc;
    opts_t o;
    rank = bench_launch_rank();
    rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? BENCH_OK : BENCH_USAGE;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (rank == 0 && provided != MPI_THREAD_MULTIPLE)
        printf("# MPI provided thread level %d, not MPI_THREAD_MULTIPLE: libnfcoll's calls "
               "run at their issue (no progress thread)\n", provided);
    rc = run(&o);
    MPI_Finalize();
    return rc;
}

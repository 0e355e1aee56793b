/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nf_overlap: how much of a nonblocking allreduce hides behind computation,
 * in osu_iallreduce's convention (OSU Micro-Benchmarks 7.x).
 *
 *   mpirun -np 2 nf_overlap [-r ROUTES] [-m [MIN:]MAX] [-i ITERS] [-x WARMUP]
 *                           [-R REPEATS] [-s] [-h]
 *
 * Per size and route, each rank times, averaged over the iterations:
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
 * a libnfcoll route (NF_Iallreduce_route).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nfcoll.h>

#include "bench_args.h"

enum { ROUTE_MPI = -2, ROUTE_AUTO = -1, MAX_ROUTES = NF_ROUTE_COUNT + 2 };

typedef struct opts {
    int routes[MAX_ROUTES], nroutes;
    size_t min, max;
    int iters, warmup, repeats;
    int sleep;  /* -s: the compute phase sleeps */
} opts_t;

static int rank, nranks;

static void usage(FILE *fp)
{
    fprintf(fp,
            "Usage: mpirun -np N nf_overlap [options]\n"
            "  -r ROUTES    comma list of mpi (PMPI_Iallreduce), auto (NF_Iallreduce, the\n"
            "               policy decides) and libnfcoll routes (pmpi,fp32,binary,...);\n"
            "               default mpi,fp32,binary\n"
            "  -m [MIN:]MAX message sizes in bytes, powers of two; K/M/G suffixes (default 1M:16M)\n"
            "  -i ITERS     iterations per size (default 20)\n"
            "  -x WARMUP    warm-up iterations per size (default 3)\n"
            "  -R REPEATS   repeat each size, report the median repeat (default 1)\n"
            "  -s           the compute phase sleeps instead of busy-looping (the core free)\n"
            "  -h           this help\n"
            "Columns as osu_iallreduce's: Overall, Compute, Pure Comm. (us), Overlap (%%).\n");
}

static int parse_routes(char *s, opts_t *o)
{
    o->nroutes = 0;
    for (char *tok = strtok(s, ","); tok != NULL && o->nroutes < MAX_ROUTES;
         tok = strtok(NULL, ",")) {
        nf_route_t r;
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

static int parse_args(int argc, char **argv, opts_t *o)
{
    int c;
    char def[] = "mpi,fp32,binary";
    *o = (opts_t){.min = 1 << 20, .max = 16 << 20, .iters = 20, .warmup = 3, .repeats = 1};
    parse_routes(def, o);
    while ((c = getopt(argc, argv, "r:m:i:x:R:sh")) != -1) {
        switch (c) {
        case 'r':
            if (parse_routes(optarg, o) != 0) {
                if (rank == 0)
                    fprintf(stderr, "nf_overlap: bad route list '%s'\n", optarg);
                return -1;
            }
            break;
        case 'm':
            if (bench_range(optarg, &o->min, &o->max) != 0) {
                if (rank == 0)
                    fprintf(stderr, "nf_overlap: bad size range for -m\n");
                return -1;
            }
            break;
        case 'i': o->iters = atoi(optarg); break;
        case 'x': o->warmup = atoi(optarg); break;
        case 'R': o->repeats = atoi(optarg); break;
        case 's': o->sleep = 1; break;
        case 'h': if (rank == 0) usage(stdout); return 1;
        default: if (rank == 0) usage(stderr); return -1;
        }
    }
    if (o->iters < 1 || o->warmup < 0 || o->repeats < 1) {
        if (rank == 0)
            fprintf(stderr, "nf_overlap: -i and -R must be >= 1, -x >= 0\n");
        return -1;
    }
    if (o->min < sizeof(float))
        o->min = sizeof(float);
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

static int cmp_overall(const void *a, const void *b)
{
    double x = ((const double *)a)[0], y = ((const double *)b)[0];
    return (x > y) - (x < y);
}

static int run(const opts_t *o)
{
    float *x = malloc(o->max);
    double(*rep)[4] = calloc((size_t)o->repeats, sizeof(*rep));
    if (x == NULL || rep == NULL) {
        fprintf(stderr, "nf_overlap: rank %d: cannot allocate %zu bytes\n", rank, o->max);
        return 1;
    }
    if (rank == 0)
        printf("# nf_overlap: %d ranks, %d iterations (+%d warm-up), median of %d repeats\n"
               "# %-8s %12s %12s %12s %15s %11s\n",
               nranks, o->iters, o->warmup, o->repeats, "route", "Size", "Overall(us)",
               "Compute(us)", "Pure Comm.(us)", "Overlap(%)");
    for (int k = 0; k < o->nroutes; k++) {
        for (size_t size = o->min; size <= o->max; size *= 2) {
            int count = (int)(size / sizeof(float));
            for (int r = 0; r < o->repeats; r++) {
                if (time_size(o->routes[k], x, count, o, rep[r]) != 0) {
                    fprintf(stderr, "nf_overlap: rank %d: %s, %zu bytes: a call failed\n", rank,
                            route_name(o->routes[k]), size);
                    free(x), free(rep);
                    return 1;
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
    return 0;
}

int main(int argc, char **argv)
{
    int provided, rc;
    opts_t o;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    rc = parse_args(argc, argv, &o);
    if (rc == 0) {
        if (rank == 0 && provided != MPI_THREAD_MULTIPLE)
            printf("# MPI provided thread level %d, not MPI_THREAD_MULTIPLE: libnfcoll's calls "
                   "run at their issue (no progress thread)\n", provided);
        rc = run(&o);
    }
    MPI_Finalize();
    return rc < 0 ? 1 : rc;
}

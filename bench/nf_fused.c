/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What cutting a call into regions costs. Run it with a policy that sends
 * float sums to one route, e.g. bench/fused_binary.policy:
 *   mpirun -np 2 -x NFCOLL_POLICY=bench/fused_binary.policy nf_fused [mode] [options]
 * Three modes (medians of R repeats, the slowest rank's time):
 *   (default)  the same buffer of -m BYTES, alternately whole and cut into
 *              -S regions of equal size: both times and their ratio.
 *   -T LIST    per-call time of a buffer cut into N regions of -e floats
 *              each, for each N of the comma-separated LIST (e.g.
 *              1,100,1000,10000,20000): flat when a call's cost does not
 *              grow with the number of bound regions.
 *   -B N       time to bind and to unbind N regions of -e floats, in
 *              ascending, descending and shuffled address order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nfcoll.h>

static const char usage[] =
    "usage: nf_fused [-m BYTES] [-S REGIONS] [-i ITERS] [-R REPEATS]\n"
    "       nf_fused -T N1,N2,... [-e FLOATS] [-i ITERS] [-R REPEATS]\n"
    "       nf_fused -B N [-e FLOATS] [-R REPEATS]\n"
    "  default  a -m BYTES buffer (64 MiB) whole and cut into -S equal regions (16):\n"
    "           median per-call time of each and their ratio\n"
    "  -T LIST  median per-call time with N regions of -e floats (4) for each N\n"
    "  -B N     seconds to bind and unbind N regions of -e floats, in ascending,\n"
    "           descending and shuffled order\n"
    "  -i ITERS calls per timing (10), -R REPEATS timings (7; the median is printed)\n"
    "Run on 2 ranks with NFCOLL_POLICY=bench/fused_binary.policy (every float sum binary).\n";

static double time_calls(float *buf, int m, int iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++)
        NF_Allreduce(MPI_IN_PLACE, buf, m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / iters, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

/* Region s of nseg over m floats; order[] permutes the binding order. */
static int bind(float *buf, long m, int nseg, int on, const int *order)
{
    char name[32];
    int bad = 0;
    for (int k = 0; k < nseg; k++) {
        int s = order != NULL ? order[k] : k;
        long lo = m * s / nseg, hi = m * (s + 1) / nseg;
        snprintf(name, sizeof(name), "layer%d.weight", s);
        bad |= on ? NF_Region_bind(buf + lo, (int)(hi - lo), MPI_FLOAT, name)
                  : NF_Region_unbind(buf + lo);
    }
    return bad;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp);
    return v[n / 2];
}

static float *filled(long m)
{
    float *buf = malloc((size_t)m * sizeof(float));
    for (long j = 0; buf != NULL && j < m; j++)
        buf[j] = (float)((j * 2654435761u >> 7) % 2001) - 1000.0f;
    return buf;
}

static void run_ratio(long bytes, int nseg, int iters, int reps, int rank)
{
    int m = (int)(bytes / (long)sizeof(float));
    float *buf = filled(m);
    double *whole = calloc((size_t)reps, sizeof(double)), *cut = calloc((size_t)reps, sizeof(double));
    time_calls(buf, m, 2); /* warm up both: residuals, segment */
    bind(buf, m, nseg, 1, NULL);
    time_calls(buf, m, 2);
    for (int r = 0; r < reps; r++) { /* alternate, so load hits both alike */
        cut[r] = time_calls(buf, m, iters);
        bind(buf, m, nseg, 0, NULL);
        whole[r] = time_calls(buf, m, iters);
        bind(buf, m, nseg, 1, NULL);
    }
    double w = median(whole, reps), c = median(cut, reps);
    if (rank == 0)
        printf("# %ld B, %d iterations x %d repeats, median\n"
               "whole      %10.3f ms\n%2d regions %10.3f ms\nratio      %10.3f\n",
               bytes, iters, reps, w * 1e3, nseg, c * 1e3, c / w);
    bind(buf, m, nseg, 0, NULL);
    free(buf);
    free(whole);
    free(cut);
}

static void run_sweep(const char *list, int elems, int iters, int reps, int rank)
{
    double *t = calloc((size_t)reps, sizeof(double));
    if (rank == 0)
        printf("# per-call time, %d floats per region, %d iterations x %d repeats, median\n"
               "# regions      ms/call\n", elems, iters, reps);
    for (const char *p = list; *p != '\0';) {
        char *end;
        long n = strtol(p, &end, 10);
        p = *end == ',' ? end + 1 : end + strlen(end);
        if (n <= 0)
            continue;
        long m = n * elems;
        float *buf = filled(m);
        if (bind(buf, m, (int)n, 1, NULL) != MPI_SUCCESS && rank == 0)
            printf("# binding %ld regions failed\n", n);
        time_calls(buf, (int)m, 1); /* first call: residuals, plan */
        for (int r = 0; r < reps; r++)
            t[r] = time_calls(buf, (int)m, iters);
        if (rank == 0)
            printf("%9ld %12.4f\n", n, median(t, reps) * 1e3);
        bind(buf, m, (int)n, 0, NULL);
        free(buf);
    }
    free(t);
}

static void run_bind(int n, int elems, int reps, int rank)
{
    static const char *const names[] = {"ascending", "descending", "shuffled"};
    long m = (long)n * elems;
    float *buf = filled(m);
    int *order = malloc((size_t)n * sizeof(int));
    double *tb = calloc((size_t)reps, sizeof(double)), *tu = calloc((size_t)reps, sizeof(double));
    if (rank == 0)
        printf("# %d regions of %d floats, %d repeats, median seconds\n"
               "# order          bind     unbind\n", n, elems, reps);
    for (int o = 0; o < 3; o++) {
        srand(12345);
        for (int r = 0; r < reps; r++) {
            for (int k = 0; k < n; k++)
                order[k] = o == 1 ? n - 1 - k : k;
            for (int k = n - 1; o == 2 && k > 0; k--) { /* Fisher-Yates */
                int j = rand() % (k + 1), v = order[k];
                order[k] = order[j], order[j] = v;
            }
            double t0 = MPI_Wtime();
            int bad = bind(buf, m, n, 1, order);
            tb[r] = MPI_Wtime() - t0;
            t0 = MPI_Wtime();
            bad |= bind(buf, m, n, 0, order);
            tu[r] = MPI_Wtime() - t0;
            if (bad && rank == 0)
                printf("# a bind or unbind failed\n");
        }
        if (rank == 0)
            printf("%-12s %9.4f %10.4f\n", names[o], median(tb, reps), median(tu, reps));
    }
    free(buf);
    free(order);
    free(tb);
    free(tu);
}

int main(int argc, char **argv)
{
    long bytes = 64L << 20;
    int nseg = 16, iters = 10, reps = 7, elems = 4, nbind = 0, c, rank;
    const char *sweep = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    while ((c = getopt(argc, argv, "m:S:i:R:T:B:e:h")) != -1) {
        switch (c) {
        case 'm': bytes = atol(optarg); break;
        case 'S': nseg = atoi(optarg); break;
        case 'i': iters = atoi(optarg); break;
        case 'R': reps = atoi(optarg); break;
        case 'T': sweep = optarg; break;
        case 'B': nbind = atoi(optarg); break;
        case 'e': elems = atoi(optarg); break;
        default:
            if (rank == 0)
                fputs(usage, c == 'h' ? stdout : stderr);
            MPI_Finalize();
            return c == 'h' ? 0 : 2;
        }
    }
    if (iters < 1 || reps < 1 || elems < 1 || nseg < 1 || nbind < 0) {
        if (rank == 0)
            fputs(usage, stderr);
        MPI_Finalize();
        return 2;
    }
    if (sweep != NULL)
        run_sweep(sweep, elems, iters, reps, rank);
    else if (nbind > 0)
        run_bind(nbind, elems, reps, rank);
    else
        run_ratio(bytes, nseg, iters, reps, rank);
    MPI_Finalize();
    return 0;
}

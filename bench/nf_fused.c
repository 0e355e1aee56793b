/*
 * What cutting a call into regions costs: the same buffer reduced by
 * NF_Allreduce (admission: run it with a policy that sends float sums to
 * one route, e.g. bench/fused_binary.policy), alternately whole and cut
 * into S bound regions of equal size, in the same run; prints the median
 * of each and their ratio.
 *   mpirun -np 2 -x NFCOLL_POLICY=bench/fused_binary.policy nf_fused [-m BYTES] [-S N] [-i ITERS] [-R REPEATS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nfcoll.h>

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

static void bind(float *buf, int m, int nseg, int on)
{
    char name[32];
    for (int s = 0; s < nseg; s++) {
        int lo = (int)((long)m * s / nseg), hi = (int)((long)m * (s + 1) / nseg);
        snprintf(name, sizeof(name), "layer%d.weight", s);
        if (on)
            NF_Region_bind(buf + lo, hi - lo, MPI_FLOAT, name);
        else
            NF_Region_unbind(buf + lo);
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    long bytes = 64L << 20;
    int nseg = 16, iters = 10, reps = 7, c, rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    while ((c = getopt(argc, argv, "m:S:i:R:h")) != -1) {
        switch (c) {
        case 'm': bytes = atol(optarg); break;
        case 'S': nseg = atoi(optarg); break;
        case 'i': iters = atoi(optarg); break;
        case 'R': reps = atoi(optarg); break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: nf_fused [-m BYTES] [-S REGIONS] [-i ITERS] [-R REPEATS]\n");
            MPI_Finalize();
            return c == 'h' ? 0 : 2;
        }
    }
    int m = (int)(bytes / (long)sizeof(float));
    float *buf = malloc((size_t)m * sizeof(float));
    double *whole = calloc((size_t)reps, sizeof(double)), *cut = calloc((size_t)reps, sizeof(double));
    for (int j = 0; j < m; j++)
        buf[j] = (float)((j * 2654435761u >> 7) % 2001) - 1000.0f;
    time_calls(buf, m, 2); /* warm up both: residuals, segment */
    bind(buf, m, nseg, 1);
    time_calls(buf, m, 2);
    for (int r = 0; r < reps; r++) { /* alternate, so load hits both alike */
        cut[r] = time_calls(buf, m, iters);
        bind(buf, m, nseg, 0);
        whole[r] = time_calls(buf, m, iters);
        bind(buf, m, nseg, 1);
    }
    qsort(whole, (size_t)reps, sizeof(double), cmp);
    qsort(cut, (size_t)reps, sizeof(double), cmp);
    if (rank == 0)
        printf("# %ld B, %d iterations x %d repeats, median\n"
               "whole      %10.3f ms\n%2d regions %10.3f ms\nratio      %10.3f\n",
               bytes, iters, reps, whole[reps / 2] * 1e3, nseg, cut[reps / 2] * 1e3,
               cut[reps / 2] / whole[reps / 2]);
    free(buf);
    free(whole);
    free(cut);
    MPI_Finalize();
    return 0;
}

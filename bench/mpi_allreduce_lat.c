/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_allreduce_lat: a plain osu_allreduce-style MPI program that does not
 * know libnfcoll, built without it, to measure interposition overhead:
 *
 *   mpirun -np 2 mpi_allreduce_lat [-m BYTES]... [-i ITERS] [-x WARMUP]
 *   mpirun -np 2 -x LD_PRELOAD=libnfcoll.so mpi_allreduce_lat ...
 *
 * Prints OSU rows: Size, Avg/Min/Max Latency(us), Iterations.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long sizes[16];
    int nsizes = 0, iters = 10000, warmup = 200, rank, n, c;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    while ((c = getopt(argc, argv, "m:i:x:h")) != -1) {
        if (c == 'm' && nsizes < 16)
            sizes[nsizes++] = atol(optarg);
        else if (c == 'i')
            iters = atoi(optarg);
        else if (c == 'x')
            warmup = atoi(optarg);
        else {
            if (rank == 0)
                fprintf(stderr, "usage: mpi_allreduce_lat [-m BYTES]... [-i ITERS] [-x WARMUP]\n");
            MPI_Finalize();
            return c == 'h' ? 0 : 2;
        }
    }
    if (nsizes == 0)
        sizes[nsizes++] = 8;
    if (rank == 0)
        printf("%-10s %18s %18s %18s %12s\n", "# Size", "Avg Latency(us)", "Min Latency(us)",
               "Max Latency(us)", "Iterations");
    for (int s = 0; s < nsizes; s++) {
        int count = (int)(sizes[s] / (long)sizeof(float));
        int it = sizes[s] > 65536 ? iters / 20 + 1 : iters;
        float *a = calloc((size_t)count + 1, sizeof(float)), *b = calloc((size_t)count + 1, sizeof(float));
        for (int i = 0; i < warmup; i++)
            MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < it; i++)
            MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double lat = (MPI_Wtime() - t0) * 1e6 / it, mn, mx, sum;
        MPI_Reduce(&lat, &mn, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&lat, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&lat, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("%-10ld %18.3f %18.3f %18.3f %12d\n", sizes[s], sum / n, mn, mx, it);
        free(a);
        free(b);
    }
    MPI_Finalize();
    return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An ordinary MPI program with nonblocking allreduces, for the shim
 * (tests/mpi_iallreduce.sh): built plain (run with LD_PRELOAD) and relinked.
 * On two duplicates of MPI_COMM_WORLD it makes the same float sums, X with
 * MPI_Allreduce, Y with MPI_Iallreduce (several in flight, MPI_Waitall),
 * plus an int sum (never admitted) on Y, and checks Y's results bit for bit
 * against X's. It asks MPI_Init for nothing (MPI_THREAD_SINGLE); the
 * library may ask for more. Prints "float iallreduces: N" per rank.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { M = 300000, K = 3, STEPS = 8 };

int main(int argc, char **argv)
{
    int rank, n, bad = 0, calls = 0;
    MPI_Comm X, Y;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_dup(MPI_COMM_WORLD, &X);
    MPI_Comm_dup(MPI_COMM_WORLD, &Y);
    float *x[K], *y[K];
    for (int b = 0; b < K; b++)
        x[b] = malloc(M * sizeof(float)), y[b] = malloc(M * sizeof(float));
    for (int s = 0; s < STEPS; s++) {
        MPI_Request req[K + 1];
        MPI_Status st[K + 1]; /* not MPI_STATUSES_IGNORE: gcc 12 under MPICH's mpi.h */
        int ia = s + rank, ib = 0;
        for (int b = 0; b < K; b++) {
            for (int j = 0; j < M; j++)
                x[b][j] = y[b][j] = (float)(((j * 7 + s * 13 + b * 5 + rank * 11) % 101) - 50) /
                                    (float)(1 + (j % 9));
            MPI_Allreduce(MPI_IN_PLACE, x[b], M, MPI_FLOAT, MPI_SUM, X);
            MPI_Iallreduce(MPI_IN_PLACE, y[b], M, MPI_FLOAT, MPI_SUM, Y, &req[b]);
            calls++;
        }
        MPI_Iallreduce(&ia, &ib, 1, MPI_INT, MPI_SUM, Y, &req[K]);
        if (MPI_Waitall(K + 1, req, st) != MPI_SUCCESS)
            printf("FAIL rank %d: MPI_Waitall, step %d\n", rank, s), bad = 1;
        for (int b = 0; b < K; b++)
            if (memcmp(x[b], y[b], M * sizeof(float)) != 0)
                printf("FAIL rank %d: step %d buffer %d: MPI_Iallreduce's result differs from "
                       "MPI_Allreduce's\n", rank, s, b), bad = 1;
        if (ib != s * n + n * (n - 1) / 2)
            printf("FAIL rank %d: int sum %d, want %d\n", rank, ib, s * n + n * (n - 1) / 2),
                bad = 1;
    }
    printf("float iallreduces: %d\n", calls);
    for (int b = 0; b < K; b++)
        free(x[b]), free(y[b]);
    MPI_Comm_free(&X);
    MPI_Comm_free(&Y);
    MPI_Finalize();
    return bad;
}

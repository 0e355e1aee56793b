/*
 * Runs that end badly on purpose, for the tests/mpi_faults_*.sh scripts.
 * Relinked with libnfcoll (MPI_Init and MPI_Allreduce through the shim).
 *
 *   test_faults calls N          N MPI_Allreduce float sums of 1 Ki floats
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank;

static void calls(long n)
{
    static float x[1024], r[1024];
    for (int j = 0; j < 1024; j++)
        x[j] = (float)(j % 7) - 3.0f + (float)rank;
    for (long i = 0; i < n; i++)
        MPI_Allreduce(x, r, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    int rc = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *mode = argc > 1 ? argv[1] : "";
    long a = argc > 2 ? atol(argv[2]) : 0;
    if (strcmp(mode, "calls") == 0) {
        calls(a);
    } else {
        fprintf(stderr, "usage: see tests/mpi/test_faults.c\n");
        rc = 2;
    }
    MPI_Finalize();
    return rc;
}

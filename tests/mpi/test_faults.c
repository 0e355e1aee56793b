/*
 * Runs that end badly on purpose, for the tests/mpi_faults_*.sh scripts.
 * Relinked with libnfcoll (MPI_Init and MPI_Allreduce through the shim).
 *
 *   test_faults calls N          N MPI_Allreduce float sums of 1 Ki floats
 *   test_faults abort-idle K J   K calls, 1.5 s without one, 1 call, J more;
 *                                then rank 0 calls MPI_Abort while the others
 *                                wait in a barrier and are killed
 *   test_faults abort-volume N   N calls, then the same abort
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank;

static void calls(long n)
{
    static float x[1024], r[1024];
    for (int j = 0; j < 1024; j++)
        x[j] = (float)(j % 7) - 3.0f + (float)rank;
    for (long i = 0; i < n; i++)
        MPI_Allreduce(x, r, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

/* Rank 0 aborts; the others are killed while they wait. */
static void abort_now(void)
{
    fflush(stdout);
    if (rank == 0)
        MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Barrier(MPI_COMM_WORLD);
    sleep(60); /* not reached: the barrier waits for rank 0 */
}

int main(int argc, char **argv)
{
    int rc = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *mode = argc > 1 ? argv[1] : "";
    long a = argc > 2 ? atol(argv[2]) : 0, b = argc > 3 ? atol(argv[3]) : 0;
    if (strcmp(mode, "calls") == 0) {
        calls(a);
    } else if (strcmp(mode, "abort-idle") == 0) {
        calls(a);
        usleep(1500 * 1000);
        calls(1 + b);
        abort_now();
    } else if (strcmp(mode, "abort-volume") == 0) {
        calls(a);
        abort_now();
    } else {
        fprintf(stderr, "usage: see tests/mpi/test_faults.c\n");
        rc = 2;
    }
    MPI_Finalize();
    return rc;
}

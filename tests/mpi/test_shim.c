/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An ordinary MPI program: it knows nothing of libnfcoll. tests/mpi_shim.sh
 * builds it plain and relinked against libnfcoll, runs it plain, relinked
 * and under LD_PRELOAD, and compares what it prints.
 *
 *   test_shim transparency   MPI_Allreduce on float, double, int, in place,
 *                            a derived datatype with a user op: prints a
 *                            hash per case and checks each against
 *                            PMPI_Allreduce bit for bit.
 *   test_shim policy         10 float sums of 1 MiB, 5 of 1 KiB, 3 double
 *                            sums of 1 MiB: the workload the policy tests
 *                            count with NFCOLL_STATS.
 *   test_shim policy wire    the same, then 3 float sums of 32768 elements
 *                            and 2 of 32769 (tests/replay.sh: two one-rank
 *                            nodes' verdicts carry the first, not the
 *                            second).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks, fails;

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void report(const char *what, const void *got, const void *want, size_t bytes)
{
    if (memcmp(got, want, bytes) != 0) {
        printf("FAIL rank %d: %s differs from PMPI_Allreduce\n", rank, what);
        fails++;
    }
    if (rank == 0)
        printf("%-28s %016llx\n", what, (unsigned long long)fnv(got, bytes));
}

static void pair_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    float *a = in, *b = inout;
    (void)dt;
    for (int i = 0; i < 2 * *len; i++)
        b[i] = a[i] * 0.5f + b[i];
}

static void transparency(void)
{
    enum { N = 4099 };
    float *f = malloc(N * sizeof(float)), *fr = malloc(N * sizeof(float)), *fw = malloc(N * sizeof(float));
    double *d = malloc(N * sizeof(double)), *dr = malloc(N * sizeof(double)), *dw = malloc(N * sizeof(double));
    int *x = malloc(N * sizeof(int)), *xr = malloc(N * sizeof(int)), *xw = malloc(N * sizeof(int));
    for (int j = 0; j < N; j++) {
        f[j] = (float)((j * 7919 + rank * 104729) % 2003 - 1001) / 37.0f;
        d[j] = f[j] * 1e-3 + rank;
        x[j] = (j * 31 + rank * 17) % 1000 - 500;
    }
    MPI_Allreduce(f, fr, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allreduce(f, fw, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    report("MPI_FLOAT sum", fr, fw, N * sizeof(float));
    MPI_Allreduce(d, dr, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allreduce(d, dw, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    report("MPI_DOUBLE sum", dr, dw, N * sizeof(double));
    MPI_Allreduce(x, xr, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    PMPI_Allreduce(x, xw, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    report("MPI_INT max", xr, xw, N * sizeof(int));
    memcpy(fr, f, N * sizeof(float));
    memcpy(fw, f, N * sizeof(float));
    MPI_Allreduce(MPI_IN_PLACE, fr, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allreduce(MPI_IN_PLACE, fw, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    report("MPI_FLOAT sum in place", fr, fw, N * sizeof(float));
    MPI_Datatype pair;
    MPI_Op op;
    MPI_Type_contiguous(2, MPI_FLOAT, &pair);
    MPI_Type_commit(&pair);
    MPI_Op_create(pair_sum, 0, &op);
    MPI_Allreduce(f, fr, N / 2, pair, op, MPI_COMM_WORLD);
    PMPI_Allreduce(f, fw, N / 2, pair, op, MPI_COMM_WORLD);
    report("derived type, user op", fr, fw, (N / 2) * 2 * sizeof(float));
    MPI_Allreduce(f, fr, N, MPI_FLOAT, MPI_PROD, MPI_COMM_WORLD);
    PMPI_Allreduce(f, fw, N, MPI_FLOAT, MPI_PROD, MPI_COMM_WORLD);
    report("MPI_FLOAT prod", fr, fw, N * sizeof(float));
    MPI_Op_free(&op);
    MPI_Type_free(&pair);
    free(f), free(fr), free(fw), free(d), free(dr), free(dw), free(x), free(xr), free(xw);
}

static void policy_workload(int wire)
{
    enum { BIG = 262144, SMALL = 256 };
    float *f = malloc(BIG * sizeof(float)), *r = malloc(BIG * sizeof(float));
    double *d = malloc(BIG * sizeof(double)), *dr = malloc(BIG * sizeof(double));
    for (int j = 0; j < BIG; j++) {
        f[j] = (float)((j % 97) - 48) + 0.25f * rank;
        d[j] = f[j];
    }
    for (int c = 0; c < 10; c++)
        MPI_Allreduce(f, r, BIG, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int c = 0; c < 5; c++)
        MPI_Allreduce(f, r, SMALL, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int c = 0; c < 3; c++)
        MPI_Allreduce(d, dr, BIG, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int c = 0; wire && c < 5; c++)
        MPI_Allreduce(f, r, c < 3 ? 32768 : 32769, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("policy workload done: r[1] finite=%d\n", r[1] == r[1]);
    free(f), free(r), free(d), free(dr);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc > 1 && strcmp(argv[1], "policy") == 0)
        policy_workload(argc > 2 && strcmp(argv[2], "wire") == 0);
    else
        transparency();
    int total = 0;
    MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return total ? 1 : 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MPI_THREAD_MULTIPLE: two threads, each with its own communicator, call
 * MPI_Allreduce at the same time through the interposed shim. The policy
 * (tests/policy_shim/threads.policy) sends communicator "tA" to fp32 and
 * "tB" to binary, so both shared-memory protocols, their state set-up and
 * the counters run concurrently. Each thread checks every result bit for
 * bit against nf_ref.h (with error feedback per buffer). Prints SKIP and
 * exits 77 when the MPI library does not provide MPI_THREAD_MULTIPLE.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "nf_ref.h"
#include "nf_testutil.h"

enum { CALLS = 30, NCOUNTS = 3 };
static const size_t counts[NCOUNTS] = {7, 513, 70001};
static int rank, n;

typedef struct worker {
    MPI_Comm comm;
    int binary; /* the policy routes this communicator binary, else fp32 */
    int fails;
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    float *buf[NCOUNTS], *es[NCOUNTS];
    size_t maxm = counts[NCOUNTS - 1];
    float *xs = malloc(n * maxm * sizeof(float)), *ref = malloc(maxm * sizeof(float));
    for (int i = 0; i < NCOUNTS; i++) {
        buf[i] = malloc(counts[i] * sizeof(float));
        es[i] = calloc(n * counts[i], sizeof(float));
    }
    for (int c = 0; c < CALLS; c++) {
        int i = c % NCOUNTS;
        size_t m = counts[i];
        for (int r = 0; r < n; r++)
            ref_input(xs + (size_t)r * m, m, r, c, 40 + (unsigned)w->binary);
        memcpy(buf[i], xs + (size_t)rank * m, m * sizeof(float));
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf[i], (int)m, MPI_FLOAT, MPI_SUM, w->comm);
        if (w->binary)
            ref_binary(ref, xs, es[i], n, m);
        else
            ref_fp32(ref, xs, n, m);
        if (rc != MPI_SUCCESS || memcmp(buf[i], ref, m * sizeof(float)) != 0) {
            printf("FAIL rank %d: %s call %d count %zu differs from the reference\n", rank,
                   w->binary ? "binary" : "fp32", c, m);
            w->fails++;
        }
    }
    for (int i = 0; i < NCOUNTS; i++)
        free(buf[i]), free(es[i]);
    free(xs);
    free(ref);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            printf("SKIP: this MPI library provides thread level %d, not MPI_THREAD_MULTIPLE\n",
                   provided);
        MPI_Finalize();
        return 77;
    }
    ref_nodes_init(n);
    worker_t w[2] = {{MPI_COMM_NULL, 0, 0}, {MPI_COMM_NULL, 1, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &w[i].comm);
        MPI_Comm_set_name(w[i].comm, i ? "tB" : "tA"); /* before first use: rules match it */
    }
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, work, &w[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        MPI_Comm_free(&w[i].comm);
    return nft_finish(w[0].fails + w[1].fails, "test_threads");
}

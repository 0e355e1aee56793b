/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What two one-rank nodes put on the wire per call (docs/design.md,
 * "Protocol"; the bytes: "Predicting a call's time"): a call that fits its verdict's area crosses in the verdict's one
 * PMPI_Sendrecv, a larger one adds point-to-point messages. This program
 * defines PMPI_Sendrecv and PMPI_Isend itself, so libnfcoll's calls reach
 * them first; they count the messages and their bytes, then call MPI's
 * own. Run on 2 ranks as two pretend nodes (NFCOLL_RANKS_PER_NODE=1).
 * The bytes NFCOLL_STATS reports are the same either way (a header line
 * and the data), which is why this counts messages.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "nfcoll.h"
#include "nf_standin.h"
#include "nf_testutil.h"

static long n_sendrecv, n_isend, sendrecv_bytes;

NFT_EXPORT int PMPI_Sendrecv(const void *sb, int sc, MPI_Datatype st, int dest, int stag, void *rb,
                             int rc, MPI_Datatype rt, int src, int rtag, MPI_Comm comm,
                             MPI_Status *status)
{
    int size = 0;
    PMPI_Type_size(st, &size);
    n_sendrecv++;
    sendrecv_bytes += (long)sc * size;
    return NFT_NEXT(PMPI_Sendrecv)(sb, sc, st, dest, stag, rb, rc, rt, src, rtag, comm, status);
}

NFT_EXPORT int PMPI_Isend(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
                          MPI_Request *rq)
{
    n_isend++;
    return NFT_NEXT(PMPI_Isend)(b, n, t, dest, tag, comm, rq);
}

/* One call of n floats on route; want: its verdict message's bytes (a
 * 64-byte header line and the area, up to MPI's eager limit), and the
 * messages it sends besides (-1: some). */
static int one(int n, nf_route_t route, const char *what, long want_bytes, int more)
{
    float *x = malloc((size_t)n * sizeof(float)), *r = malloc((size_t)n * sizeof(float));
    int me = nft_rank(), bad = 0;
    for (int i = 0; i < n; i++)
        x[i] = (float)((i % 13) + 1) * (me ? 1.0f : -0.5f);
    long s0 = n_sendrecv, i0 = n_isend, b0 = sendrecv_bytes;
    int rc = NF_Allreduce_route(x, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, route);
    long s = n_sendrecv - s0, i = n_isend - i0, b = sendrecv_bytes - b0;
    bad |= nft_check(rc == MPI_SUCCESS, what, "rc %d", rc);
    bad |= nft_check(s == 1 && b == want_bytes, what,
                     "%ld verdict exchange(s) of %ld bytes, want one of %ld", s, b, want_bytes);
    bad |= nft_check(more < 0 ? i > 0 : i == more, what,
                     "%ld messages besides the verdict, want %d (-1: some)", i, more);
    /* fp32: the sum exactly (small integers and halves); binary: signs
     * agree where the ranks' values do not cancel */
    for (int k = 0; route == NF_ROUTE_FP32 && k < n && !bad; k++)
        bad |= nft_check(r[k] == (float)((k % 13) + 1) * 0.5f, what, "r[%d] = %g", k,
                         (double)r[k]);
    free(x), free(r);
    return bad;
}

int main(int argc, char **argv)
{
    int bad = 0, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (nft_rank() == 0)
            printf("test_wire: run on 2 ranks as two one-rank nodes\n");
        MPI_Finalize();
        return 1;
    }
    /* Warm up: libnfcoll's state for the communicator. */
    bad |= one(7, NF_ROUTE_FP32, "warm-up, 7 floats", 64 + 64, 0);
    /* fp32 up to 128 KiB rides whole: the header line and the floats. */
    bad |= one(16240, NF_ROUTE_FP32, "fp32, 16240 floats", 64 + 64960, 0);
    /* Past 65024 bytes (NF_PAIR_EAGER_BYTES: under MPI's eager limit and
     * below the message sizes Open MPI's TCP transport stalled on,
     * lib/util/nf_traffic.h) the verdict's message stops there, and tail
     * messages of at most as much carry the rest: one up to 32480 floats,
     * two past it. */
    bad |= one(16241, NF_ROUTE_FP32, "fp32, 16241 floats", 65024, 1);
    bad |= one(16384, NF_ROUTE_FP32, "fp32, 16384 floats", 65024, 1);
    bad |= one(32480, NF_ROUTE_FP32, "fp32, 32480 floats", 65024, 1);
    bad |= one(32481, NF_ROUTE_FP32, "fp32, 32481 floats", 65024, 2);
    bad |= one(32768, NF_ROUTE_FP32, "fp32, 32768 floats", 65024, 2);
    /* Larger fp32 calls follow the verdict in messages of their own, under
     * the eager limit too: 16256 floats each (NF_PAIR_MSG,
     * lib/util/nf_traffic.h). */
    bad |= one(32769, NF_ROUTE_FP32, "fp32, 32769 floats", 64, 3);
    bad |= one(65536, NF_ROUTE_FP32, "fp32, 65536 floats", 64, 5);
    bad |= one(98304, NF_ROUTE_FP32, "fp32, 98304 floats", 64, 7);
    bad |= one(98305, NF_ROUTE_FP32, "fp32, 98305 floats", 64, 7);
    bad |= one(113792, NF_ROUTE_FP32, "fp32, 113792 floats", 64, 7);
    bad |= one(113793, NF_ROUTE_FP32, "fp32, 113793 floats", 64, 8);
    bad |= one(262144, NF_ROUTE_FP32, "fp32, 262144 floats", 64, 17);
    /* With low-bit lines, 8 KiB: 16 lines of bits and a line of scale. */
    bad |= one(8192, NF_ROUTE_BINARY, "binary, 8192 elements", 64 + 17 * 64, 0);
    bad |= one(300007, NF_ROUTE_BINARY, "binary, 300007 elements", 64, -1);
    if (!bad && nft_rank() == 0)
        printf("PASS two one-rank nodes: fp32 up to 32768 floats and small binary calls "
               "cross with the verdict (past 65024 bytes, its tails), larger calls add "
               "messages of their own (eager-sized)\n");
    MPI_Finalize();
    return bad;
}

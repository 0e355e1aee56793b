/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared memory per communicator (docs/design.md, "Files and memory"): many
 * communicators doing small calls each keep a small segment, and a later
 * large call on one of them grows it with exact results, identical on
 * every rank. The segments are the process's mappings of
 * /dev/shm/nfcoll.* (unlinked, so "(deleted)"), read from /proc/self/smaps.
 *
 * Usage: test_shm [-n COMMS] [-measure] [-tight]
 *   -n COMMS   communicators to create, alternately MPI_Comm_split and
 *              MPI_Comm_dup of MPI_COMM_WORLD (default 64)
 *   -measure   print the sizes, assert only the results (a build before
 *              segments were sized to the calls)
 *   -tight     /dev/shm has no room to grow a segment: the large fp32 call
 *              runs in the chunks the segment has, the large binary one
 *              runs fp32, both exact, each counted as a capacity fallback
 * Each communicator makes a 16 KiB and a 64 B call on the fp32 and binary
 * routes. Bound: L local ranks keep at most L * 64 KiB + 64 KiB of segment
 * per communicator for such calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nfcoll.h>

#include "nf_ref.h"
#include "nf_testutil.h"

#define KIB 1024ul
#define SMALL_M 4096 /* 16 KiB of floats */
#define TINY_M 16    /* 64 B */
#define LARGE_M (1048576 + 3)

/* Bytes of this process's nfcoll segment mappings, and how many of them
 * are resident (*rss) and how many mappings there are (*n). */
static size_t shm_mapped(size_t *rss, int *n)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    size_t total = 0, res = 0;
    int in = 0, count = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        size_t kb;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '/') != NULL) {
            in = strstr(line, "/nfcoll.") != NULL;
            if (in)
                total += hi - lo, count++;
        } else if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            in = 0;
        } else if (in && sscanf(line, "Rss: %zu kB", &kb) == 1) {
            res += kb * KIB;
        }
    }
    fclose(f);
    *rss = res;
    *n = count;
    return total;
}

static int local_ranks(int rank, int n)
{
    int l = 0;
    for (int i = 0; i < n; i++)
        l += ref_node_of[i] == ref_node_of[rank];
    return l;
}

/* One call on comm, checked against the reference (binary: the send buffer
 * is never freed, so its address is new to every communicator and its
 * residual starts at zero); expect_fp32:
 * the call is expected to have run fp32 (no room to grow). */
static int call(MPI_Comm comm, nf_route_t route, size_t m, int rank, int n, unsigned seed,
                int expect_fp32, const char *label)
{
    float *xs = malloc(n * m * sizeof(float));
    float *es = calloc(n * m, sizeof(float));
    float *ref = malloc(m * sizeof(float));
    float *send = nft_keep(malloc(m * sizeof(float))), *recv = malloc(m * sizeof(float));
    for (int i = 0; i < n; i++)
        ref_input(xs + (size_t)i * m, m, i, 0, seed);
    memcpy(send, xs + (size_t)rank * m, m * sizeof(float));
    int rc = NF_Allreduce_route(send, recv, (int)m, MPI_FLOAT, MPI_SUM, comm, route);
    if (route == NF_ROUTE_FP32 || expect_fp32)
        ref_fp32(ref, xs, n, m);
    else
        ref_binary(ref, xs, es, n, m);
    char what[160];
    snprintf(what, sizeof(what), "%s %s count %zu", label, nf_route_name(route), m);
    int fails = nft_check(rc == MPI_SUCCESS, what, "return code %d", rc);
    fails += nft_same_floats(recv, ref, m, what);
    fails += nft_identical_on_all(recv, m * sizeof(float), what);
    free(xs);
    free(es);
    free(ref);
    free(recv);
    return fails;
}

static int small_calls(MPI_Comm comm, int rank, int n, unsigned seed, const char *label)
{
    int fails = 0;
    for (int r = 0; r < 2; r++) {
        nf_route_t route = r ? NF_ROUTE_BINARY : NF_ROUTE_FP32;
        fails += call(comm, route, SMALL_M, rank, n, seed + 2 * r, 0, label);
        fails += call(comm, route, TINY_M, rank, n, seed + 2 * r + 1, 0, label);
    }
    return fails;
}

int main(int argc, char **argv)
{
    int ncomms = 64, measure = 0, tight = 0, rank, n, fails = 0, maps;
    size_t rss;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    ref_nodes_init(n);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            ncomms = atoi(argv[++i]);
        else if (strcmp(argv[i], "-measure") == 0)
            measure = 1;
        else if (strcmp(argv[i], "-tight") == 0)
            tight = 1;
    }
    if (ncomms < 1)
        ncomms = 1;
    int l = local_ranks(rank, n);
    size_t bound = (size_t)l * 64 * KIB + 64 * KIB;
    MPI_Comm *comms = malloc((size_t)ncomms * sizeof(MPI_Comm));
    size_t base = shm_mapped(&rss, &maps);

    /* Many communicators, small calls. */
    for (int i = 0; i < ncomms; i++) {
        if (i & 1)
            MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]);
        else
            MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &comms[i]);
        fails += small_calls(comms[i], rank, n, 100u + 4u * (unsigned)i, "small calls");
    }
    size_t total = shm_mapped(&rss, &maps) - base, per = total / (size_t)ncomms;
    if (rank == 0)
        printf("%d communicators, %d local rank%s: %zu segment%s, %zu KiB mapped per "
               "communicator (%zu KiB resident), bound %zu KiB\n",
               ncomms, l, l == 1 ? "" : "s", (size_t)maps, maps == 1 ? "" : "s", per / KIB,
               rss / (size_t)ncomms / KIB, bound / KIB);
    if (!measure) {
        fails += nft_check(maps == ncomms, "small calls", "%d segments mapped for %d "
                           "communicators", maps, ncomms);
        fails += nft_check(per <= bound, "small calls", "%zu KiB of segment per communicator, "
                           "more than %zu KiB", per / KIB, bound / KIB);
    }

    /* A large call on the first and the last communicator grows its
     * segment (unless there is no room); every result stays exact. */
    uint64_t cap0 = nf_stats_fallbacks(NF_FALLBACK_CAPACITY);
    for (int i = 0; i < ncomms; i += ncomms > 1 ? ncomms - 1 : 1) {
        size_t before = shm_mapped(&rss, &maps);
        fails += call(comms[i], NF_ROUTE_FP32, LARGE_M, rank, n, 7u + (unsigned)i, 0,
                      "large call");
        fails += call(comms[i], NF_ROUTE_BINARY, LARGE_M, rank, n, 9u + (unsigned)i, tight,
                      "large call");
        size_t after = shm_mapped(&rss, &maps);
        if (rank == 0)
            printf("communicator %d after a %zu-float fp32 and binary call: %zu KiB mapped "
                   "(was %zu KiB)\n",
                   i, (size_t)LARGE_M, (after - total - base + per) / KIB, per / KIB);
        if (!measure && !tight)
            fails += nft_check(after >= before + (size_t)LARGE_M * sizeof(float) / 2,
                               "large call", "the segment did not grow: %zu KiB mapped, was "
                               "%zu KiB", after / KIB, before / KIB);
        if (tight)
            fails += nft_check(after == before, "large call, tight", "mapped %zu KiB, was %zu "
                               "KiB", after / KIB, before / KIB);
        total = after - base;
        fails += small_calls(comms[i], rank, n, 300u + 4u * (unsigned)i, "after the large call");
        if (ncomms == 1)
            break;
    }
    if (tight) /* the first fp32 growth is tried once, each binary call tries */
        fails += nft_check(nf_stats_fallbacks(NF_FALLBACK_CAPACITY) - cap0 >= 2, "tight",
                           "%llu capacity fallbacks, expected at least 2",
                           (unsigned long long)(nf_stats_fallbacks(NF_FALLBACK_CAPACITY) - cap0));

    for (int i = 0; i < ncomms; i++)
        MPI_Comm_free(&comms[i]);
    size_t left = shm_mapped(&rss, &maps);
    fails += nft_check(left == base, "freed", "%zu KiB of segments still mapped after freeing "
                       "every communicator", (left - base) / KIB);
    free(comms);
    return nft_finish(fails, "test_shm");
}

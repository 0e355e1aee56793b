/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One NF_Allreduce on a forced route, checked against a reference computed
 * here, then where its memory lives: the buffer's node and resident fraction
 * from nf_placement_query, and every mapping bound to that node (the shared
 * buffer and the error-feedback residuals) from /proc/self/numa_maps.
 * Public API only. Prints one PASS or FAIL line per rank, with a hash of the
 * result's bytes (runs placed differently must print the same hash).
 * fp32 and binary are also checked against a reference computed here.
 *
 *   cxl_run fp32|binary|ternary|bf16 [-n COUNT] [-e NODE]
 *       (NODE: the node everything must be on)
 *
 * Exit: 0 pass, 1 fail, 3 libnfcoll could not set up (e.g. NFCOLL_CXL=require
 * without a CXL node: the library has said why on stderr).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nfcoll.h"

static float input(int rank, size_t j)
{
    unsigned long h = (unsigned long)rank * 2654435761UL + j * 40503UL + 12345UL;
    h ^= h >> 13;
    h *= 0x5bd1e995UL;
    h ^= h >> 15;
    return (float)((long)(h % 2001) - 1000) / 997.0f + (rank % 2 ? 0.25f : -0.25f);
}

/* Binary: sign counts times the mean of the per-rank mean |x|. */
static void ref_binary(float *r, size_t m, int n)
{
    double a = 0.0;
    for (int i = 0; i < n; i++) {
        double s = 0.0;
        for (size_t j = 0; j < m; j++)
            s += fabs((double)input(i, j));
        a += s / (double)m;
    }
    a /= n;
    for (size_t j = 0; j < m; j++) {
        int c = 0;
        for (int i = 0; i < n; i++)
            c += !signbit(input(i, j));
        r[j] = (float)(a * (double)(2 * c - n));
    }
}

/* fp32: float sum in rank order, exact. */
static void ref_fp32(float *r, size_t m, int n)
{
    for (size_t j = 0; j < m; j++) {
        float s = input(0, j);
        for (int i = 1; i < n; i++)
            s += input(i, j);
        r[j] = s;
    }
}

static size_t compare(const float *got, const float *want, size_t m, int exact)
{
    size_t bad = 0;
    for (size_t j = 0; j < m; j++) {
        int ok = exact ? memcmp(&got[j], &want[j], sizeof(float)) == 0
                       : fabsf(got[j] - want[j]) <= 1e-5f * fabsf(want[j]) + 1e-30f;
        if (!ok && bad++ < 3)
            fprintf(stderr, "cxl_run: element %zu: got %.9g, want %.9g\n", j, got[j], want[j]);
    }
    return bad;
}

/* Pages of mappings whose NUMA policy names node: on it and elsewhere. */
static void bound_pages(int node, long *on, long *off)
{
    char line[4096], pol[64];
    FILE *f = fopen("/proc/self/numa_maps", "r");
    *on = *off = 0;
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *p, *save = NULL;
        int k;
        long v;
        if (sscanf(line, "%*s %63s", pol) != 1)
            continue;
        p = strchr(pol, ':');
        if (p == NULL || atoi(p + 1) != node || (strncmp(pol, "bind", 4) && strncmp(pol, "prefer", 6)))
            continue;
        for (p = strtok_r(line, " \n", &save); p != NULL; p = strtok_r(NULL, " \n", &save))
            if (sscanf(p, "N%d=%ld", &k, &v) == 2)
                *(k == node ? on : off) += v;
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    int rank, size, opt, expect = -1;
    size_t m = 1 << 18;
    nf_route_t route;
    nf_placement_info_t pi;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "n:e:")) != -1) {
        if (opt == 'n')
            m = strtoul(optarg, NULL, 0);
        else if (opt == 'e')
            expect = atoi(optarg);
    }
    if (optind >= argc || nf_route_parse(argv[optind], &route) != NF_OK || route == NF_ROUTE_PMPI) {
        fprintf(stderr, "usage: cxl_run fp32|binary|ternary|bf16 [-n COUNT] [-e NODE]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *x = malloc(m * sizeof(float)), *r = malloc(m * sizeof(float)), *want = malloc(m * sizeof(float));
    if (x == NULL || r == NULL || want == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (size_t j = 0; j < m; j++)
        x[j] = input(rank, j);

    int st = nf_placement_query(MPI_COMM_WORLD, &pi);
    if (st != NF_OK) {
        printf("SETUP-FAILED cxl_run rank %d: nf_placement_query: %s\n", rank, nf_strerror(st));
        MPI_Finalize();
        return 3;
    }
    int rc = NF_Allreduce_route(x, r, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, route);
    size_t bad = rc == MPI_SUCCESS ? 0 : m;
    if (rc == MPI_SUCCESS && (route == NF_ROUTE_FP32 || route == NF_ROUTE_BINARY)) {
        (route == NF_ROUTE_FP32 ? ref_fp32 : ref_binary)(want, m, size);
        bad = compare(r, want, m, route == NF_ROUTE_FP32);
    }
    unsigned long long hash = 1469598103934665603ULL; /* FNV-1a over the result's bytes */
    for (size_t j = 0; j < m * sizeof(float); j++)
        hash = (hash ^ ((const unsigned char *)r)[j]) * 1099511628211ULL;
    nf_route_stats_t rs;
    nf_stats_get(route, &rs);
    nf_placement_query(MPI_COMM_WORLD, &pi);
    long on = 0, off = 0;
    if (pi.node >= 0)
        bound_pages(pi.node, &on, &off);

    /* the low-bit routes keep an error-feedback residual as large as the
     * input: at least that many bound pages besides the buffer. */
    long need = route == NF_ROUTE_BINARY || route == NF_ROUTE_TERNARY ? (long)(m * sizeof(float) / (size_t)sysconf(_SC_PAGESIZE)) : 1;
    int pass = rc == MPI_SUCCESS && bad == 0 && rs.calls == 1 &&
               (expect < 0 || (pi.node == expect && pi.resident_frac == 1.0 && on >= need && off == 0));
    printf("%s cxl_run rank %d/%d %s: %s (%zu of %zu wrong), result hash %016llx, calls on route %llu; "
           "buffer node %d (%s) %.1f %% of %zu bytes resident; "
           "pages of mappings bound there (buffer + residuals): %ld on node %d, %ld elsewhere\n",
           pass ? "PASS" : "FAIL", rank, size, nf_route_name(route),
           bad != 0 ? "WRONG RESULTS"
           : route == NF_ROUTE_FP32 || route == NF_ROUTE_BINARY ? "results match the reference"
                                                                 : "call succeeded",
           bad, m, hash, (unsigned long long)rs.calls, pi.node, pi.reason, 100.0 * pi.resident_frac, pi.bytes,
           on, pi.node, off);
    fflush(stdout);
    free(x);
    free(r);
    free(want);
    MPI_Finalize();
    return pass ? 0 : 1;
}

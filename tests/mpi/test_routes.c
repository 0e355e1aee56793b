/*
 * Multi-rank check of every route against nf_ref.h: exact bits, identical on
 * every rank, error feedback over several calls, MPI_IN_PLACE, counts 0 to
 * 1M+3, and one buffer whose calls change route (the residual changes
 * form). Honours NFCOLL_EF and NFCOLL_TERNARY_GAMMA like the library does.
 * Usage: test_routes [-c COUNT]...   (default counts 0 1 7 513 1048579)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nfcoll.h>

#include "nf_ref.h"
#include "nf_testutil.h"

typedef struct tcase {
    nf_route_t route;
    size_t m;
    int inplace;
    unsigned seed;
} tcase_t;

static int ef_on(void)
{
    const char *v = getenv("NFCOLL_EF");
    return !(v != NULL && (strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0));
}

static double gamma_env(void)
{
    const char *v = getenv("NFCOLL_TERNARY_GAMMA");
    return v != NULL ? strtod(v, NULL) : 1.0;
}

static void expect(const tcase_t *t, float *ref, const float *xs, float *es, int n)
{
    if (t->route == NF_ROUTE_FP32)
        ref_fp32(ref, xs, n, t->m);
    else if (t->route == NF_ROUTE_BINARY)
        ref_binary(ref, xs, es, n, t->m);
    else
        ref_ternary(ref, xs, es, n, t->m, gamma_env());
}

/* Calls on one buffer, so error feedback carries over: three on the
 * case's route, or (seq) one per entry of seq, alternating routes. */
static int run_calls(const tcase_t *base, const nf_route_t *seq, int calls, int rank, int n)
{
    size_t m = base->m, mm = m ? m : 1;
    float *xs = malloc(n * mm * sizeof(float));
    float *es = ef_on() && (seq != NULL || base->route != NF_ROUTE_FP32)
                    ? calloc(n * mm, sizeof(float))
                    : NULL;
    float *ref = malloc(mm * sizeof(float));
    /* Buffers stay allocated until exit: a reused address would inherit the
     * previous case's residual, which is the library's documented keying. */
    float *send = nft_keep(malloc(mm * sizeof(float) + 64));
    float *recv = nft_keep(malloc(mm * sizeof(float) + 64));
    int fails = 0;
    for (int c = 0; c < calls; c++) {
        tcase_t tc = *base;
        if (seq != NULL)
            tc.route = seq[c];
        const tcase_t *t = &tc;
        for (int i = 0; i < n; i++)
            ref_input(xs + (size_t)i * m, m, i, c, t->seed);
        float *in = t->inplace ? recv : send;
        memcpy(in, xs + (size_t)rank * m, m * sizeof(float));
        int rc = NF_Allreduce_route(t->inplace ? MPI_IN_PLACE : send, recv, (int)m, MPI_FLOAT,
                                    MPI_SUM, MPI_COMM_WORLD, t->route);
        expect(t, ref, xs, es, n);
        char what[128];
        snprintf(what, sizeof(what), "%s count %zu %s call %d%s", nf_route_name(t->route), m,
                 t->inplace ? "in-place" : "out-of-place", c, seq ? " (routes alternate)" : "");
        fails += nft_check(rc == MPI_SUCCESS, what, "return code %d", rc);
        fails += nft_same_floats(recv, ref, m, what);
        fails += nft_identical_on_all(recv, m * sizeof(float), what);
    }
    free(xs);
    free(es);
    free(ref);
    return fails;
}

static int run_case(const tcase_t *t, int rank, int n)
{
    return run_calls(t, NULL, 3, rank, n);
}

int main(int argc, char **argv)
{
    size_t counts[16] = {0, 1, 7, 513, 1048579};
    int ncounts = 5, given = 0, rank, n, fails = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    ref_nodes_init(n);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0 && i + 1 < argc && given < 16)
            counts[given++] = strtoul(argv[++i], NULL, 10);
    }
    if (given)
        ncounts = given;
    unsigned seed = 1;
    for (int r = NF_ROUTE_FP32; r <= NF_ROUTE_TERNARY; r++)
        for (int c = 0; c < ncounts; c++)
            for (int ip = 0; ip < 2; ip++) {
                tcase_t t = {(nf_route_t)r, counts[c], ip, seed++};
                fails += run_case(&t, rank, n);
            }
    static const nf_route_t seq[] = {NF_ROUTE_BINARY, NF_ROUTE_TERNARY, NF_ROUTE_TERNARY,
                                     NF_ROUTE_BINARY, NF_ROUTE_FP32,    NF_ROUTE_TERNARY,
                                     NF_ROUTE_BINARY, NF_ROUTE_BINARY};
    for (int c = 0; c < ncounts; c++) {
        tcase_t t = {NF_ROUTE_BINARY, counts[c], c & 1, seed++};
        fails += run_calls(&t, seq, (int)(sizeof(seq) / sizeof(seq[0])), rank, n);
    }
    return nft_finish(fails, "test_routes");
}

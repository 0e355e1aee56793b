/*
 * Multi-rank check of every route against nf_ref.h: exact bits, identical on
 * every rank, error feedback over several calls, MPI_IN_PLACE, counts 0 to
 * 1M+3, and one buffer whose calls change route (the residual changes
 * form), and bf16 on the special values. Honours NFCOLL_EF and NFCOLL_TERNARY_GAMMA like the library does.
 * Usage: test_routes [-c COUNT]...   (default counts 0 1 7 513 1048579)
 */
#include <math.h>
#include <stdint.h>
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
    else if (t->route == NF_ROUTE_BF16)
        ref_bf16_sum(ref, xs, n, t->m);
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

/* The bf16 route on the special values (NaN with payloads, signalling NaN,
 * infinities, FLT_MAX and the largest float that still rounds down, ties to
 * even both ways, subnormals, signed zeros) spread over the ranks, among
 * values with low mantissa bits so a call sent to fp32 would not match.
 * Which NaN payload survives a sum depends on the operand order the
 * hardware picks, so where the reference is NaN the result must be a NaN;
 * everywhere else the bits must match. */
static int bf16_specials(size_t m, int rank, int n)
{
    static const uint32_t sp[] = {
        0x7fc00000u, 0xffc12345u, 0x7f800001u, 0x7fbfffffu, /* NaNs, two signalling */
        0x7f800000u, 0xff800000u,                           /* +-Inf */
        0x7f7fffffu, 0xff7fffffu, 0x7f7f7fffu,              /* FLT_MAX rounds to Inf; below it */
        0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3f808001u, /* ties: down, up, negative; just above */
        0x00000001u, 0x00008000u, 0x00018000u, 0x807fffffu, /* subnormals */
        0x00000000u, 0x80000000u, 0x3f800001u, 0xc0490fdbu, /* zeros, 1 + ulp, -pi */
    };
    const size_t nsp = sizeof(sp) / sizeof(sp[0]);
    float *xs = malloc((size_t)n * m * sizeof(float) + 1), *ref = malloc(m * sizeof(float) + 1);
    float *buf = nft_keep(malloc(m * sizeof(float) + 1));
    ref_input(xs, (size_t)n * m, 0, 0, 77);
    for (int i = 0; i < n; i++)
        for (size_t k = (size_t)i; k < m; k += 3) /* every rank its own specials, some shared */
            memcpy(&xs[(size_t)i * m + k], &sp[(k / 3 + (size_t)i * 5) % nsp], sizeof(float));
    memcpy(buf, xs + (size_t)rank * m, m * sizeof(float));
    int rc = NF_Allreduce_route(MPI_IN_PLACE, buf, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                NF_ROUTE_BF16);
    ref_bf16_sum(ref, xs, n, m);
    int fails = nft_check(rc == MPI_SUCCESS, "bf16 specials", "return code %d", rc), nans = 0;
    for (size_t j = 0; j < m && fails == 0; j++) {
        if (isnan(ref[j])) {
            nans++;
            fails += nft_check(isnan(buf[j]), "bf16 specials", "element %zu is %a, expected a NaN",
                               j, (double)buf[j]);
        } else if (memcmp(&buf[j], &ref[j], sizeof(float)) != 0) {
            fails += nft_check(0, "bf16 specials", "element %zu is %a, expected %a", j,
                               (double)buf[j], (double)ref[j]);
        }
    }
    if (m >= 3 * nsp) /* every special is in: some sums are NaN, most are not */
        fails += nft_check(nans > 0 && (size_t)nans < m / 2, "bf16 specials", "%d NaNs of %zu",
                           nans, m);
    fails += nft_identical_on_all(buf, m * sizeof(float), "bf16 specials");
    free(xs);
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
    for (int r = NF_ROUTE_FP32; r <= NF_ROUTE_BF16; r++)
        for (int c = 0; c < ncounts; c++)
            for (int ip = 0; ip < 2; ip++) {
                tcase_t t = {(nf_route_t)r, counts[c], ip, seed++};
                fails += run_case(&t, rank, n);
            }
    static const nf_route_t seq[] = {NF_ROUTE_BINARY, NF_ROUTE_TERNARY, NF_ROUTE_TERNARY,
                                     NF_ROUTE_BINARY, NF_ROUTE_FP32,    NF_ROUTE_BF16,
                                     NF_ROUTE_TERNARY, NF_ROUTE_BINARY, NF_ROUTE_BINARY};
    for (int c = 0; c < ncounts; c++)
        if (counts[c] > 0)
            fails += bf16_specials(counts[c], rank, n);
    for (int c = 0; c < ncounts; c++) {
        tcase_t t = {NF_ROUTE_BINARY, counts[c], c & 1, seed++};
        fails += run_calls(&t, seq, (int)(sizeof(seq) / sizeof(seq[0])), rank, n);
    }
    return nft_finish(fails, "test_routes");
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Multi-rank check of every route against nf_ref.h: exact bits, identical on
 * every rank, error feedback over several calls, MPI_IN_PLACE, counts 0 to
 * 1M+3, and one buffer whose calls change route (the residual changes
 * form), and bf16 on the special values. Honours NFCOLL_EF,
 * NFCOLL_EF_DECAY, NFCOLL_SCALE_BLOCK and NFCOLL_TERNARY_GAMMA like the
 * library does. With -p (under tests/policy_shim/ef_decay.policy): the
 * policy's ef_decay and scale_block rules instead, by communicator name and
 * by region (see policy_cases).
 * Usage: test_routes [-p] [-c COUNT]...   (default counts 0 1 7 513 1048579;
 * with -p: 1 513 70001)
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

static float decay_env(void)
{
    const char *v = getenv("NFCOLL_EF_DECAY");
    return v != NULL && v[0] != '\0' ? (float)strtod(v, NULL) : 1.0f;
}

static void expect(const tcase_t *t, float *ref, const float *xs, float *es, int n)
{
    if (t->route == NF_ROUTE_FP32)
        ref_fp32(ref, xs, n, t->m);
    else if (t->route == NF_ROUTE_BF16)
        ref_bf16_sum(ref, xs, n, t->m);
    else if (t->route == NF_ROUTE_BINARY)
        ref_binary_b(ref, xs, es, n, t->m, decay_env(), ref_block_env());
    else if (t->route >= NF_ROUTE_INT4)
        ref_int(ref, xs, es, n, t->m, t->route == NF_ROUTE_INT4 ? 4 : t->route == NF_ROUTE_INT3 ? 3 : 2,
                decay_env(), REF_INT_BLOCK);
    else
        ref_ternary_d(ref, xs, es, n, t->m, gamma_env(), decay_env());
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

/* ---- -p: ef_decay from the policy (tests/policy_shim/ef_decay.policy) ---- */

enum { PCALLS = 7 };

/* A communicator of that name, or (region != NULL) one buffer in two bound
 * regions, region and region2, each half of it; decay < 0: the setting's;
 * block (region's and binary's scale_block, or an integer route's block) < 0:
 * the setting's. */
typedef struct pcase {
    const char *comm;
    nf_route_t route[PCALLS]; /* per call: the policy's calls ranges */
    float decay;
    const char *region, *region2;
    nf_route_t route2;        /* region2's, every call */
    float decay2;
    long block;
} pcase_t;

#define B NF_ROUTE_BINARY
#define T NF_ROUTE_TERNARY
#define I4 NF_ROUTE_INT4
#define I3 NF_ROUTE_INT3
#define I2 NF_ROUTE_INT2
static const pcase_t policy_cases[] = {
    {"nokey", {B, B, B, B, B, B, B}, -1.0f, NULL, NULL, B, 0, -1},
    {"one", {B, B, B, B, B, B, B}, 1.0f, NULL, NULL, B, 0, -1},
    {"half", {B, B, B, B, B, B, B}, 0.5f, NULL, NULL, B, 0, -1},
    {"zero", {B, B, B, B, B, B, B}, 0.0f, NULL, NULL, B, 0, -1},
    {"ter", {T, T, T, T, T, T, T}, 0.3f, NULL, NULL, B, 0, -1},
    /* binary after ternary: the E form, decayed */
    {"switch", {T, T, B, B, T, B, B}, 0.5f, NULL, NULL, B, 0, -1},
    {"fused", {B, B, B, B, B, B, B}, 0.5f, "rhalf", "rter", T, 0.3f, -1},
    /* scale_block (version 3): blocks, the rule's 0 against the setting,
     * blocked Y form into ternary and back, blocks with the whole residual,
     * a blocked region beside a ternary one */
    {"block", {B, B, B, B, B, B, B}, 0.5f, NULL, NULL, B, 0, 512},
    {"block0", {B, B, B, B, B, B, B}, 0.5f, NULL, NULL, B, 0, 0},
    {"bswitch", {T, T, B, B, T, B, B}, 0.5f, NULL, NULL, B, 0, 1024},
    {"bone", {B, B, B, B, B, B, B}, 1.0f, NULL, NULL, B, 0, 512},
    {"bfused", {B, B, B, B, B, B, B}, 0.5f, "rblock", "rter", T, 0.3f, 512},
    /* the integer routes' block (version 4): below, above and at a line;
     * across two one-rank nodes their finish streams in whole blocks */
    {"i4b32", {I4, I4, I4, I4, I4, I4, I4}, -1.0f, NULL, NULL, B, 0, 32},
    {"i3b4096", {I3, I3, I3, I3, I3, I3, I3}, 0.5f, NULL, NULL, B, 0, 4096},
    {"i2b1024", {I2, I2, I2, I2, I2, I2, I2}, -1.0f, NULL, NULL, B, 0, 1024},
};
#undef B
#undef T
#undef I4
#undef I3
#undef I2
#define NPCASES (sizeof(policy_cases) / sizeof(policy_cases[0]))

/* The expected result of part [off, off + pm) of every rank's m inputs. */
static void ref_part(float *ref, const float *xs, float *es, int n, size_t m, size_t off, size_t pm,
                     nf_route_t route, float decay, long block)
{
    float *sub = malloc((size_t)n * pm * sizeof(float) + 1);
    for (int i = 0; i < n; i++)
        memcpy(sub + (size_t)i * pm, xs + (size_t)i * m + off, pm * sizeof(float));
    if (decay < 0.0f)
        decay = decay_env();
    if (route == NF_ROUTE_BINARY)
        ref_binary_b(ref + off, sub, es, n, pm, decay, block < 0 ? ref_block_env() : (size_t)block);
    else if (route >= NF_ROUTE_INT4)
        ref_int(ref + off, sub, es, n, pm, route == NF_ROUTE_INT4 ? 4 : route == NF_ROUTE_INT3 ? 3 : 2,
                decay, block > 0 ? (size_t)block : REF_INT_BLOCK);
    else
        ref_ternary_d(ref + off, sub, es, n, pm, gamma_env(), decay);
    free(sub);
}

/* PCALLS calls of NF_Allreduce (the policy decides) on case p's
 * communicator; every result goes to out (PCALLS x m) for comparisons
 * between cases. Inputs depend on the seed only, not on the case. */
static int run_policy_case(const pcase_t *p, size_t m, int inplace, int rank, int n, float *out)
{
    size_t m1 = p->region != NULL ? m / 2 : m, mm = m ? m : 1;
    float *xs = malloc((size_t)n * mm * sizeof(float)), *ref = malloc(mm * sizeof(float));
    float *es1 = ef_on() ? calloc((size_t)n * mm, sizeof(float)) : NULL;
    float *es2 = ef_on() ? calloc((size_t)n * mm, sizeof(float)) : NULL;
    float *send = nft_keep(malloc(mm * sizeof(float) + 64));
    float *recv = nft_keep(malloc(mm * sizeof(float) + 64));
    float *buf = inplace ? recv : send;
    MPI_Comm comm;
    int fails = 0;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_name(comm, p->comm);
    if (p->region != NULL) {
        fails += nft_check(NF_Region_bind(buf, (int)m1, MPI_FLOAT, p->region) == MPI_SUCCESS,
                           p->region, "bind failed");
        fails += nft_check(NF_Region_bind(buf + m1, (int)(m - m1), MPI_FLOAT, p->region2) ==
                               MPI_SUCCESS, p->region2, "bind failed");
    }
    for (int c = 0; c < PCALLS && fails == 0; c++) {
        for (int i = 0; i < n; i++)
            ref_input(xs + (size_t)i * m, m, i, c, 4242);
        memcpy(buf, xs + (size_t)rank * m, m * sizeof(float));
        int rc = NF_Allreduce(inplace ? MPI_IN_PLACE : send, recv, (int)m, MPI_FLOAT, MPI_SUM, comm);
        ref_part(ref, xs, es1, n, m, 0, m1, p->route[c], p->decay, p->block);
        if (p->region != NULL)
            ref_part(ref, xs, es2, n, m, m1, m - m1, p->route2, p->decay2, -1);
        char what[160];
        snprintf(what, sizeof(what), "policy comm %s count %zu %s call %d (%s)", p->comm, m,
                 inplace ? "in-place" : "out-of-place", c, nf_route_name(p->route[c]));
        fails += nft_check(rc == MPI_SUCCESS, what, "return code %d", rc);
        fails += nft_same_floats(recv, ref, m, what);
        fails += nft_identical_on_all(recv, m * sizeof(float), what);
        memcpy(out + (size_t)c * m, recv, m * sizeof(float));
    }
    if (p->region != NULL)
        NF_Region_unbind(buf), NF_Region_unbind(buf + m1);
    MPI_Comm_free(&comm);
    free(xs), free(ref), free(es1), free(es2);
    return fails;
}

/* Results of two cases over all calls: the same bits (want_same), or not. */
static int compare_cases(const float *a, const float *b, size_t m, int want_same, const char *what)
{
    int same = memcmp(a, b, PCALLS * m * sizeof(float)) == 0;
    return nft_check(same == want_same, what, want_same ? "results differ" : "results are the same");
}

static int run_policy(const size_t *counts, int ncounts, int rank, int n)
{
    int fails = 0;
    float d = decay_env();
    for (int c = 0; c < ncounts; c++) {
        size_t m = counts[c];
        float *out[NPCASES];
        for (size_t i = 0; i < NPCASES; i++) {
            out[i] = malloc(PCALLS * (m ? m : 1) * sizeof(float));
            if (policy_cases[i].region == NULL || m >= 2) /* two regions need two elements */
                fails += run_policy_case(&policy_cases[i], m, (int)((i + (size_t)c) & 1), rank, n,
                                         out[i]);
        }
        char what[96];
        snprintf(what, sizeof(what), "count %zu: ef_decay = 1 against no ef_decay (setting %g)", m,
                 (double)d);
        if (d == 1.0f || d == 0.5f) /* nokey takes the setting, one and half their own */
            fails += compare_cases(out[0], out[d == 1.0f ? 1 : 2], m, 1, what);
        snprintf(what, sizeof(what), "count %zu: ef_decay = 0.5 against 1", m);
        if (m > 1 && ef_on()) /* the decay must change something after the first call */
            fails += compare_cases(out[1], out[2], m, 0, what);
        snprintf(what, sizeof(what), "count %zu: scale_block = 512 against none", m);
        if (m > 512) /* several blocks: other scales from the first call */
            fails += compare_cases(out[7], out[8], m, 0, what);
        snprintf(what, sizeof(what), "count %zu: scale_block = 0 against the setting %zu", m,
                 ref_block_env());
        if (ref_block_env() == 0 || ref_block_env() >= m) /* one scale either way */
            fails += compare_cases(out[2], out[8], m, 1, what);
        for (size_t i = 0; i < NPCASES; i++)
            free(out[i]);
    }
    return fails;
}

int main(int argc, char **argv)
{
    size_t counts[16] = {0, 1, 7, 513, 1048579}, pcounts[3] = {1, 513, 70001};
    int ncounts = 5, given = 0, rank, n, fails = 0, policy = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    ref_nodes_init(n);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0 && i + 1 < argc && given < 16)
            counts[given++] = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-p") == 0)
            policy = 1;
    }
    if (given)
        ncounts = given;
    if (policy) {
        fails += given ? run_policy(counts, ncounts, rank, n) : run_policy(pcounts, 3, rank, n);
        return nft_finish(fails, "test_routes -p");
    }
    unsigned seed = 1;
    for (int r = NF_ROUTE_FP32; r < NF_ROUTE_COUNT; r++)
        for (int c = 0; c < ncounts; c++)
            for (int ip = 0; ip < 2; ip++) {
                tcase_t t = {(nf_route_t)r, counts[c], ip, seed++};
                fails += run_case(&t, rank, n);
            }
    /* every residual form into every other: Y, TY and Q (int), and E */
    static const nf_route_t seq[] = {
        NF_ROUTE_BINARY, NF_ROUTE_TERNARY, NF_ROUTE_TERNARY, NF_ROUTE_BINARY, NF_ROUTE_FP32,
        NF_ROUTE_BF16,   NF_ROUTE_TERNARY, NF_ROUTE_BINARY,  NF_ROUTE_BINARY, NF_ROUTE_INT4,
        NF_ROUTE_INT4,   NF_ROUTE_TERNARY, NF_ROUTE_INT3,    NF_ROUTE_INT2,   NF_ROUTE_BINARY,
        NF_ROUTE_INT4,   NF_ROUTE_FP32,    NF_ROUTE_INT4};
    for (int c = 0; c < ncounts; c++)
        if (counts[c] > 0)
            fails += bf16_specials(counts[c], rank, n);
    for (int c = 0; c < ncounts; c++) {
        tcase_t t = {NF_ROUTE_BINARY, counts[c], c & 1, seed++};
        fails += run_calls(&t, seq, (int)(sizeof(seq) / sizeof(seq[0])), rank, n);
    }
    return nft_finish(fails, "test_routes");
}

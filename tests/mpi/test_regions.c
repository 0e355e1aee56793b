/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fused buffers (run under tests/policy_shim/regions.policy): a buffer
 * bound as body (binary) | gap (binary, unbound) | mid (ternary) |
 * head.weight (fp32), reduced by NF_Allreduce; every part checked against
 * nf_ref.h on its own, with error feedback, over several calls; then unbind,
 * rebind with another count, a bucket moved to a new address, ranks with
 * different layouts, and the binding API's errors (one name at two
 * addresses, a base not aligned to a float). Binary parts follow
 * NFCOLL_SCALE_BLOCK as the library does.
 * With --pmpi-default (tests/policy_shim/regions_pmpi.policy): ranks whose
 * layouts make one run the call whole on pmpi and another cut it into the
 * protocol agree on pmpi, with no hang and the exact sum; --bytes-only
 * (regions_bytes.policy) the same where a cut changes segments' sizes.
 * With --forced: a forced route's residual restarted by regions bound over
 * its buffer. With --many: more fused buffers and call sizes than
 * admission keeps decisions for, interleaved, each call against its
 * references (a decision dropped and made again routes alike). With --scale: 20 000 four-float regions in one call, 100 000 binds in
 * descending address order and their unbinds in ascending order, each
 * under a generous time bound (quadratic costs take seconds to minutes).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nfcoll.h>

#include "nf_ref.h"
#include "nf_testutil.h"

enum { NSEG = 4 };
typedef struct part {
    const char *name; /* NULL: unbound gap */
    size_t off, m;
    nf_route_t route;
    float *es;        /* n x m residuals of the reference */
} part_t;

static int rank, n;

static void ref_part(float *ref, const float *xs, part_t *p, size_t m)
{
    /* xs holds n full buffers of m elements: gather this part's slices. */
    float *sub = malloc((size_t)n * p->m * sizeof(float) + 1);
    for (int i = 0; i < n; i++)
        memcpy(sub + (size_t)i * p->m, xs + (size_t)i * m + p->off, p->m * sizeof(float));
    if (p->route == NF_ROUTE_FP32)
        ref_fp32(ref + p->off, sub, n, p->m);
    else if (p->route == NF_ROUTE_BINARY)
        ref_binary_b(ref + p->off, sub, p->es, n, p->m, 1.0f, ref_block_env());
    else
        ref_ternary(ref + p->off, sub, p->es, n, p->m, 1.0);
    free(sub);
}

static void reset_part(part_t *p)
{
    free(p->es);
    p->es = p->route == NF_ROUTE_FP32 ? NULL : calloc((size_t)n * p->m, sizeof(float));
}

/* One call on each of nb buffers, back to back (no other call between
 * them), then each checked: NF_Allreduce (route < 0) or NF_Allreduce_route
 * on buf[j] (in place) against its parts' references. */
typedef struct call_on {
    float *buf;
    size_t m;
    part_t *parts;
    int np;
} call_on_t;

static int run_batch(const call_on_t *on, int nb, int c, int seed, int route, const char *what)
{
    float **xs = calloc((size_t)nb, sizeof(*xs));
    int *rc = calloc((size_t)nb, sizeof(*rc)), fails = 0;
    for (int j = 0; j < nb; j++) {
        xs[j] = malloc((size_t)n * on[j].m * sizeof(float));
        for (int i = 0; i < n; i++)
            ref_input(xs[j] + (size_t)i * on[j].m, on[j].m, i, c, (unsigned)seed);
        memcpy(on[j].buf, xs[j] + (size_t)rank * on[j].m, on[j].m * sizeof(float));
    }
    for (int j = 0; j < nb; j++)
        rc[j] = route < 0 ? NF_Allreduce(MPI_IN_PLACE, on[j].buf, (int)on[j].m, MPI_FLOAT,
                                         MPI_SUM, MPI_COMM_WORLD)
                          : NF_Allreduce_route(MPI_IN_PLACE, on[j].buf, (int)on[j].m,
                                               MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                               (nf_route_t)route);
    for (int j = 0; j < nb; j++) {
        float *ref = malloc(on[j].m * sizeof(float));
        char w[160];
        for (int p = 0; p < on[j].np; p++)
            ref_part(ref, xs[j], &on[j].parts[p], on[j].m);
        snprintf(w, sizeof(w), nb > 1 ? "%s, call %d, buffer %d" : "%s, call %d", what, c, j);
        fails += nft_check(rc[j] == MPI_SUCCESS, w, "return code %d", rc[j]);
        for (int p = 0; p < on[j].np; p++) {
            const part_t *q = &on[j].parts[p];
            char wp[200];
            snprintf(wp, sizeof(wp), "%s, %s (%s)", w, q->name ? q->name : "gap",
                     nf_route_name(q->route));
            fails += nft_same_floats(on[j].buf + q->off, ref + q->off, q->m, wp);
        }
        fails += nft_identical_on_all(on[j].buf, on[j].m * sizeof(float), w);
        free(ref);
        free(xs[j]);
    }
    free(xs);
    free(rc);
    return fails;
}

static int run_route(float *buf, size_t m, part_t *parts, int np, int calls, int seed,
                     int route, const char *what)
{
    call_on_t on = {buf, m, parts, np};
    int fails = 0;
    for (int c = 0; c < calls; c++)
        fails += run_batch(&on, 1, c, seed, route, what);
    return fails;
}

static int run_calls(float *buf, size_t m, part_t *parts, int np, int calls, int seed,
                     const char *what)
{
    return run_route(buf, m, parts, np, calls, seed, -1, what);
}

static int bind_all(float *buf, part_t *parts, int np)
{
    int fails = 0;
    for (int p = 0; p < np; p++)
        if (parts[p].name != NULL)
            fails += nft_check(NF_Region_bind(buf + parts[p].off, (int)parts[p].m, MPI_FLOAT,
                                              parts[p].name) == MPI_SUCCESS,
                               parts[p].name, "bind failed");
    return fails;
}

static void unbind_all(float *buf, part_t *parts, int np)
{
    for (int p = 0; p < np; p++)
        if (parts[p].name != NULL)
            NF_Region_unbind(buf + parts[p].off);
}

static int test_api(void)
{
    static float b[64];
    char longname[140];
    int f = 0;
    memset(longname, 'a', sizeof(longname));
    longname[128] = '\0';
    f += nft_check(NF_Region_bind(b, 8, MPI_DOUBLE, "x") == MPI_ERR_TYPE, "bind double",
                   "not MPI_ERR_TYPE");
    f += nft_check(NF_Region_bind(b, 0, MPI_FLOAT, "x") == MPI_ERR_COUNT, "bind count 0",
                   "not MPI_ERR_COUNT");
    f += nft_check(NF_Region_bind(b, 8, MPI_FLOAT, "a b") == MPI_ERR_ARG, "bind 'a b'",
                   "not MPI_ERR_ARG");
    f += nft_check(NF_Region_bind(b, 8, MPI_FLOAT, "") == MPI_ERR_ARG, "bind ''", "not MPI_ERR_ARG");
    f += nft_check(NF_Region_bind(b, 8, MPI_FLOAT, longname) == MPI_ERR_ARG, "bind 128 bytes",
                   "not MPI_ERR_ARG");
    longname[127] = '\0';
    f += nft_check(NF_Region_bind(b, 8, MPI_FLOAT, longname) == MPI_SUCCESS, "bind 127 bytes",
                   "refused");
    f += nft_check(NF_Region_bind(b + 4, 8, MPI_FLOAT, "y") == MPI_ERR_ARG, "overlap",
                   "not MPI_ERR_ARG");
    f += nft_check(NF_Region_bind(b + 8, 8, MPI_FLOAT, "y") == MPI_SUCCESS, "adjacent",
                   "refused");
    f += nft_check(NF_Region_unbind(b + 1) == MPI_ERR_ARG, "unbind unknown", "not MPI_ERR_ARG");
    f += nft_check(NF_Region_unbind(b) == MPI_SUCCESS && NF_Region_unbind(b + 8) == MPI_SUCCESS,
                   "unbind", "failed");
    /* One name is one layer: a second address under it would share its
     * residual (issue 18 item 4). Free again once unbound. */
    f += nft_check(NF_Region_bind(b, 8, MPI_FLOAT, "dup") == MPI_SUCCESS, "bind dup", "refused");
    f += nft_check(NF_Region_bind(b + 16, 8, MPI_FLOAT, "dup") == MPI_ERR_ARG,
                   "bind dup at a second address", "not MPI_ERR_ARG");
    f += nft_check(NF_Region_unbind(b + 16) == MPI_ERR_ARG, "the refused dup is not bound",
                   "it was");
    f += nft_check(NF_Region_unbind(b) == MPI_SUCCESS &&
                       NF_Region_bind(b + 16, 8, MPI_FLOAT, "dup") == MPI_SUCCESS &&
                       NF_Region_unbind(b + 16) == MPI_SUCCESS,
                   "dup moved after its unbind", "refused");
    /* A float buffer cannot start 2 bytes into a float: refused, not
     * rounded down to the float below. */
    f += nft_check(NF_Region_bind((char *)(b + 32) + 2, 8, MPI_FLOAT, "odd") == MPI_ERR_ARG,
                   "bind 2 bytes off a float", "not MPI_ERR_ARG");
    f += nft_check(NF_Region_bind(b + 32, 8, MPI_FLOAT, "odd") == MPI_SUCCESS &&
                       NF_Region_unbind(b + 32) == MPI_SUCCESS,
                   "odd bound aligned", "refused");
    return f;
}

enum { SCALE_CALL = 20000, SCALE_BIND = 100000, SCALE_ELEMS = 4 };

/* Bind (on) or unbind regions 0 .. count-1 of buf, lowest address first
 * or (down) highest first: the number done. A sorted array pays the whole
 * array per bind going down, per unbind going up. bound is a hang guard,
 * not a speed check (speeds are bench/nf_fused's): minutes of a quadratic
 * registry stop there, and the count then says so. */
static int scale_bind(float *buf, int count, int on, int down, double bound, double *secs)
{
    char name[32];
    double t0 = MPI_Wtime();
    int done = 0;
    for (int i = 0; i < count; i++) {
        int k = down ? count - 1 - i : i;
        float *at = buf + (size_t)k * SCALE_ELEMS;
        snprintf(name, sizeof(name), "layer%d.w", k);
        if ((on ? NF_Region_bind(at, SCALE_ELEMS, MPI_FLOAT, name) : NF_Region_unbind(at)) !=
            MPI_SUCCESS)
            break;
        done++;
        if (i % 1024 == 1023 && MPI_Wtime() - t0 > bound)
            break; /* quadratic: do not wait minutes to say so */
    }
    *secs = MPI_Wtime() - t0;
    return done;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Scale: 20 000 regions in one call, one segment each, and 100 000 binds
 * and unbinds in the order a sorted array pays most for. No timed
 * assertion (the times are printed; bench/nf_fused measures them): the
 * guard only stops a registry that would take minutes (a quadratic one
 * took 40 s for the 100 000 binds, an O(log n) one well under 1 s). */
static int test_scale(void)
{
    const double guard = 120.0;
    float *buf = nft_keep(malloc((size_t)SCALE_BIND * SCALE_ELEMS * sizeof(float)));
    const int m = SCALE_CALL * SCALE_ELEMS;
    double secs, t[3];
    int f = 0, done;
    done = scale_bind(buf, SCALE_CALL, 1, 0, 60.0, &secs);
    f += nft_check(done == SCALE_CALL, "bind 20000 regions", "%d bound", done);
    nf_route_stats_t b0, b1;
    for (int c = 0; c < 4; c++) { /* the first call makes the residuals: untimed */
        for (int j = 0; j < m; j++)
            buf[j] = (float)((j * 7 + rank) % 13) - 6.0f;
        MPI_Barrier(MPI_COMM_WORLD);
        nf_stats_get(NF_ROUTE_BINARY, &b0);
        double t0 = MPI_Wtime();
        int rc = NF_Allreduce(MPI_IN_PLACE, buf, m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double dt = MPI_Wtime() - t0;
        nf_stats_get(NF_ROUTE_BINARY, &b1);
        f += nft_check(rc == MPI_SUCCESS, "call with 20000 regions", "return code %d", rc);
        f += nft_check(b1.calls - b0.calls == SCALE_CALL, "call with 20000 regions",
                       "%llu binary segments, not one per region",
                       (unsigned long long)(b1.calls - b0.calls));
        MPI_Allreduce(&dt, c > 0 ? &t[c - 1] : &secs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    qsort(t, 3, sizeof(double), cmp_double);
    if (rank == 0)
        printf("20000 regions: first call %.3f s, then %.4f s per call (median of 3)\n", secs,
               t[1]);
    done = scale_bind(buf, SCALE_CALL, 0, 1, 60.0, &secs);
    f += nft_check(done == SCALE_CALL, "unbind 20000 regions", "%d unbound", done);

    /* One unbound buffer's residual beside the 20000 regions' in the same
     * table: a bind looks at unbound buffers' residuals only, not at all. */
    static float one[64];
    f += nft_check(NF_Allreduce_route(MPI_IN_PLACE, one, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                      NF_ROUTE_BINARY) == MPI_SUCCESS,
                   "an unbound binary call", "failed");
    done = scale_bind(buf, SCALE_BIND, 1, 1, guard, &secs);
    if (rank == 0)
        printf("100000 binds, descending: %d in %.3f s\n", done, secs);
    f += nft_check(done == SCALE_BIND, "100000 binds, descending",
                   "%d in %.2f s (stopped by the %.0f s guard)", done, secs, guard);
    /* The regions bound: the highest `bound` (the time bound may stop it). */
    int bound = done;
    float *lo = buf + (size_t)(SCALE_BIND - bound) * SCALE_ELEMS;
    done = scale_bind(lo, bound, 0, 0, guard, &secs);
    if (rank == 0)
        printf("%d unbinds, ascending: %d in %.3f s\n", bound, done, secs);
    f += nft_check(done == SCALE_BIND, "100000 unbinds, ascending",
                   "%d in %.2f s (stopped by the %.0f s guard)", done, secs, guard);
    /* Leave nothing bound (the highest ones, when the bound stopped it). */
    for (int k = done; k < bound; k++)
        NF_Region_unbind(lo + (size_t)k * SCALE_ELEMS);
    return f;
}

/* One call of m floats after each rank bound what bind() says; every rank
 * must get the sum (pmpi may add in another order: within rounding), the
 * same bits everywhere, and `layouts` more layout fallbacks counted. */
static int mixed_call(size_t m, void (*bind)(float *, size_t), int layouts, nf_route_t route,
                      const char *what)
{
    float *buf = malloc(m * sizeof(float)), *xs = malloc((size_t)n * m * sizeof(float));
    float *ref = malloc(m * sizeof(float));
    uint64_t before = nf_stats_fallbacks(NF_FALLBACK_LAYOUT);
    nf_route_stats_t r0, r1;
    int fails = 0;
    for (int i = 0; i < n; i++)
        ref_input(xs + (size_t)i * m, m, i, 0, 11);
    memcpy(buf, xs + (size_t)rank * m, m * sizeof(float));
    ref_fp32(ref, xs, n, m);
    bind(buf, m);
    nf_stats_get(route, &r0);
    int rc = NF_Allreduce(MPI_IN_PLACE, buf, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    nf_stats_get(route, &r1);
    fails += nft_check(rc == MPI_SUCCESS, what, "return code %d", rc);
    for (size_t j = 0; j < m && fails == 0; j++)
        fails += nft_check(fabsf(buf[j] - ref[j]) <= 1e-5f * (float)n, what,
                           "element %zu is %g, expected %g", j, (double)buf[j], (double)ref[j]);
    fails += nft_identical_on_all(buf, m * sizeof(float), what);
    fails += nft_check(nf_stats_fallbacks(NF_FALLBACK_LAYOUT) == before + (uint64_t)layouts,
                       what, "layout fallbacks %llu -> %llu, expected +%d",
                       (unsigned long long)before,
                       (unsigned long long)nf_stats_fallbacks(NF_FALLBACK_LAYOUT), layouts);
    fails += nft_check(r1.calls > r0.calls, what, "no %s call counted", nf_route_name(route));
    NF_Region_unbind(buf); /* what bind() bound; the other one is refused */
    NF_Region_unbind(buf + m / 2);
    free(buf), free(xs), free(ref);
    return fails;
}

/* Rank 0 binds head.w in the second half, the others nothing: rank 0 cuts
 * the call (gap pmpi, head fp32), the others run it whole on pmpi. */
static void bind_head_rank0(float *b, size_t m)
{
    if (rank == 0)
        NF_Region_bind(b + m / 2, (int)(m - m / 2), MPI_FLOAT, "head.w");
}

/* Rank 0 binds body.w (pmpi like its gap: whole on pmpi), the others
 * head.w (fused, fp32). */
static void bind_body_or_head(float *b, size_t m)
{
    NF_Region_bind(b + m / 2, (int)(m - m / 2), MPI_FLOAT, rank == 0 ? "body.w" : "head.w");
}

/* A binary-sized call: rank 0 binds all of it as skip.all (pmpi, so whole
 * on pmpi), the others run it binary. */
static void bind_skip_rank0(float *b, size_t m)
{
    if (rank == 0)
        NF_Region_bind(b, (int)m, MPI_FLOAT, "skip.all");
}

/* The same layout everywhere: fused, exact, no fallback. */
static void bind_head_all(float *b, size_t m)
{
    NF_Region_bind(b + m / 2, (int)(m - m / 2), MPI_FLOAT, "head.w");
}

/* Rank 0 binds the first half as x, the others nothing. */
static void bind_half_rank0(float *b, size_t m)
{
    if (rank == 0)
        NF_Region_bind(b, (int)(m / 2), MPI_FLOAT, "x");
}

/* A policy on bytes alone: a binary-sized call whose halves are pmpi-sized
 * runs whole on pmpi on rank 0 and binary elsewhere: pmpi everywhere. A
 * small call is pmpi on every rank however it is cut: no fallback. */
/* --forced: NF_Allreduce_route keeps one residual for the buffer, by
 * address. Binding regions over it says the memory holds something new
 * (DDP rebuilds a bucket where a freed one was): the residual restarts, so
 * the result does not depend on where the allocator put the new buffer.
 * Apart from the main run: forced calls are not admitted, so the trace
 * tests/replay.sh replays has none of them. */
static int forced(void)
{
    const size_t m = 4000;
    float *buf = nft_keep(malloc(m * sizeof(float)));
    part_t all = {NULL, 0, m, NF_ROUTE_BINARY, NULL};
    part_t two[2] = {{"f.a", 0, 1000, NF_ROUTE_BINARY, NULL},
                     {"f.b", 1000, 3000, NF_ROUTE_BINARY, NULL}};
    reset_part(&all);
    int fails = run_route(buf, m, &all, 1, 2, 6, NF_ROUTE_BINARY, "forced binary");
    fails += bind_all(buf, two, 2);
    reset_part(&all);
    fails += run_route(buf, m, &all, 1, 2, 7, NF_ROUTE_BINARY,
                       "forced binary, regions bound over it since: a fresh residual");
    unbind_all(buf, two, 2);
    free(all.es);
    return nft_finish(fails, "test_regions --forced");
}

static int bytes_only(void)
{
    int f = 0;
    f += mixed_call(20000, bind_half_rank0, 1, NF_ROUTE_PMPI, "halves of 40000 B on rank 0");
    f += mixed_call(1000, bind_half_rank0, 0, NF_ROUTE_PMPI, "a small call cut on rank 0");
    return nft_finish(f, "test_regions --bytes-only");
}

static int pmpi_default(void)
{
    int f = 0;
    f += mixed_call(1000, bind_head_rank0, 1, NF_ROUTE_PMPI, "head.w on rank 0 only");
    f += mixed_call(1000, bind_body_or_head, 1, NF_ROUTE_PMPI, "body.w on rank 0, head.w else");
    f += mixed_call(32768, bind_skip_rank0, 1, NF_ROUTE_PMPI, "skip.all on rank 0 only");
    f += mixed_call(1000, bind_head_all, 0, NF_ROUTE_FP32, "head.w on every rank");
    f += mixed_call(1000, bind_head_rank0, 1, NF_ROUTE_PMPI, "head.w on rank 0 only, again");
    return nft_finish(f, "test_regions --pmpi-default");
}

/* --many: 12 fused buffers (admission keeps the cuts of 8), two by two of
 * one size cut differently, called back to back and then an unbound
 * buffer of their size; between them, unbound calls of 80 other
 * sizes (admission's table holds 64 decisions); three rounds. Every part
 * of every call matches its reference, error feedback included: no call
 * takes another's decision, and decisions replaced and made again route
 * alike. */
static int many(void)
{
    enum { NBUF = 12, NSIZE = 80, ROUNDS = 3 };
    static part_t fp[NBUF][2], up[NSIZE][1], sp[NBUF / 2][1];
    static float *fb[NBUF], *ub[NSIZE], *sb[NBUF / 2];
    static char names[NBUF][16];
    int f = 0;
    for (int k = 0; k < NBUF; k++) {
        size_t m = 600 + 37 * (size_t)(k % (NBUF / 2)), h = 100 + 11 * (size_t)k;
        snprintf(names[k], sizeof(names[k]), "head.w%d", k);
        fp[k][0] = (part_t){NULL, 0, m - h, NF_ROUTE_BINARY, NULL};
        fp[k][1] = (part_t){names[k], m - h, h, NF_ROUTE_FP32, NULL};
        reset_part(&fp[k][0]);
        reset_part(&fp[k][1]);
        fb[k] = nft_keep(malloc(m * sizeof(float)));
        f += bind_all(fb[k], fp[k], 2);
        if (k < NBUF / 2) {
            sp[k][0] = (part_t){NULL, 0, m, NF_ROUTE_BINARY, NULL};
            reset_part(&sp[k][0]);
            sb[k] = nft_keep(malloc(m * sizeof(float)));
        }
    }
    for (int k = 0; k < NSIZE; k++) {
        up[k][0] = (part_t){NULL, 0, 50 + 13 * (size_t)k, NF_ROUTE_BINARY, NULL};
        reset_part(&up[k][0]);
        ub[k] = nft_keep(malloc(up[k][0].m * sizeof(float)));
    }
    for (int r = 0; r < ROUNDS && f == 0; r++)
        for (int k = 0; k < NSIZE; k++) {
            char w[80];
            int b = (k / 10 + r) % (NBUF / 2);
            size_t m = sp[b][0].m;
            if (k % 10 == 0) { /* one count: two cuts, then none */
                call_on_t on[3] = {{fb[b], m, fp[b], 2},
                                   {fb[b + NBUF / 2], m, fp[b + NBUF / 2], 2},
                                   {sb[b], m, sp[b], 1}};
                snprintf(w, sizeof(w), "--many round %d, fused buffers %d and %d, unbound",
                         r, b, b + NBUF / 2);
                f += run_batch(on, 3, 0, 100 + r, -1, w);
            }
            snprintf(w, sizeof(w), "--many round %d, %zu floats unbound", r, up[k][0].m);
            f += run_calls(ub[k], up[k][0].m, up[k], 1, 1, 200 + r, w);
        }
    return nft_finish(f, "test_regions --many");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    ref_nodes_init(n);
    if (argc > 1 && strcmp(argv[1], "--scale") == 0)
        return nft_finish(test_scale(), "test_regions --scale");
    if (argc > 1 && strcmp(argv[1], "--pmpi-default") == 0)
        return pmpi_default();
    if (argc > 1 && strcmp(argv[1], "--bytes-only") == 0)
        return bytes_only();
    if (argc > 1 && strcmp(argv[1], "--forced") == 0)
        return forced();
    if (argc > 1 && strcmp(argv[1], "--many") == 0)
        return many();
    const size_t m = 9777;
    part_t parts[NSEG] = {
        {"body", 0, 5000, NF_ROUTE_BINARY, NULL},
        {NULL, 5000, 777, NF_ROUTE_BINARY, NULL},
        {"mid", 5777, 3000, NF_ROUTE_TERNARY, NULL},
        {"head.weight", 8777, 1000, NF_ROUTE_FP32, NULL},
    };
    float *buf = nft_keep(malloc(m * sizeof(float))), *moved = nft_keep(malloc(m * sizeof(float)));
    int fails = test_api();
    for (int p = 0; p < NSEG; p++)
        reset_part(&parts[p]);
    fails += bind_all(buf, parts, NSEG);
    fails += run_calls(buf, m, parts, NSEG, 3, 1, "fused");

    /* Unbind mid: [5000, 8777) is one unbound gap now, a new residual. */
    NF_Region_unbind(buf + 5777);
    part_t merged[3] = {parts[0], {NULL, 5000, 3777, NF_ROUTE_BINARY, NULL}, parts[3]};
    reset_part(&merged[1]);
    fails += run_calls(buf, m, merged, 3, 2, 2, "mid unbound");
    parts[0] = merged[0];
    free(merged[1].es);

    /* Rebind mid with another count: its residual starts over, and so does
     * the gap at 5000 (its count changed back from 3777). */
    part_t again[5] = {parts[0], {NULL, 5000, 777, NF_ROUTE_BINARY, NULL},
                       {"mid", 5777, 2000, NF_ROUTE_TERNARY, NULL},
                       {NULL, 7777, 1000, NF_ROUTE_BINARY, NULL}, parts[3]};
    free(parts[1].es);
    reset_part(&again[1]);
    reset_part(&again[2]);
    reset_part(&again[3]);
    fails += nft_check(NF_Region_bind(buf + 5777, 2000, MPI_FLOAT, "mid") == MPI_SUCCESS,
                       "rebind mid", "failed");
    fails += run_calls(buf, m, again, 5, 2, 3, "mid rebound with 2000");

    /* The bucket moves: regions keep their residuals by name, gaps (keyed
     * by address) start over. */
    unbind_all(buf, again, 5);
    reset_part(&again[1]);
    reset_part(&again[3]);
    fails += bind_all(moved, again, 5);
    fails += run_calls(moved, m, again, 5, 2, 4, "moved bucket");


    /* Different layouts: rank 0 binds one more region. The call runs fp32
     * everywhere, no hang, one fallback counted on every rank. */
    uint64_t before = nf_stats_fallbacks(NF_FALLBACK_LAYOUT);
    if (rank == 0)
        NF_Region_bind(moved + 7777, 100, MPI_FLOAT, "extra");
    part_t whole = {NULL, 0, m, NF_ROUTE_FP32, NULL};
    fails += run_calls(moved, m, &whole, 1, 1, 5, "layouts differ");
    fails += nft_check(nf_stats_fallbacks(NF_FALLBACK_LAYOUT) == before + 1,
                       "layout mismatch counted", "fallbacks %llu -> %llu",
                       (unsigned long long)before,
                       (unsigned long long)nf_stats_fallbacks(NF_FALLBACK_LAYOUT));
    for (int p = 0; p < 5; p++)
        free(again[p].es);
    return nft_finish(fails, "test_regions");
}

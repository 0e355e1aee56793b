/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernel bandwidth benchmark: every kernel of every available ISA on the same
 * buffers, each next to a memcpy of the FP32 buffer timed alternately with it.
 *
 * Two rates per row:
 *  - FP32 GB/s: gradient elements processed per second x 4 bytes (the size of
 *    the FP32 vector the kernel works on), comparable across kernels;
 *  - traffic GB/s: bytes the kernel must read plus write per element (column
 *    B/elem), and that rate as % of memcpy's read+write rate (2 x size / time).
 * Kernels are memory-bound; the target is >= 80 % of memcpy.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nf_kernels.h"

typedef struct {
    size_t m;        /* floats */
    unsigned nranks; /* n for the counters */
    unsigned k;      /* planes for n */
    int inplace;
    float decay;     /* ef_decay of bin_pack_ef, ter_y_ef and int_y_ef */
    unsigned kb;     /* bits of the int-k kernels */
    size_t B;        /* their scale block */
    float *x, *e, *r, *y, *src, *dst; /* x, r at the -o offset; y (ynew) aligned */
    float **in;      /* sum_f32 inputs */
    uint16_t **hin;  /* bf16: sum_bf16 inputs, hin[0] bf16_pack's output (at -o halves) */
    uint64_t *bits, *plus, *minus, *cnt, *cnt2, **bin;
    float *mx, *me;  /* int-k: block max of |x| and of |e| (m / B + 1) */
    uint32_t *bmax;  /* int_y_ef's block maxima */
    uint64_t *planes, *icnt; /* int_pack's kb lines, int_finish's kb * k counter lines per 512 */
} bench_t;

typedef struct {
    const char *name;
    int has_e; /* 1: with error feedback, 0: without, -1: not applicable */
} row_t;

static const row_t rows[] = {
    {"abs_sum", 1}, {"abs_sum", 0}, {"bin_pack", 1}, {"bin_pack", 0}, {"bin_pack_ef", 1},
    {"bin_finish", 1}, {"bin_finish", 0}, {"ter_pack", 1}, {"ter_pack", 0},
    {"ter_y_ef", 1}, {"ter_finish", 1}, {"ter_finish", 0}, {"count_sum", -1}, {"count_merge", -1},
    {"sum_f32", -1}, {"bf16_pack", -1}, {"sum_bf16", -1}, {"sum_bf16_f32", -1},
    {"int_y_ef", 1}, {"int_y_ef", 0}, {"int_pack", -1}, {"int_finish", -1},
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

static volatile double sink;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void *xalloc(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "nf_kernels: cannot allocate %zu bytes\n", bytes);
        exit(EXIT_FAILURE);
    }
    memset(p, 0, bytes); /* first touch outside the timed loops */
    return p;
}

/* Bytes read plus written per element. */
static double traffic(const bench_t *b, const row_t *r)
{
    double k = b->k, n = b->nranks;
    if (!strcmp(r->name, "abs_sum"))
        return r->has_e ? 8 : 4;
    if (!strcmp(r->name, "bin_pack"))
        return (r->has_e ? 8 : 4) + 1.0 / 8;
    if (!strcmp(r->name, "bin_pack_ef")) /* x, yprev in; ynew, bits out */
        return 12 + 1.0 / 8;
    if (!strcmp(r->name, "bin_finish"))
        return r->has_e ? 16 + k / 8 : 4 + k / 8;
    if (!strcmp(r->name, "ter_pack"))
        return (r->has_e ? 8 : 4) + 2.0 / 8;
    if (!strcmp(r->name, "ter_y_ef")) /* x, yprev in; ynew out */
        return 12;
    if (!strcmp(r->name, "ter_finish"))
        return r->has_e ? 16 + 2 * k / 8 : 4 + 2 * k / 8;
    if (!strcmp(r->name, "count_sum"))
        return n / 8 + k / 8;
    if (!strcmp(r->name, "count_merge"))
        return 3 * k / 8;
    if (!strcmp(r->name, "bf16_pack"))
        return 4 + 2;
    if (!strcmp(r->name, "sum_bf16"))
        return 2 * n + 4;
    if (!strcmp(r->name, "sum_bf16_f32")) /* in place: r read and written */
        return 2 * n + 8;
    double kb = b->kb, blk = 4.0 / (double)b->B; /* a float or uint32 per block */
    if (!strcmp(r->name, "int_y_ef")) /* x, yprev, mprev in; ynew, bmax out; without: x in */
        return r->has_e ? 12 + 2 * blk : 4 + blk;
    if (!strcmp(r->name, "int_pack")) /* y, M in; kb planes out */
        return 4 + kb / 8 + blk;
    if (!strcmp(r->name, "int_finish")) /* kb counters of k planes, M in; r out */
        return kb * k / 8 + 4 + blk;
    return 4 * n + 4; /* sum_f32 */
}

static void run_kernel(const nf_kernels_t *K, const bench_t *b, const row_t *r)
{
    const float *x = b->x;
    float *e = r->has_e ? b->e : NULL, *out = b->inplace ? b->x : b->r;
    const int stream = b->m >= NF_STREAM_MIN; /* as the library decides for a call of m */
    size_t nin;
    if (!strcmp(r->name, "abs_sum"))
        sink = K->abs_sum(x, e, b->m);
    else if (!strcmp(r->name, "bin_pack"))
        sink = K->bin_pack(x, e, b->m, b->bits);
    else if (!strcmp(r->name, "bin_pack_ef"))
        sink = K->bin_pack_ef(x, b->e, 1e-3f, b->decay, b->y, b->m, b->bits, stream);
    else if (!strcmp(r->name, "bin_finish"))
        K->bin_finish(out, e ? x : NULL, e, b->cnt, b->k, b->m, b->nranks, 1e-3, 1e-3f, stream);
    else if (!strcmp(r->name, "ter_pack"))
        sink = K->ter_pack(x, e, b->m, 0.5f, b->plus, b->minus, &nin);
    else if (!strcmp(r->name, "ter_y_ef"))
        sink = K->ter_y_ef(x, b->e, 0.5f, 1e-3f, b->decay, b->y, b->m, stream);
    else if (!strcmp(r->name, "ter_finish"))
        K->ter_finish(out, e ? x : NULL, e, b->cnt, b->cnt2, b->k, b->m, 1e-3, 0.5f, 1e-3f);
    else if (!strcmp(r->name, "count_sum"))
        K->count_sum(b->cnt, b->k, (const uint64_t *const *)b->bin, b->nranks, nf_lines(b->m));
    else if (!strcmp(r->name, "count_merge"))
        K->count_merge(b->cnt, b->cnt2, b->k, nf_lines(b->m));
    else if (!strcmp(r->name, "sum_f32"))
        K->sum_f32(b->r, (const float *const *)b->in, b->nranks, b->m);
    else if (!strcmp(r->name, "bf16_pack"))
        K->bf16_pack(x, b->hin[0], b->m);
    else if (!strcmp(r->name, "sum_bf16"))
        K->sum_bf16(b->r, (const uint16_t *const *)b->hin, b->nranks, b->m);
    else if (!strcmp(r->name, "int_y_ef"))
        K->int_y_ef(x, r->has_e ? b->e : NULL, r->has_e ? b->me : NULL, b->kb, b->decay,
                    r->has_e ? b->y : NULL, b->m, b->B, b->bmax, stream);
    else if (!strcmp(r->name, "int_pack"))
        K->int_pack(x, b->mx, b->kb, b->m, b->B, b->planes);
    else if (!strcmp(r->name, "int_finish"))
        K->int_finish(b->r, b->icnt, b->k, b->mx, b->kb, b->m, b->B, b->nranks, stream);
    else
        K->sum_bf16_f32(b->r, b->r, (const uint16_t *const *)b->hin, b->nranks, b->m);
}

/* Median seconds of `iters` timed runs of the kernel and of memcpy, the two
 * alternating (after one untimed warm-up each) so that both see the same
 * machine: on a shared host, memory bandwidth drifts between seconds. */
static void time_pair(const nf_kernels_t *K, const bench_t *b, const row_t *r, int iters,
                      double *tk, double *tc, double *scratch)
{
    double *sk = scratch, *sc = scratch + iters;
    for (int i = -1; i < iters; i++) {
        double t0 = now();
        memcpy(b->dst, b->src, b->m * sizeof(float));
        double t1 = now();
        run_kernel(K, b, r);
        double t2 = now();
        if (i >= 0)
            sc[i] = t1 - t0, sk[i] = t2 - t1;
    }
    *tk = median(sk, iters);
    *tc = median(sc, iters);
}

static void fill(bench_t *b)
{
    uint64_t s = 88172645463325252ull;
    for (size_t j = 0; j < b->m; j++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        b->x[j] = (float)((int64_t)(s % 2001) - 1000) * 1e-3f;
        b->e[j] = b->x[j] * 0.01f;
        b->src[j] = b->x[j];
    }
    size_t L = nf_lines(b->m);
    for (size_t i = 0; i < L * NF_LINE_WORDS * b->k; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        b->cnt[i] = s;
        b->cnt2[i] = s * 0x9E3779B97F4A7C15ull;
    }
    for (unsigned i = 0; i < b->nranks; i++)
        for (size_t w = 0; w < L * NF_LINE_WORDS; w++)
            b->bin[i][w] = b->cnt[w] ^ (b->cnt2[w] >> i);
    for (size_t i = 0; i < L * NF_LINE_WORDS * b->k * b->kb; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        b->icnt[i] = s;
    }
    for (size_t j0 = 0, i = 0; j0 < b->m; j0 += b->B, i++) { /* the blocks' true maxima */
        float ax = 0.0f, ae = 0.0f;
        for (size_t j = j0; j < b->m && j < j0 + b->B; j++) {
            ax = b->x[j] > ax ? b->x[j] : -b->x[j] > ax ? -b->x[j] : ax;
            ae = b->e[j] > ae ? b->e[j] : -b->e[j] > ae ? -b->e[j] : ae;
        }
        b->mx[i] = ax, b->me[i] = ae;
    }
    for (unsigned i = 0; i < b->nranks; i++) /* bf16 of x, truncated */
        for (size_t j = 0; j < b->m; j++) {
            uint32_t u;
            memcpy(&u, &b->x[j], sizeof(u));
            b->hin[i][j] = (uint16_t)(u >> 16);
        }
}

static void setup(bench_t *b, size_t bytes, unsigned nranks, int inplace, unsigned off,
                  unsigned kb, size_t B)
{
    b->m = bytes / sizeof(float);
    b->nranks = nranks;
    b->k = nf_count_planes(nranks);
    b->inplace = inplace;
    b->kb = kb, b->B = B;
    size_t fb = b->m * sizeof(float), L = nf_lines(b->m), nb = b->m / B + 1;
    /* x and r are the caller's buffers: any alignment (malloc: 16 bytes) */
    b->x = (float *)xalloc(fb + 64) + off, b->r = (float *)xalloc(fb + 64) + off;
    b->e = xalloc(fb), b->y = xalloc(fb);
    b->src = xalloc(fb), b->dst = xalloc(fb);
    b->bits = xalloc(L * NF_LINE_BYTES);
    b->plus = xalloc(L * NF_LINE_BYTES), b->minus = xalloc(L * NF_LINE_BYTES);
    b->cnt = xalloc(L * b->k * NF_LINE_BYTES), b->cnt2 = xalloc(L * b->k * NF_LINE_BYTES);
    b->mx = xalloc(nb * sizeof(float)), b->me = xalloc(nb * sizeof(float));
    b->bmax = xalloc(nb * sizeof(uint32_t));
    b->planes = xalloc(L * kb * NF_LINE_BYTES), b->icnt = xalloc(L * kb * b->k * NF_LINE_BYTES);
    b->bin = malloc(nranks * sizeof(*b->bin));
    b->in = malloc(nranks * sizeof(*b->in));
    b->hin = malloc(nranks * sizeof(*b->hin));
    if (!b->bin || !b->in || !b->hin) {
        fprintf(stderr, "nf_kernels: out of memory\n");
        exit(EXIT_FAILURE);
    }
    for (unsigned i = 0; i < nranks; i++) {
        b->bin[i] = xalloc(L * NF_LINE_BYTES);
        b->in[i] = i == 0 ? b->x : i == 1 ? b->e : xalloc(fb);
        b->hin[i] = (uint16_t *)xalloc(fb / 2 + 64) + off;
    }
    fill(b);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nf_kernels [-s BYTES] [-i ITERS] [-k KERNEL] [-I ISA] [-n RANKS] [-o FLOATS] [-d DECAY]\n"
            "                  [-q BITS] [-b BLOCK] [-p] [-h]\n"
            "  -s BYTES   size of the FP32 buffer (default 64M; suffixes K, M, G)\n"
            "  -i ITERS   timed repeats per row, median reported (default 11)\n"
            "  -k KERNEL  only this kernel (abs_sum bin_pack bin_pack_ef bin_finish ter_pack ter_y_ef ter_finish\n"
            "             count_sum count_merge sum_f32 bf16_pack sum_bf16 sum_bf16_f32 int_y_ef\n"
            "             int_pack int_finish)\n"
            "  -I ISA     only this ISA (scalar avx2 avx512), or the table nf_kernels_tuned\n"
            "             chose (tuned: rows labelled t- and the ISA chosen for the kernel)\n"
            "  -n RANKS   ranks counted (count_sum inputs, sum_f32 and sum_bf16 inputs, n of\n"
            "             the finish kernels, int_finish's counters of k planes; default 4)\n"
            "  -o FLOATS  x and r start this many floats past a 64-byte boundary, the bf16\n"
            "             buffers this many halves (0..15, default 0; large malloc blocks give 4)\n"
            "  -d DECAY   ef_decay of bin_pack_ef, ter_y_ef and int_y_ef (0..1, default 1)\n"
            "  -q BITS    bits of the int-k kernels (2, 3 or 4: int2, int3, int4; default 4)\n"
            "  -b BLOCK   their scale block, a power of two (32..4096, default 128)\n"
            "  -p         finish kernels in place (r = x, as MPI_IN_PLACE)\n"
            "Each row: median time, ns per element, FP32 GB/s (4 B x elements / time), bytes\n"
            "read + written per element, that traffic in GB/s and as %% of a memcpy of the\n"
            "FP32 buffer timed alternately with the kernel (memcpy moves 2 x size).\n"
            "int_y_ef e=yes: y = x + decay * e from yprev and mprev (12 B + 8 / BLOCK: x, yprev\n"
            "in, ynew out, a block max in and out); e=no: x alone, the block maxima (4 B).\n"
            "int_pack: y in, BITS planes out; int_finish: BITS counters of k planes in, r out.\n");
}

/* One row: the kernel next to memcpy. label NULL: the tuned table, shown as
 * "t-" and the ISA it chose for this kernel. */
static void print_row(const nf_kernels_t *K, const char *label, const bench_t *b, const row_t *r,
                      int iters, double *scratch)
{
    char tl[16];
    double tk, tc;
    if (!label) {
        nf_isa_t isa = NF_ISA_COUNT;
        const char *name;
        for (int i = 0; (name = nf_kernels_choice(i, &isa, NULL)) && strcmp(name, r->name); i++)
            ;
        snprintf(tl, sizeof(tl), "t-%s", name && isa < NF_ISA_COUNT ? nf_isa_name(isa) : "?");
        label = tl;
    }
    if ((!strcmp(r->name, "int_y_ef") && !K->int_y_ef) || (!strcmp(r->name, "int_pack") && !K->int_pack) ||
        (!strcmp(r->name, "int_finish") && !K->int_finish)) {
        printf("%-12s %-8s SKIP: not in this table\n", r->name, label);
        return;
    }
    time_pair(K, b, r, iters, &tk, &tc, scratch);
    double bytes = 4.0 * (double)b->m, mc = 2.0 * bytes / tc * 1e-9;
    double tb = traffic(b, r), tr = tb * (double)b->m / tk * 1e-9;
    printf("%-12s %-8s %-3s %9.3f %8.4f %10.2f %7.3f %10.2f %10.2f %7.1f%%%s\n", r->name, label,
           r->has_e < 0 ? "-" : r->has_e ? "yes" : "no", tk * 1e3, tk * 1e9 / (double)b->m,
           bytes / tk * 1e-9, tb, tr, mc, 100.0 * tr / mc, tr < 0.8 * mc ? "  < 80%" : "");
    fflush(stdout);
}

/* What nf_kernels_tuned() chose per kernel, with every candidate's time. */
static void print_choice(const nf_kernels_t *T, double seconds)
{
    printf("tuned kernels (nf_kernels_tuned, %.1f ms at first call): %s\n", seconds * 1e3, T->name);
    printf("  %-12s %-7s", "kernel", "choice");
    for (int isa = 0; isa < NF_ISA_COUNT; isa++)
        printf(" %9s", nf_isa_name((nf_isa_t)isa));
    printf("   (ns/elem, cold buffers; 0: not measured)\n");
    nf_isa_t isa;
    const char *name;
    for (int i = 0; (name = nf_kernels_choice(i, &isa, NULL)) != NULL; i++) {
        printf("  %-12s %-7s", name, nf_isa_name(isa));
        for (int c = 0; c < NF_ISA_COUNT; c++)
            printf(" %9.4f", nf_kernels_measured(i, (nf_isa_t)c));
        printf("\n");
    }
}

static size_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    switch (*end) {
    case 'G': case 'g': v *= 1024; /* fall through */
    case 'M': case 'm': v *= 1024; /* fall through */
    case 'K': case 'k': v *= 1024; end++; break;
    default: break;
    }
    if (errno || end == s || *end || v < 4) {
        fprintf(stderr, "nf_kernels: bad size '%s'\n", s);
        exit(EXIT_FAILURE);
    }
    return (size_t)v / 4 * 4;
}

int main(int argc, char **argv)
{
    size_t bytes = 64u << 20;
    int iters = 11, opt, inplace = 0, off = 0;
    double decay = 1.0;
    unsigned nranks = 4, kb = 4;
    size_t blk = NF_INT_BLOCK_DEFAULT;
    const char *kname = NULL, *iname = NULL;
    while ((opt = getopt(argc, argv, "s:i:k:I:n:o:d:q:b:ph")) != -1) {
        switch (opt) {
        case 's': bytes = parse_size(optarg); break;
        case 'i': iters = atoi(optarg); break;
        case 'k': kname = optarg; break;
        case 'I': iname = optarg; break;
        case 'n': nranks = (unsigned)atoi(optarg); break;
        case 'o': off = atoi(optarg); break;
        case 'd': decay = strtod(optarg, NULL); break;
        case 'q': kb = (unsigned)atoi(optarg); break;
        case 'b': blk = (size_t)atol(optarg); break;
        case 'p': inplace = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EXIT_FAILURE;
        }
    }
    if (iters < 1 || nranks < 2 || nranks > 65535 || off < 0 || off > 15 || !(decay >= 0.0) ||
        decay > 1.0 || kb < 2 || kb > 4 || blk < NF_INT_BLOCK_MIN || blk > NF_INT_BLOCK_MAX ||
        (blk & (blk - 1)) != 0) {
        fprintf(stderr, "nf_kernels: need -i >= 1, 2 <= -n <= 65535, 0 <= -o <= 15, 0 <= -d <= 1,\n"
                        "2 <= -q <= 4 and -b a power of two from 32 to 4096\n");
        return EXIT_FAILURE;
    }
    int known = !kname;
    for (size_t i = 0; i < NROWS && !known; i++)
        known = !strcmp(rows[i].name, kname);
    if (!known || (iname && strcmp(iname, "scalar") && strcmp(iname, "avx2") && strcmp(iname, "avx512") &&
                   strcmp(iname, "tuned"))) {
        usage(stderr);
        return EXIT_FAILURE;
    }

    bench_t b;
    setup(&b, bytes, nranks, inplace, (unsigned)off, kb, blk);
    b.decay = (float)decay;
    double *scratch = malloc(2 * (size_t)iters * sizeof(double));
    if (!scratch)
        return EXIT_FAILURE;
    printf("nf_kernels: %zu floats (%.1f MiB FP32), n = %u ranks (k = %u planes), %d repeats, "
           "median%s, x and r at +%d floats, ef_decay %g, int%u blocks of %zu; best ISA here: %s\n",
           b.m, (double)bytes / (1 << 20), nranks, b.k, iters, inplace ? ", in place" : "", off,
           (double)b.decay, kb, blk, nf_isa_name(nf_isa_detect()));
    double t0 = now();
    const nf_kernels_t *T = nf_kernels_tuned(nf_isa_detect());
    print_choice(T, now() - t0);
    printf("%-12s %-8s %-3s %9s %8s %10s %7s %10s %10s %8s\n", "kernel", "isa", "e", "ms", "ns/elem",
           "FP32 GB/s", "B/elem", "traf GB/s", "memcpy", "% memcpy");
    for (int isa = 0; isa <= NF_ISA_COUNT; isa++) { /* NF_ISA_COUNT: the tuned table */
        const char *label = isa < NF_ISA_COUNT ? nf_isa_name((nf_isa_t)isa) : "tuned";
        const nf_kernels_t *K = isa < NF_ISA_COUNT ? nf_kernels_for((nf_isa_t)isa) : T;
        if (iname && strcmp(iname, label))
            continue;
        if (!K) {
            printf("%-12s %-8s SKIP: not built or not supported by this CPU\n", "*", label);
            continue;
        }
        for (size_t i = 0; i < NROWS; i++) {
            if (!kname || !strcmp(kname, rows[i].name))
                print_row(K, isa < NF_ISA_COUNT ? label : NULL, &b, &rows[i], iters, scratch);
        }
    }
    free(scratch);
    return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernel choice by measurement. Which ISA runs a kernel fastest is a property
 * of the CPU, not of the ISA's name: one EPYC ran four AVX-512 kernels at half
 * the speed of their AVX2 versions, another ranked them the other way round.
 * So each kernel's candidates are timed once per process and the fastest is
 * kept.
 * Every candidate gives the same bits (nf_kernels.h), so the choice moves
 * speed only, never results.
 *
 * How it is timed, within TUNE_BUDGET seconds:
 *  - one arena of TUNE_M-element buffers, every line of a call's buffers
 *    flushed from all cache levels before the call, so its data comes from
 *    DRAM as it does for buffers beyond the last-level cache (a buffer that
 *    size would take longer to touch than the whole budget);
 *  - candidates alternate call by call, in turn order reversed every round,
 *    so that drift on a shared machine reaches them alike;
 *  - a probe is a kernel with or without e (the finish kernels also at two
 *    rank counts: small counts take table lookups, large ones arithmetic;
 *    int_finish at 4 ranks of int4 and 64 of int2, a sum of 8 planes and
 *    one of more);
 *    a kernel's time is the sum over its probes of each probe's best round;
 *    rounds go on while the budget lasts, and a kernel not measured in full
 *    keeps the highest ISA.
 * The scalar reference is a candidate only where no vector ISA may run: it
 * is written for obviousness and runs 5-40x slower (bench/nf_kernels), so
 * timing it would spend the budget to learn nothing.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nf_kernels.h"

#if defined(__x86_64__) || (defined(__i386__) && defined(__SSE2__))
#include <emmintrin.h>
#define NF_CLFLUSH 1
#endif

#define TUNE_M (64u * 1024) /* elements per timed call */
#define TUNE_M_COUNT (8 * TUNE_M) /* counters: 1/32 of the bytes, as long a call */
#define TUNE_RANKS 4        /* count_sum inputs; n of the finish kernels, and: */
#define TUNE_RANKS_BIG 64   /* n (k = 7 planes): the finish kernels' tables end at k = 5 */
#define TUNE_SUM_IN 3       /* sum_f32 and sum_bf16 inputs */
#define TUNE_OFF 4          /* x, r: floats past a line, as in large malloc blocks */
#define TUNE_BUDGET 0.018   /* seconds, allocation included */
#define TUNE_ROUNDS 25
#define TUNE_MARGIN 0.95    /* a lower ISA replaces a higher one only 5 % faster */
#define TUNE_KB 4           /* int-k probes: int4, blocks of the default size, */
#define TUNE_KB_BIG 2       /* int_finish at TUNE_RANKS_BIG: int2 (its counters fill cnt, cnt2) */
#define TUNE_BLK NF_INT_BLOCK_DEFAULT

#define NF_K_ID(f, ID) K_##ID,
#define NF_K_NAME(f, ID) #f,
#define NF_K_PLACE(f, ID)                                                                  \
    _Static_assert(offsetof(nf_kernels_t, f) ==                                            \
                       offsetof(nf_kernels_t, abs_sum) + K_##ID * sizeof(void (*)(void)),  \
                   "NF_KERNEL_LIST: " #f " is not at its place in nf_kernels_t");
enum { NF_KERNEL_LIST(NF_K_ID) K_COUNT };
static const char *const kernel_names[K_COUNT] = {NF_KERNEL_LIST(NF_K_NAME)};
NF_KERNEL_LIST(NF_K_PLACE)
_Static_assert(sizeof(nf_kernels_t) == offsetof(nf_kernels_t, abs_sum) + K_COUNT * sizeof(void (*)(void)),
               "a kernel of nf_kernels_t is missing from NF_KERNEL_LIST");

/* ---- the measurement ---- */

/* Buffers a probe touches, flushed before it runs. R_CNT8: the counters and
 * inputs of the counter probes, which run over TUNE_M_COUNT elements; R_H:
 * the bf16 buffers; R_PL: int_pack's planes; R_BLK: the int-k block maxima
 * (mx, bmax). */
enum { R_X, R_E, R_R, R_S, R_BITS, R_PM, R_CNT, R_CNT8, R_H, R_PL, R_BLK, R_COUNT };
#define RB(r) (1u << (r))
#define KMAX 7 /* planes for TUNE_RANKS_BIG: the size of cnt and cnt2 */
_Static_assert(TUNE_RANKS_BIG >> (KMAX - 1) == 1, "KMAX is nf_count_planes(TUNE_RANKS_BIG)");
/* int_finish's counters, kb bit lines of k planes per 512 elements, lie in
 * cnt and cnt2 (2 KMAX lines per 512): TUNE_KB lines of 3 planes (4 to 7
 * ranks) and TUNE_KB_BIG lines of KMAX planes. */
_Static_assert(TUNE_RANKS >= 4 && TUNE_RANKS <= 7 && TUNE_KB * 3 <= 2 * KMAX && TUNE_KB_BIG <= 2,
               "int_finish probes: counters past cnt2");
#define NBLK (TUNE_M / NF_INT_BLOCK_MIN) /* block maxima of the smallest blocks */

typedef struct {
    unsigned char kernel, has_e;
    unsigned short regions;
    unsigned n; /* ranks counted: the finish kernels' n and k */
} probe_t;

#define FINISH_E (RB(R_R) | RB(R_X) | RB(R_E) | RB(R_CNT))
static const probe_t probes[] = {
    {K_ABS_SUM, 1, RB(R_X) | RB(R_E), TUNE_RANKS},
    {K_ABS_SUM, 0, RB(R_X), TUNE_RANKS},
    {K_BIN_PACK, 1, RB(R_X) | RB(R_E) | RB(R_BITS), TUNE_RANKS},
    {K_BIN_PACK, 0, RB(R_X) | RB(R_BITS), TUNE_RANKS},
    {K_BIN_PACK_EF, 1, RB(R_X) | RB(R_E) | RB(R_S) | RB(R_BITS), TUNE_RANKS},
    {K_BIN_FINISH, 1, FINISH_E, TUNE_RANKS},
    {K_BIN_FINISH, 0, RB(R_R) | RB(R_CNT), TUNE_RANKS},
    {K_BIN_FINISH, 1, FINISH_E, TUNE_RANKS_BIG},
    {K_BIN_FINISH, 0, RB(R_R) | RB(R_CNT), TUNE_RANKS_BIG},
    {K_TER_PACK, 1, RB(R_X) | RB(R_E) | RB(R_PM), TUNE_RANKS},
    {K_TER_PACK, 0, RB(R_X) | RB(R_PM), TUNE_RANKS},
    {K_TER_Y_EF, 1, RB(R_X) | RB(R_E) | RB(R_S), TUNE_RANKS},
    {K_TER_FINISH, 1, FINISH_E, TUNE_RANKS},
    {K_TER_FINISH, 0, RB(R_R) | RB(R_CNT), TUNE_RANKS},
    {K_TER_FINISH, 1, FINISH_E, TUNE_RANKS_BIG},
    {K_TER_FINISH, 0, RB(R_R) | RB(R_CNT), TUNE_RANKS_BIG},
    {K_COUNT_SUM, 0, RB(R_CNT8), TUNE_RANKS},
    {K_COUNT_MERGE, 0, RB(R_CNT8), TUNE_RANKS},
    {K_SUM_F32, 0, RB(R_R) | RB(R_X) | RB(R_E) | RB(R_S), TUNE_RANKS},
    {K_BF16_PACK, 0, RB(R_X) | RB(R_H), TUNE_RANKS},
    {K_SUM_BF16, 0, RB(R_R) | RB(R_H), TUNE_RANKS},
    {K_SUM_BF16_F32, 0, RB(R_R) | RB(R_H), TUNE_RANKS}, /* in place, as a reducer continues */
    {K_INT_Y_EF, 1, RB(R_X) | RB(R_E) | RB(R_S) | RB(R_BLK), TUNE_RANKS}, /* e: yprev, mprev */
    {K_INT_Y_EF, 0, RB(R_X) | RB(R_BLK), TUNE_RANKS},
    {K_INT_PACK, 0, RB(R_X) | RB(R_PL) | RB(R_BLK), TUNE_RANKS},
    {K_INT_FINISH, 0, RB(R_R) | RB(R_CNT) | RB(R_BLK), TUNE_RANKS},
    {K_INT_FINISH, 0, RB(R_R) | RB(R_CNT) | RB(R_BLK), TUNE_RANKS_BIG},
};
#define NPROBES (sizeof(probes) / sizeof(probes[0]))

typedef struct {
    void *base;
    unsigned k; /* planes of the counter probes' counters (TUNE_RANKS) */
    float *x, *e, *r, *s; /* s: ynew of bin_pack_ef, third input of sum_f32 */
    uint64_t *bits, *plus, *minus, *cnt, *cnt2; /* TUNE_M elements (cnt: KMAX planes) */
    uint64_t *cnt8, *cnt8b;                       /* TUNE_M_COUNT elements */
    const uint64_t *in[TUNE_RANKS];               /* TUNE_M_COUNT elements */
    const float *sum_in[TUNE_SUM_IN];
    uint16_t *h[TUNE_SUM_IN]; /* bf16 of x, e, s; bf16_pack writes h[0] */
    uint64_t *planes;         /* int_pack's TUNE_KB lines per 512 */
    float *mx;                /* int-k block maxima (NBLK): mprev and M */
    uint32_t *bmax;           /* int_y_ef's (NBLK), right after mx */
    struct {
        char *p;
        size_t bytes;
    } reg[R_COUNT];
} arena_t;

static volatile double tune_sink;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Bytes of a bf16 buffer, whole lines: the buffers lie end to end. */
#define HB ((TUNE_M * sizeof(uint16_t) + NF_LINE_BYTES - 1) / NF_LINE_BYTES * NF_LINE_BYTES)
/* Bytes of mx and of bmax, whole lines: the two lie end to end. */
#define BB ((NBLK * sizeof(float) + NF_LINE_BYTES - 1) / NF_LINE_BYTES * NF_LINE_BYTES)

/* Top halves of the encodings of x: the bf16 buffers' data. */
static void fill_bf16(uint16_t *h, const float *x)
{
    for (size_t j = 0; j < TUNE_M; j++) {
        uint32_t u;
        memcpy(&u, &x[j], sizeof(u));
        h[j] = (uint16_t)(u >> 16);
    }
}

/* Carve `bytes` (rounded up to lines) from the bump pointer *p. */
static char *carve(char **p, size_t bytes)
{
    char *q = *p;
    *p += (bytes + NF_LINE_BYTES - 1) / NF_LINE_BYTES * NF_LINE_BYTES;
    return q;
}

static void arena_regions(arena_t *a)
{
    size_t fb = TUNE_M * sizeof(float), lb = nf_lines(TUNE_M) * NF_LINE_BYTES;
    size_t lb8 = nf_lines(TUNE_M_COUNT) * NF_LINE_BYTES, hb = HB;
    char *const p[R_COUNT] = {(char *)a->x, (char *)a->e, (char *)a->r, (char *)a->s,
                              (char *)a->bits, (char *)a->plus, (char *)a->cnt,
                              (char *)a->cnt8, (char *)a->h[0], (char *)a->planes,
                              (char *)a->mx};
    const size_t n[R_COUNT] = {fb, fb, fb, fb, lb, 2 * lb, 2 * KMAX * lb,
                               (2 * a->k + TUNE_RANKS) * lb8, TUNE_SUM_IN * hb, TUNE_KB * lb,
                               2 * BB};
    for (int r = 0; r < R_COUNT; r++)
        a->reg[r].p = p[r], a->reg[r].bytes = n[r];
}

/* Random words end to end from p: counters and sign lines. */
static void fill_words(uint64_t *p, size_t bytes, uint64_t *s)
{
    for (size_t w = 0; w < bytes / sizeof(uint64_t); w++)
        p[w] = xorshift(s);
}

/* 1 when the arena is carved, 0 without memory for it. */
static int arena_init(arena_t *a)
{
    const size_t fb = (TUNE_M + NF_LANES) * sizeof(float), lb = nf_lines(TUNE_M) * NF_LINE_BYTES;
    const size_t lb8 = nf_lines(TUNE_M_COUNT) * NF_LINE_BYTES;
    const unsigned k = nf_count_planes(TUNE_RANKS);
    size_t total = 4 * (fb + NF_LINE_BYTES) + (3 + 2 * KMAX + TUNE_KB) * lb +
                   (2 * k + TUNE_RANKS) * lb8 + TUNE_SUM_IN * HB + 2 * BB;
    char *p = aligned_alloc(NF_LINE_BYTES, total);
    if (p == NULL)
        return 0;
    memset(p, 0, total); /* page faults now, not in a timed call */
    a->base = p, a->k = k;
    a->x = (float *)carve(&p, fb) + TUNE_OFF, a->r = (float *)carve(&p, fb) + TUNE_OFF;
    a->e = (float *)carve(&p, fb), a->s = (float *)carve(&p, fb);
    a->bits = (uint64_t *)carve(&p, lb);
    a->plus = (uint64_t *)carve(&p, lb), a->minus = (uint64_t *)carve(&p, lb);
    a->cnt = (uint64_t *)carve(&p, KMAX * lb), a->cnt2 = (uint64_t *)carve(&p, KMAX * lb);
    a->cnt8 = (uint64_t *)carve(&p, k * lb8), a->cnt8b = (uint64_t *)carve(&p, k * lb8);
    for (unsigned i = 0; i < TUNE_RANKS; i++)
        a->in[i] = (const uint64_t *)carve(&p, lb8);
    for (unsigned i = 0; i < TUNE_SUM_IN; i++)
        a->h[i] = (uint16_t *)carve(&p, HB);
    a->planes = (uint64_t *)carve(&p, TUNE_KB * lb);
    a->mx = (float *)carve(&p, BB), a->bmax = (uint32_t *)carve(&p, BB);
    for (size_t b = 0; b < NBLK; b++) /* |x| <= 1; int_y_ef's residual is e's */
        a->mx[b] = 1.0f;
    a->sum_in[0] = a->x, a->sum_in[1] = a->e, a->sum_in[2] = a->s;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t j = 0; j < TUNE_M; j++) { /* |x| <= 1, e = x / 128: finite, no denormals */
        a->x[j] = (float)((int64_t)(xorshift(&s) % 2001) - 1000) * 1e-3f;
        a->e[j] = a->s[j] = a->x[j] * 0.0078125f;
    }
    for (unsigned i = 0; i < TUNE_SUM_IN; i++)
        fill_bf16(a->h[i], a->sum_in[i]);
    fill_words(a->cnt, 2 * KMAX * lb, &s);
    fill_words(a->cnt8, (2 * k + TUNE_RANKS) * lb8, &s);
    arena_regions(a);
    return 1;
}

static void arena_flush(const arena_t *a, unsigned regions)
{
#ifdef NF_CLFLUSH
    for (int r = 0; r < R_COUNT; r++) {
        if (!(regions & RB(r)))
            continue;
        const char *end = a->reg[r].p + a->reg[r].bytes; /* x and r start mid-line */
        for (const char *q = a->reg[r].p - ((uintptr_t)a->reg[r].p & (NF_LINE_BYTES - 1)); q < end;
             q += NF_LINE_BYTES)
            _mm_clflush(q);
    }
    _mm_mfence();
#else
    (void)a, (void)regions;
#endif
}

static size_t probe_elems(const probe_t *p)
{
    return p->kernel == K_COUNT_SUM || p->kernel == K_COUNT_MERGE ? TUNE_M_COUNT : TUNE_M;
}

static void probe_run(const nf_kernels_t *K, const probe_t *p, const arena_t *a, size_t m)
{
    const float *e = p->has_e ? a->e : NULL;
    size_t nin;
    switch (p->kernel) {
    case K_ABS_SUM: tune_sink = K->abs_sum(a->x, e, m); break;
    case K_BIN_PACK: tune_sink = K->bin_pack(a->x, e, m, a->bits); break;
    case K_BIN_PACK_EF: tune_sink = K->bin_pack_ef(a->x, a->e, 1e-3f, 1.0f, a->s, m, a->bits, 0); break;
    case K_BIN_FINISH:
        K->bin_finish(a->r, e ? a->x : NULL, p->has_e ? a->e : NULL, a->cnt,
                      nf_count_planes(p->n), m, p->n, 1e-3, 1e-3f, 0);
        break;
    case K_TER_PACK: tune_sink = K->ter_pack(a->x, e, m, 0.5f, a->plus, a->minus, &nin); break;
    case K_TER_Y_EF: tune_sink = K->ter_y_ef(a->x, a->e, 0.5f, 1e-3f, 1.0f, a->s, m, 0); break;
    case K_TER_FINISH:
        K->ter_finish(a->r, e ? a->x : NULL, p->has_e ? a->e : NULL, a->cnt, a->cnt2,
                      nf_count_planes(p->n), m, 1e-3, 0.5f, 1e-3f);
        break;
    case K_COUNT_SUM: K->count_sum(a->cnt8, a->k, a->in, TUNE_RANKS, nf_lines(m)); break;
    case K_COUNT_MERGE: K->count_merge(a->cnt8, a->cnt8b, a->k, nf_lines(m)); break;
    case K_SUM_F32: K->sum_f32(a->r, a->sum_in, TUNE_SUM_IN, m); break;
    case K_BF16_PACK: K->bf16_pack(a->x, a->h[0], m); break;
    case K_SUM_BF16: K->sum_bf16(a->r, (const uint16_t *const *)a->h, TUNE_SUM_IN, m); break;
    case K_SUM_BF16_F32:
        K->sum_bf16_f32(a->r, a->r, (const uint16_t *const *)a->h, TUNE_SUM_IN, m);
        break;
    case K_INT_Y_EF: /* with e: yprev = e, mprev = mx (decay 1); without: x alone */
        K->int_y_ef(a->x, e, e ? a->mx : NULL, TUNE_KB, 1.0f, e ? a->s : NULL, m, TUNE_BLK,
                    a->bmax, 0);
        break;
    case K_INT_PACK: K->int_pack(a->x, a->mx, TUNE_KB, m, TUNE_BLK, a->planes); break;
    case K_INT_FINISH: {
        const unsigned kb = p->n > TUNE_RANKS ? TUNE_KB_BIG : TUNE_KB;
        K->int_finish(a->r, a->cnt, nf_count_planes(p->n), a->mx, kb, m, TUNE_BLK, p->n, 0);
        break;
    }
    default: /* every kernel has its case: a probe without one runs nothing */
        break;
    }
}

/* Kernel i of table t, as one comparable type; NULL for an entry the
 * table lacks (or an i out of range). */
typedef void (*kfn_t)(void);

static kfn_t get_entry(const nf_kernels_t *t, int i)
{
#define NF_K_GET(f, ID)                                                                    \
    case K_##ID:                                                                           \
        return (kfn_t)t->f;
    switch (i) {
        NF_KERNEL_LIST(NF_K_GET)
    default:
        return NULL;
    }
#undef NF_K_GET
}

/* best[c][i]: the fastest call (seconds) of probe i by candidate c, 0 when
 * the deadline came first. */
static void measure(const nf_kernels_t *const *cand, int nc, const arena_t *a, double t_end,
                    double best[][NPROBES])
{
    for (size_t i = 0; i < NPROBES; i++) /* warm code and wide units, untimed */
        for (int c = 0; c < nc; c++)
            if (get_entry(cand[c], probes[i].kernel) != NULL)
                probe_run(cand[c], &probes[i], a, NF_LINE_BITS);
    for (int round = 0; round < TUNE_ROUNDS; round++) {
        double t_round = now();
        for (size_t i = 0; i < NPROBES; i++) {
            for (int j = 0; j < nc; j++) {
                int c = round & 1 ? nc - 1 - j : j;
                if (get_entry(cand[c], probes[i].kernel) == NULL) /* never measured: the */
                    continue; /* kernel keeps the highest ISA that has it (fill_missing) */
                arena_flush(a, probes[i].regions);
                double t0 = now();
                if (t0 > t_end)
                    return;
                probe_run(cand[c], &probes[i], a, probe_elems(&probes[i]));
                double dt = now() - t0;
                if (best[c][i] == 0 || dt < best[c][i])
                    best[c][i] = dt;
            }
        }
        double t = now();
        if (t + (t - t_round) > t_end) /* no time for another full round */
            return;
    }
}

/* ---- the tuned tables ---- */

typedef struct {
    nf_kernels_t table;
    char name[192];
    nf_isa_t isa[K_COUNT];
    double ns[NF_ISA_COUNT][K_COUNT]; /* per candidate; 0: not measured */
} tuned_t;

static tuned_t tuned[NF_ISA_COUNT]; /* one per cap */
static int tuned_ready[NF_ISA_COUNT];
static int tuned_last = -1;
static pthread_mutex_t tune_lock = PTHREAD_MUTEX_INITIALIZER;

static void set_entry(nf_kernels_t *t, int i, const nf_kernels_t *s)
{
#define NF_K_SET(f, ID)                                                                    \
    case K_##ID:                                                                           \
        t->f = s->f;                                                                       \
        break;
    switch (i) {
        NF_KERNEL_LIST(NF_K_SET)
    default:
        break;
    }
#undef NF_K_SET
}

static atomic_int tune_on = 1; /* nf_kernels_set_tune */

void nf_kernels_set_tune(int on) { atomic_store(&tune_on, on != 0); }

static int tune_enabled(void) { return atomic_load(&tune_on); }

/* Per kernel, the fastest candidate; the highest one unless a lower one is
 * faster by the margin (a tie is noise: keep what the CPU advertises). */
static void choose(tuned_t *t, const nf_kernels_t *const *cand, int nc, double best[][NPROBES])
{
    for (int i = 0; i < K_COUNT; i++) {
        double ns[NF_ISA_COUNT] = {0}; /* per element, summed over the kernel's probes */
        int full = 1, pick = nc - 1;
        for (int c = 0; c < nc; c++)
            for (size_t p = 0; p < NPROBES; p++)
                if (probes[p].kernel == i) {
                    ns[c] += best[c][p] * 1e9 / (double)probe_elems(&probes[p]);
                    full &= best[c][p] > 0;
                }
        if (!full)
            continue;
        for (int c = 0; c < nc; c++) {
            t->ns[cand[c]->isa][i] = ns[c];
            if (c < nc - 1 && ns[c] < TUNE_MARGIN * ns[nc - 1] && ns[c] < ns[pick])
                pick = c;
        }
        t->isa[i] = cand[pick]->isa;
        set_entry(&t->table, i, cand[pick]);
    }
}

/* "avx512", or "avx512 (avx2: ter_pack sum_f32)": the ISA most entries use,
 * then the others with their kernels. */
static void summarise(tuned_t *t)
{
    int uses[NF_ISA_COUNT] = {0}, major = 0;
    for (int i = 0; i < K_COUNT; i++)
        uses[t->isa[i]]++;
    for (int isa = 0; isa < NF_ISA_COUNT; isa++)
        if (uses[isa] >= uses[major])
            major = isa;
    size_t n = (size_t)snprintf(t->name, sizeof(t->name), "%s", nf_isa_name((nf_isa_t)major));
    const char *sep = " (";
    for (int isa = NF_ISA_COUNT - 1; isa >= 0; isa--) {
        if (isa == major || uses[isa] == 0)
            continue;
        n += (size_t)snprintf(t->name + n, n < sizeof(t->name) ? sizeof(t->name) - n : 0, "%s%s:",
                              sep, nf_isa_name((nf_isa_t)isa));
        for (int i = 0; i < K_COUNT; i++)
            if ((int)t->isa[i] == isa)
                n += (size_t)snprintf(t->name + n, n < sizeof(t->name) ? sizeof(t->name) - n : 0,
                                      " %s", kernel_names[i]);
        sep = "; ";
    }
    if (uses[major] < K_COUNT)
        snprintf(t->name + n, n < sizeof(t->name) ? sizeof(t->name) - n : 0, ")");
    t->table.name = t->name;
    t->table.isa = NF_ISA_SCALAR;
    for (int i = 0; i < K_COUNT; i++)
        if (t->isa[i] > t->table.isa)
            t->table.isa = t->isa[i];
}

/* An entry the highest candidate lacks (a table built before its kernel
 * had a version for that ISA) comes from the highest one that has it, else
 * from the scalar reference: no entry of a tuned table is NULL. */
static void fill_missing(tuned_t *t, const nf_kernels_t *const *cand, int nc)
{
    for (int i = 0; i < K_COUNT; i++) {
        if (get_entry(&t->table, i) != NULL)
            continue;
        const nf_kernels_t *from = &nf_kernels_scalar;
        for (int c = nc - 1; c >= 0; c--)
            if (get_entry(cand[c], i) != NULL) {
                from = cand[c];
                break;
            }
        set_entry(&t->table, i, from);
        t->isa[i] = from->isa;
    }
}

/* Candidates: the vector ISAs at or below cap that the CPU runs, else scalar. */
static int candidates(nf_isa_t cap, const nf_kernels_t *cand[NF_ISA_COUNT])
{
    int nc = 0;
    for (int isa = NF_ISA_AVX2; isa <= (int)cap; isa++)
        if ((cand[nc] = nf_kernels_for((nf_isa_t)isa)) != NULL)
            nc++;
    if (nc == 0)
        cand[nc++] = &nf_kernels_scalar;
    return nc;
}

static void tune_build(tuned_t *t, nf_isa_t cap)
{
    const double t_end = now() + TUNE_BUDGET;
    const nf_kernels_t *cand[NF_ISA_COUNT];
    int nc = candidates(cap, cand);
    t->table = *cand[nc - 1];
    for (int i = 0; i < K_COUNT; i++)
        t->isa[i] = cand[nc - 1]->isa;
    arena_t a;
    if (nc > 1 && tune_enabled() && arena_init(&a)) {
        double best[NF_ISA_COUNT][NPROBES] = {{0}};
        measure(cand, nc, &a, t_end, best);
        choose(t, cand, nc, best);
        free(a.base);
    }
    fill_missing(t, cand, nc);
    summarise(t);
}

const nf_kernels_t *nf_kernels_tuned(nf_isa_t cap)
{
    const nf_isa_t best = nf_isa_detect();
    if ((int)cap < 0)
        cap = NF_ISA_SCALAR;
    if (cap > best)
        cap = best;
    if (!__atomic_load_n(&tuned_ready[cap], __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&tune_lock);
        if (!tuned_ready[cap]) {
            tune_build(&tuned[cap], cap);
            __atomic_store_n(&tuned_ready[cap], 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&tune_lock);
    }
    __atomic_store_n(&tuned_last, (int)cap, __ATOMIC_RELEASE);
    return &tuned[cap].table;
}

/* ---- reporting ---- */

int nf_kernels_count(void)
{
    return K_COUNT;
}

const char *nf_kernels_choice(int i, nf_isa_t *isa, double *ns_per_elem)
{
    if (i < 0 || i >= K_COUNT)
        return NULL;
    int last = __atomic_load_n(&tuned_last, __ATOMIC_ACQUIRE);
    nf_isa_t chosen = last < 0 ? NF_ISA_COUNT : tuned[last].isa[i];
    if (isa != NULL)
        *isa = chosen;
    if (ns_per_elem != NULL)
        *ns_per_elem = last < 0 ? 0.0 : tuned[last].ns[chosen][i];
    return kernel_names[i];
}

double nf_kernels_measured(int i, nf_isa_t isa)
{
    int last = __atomic_load_n(&tuned_last, __ATOMIC_ACQUIRE);
    if (i < 0 || i >= K_COUNT || (int)isa < 0 || isa >= NF_ISA_COUNT || last < 0)
        return 0.0;
    return tuned[last].ns[isa][i];
}

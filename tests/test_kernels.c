/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernel unit tests: the scalar reference against hand-computed cases, then
 * every kernel of every available ISA against the reference, bit for bit, on
 * odd sizes, unaligned starts, with and without error feedback, in place and
 * not, on ordinary, special (+-0, denormal, near FLT_MAX) and non-finite data.
 * The bf16 rounding is also checked against hand-worked rows and against
 * nearest-even worked out in double at every rounding boundary, every NaN
 * encoding against turning into Inf or zero, the sums against a plain loop.
 * The int-k kernels are checked against hand-worked cases, their sum over
 * simulated ranks and their residual, then every ISA against the reference
 * on sizes around a vector and a line, every block size and bit count.
 * An ISA this build or CPU lacks prints a SKIP line with the reason.
 */
#include "config.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nf_codec.h"
#include "nf_kernels.h"

#define GUARD 48       /* floats of sentinel around each float buffer */
#define OFF_MAX 16     /* float offsets 0..15 from a 64-byte boundary */
#define SENTINEL 0x7fa5a5a5u

static const nf_kernels_t *const S = &nf_kernels_scalar;

/* ------------------------------------------------------------------ helpers */

static uint64_t rng;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void seed(uint64_t s)
{
    rng = s * 0x9E3779B97F4A7C15ull + 0x1234567ull;
    if (!rng)
        rng = 1;
    for (int i = 0; i < 4; i++)
        rnd();
}

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Magnitudes 2^-10 .. 2^11 with random mantissa and sign. */
static float rnd_normal(void)
{
    uint64_t u = rnd();
    float mag = ldexpf(1.0f + (float)(u & 0xFFFF) / 65536.0f, (int)((u >> 16) % 22) - 10);
    return (u >> 63) ? -mag : mag;
}

static float rnd_special(void)
{
    static const float tab[] = {
        0.0f, -0.0f, 0.0f, -0.0f, FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MIN / 3, -FLT_MIN / 2,
        3e-39f, -1e-44f, FLT_MAX, -FLT_MAX, 0.99f * FLT_MAX, -0.75f * FLT_MAX, 1.0f, -1.0f,
    };
    uint64_t u = rnd();
    return (u & 3) == 0 ? rnd_normal() : tab[(u >> 2) % (sizeof(tab) / sizeof(tab[0]))];
}

enum { KIND_NORMAL, KIND_SPECIAL, KIND_NONFINITE, KIND_COUNT };
static const char *const kind_name[KIND_COUNT] = {"normal", "special", "nonfinite"};

/* x and e data of a kind; nonfinite puts NaN/-NaN/Inf/-Inf at random places
 * and always at the last element (the masked tail). */
static void fill(float *x, float *e, size_t m, int kind)
{
    for (size_t j = 0; j < m; j++) {
        x[j] = kind == KIND_SPECIAL ? rnd_special() : rnd_normal();
        e[j] = kind == KIND_SPECIAL ? rnd_special() : rnd_normal() * 0.125f;
    }
    if (kind == KIND_NONFINITE && m) {
        static const uint32_t nf[] = {0x7fc00000u, 0xffc00000u, 0x7f800000u, 0xff800000u};
        for (unsigned i = 0; i < 4; i++)
            x[rnd() % m] = bits_f(nf[i]);
        x[m - 1] = bits_f(nf[rnd() % 4]);
    }
}

/* Float buffer of m elements at `off` floats past a 64-byte boundary, with
 * sentinels all around; base is what to free and to compare. */
typedef struct {
    float *base, *p;
    size_t n;
} fbuf_t;

static fbuf_t fb_new(size_t m, unsigned off)
{
    fbuf_t b;
    b.n = m + OFF_MAX + GUARD;
    size_t bytes = (b.n * sizeof(float) + 63) / 64 * 64;
    b.base = aligned_alloc(64, bytes);
    ck_assert_ptr_nonnull(b.base);
    for (size_t i = 0; i < b.n; i++)
        b.base[i] = bits_f(SENTINEL);
    b.p = b.base + off;
    return b;
}

static void fb_copy(fbuf_t *d, const fbuf_t *s)
{
    memcpy(d->base, s->base, s->n * sizeof(float));
}

static int fb_same(const fbuf_t *a, const fbuf_t *b)
{
    return memcmp(a->base, b->base, a->n * sizeof(float)) == 0;
}

/* The same floats, a NaN matching any NaN: which NaN's payload an add of
 * two NaNs keeps depends on the order the compiler gives the operands
 * (addss keeps its first), not on the kernel; every rank still reads one
 * element's sum from the rank that computed it. */
static int fb_same_nan(const fbuf_t *a, const fbuf_t *b)
{
    for (size_t i = 0; i < a->n; i++)
        if (memcmp(a->base + i, b->base + i, sizeof(float)) != 0 &&
            !(isnan(a->base[i]) && isnan(b->base[i])))
            return 0;
    return 1;
}

static size_t first_diff(const fbuf_t *a, const fbuf_t *b)
{
    for (size_t i = 0; i < a->n; i++)
        if (memcmp(a->base + i, b->base + i, sizeof(float)))
            return i;
    return (size_t)-1;
}

/* Line buffer: `lines` lines plus one guard line, all filled with junk. */
static uint64_t *lb_new(size_t lines)
{
    uint64_t *b = aligned_alloc(64, (lines + 1) * NF_LINE_BYTES);
    ck_assert_ptr_nonnull(b);
    memset(b, 0xA5, (lines + 1) * NF_LINE_BYTES);
    return b;
}

static void lb_random(uint64_t *b, size_t lines)
{
    for (size_t i = 0; i < lines * NF_LINE_WORDS; i++)
        b[i] = rnd();
}

static int same_double(double a, double b)
{
    return memcmp(&a, &b, sizeof(a)) == 0 || (isnan(a) && isnan(b));
}

/* -------------------------------------------------- reference: hand cases */

static double lane_sum_small(const double *v, size_t m)
{
    /* element k in lane k % 16, m <= 16: the fold of nf_kernels.h written out */
    double l[16] = {0};
    for (size_t k = 0; k < m; k++)
        l[k] = v[k];
    double a = ((l[0] + l[8]) + (l[4] + l[12])) + ((l[2] + l[10]) + (l[6] + l[14]));
    double b = ((l[1] + l[9]) + (l[5] + l[13])) + ((l[3] + l[11]) + (l[7] + l[15]));
    return a + b;
}

START_TEST(ref_lane_order)
{
    /* Sequential summation would lose both 1s against 2^53; the lane fold
     * adds lane 1 and lane 9 first and keeps them. */
    float x[10] = {9007199254740992.0f, 1.0f, 0, 0, 0, 0, 0, 0, 0, 1.0f};
    ck_assert(S->abs_sum(x, NULL, 10) == 9007199254740994.0);
    float y[17];
    double d[16] = {0};
    for (int i = 0; i < 17; i++)
        y[i] = (float)(i + 1) * (i & 1 ? -0.1f : 0.3f);
    for (int i = 0; i < 16; i++)
        d[i] = fabs((double)y[i]);
    d[0] += fabs((double)y[16]);
    ck_assert(S->abs_sum(y, NULL, 17) == lane_sum_small(d, 16));
    ck_assert(S->abs_sum(NULL, NULL, 0) == 0.0);
}
END_TEST

static unsigned count_of(const uint64_t *cnt, unsigned k, size_t j)
{
    unsigned c = 0;
    for (unsigned p = 0; p < k; p++)
        c |= (unsigned)((cnt[(j / 512 * k + p) * 8 + (j % 512) / 64] >> (j % 64)) & 1) << p;
    return c;
}

START_TEST(ref_three_ranks)
{
    /* Three ranks' signs: -0.0 and a negative denormal count as set bits. */
    const float x[3][5] = {
        {1.0f, -1.0f, -0.0f, 2.0f, 0.0f},
        {-1.0f, -1.0f, 3.0f, 0.0f, 1.0f},
        {2.0f, -3.0f, 1.0f, -0.0f, -1e-40f},
    };
    const unsigned want[5] = {1, 3, 1, 1, 1};
    uint64_t *bits[3], *cnt = lb_new(2);
    for (int i = 0; i < 3; i++) {
        bits[i] = lb_new(1);
        double s = S->bin_pack(x[i], NULL, 5, bits[i]);
        double d[5];
        for (int j = 0; j < 5; j++)
            d[j] = fabs((double)x[i][j]);
        ck_assert(s == lane_sum_small(d, 5));
        for (int w = 1; w < 8; w++)
            ck_assert_uint_eq(bits[i][w], 0);
        ck_assert_uint_eq(bits[i][0] >> 5, 0);
    }
    ck_assert_uint_eq(bits[0][0], 0x6);
    ck_assert_uint_eq(bits[2][0], 0x1A);
    S->count_sum(cnt, 2, (const uint64_t *const *)bits, 3, 1);
    for (int j = 0; j < 5; j++)
        ck_assert_uint_eq(count_of(cnt, 2, (size_t)j), want[j]);
    ck_assert_uint_eq(cnt[0] >> 5, 0);
    ck_assert_uint_eq(cnt[8] >> 5, 0);

    /* c counts the set (-1) signs: r = (float)(a * (n - 2c)) with a = 0.25,
     * n = 3: c = 1 -> 0.25, c = 3 -> -0.75 */
    float r[5], e[5] = {0.25f, 0.5f, -0.0f, 0, 0}, xf[5] = {1.5f, -2.0f, -0.0f, 0, 0};
    S->bin_finish(r, xf, e, cnt, 2, 5, 3, 0.25, 1.0f, 0);
    for (int j = 0; j < 5; j++)
        ck_assert(r[j] == (want[j] == 3 ? -0.75f : 0.25f));
    ck_assert(e[0] == 0.75f);   /* y = 1.75 >= 0: y - 1 */
    ck_assert(e[1] == -0.5f);   /* y = -1.5: y + 1 */
    ck_assert(e[2] == 1.0f);    /* y = -0.0 (sign set): y + 1 */
    ck_assert(e[3] == -1.0f);   /* y = +0.0: y - 1 */
    /* no set sign among 3 ranks: r = 3a, rounded once from double */
    memset(cnt, 0, 2 * NF_LINE_BYTES);
    S->bin_finish(r, NULL, NULL, cnt, 2, 1, 3, 0.1, 0.0f, 0);
    ck_assert(r[0] == (float)(0.1 * 3.0));
    for (int i = 0; i < 3; i++)
        free(bits[i]);
    free(cnt);
}
END_TEST

START_TEST(ref_ternary)
{
    const float y[8] = {2.0f, -2.0f, 1.0f, -1.0f, 0.5f, -0.5f, NAN, 1.0000001f};
    uint64_t *p = lb_new(1), *mi = lb_new(1), *cp = lb_new(1), *cm = lb_new(1);
    size_t nin = 99;
    double s = S->ter_pack(y, NULL, 8, 1.0f, p, mi, &nin);
    ck_assert_uint_eq(p[0], 0x81);
    ck_assert_uint_eq(mi[0], 0x02);
    ck_assert_uint_eq(nin, 3);
    ck_assert(s == 2.0 + (2.0 + (double)1.0000001f));
    /* t = 0: +-0 are out, everything else in */
    const float z[4] = {0.0f, -0.0f, FLT_TRUE_MIN, -FLT_TRUE_MIN};
    S->ter_pack(z, NULL, 4, 0.0f, p, mi, &nin);
    ck_assert_uint_eq(p[0], 0x4);
    ck_assert_uint_eq(mi[0], 0x8);
    ck_assert_uint_eq(nin, 2);
    /* finish: v = P - M over one plane each, b = 0.5 */
    memset(cp, 0, NF_LINE_BYTES);
    memset(cm, 0, NF_LINE_BYTES);
    cp[0] = 0x5; /* elements 0, 2 */
    cm[0] = 0x6; /* elements 1, 2 */
    float r[4], x[4] = {2.0f, -2.0f, 0.25f, -0.0f}, e[4] = {0, 0, 0, 0};
    S->ter_finish(r, x, e, cp, cm, 1, 4, 0.5, 1.0f, 1.5f);
    ck_assert(r[0] == 0.5f && r[1] == -0.5f && r[2] == 0.0f && r[3] == 0.0f);
    ck_assert(e[0] == 0.5f && e[1] == -0.5f && e[2] == 0.25f);
    ck_assert(e[3] == 0.0f); /* -0.0 + 0.0 = +0.0, gated out: e = y */
    ck_assert(!signbit(e[3]));
    free(p), free(mi), free(cp), free(cm);
}
END_TEST

/* count_sum with nin = 2^k - 1 inputs for k = 1..16, against a per-bit
 * count, for every available ISA (all inputs share a few distinct lines). */
START_TEST(ref_count_sum_full)
{
    const unsigned k = (unsigned)_i + 1, nin = (1u << k) - 1, ndist = 61;
    uint64_t *lines = lb_new(ndist), *cnt = lb_new(k);
    const uint64_t **in = malloc(nin * sizeof(*in));
    unsigned want[512] = {0};
    seed(k);
    lb_random(lines, ndist);
    for (unsigned i = 0; i < nin; i++) {
        in[i] = lines + (i % ndist) * NF_LINE_WORDS;
        for (unsigned j = 0; j < 512; j++)
            want[j] += (unsigned)((in[i][j / 64] >> (j % 64)) & 1);
    }
    for (int isa = 0; isa < NF_ISA_COUNT; isa++) {
        const nf_kernels_t *K = nf_kernels_for((nf_isa_t)isa);
        if (!K)
            continue;
        memset(cnt, 0xA5, (k + 1) * NF_LINE_BYTES);
        K->count_sum(cnt, k, in, nin, 1);
        for (unsigned j = 0; j < 512; j++)
            ck_assert_msg(count_of(cnt, k, j) == want[j], "%s k=%u j=%u", K->name, k, j);
        /* all ones: the count is nin in every position, every plane full */
        for (unsigned i = 0; i < nin; i++)
            in[i] = lines + (ndist - 1) * NF_LINE_WORDS;
        memset(lines + (ndist - 1) * NF_LINE_WORDS, 0xFF, NF_LINE_BYTES);
        K->count_sum(cnt, k, in, nin, 1);
        for (unsigned w = 0; w < k * NF_LINE_WORDS; w++)
            ck_assert_uint_eq(cnt[w], ~0ull);
        seed(k);
        lb_random(lines, ndist);
        for (unsigned i = 0; i < nin; i++)
            in[i] = lines + (i % ndist) * NF_LINE_WORDS;
    }
    free(in), free(lines), free(cnt);
}
END_TEST

static void set_count(uint64_t *cnt, unsigned k, size_t j, unsigned c)
{
    for (unsigned p = 0; p < k; p++) {
        uint64_t *w = &cnt[(j / 512 * k + p) * 8 + (j % 512) / 64];
        *w = (*w & ~(1ull << (j % 64))) | ((uint64_t)((c >> p) & 1) << (j % 64));
    }
}

START_TEST(ref_count_merge)
{
    uint64_t *acc = lb_new(4), *add = lb_new(4);
    memset(acc, 0, 4 * NF_LINE_BYTES);
    memset(add, 0, 4 * NF_LINE_BYTES);
    set_count(acc, 4, 0, 5), set_count(add, 4, 0, 9);     /* 14 */
    set_count(acc, 4, 511, 15), set_count(add, 4, 511, 0); /* 15 */
    set_count(acc, 4, 100, 9), set_count(add, 4, 100, 9); /* 18: carry past plane 3 dropped */
    S->count_merge(acc, add, 4, 1);
    ck_assert_uint_eq(count_of(acc, 4, 0), 14);
    ck_assert_uint_eq(count_of(acc, 4, 511), 15);
    ck_assert_uint_eq(count_of(acc, 4, 100), 2);
    ck_assert_uint_eq(count_of(acc, 4, 7), 0);
    free(acc), free(add);
}
END_TEST

START_TEST(ref_sum_f32)
{
    float a[3] = {1e8f, -0.0f, bits_f(0x7f800001u)}, b[3] = {-1e8f, 2.0f, 0}, c[3] = {1.0f, 0, 0};
    const float *in[3] = {a, b, c};
    float out[3];
    S->sum_f32(out, in, 3, 1);
    ck_assert(out[0] == 1.0f); /* ((1e8 + -1e8) + 1), not 1e8 + (-1e8 + 1) = 0 */
    S->sum_f32(out, in, 1, 3); /* copy: -0.0 and a signalling NaN keep their bits */
    ck_assert(memcmp(out, a, sizeof(a)) == 0);
    S->sum_f32(a, in, 2, 2); /* out aliases in[0] */
    ck_assert(a[0] == 0.0f && a[1] == 2.0f);
}
END_TEST

/* ------------------------------------------------------------ bf16 cases */

static uint32_t f_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float widen_bf16(uint16_t h)
{
    return bits_f((uint32_t)h << 16);
}

/* Every ISA's bf16_pack against hand-worked roundings: each row fills 70
 * elements (every lane of a vector, and a tail) and checks each output. */
static const struct {
    uint32_t x;
    uint16_t want;
    const char *what;
} bf16_rows[] = {
    {0x00000000u, 0x0000, "+0"},
    {0x80000000u, 0x8000, "-0"},
    {0x00000001u, 0x0000, "smallest denormal: to +0"},
    {0x80000001u, 0x8000, "-smallest denormal: to -0"},
    {0x00008000u, 0x0000, "denormal tie, even below: down to +0"},
    {0x00008001u, 0x0001, "denormal just above a tie: up"},
    {0x00010000u, 0x0001, "bf16 denormal, exact"},
    {0x00018000u, 0x0002, "denormal tie, odd below: up"},
    {0x80018000u, 0x8002, "negative denormal tie, odd below: up in magnitude"},
    {0x007E8000u, 0x007E, "denormal tie below FLT_MIN, even: down"},
    {0x007F7FFFu, 0x007F, "just below the last denormal tie: largest bf16 denormal"},
    {0x007F8000u, 0x0080, "tie between the largest bf16 denormal and FLT_MIN: up"},
    {0x007FFFFFu, 0x0080, "largest denormal: to FLT_MIN"},
    {0x807FFFFFu, 0x8080, "-largest denormal: to -FLT_MIN"},
    {0x00800000u, 0x0080, "FLT_MIN"},
    {0x3F800000u, 0x3F80, "1"},
    {0x3F807FFFu, 0x3F80, "just below a tie: down"},
    {0x3F808000u, 0x3F80, "tie, even below: down"},
    {0x3F808001u, 0x3F81, "just above a tie: up"},
    {0x3F818000u, 0x3F82, "tie, odd below: up"},
    {0xBF818000u, 0xBF82, "negative tie, odd below: up in magnitude"},
    {0xBF808000u, 0xBF80, "negative tie, even below: down in magnitude"},
    {0x3FFF8000u, 0x4000, "tie at the end of a binade: carries into the exponent"},
    {0x3FFF7FFFu, 0x3FFF, "just below it"},
    {0x7F7E8000u, 0x7F7E, "tie below the largest finite bf16, even: down"},
    {0x7F7F0000u, 0x7F7F, "largest finite bf16, exact"},
    {0x7F7F7FFFu, 0x7F7F, "just below the overflow tie: largest finite bf16"},
    {0x7F7F8000u, 0x7F80, "overflow tie, odd below: +Inf"},
    {0x7F7FFFFFu, 0x7F80, "FLT_MAX: +Inf"},
    {0xFF7FFFFFu, 0xFF80, "-FLT_MAX: -Inf"},
    {0xFF7F7FFFu, 0xFF7F, "-(just below the overflow tie): -largest finite bf16"},
    {0x7F800000u, 0x7F80, "+Inf"},
    {0xFF800000u, 0xFF80, "-Inf"},
    {0x7FC00000u, 0x7FC0, "quiet NaN"},
    {0xFFC00000u, 0xFFC0, "negative quiet NaN"},
    {0x7FC00001u, 0x7FC0, "quiet NaN, payload in the low half"},
    {0x7FC18000u, 0x7FC1, "quiet NaN at a tie: truncated, not rounded"},
    {0x7FFFFFFFu, 0x7FFF, "quiet NaN, all ones: rounding would carry into the sign"},
    {0xFFFFFFFFu, 0xFFFF, "negative quiet NaN, all ones"},
    {0x7F800001u, 0x7FC0, "signalling NaN, payload in the low half: quieted, not Inf"},
    {0xFF800001u, 0xFFC0, "negative signalling NaN, low payload: quieted, not -Inf"},
    {0x7F808000u, 0x7FC0, "signalling NaN at a tie: quieted, not Inf"},
    {0x7F80FFFFu, 0x7FC0, "signalling NaN that would round to 0x7F81: quieted"},
    {0x7FA00000u, 0x7FE0, "signalling NaN with a payload: quieted, payload kept"},
    {0x7FBFFFFFu, 0x7FFF, "signalling NaN, all payload bits: quieted"},
    {0xFF810000u, 0xFFC1, "negative signalling NaN, payload 1: quieted, sign kept"},
};
#define NBF16_ROWS (sizeof(bf16_rows) / sizeof(bf16_rows[0]))

START_TEST(ref_bf16_pack)
{
    float x[70];
    uint16_t out[71];
    for (size_t j = 0; j < 70; j++)
        x[j] = bits_f(bf16_rows[_i].x);
    for (int isa = 0; isa < NF_ISA_COUNT; isa++) {
        const nf_kernels_t *K = nf_kernels_for((nf_isa_t)isa);
        if (!K)
            continue;
        memset(out, 0xA5, sizeof(out));
        K->bf16_pack(x, out, 70);
        size_t bad = 70;
        for (size_t j = 0; j < 70 && bad == 70; j++)
            if (out[j] != bf16_rows[_i].want)
                bad = j;
        ck_assert_msg(bad == 70, "%s bf16_pack(0x%08x) = 0x%04x, not 0x%04x (%s)", K->name,
                      bf16_rows[_i].x, out[bad], bf16_rows[_i].want, bf16_rows[_i].what);
        ck_assert_uint_eq(out[70], 0xA5A5);
    }
}
END_TEST

/* Round to nearest, ties to even, worked out in double, independently of
 * the reference's carry trick: the two bf16 around x (a magnitude beyond
 * the largest finite one counts as 2^128, which rounds to Inf), the nearer
 * one, on a tie the one with the even encoding. NaN: truncated, quieted. */
static uint16_t bf16_nearest(uint32_t u)
{
    const uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    if (isnan(bits_f(u)))
        return lo | 0x0040;
    const double x = bits_f(u), a = widen_bf16(lo);
    if (x == a)
        return lo;
    const double b = (hi & 0x7FFF) == 0x7F80 ? copysign(ldexp(1.0, 128), x) : widen_bf16(hi);
    const double da = fabs(x - a), db = fabs(b - x);
    return da < db || (da == db && !(lo & 1)) ? lo : hi;
}

/* Every top half (every sign, exponent, bf16 mantissa) with the low halves
 * at and around the rounding boundaries, then random encodings: every ISA
 * against the double-arithmetic rounding. Loop i takes top halves
 * [4096 i, 4096 i + 4096). */
static const uint16_t bf16_lows[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF};
#define NLOWS (sizeof(bf16_lows) / sizeof(bf16_lows[0]))

START_TEST(ref_bf16_nearest)
{
    const size_t n = 4096 * NLOWS + 65536;
    float *x = malloc(n * sizeof(float));
    uint16_t *want = malloc(n * sizeof(uint16_t)), *got = malloc(n * sizeof(uint16_t));
    ck_assert(x && want && got);
    seed(1000 + (uint64_t)_i);
    for (size_t j = 0; j < n; j++) {
        uint32_t top = 4096u * (uint32_t)_i + (uint32_t)(j / NLOWS);
        uint32_t u = j < 4096 * NLOWS ? top << 16 | bf16_lows[j % NLOWS] : (uint32_t)rnd();
        x[j] = bits_f(u);
        want[j] = bf16_nearest(u);
    }
    for (int isa = 0; isa < NF_ISA_COUNT; isa++) {
        const nf_kernels_t *K = nf_kernels_for((nf_isa_t)isa);
        if (!K)
            continue;
        K->bf16_pack(x, got, n);
        size_t bad = n;
        for (size_t j = 0; j < n && bad == n; j++)
            if (got[j] != want[j])
                bad = j;
        ck_assert_msg(bad == n, "%s bf16_pack(0x%08x) = 0x%04x, nearest even is 0x%04x", K->name,
                      bad < n ? f_bits(x[bad]) : 0, bad < n ? got[bad] : 0, bad < n ? want[bad] : 0);
    }
    free(x), free(want), free(got);
}
END_TEST

/* A NaN never becomes Inf or zero: every NaN encoding (both signs, every
 * payload, 2^24 - 2 of them) through every ISA's bf16_pack comes out a
 * quiet NaN of the same sign; and a NaN among the inputs of a sum, first,
 * last or in the partial sum, gives NaN whatever else is added (Inf too). */
START_TEST(ref_bf16_nan)
{
    const size_t chunk = 1u << 16;
    float *x = malloc(chunk * sizeof(float)), *r = malloc(chunk * sizeof(float));
    uint16_t *h = malloc(chunk * sizeof(uint16_t)), *f = malloc(chunk * sizeof(uint16_t));
    ck_assert(x && r && h && f);
    for (int isa = 0; isa < NF_ISA_COUNT; isa++) {
        const nf_kernels_t *K = nf_kernels_for((nf_isa_t)isa);
        if (!K)
            continue;
        size_t bad = 0;
        uint32_t first = 0;
        for (uint32_t p0 = 0; p0 < 2u << 23; p0 += (uint32_t)chunk) {
            for (size_t j = 0; j < chunk; j++) { /* payload p0 + j of sign p0 >> 23; payload 0 is Inf */
                uint32_t p = p0 + (uint32_t)j, pl = p & 0x7FFFFF;
                x[j] = bits_f((p >> 23) << 31 | 0x7F800000u | (pl ? pl : 0x400000u));
            }
            K->bf16_pack(x, h, chunk);
            for (size_t j = 0; j < chunk; j++) {
                int ok = (h[j] & 0x7FC0) == 0x7FC0 && (h[j] >> 15) == (f_bits(x[j]) >> 31);
                if (!ok && bad++ == 0)
                    first = f_bits(x[j]);
            }
        }
        ck_assert_msg(bad == 0, "%s: %zu NaNs not quiet NaNs of their sign, first 0x%08x", K->name,
                      bad, first);
        /* the last chunk's NaNs (negative) against finite values, +-0, +-Inf */
        for (size_t j = 0; j < chunk; j++)
            f[j] = (uint16_t)(j % 0x7F80 | (j & 0x8000)); /* every non-NaN class but -Inf */
        f[0] = 0x7F80, f[1] = 0xFF80;
        const uint16_t *nan_first[2] = {h, f}, *nan_last[2] = {f, h};
        for (int order = 0; order < 3; order++) {
            if (order < 2)
                K->sum_bf16(r, order ? nan_last : nan_first, 2, chunk);
            else /* NaN partial sum continued by finite and infinite values */
                K->sum_bf16_f32(r, x, nan_last, 1, chunk);
            bad = chunk;
            for (size_t j = 0; j < chunk && bad == chunk; j++)
                if (!isnan(r[j]))
                    bad = j;
            ck_assert_msg(bad == chunk, "%s sum with a NaN (order %d) is not NaN at %zu", K->name,
                          order, bad);
        }
    }
    free(x), free(r), free(h), free(f);
}
END_TEST

START_TEST(ref_sum_bf16)
{
    /* 2^24 + 1 + 1 from the left: each 1 is lost to the tie-to-even, so not
     * 2^24 + 2; -0.0 and a signalling NaN widen exactly with one input */
    const uint16_t a[3] = {0x4B80, 0x8000, 0x7F81}, b[3] = {0x3F80, 0x3F80, 0x3F80};
    const uint16_t *in[3] = {a, b, b};
    float out[3], acc[3] = {16777216.0f, -0.0f, bits_f(0x7F800001u)};
    S->sum_bf16(out, in, 3, 1);
    ck_assert(out[0] == 16777216.0f);
    S->sum_bf16(out, in, 1, 3);
    ck_assert(f_bits(out[0]) == 0x4B800000u && f_bits(out[1]) == 0x80000000u &&
              f_bits(out[2]) == 0x7F810000u);
    S->sum_bf16_f32(out, acc, in + 1, 2, 1);
    ck_assert(out[0] == 16777216.0f);
    S->sum_bf16_f32(out, acc, in, 0, 3); /* nin 0: a copy of acc, bits kept */
    ck_assert(memcmp(out, acc, sizeof(acc)) == 0);
    S->sum_bf16_f32(acc, acc, in, 2, 2); /* in place: 2^24 + 2^24 + 1, -0 + -0 + 1 */
    ck_assert(acc[0] == 33554432.0f && acc[1] == 1.0f);
}
END_TEST

START_TEST(dispatch)
{
    ck_assert_str_eq(nf_isa_name(NF_ISA_SCALAR), "scalar");
    ck_assert_str_eq(nf_isa_name(NF_ISA_AVX2), "avx2");
    ck_assert_str_eq(nf_isa_name(NF_ISA_AVX512), "avx512");
    ck_assert_ptr_null(nf_isa_name(NF_ISA_COUNT));
    ck_assert_ptr_null(nf_isa_name((nf_isa_t)-1));
    ck_assert_ptr_null(nf_kernels_for(NF_ISA_COUNT));
    ck_assert_ptr_eq(nf_kernels_for(NF_ISA_SCALAR), &nf_kernels_scalar);
    nf_isa_t best = nf_isa_detect();
    ck_assert_ptr_nonnull(nf_kernels_for(best));
    for (int i = 0; i < NF_ISA_COUNT; i++) {
        const nf_kernels_t *K = nf_kernels_for((nf_isa_t)i);
        ck_assert(i <= (int)best ? K != NULL || i == NF_ISA_AVX2 : K == NULL);
        if (K) {
            ck_assert_int_eq(K->isa, i);
            ck_assert_str_eq(K->name, nf_isa_name((nf_isa_t)i));
        }
    }
}
END_TEST

/* Entry i of a table, in nf_kernels_t order, as one comparable type. */
typedef void (*fn_t)(void);

static fn_t entry(const nf_kernels_t *K, int i)
{
    const fn_t f[] = {(fn_t)K->abs_sum, (fn_t)K->bin_pack, (fn_t)K->bin_pack_ef,
                      (fn_t)K->bin_finish, (fn_t)K->ter_pack, (fn_t)K->ter_y_ef,
                      (fn_t)K->ter_finish,
                      (fn_t)K->count_sum, (fn_t)K->count_merge, (fn_t)K->sum_f32,
                      (fn_t)K->bf16_pack, (fn_t)K->sum_bf16, (fn_t)K->sum_bf16_f32,
                      (fn_t)K->int_y_ef, (fn_t)K->int_pack, (fn_t)K->int_finish};
    ck_assert_int_eq(nf_kernels_count(), (int)(sizeof(f) / sizeof(f[0])));
    return f[i];
}

static int tune_off(void)
{
    const char *v = getenv("NFCOLL_SIMD_TUNE");
    return v && (!strcasecmp(v, "off") || !strcmp(v, "0") || !strcasecmp(v, "no") ||
                 !strcasecmp(v, "false"));
}

/* Every cap up to the CPU's: each entry is some ISA's own function, at or
 * below the cap; unmeasured entries (and all of them with the measurement
 * off, or one candidate) are the highest ISA's; scalar cap, scalar table. */
START_TEST(tuned_cap)
{
    const nf_isa_t cap = (nf_isa_t)_i, top = nf_isa_detect();
    if (cap > top)
        return;
    nf_isa_t high = NF_ISA_SCALAR;
    for (int i = NF_ISA_AVX2; i <= (int)cap; i++)
        if (nf_kernels_for((nf_isa_t)i))
            high = (nf_isa_t)i;
    const nf_kernels_t *T = nf_kernels_tuned(cap);
    ck_assert_ptr_eq(T, nf_kernels_tuned(cap));
    ck_assert_int_le(T->isa, cap);
    ck_assert_ptr_nonnull(T->name);
    for (int i = 0; i < nf_kernels_count(); i++) {
        nf_isa_t isa = NF_ISA_COUNT;
        double ns = -1;
        const char *name = nf_kernels_choice(i, &isa, &ns);
        ck_assert_ptr_nonnull(name);
        ck_assert_int_le(isa, cap);
        ck_assert_ptr_nonnull(nf_kernels_for(isa));
        ck_assert_msg(entry(T, i) == entry(nf_kernels_for(isa), i), "%s: not %s's", name,
                      nf_isa_name(isa));
        ck_assert(ns >= 0 && ns == nf_kernels_measured(i, isa));
        if (ns == 0 || tune_off() || high <= NF_ISA_AVX2)
            ck_assert_msg(isa == high, "%s: %s, not the highest (%s)", name, nf_isa_name(isa),
                          nf_isa_name(high));
        if (tune_off() || high <= NF_ISA_AVX2)
            ck_assert(ns == 0);
    }
    ck_assert_ptr_null(nf_kernels_choice(nf_kernels_count(), NULL, NULL));
    ck_assert_ptr_null(nf_kernels_choice(-1, NULL, NULL));
    if (cap == NF_ISA_SCALAR) {
        ck_assert_str_eq(T->name, "scalar");
        ck_assert_int_eq(T->isa, NF_ISA_SCALAR);
    }
    /* a cap above the CPU's is lowered to it */
    ck_assert_ptr_eq(nf_kernels_tuned(NF_ISA_COUNT), nf_kernels_tuned(top));
}
END_TEST

static void *tuned_thread(void *arg)
{
    return (void *)nf_kernels_tuned((nf_isa_t)(size_t)arg);
}

START_TEST(tuned_threads)
{
    /* The parent built the top cap's table (build_cases); in this forked
     * process eight threads race to build every cap's: one table per cap. */
    pthread_t th[8];
    void *got[8];
    for (size_t i = 0; i < 8; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, tuned_thread, (void *)(i % NF_ISA_COUNT)), 0);
    for (size_t i = 0; i < 8; i++) {
        ck_assert_int_eq(pthread_join(th[i], &got[i]), 0);
        ck_assert_ptr_eq(got[i], nf_kernels_tuned((nf_isa_t)(i % NF_ISA_COUNT)));
    }
}
END_TEST

/* ------------------------------------------------ every ISA vs reference */

typedef struct {
    const nf_kernels_t *K;
    size_t m;
    unsigned off;
} vcase_t;

static const size_t sizes[] = {0, 1, 7, 15, 31, 63, 127, 130, 511, 513, (1u << 20) + 3};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define BIG ((1u << 20) + 3)
static const unsigned big_offs[] = {0, 1, 15};
#define MAX_CASES ((NF_ISA_COUNT + 1) * NSIZES * OFF_MAX) /* + the tuned table */
static vcase_t cases[MAX_CASES];
static int ncases;

enum { E_NONE, E_SEP, E_INPLACE, E_MODES };

#define DIAG(c, what, kind, em) "%s %s m=%zu off=%u kind=%s e=%d", (c)->K->name, what, (c)->m, \
        (c)->off, kind_name[kind], em

/* Inputs for one (case, kind): x, e (and spares) at the case's offset. */
typedef struct {
    fbuf_t x, e, e2, r, r2;
} bufs_t;

static void bufs_init(bufs_t *b, const vcase_t *c, int kind)
{
    b->x = fb_new(c->m, c->off);
    b->e = fb_new(c->m, c->off);
    b->e2 = fb_new(c->m, c->off);
    b->r = fb_new(c->m, c->off);
    b->r2 = fb_new(c->m, c->off);
    seed(c->m * 31 + c->off * 7 + (uint64_t)kind);
    fill(b->x.p, b->e.p, c->m, kind);
}

static void bufs_free(bufs_t *b)
{
    free(b->x.base), free(b->e.base), free(b->e2.base), free(b->r.base), free(b->r2.base);
}

START_TEST(vs_abs_sum)
{
    const vcase_t *c = &cases[_i];
    for (int kind = 0; kind < KIND_COUNT; kind++) {
        bufs_t b;
        bufs_init(&b, c, kind);
        for (int em = E_NONE; em <= E_SEP; em++) {
            const float *e = em ? b.e.p : NULL;
            double want = S->abs_sum(b.x.p, e, c->m), got = c->K->abs_sum(b.x.p, e, c->m);
            ck_assert_msg(same_double(want, got), DIAG(c, "abs_sum", kind, em));
            if (kind == KIND_NONFINITE && c->m)
                ck_assert(!isfinite(want));
        }
        bufs_free(&b);
    }
}
END_TEST

START_TEST(vs_bin_pack)
{
    const vcase_t *c = &cases[_i];
    size_t L = nf_lines(c->m);
    uint64_t *bs = lb_new(L), *bv = lb_new(L);
    for (int kind = 0; kind < KIND_COUNT; kind++) {
        bufs_t b;
        bufs_init(&b, c, kind);
        for (int em = E_NONE; em <= E_SEP; em++) {
            const float *e = em ? b.e.p : NULL;
            memset(bs, 0xA5, (L + 1) * NF_LINE_BYTES);
            memset(bv, 0x5A, (L + 1) * NF_LINE_BYTES);
            memset(bs + L * 8, 0x5A, NF_LINE_BYTES); /* the guard line must survive */
            double want = S->bin_pack(b.x.p, e, c->m, bs);
            double got = c->K->bin_pack(b.x.p, e, c->m, bv);
            ck_assert_msg(same_double(want, got), DIAG(c, "bin_pack sum", kind, em));
            ck_assert_msg(memcmp(bs, bv, (L + 1) * NF_LINE_BYTES) == 0, DIAG(c, "bin_pack bits", kind, em));
            if (kind == KIND_NONFINITE && c->m)
                ck_assert(!isfinite(want));
        }
        bufs_free(&b);
    }
    free(bs), free(bv);
}
END_TEST

/* bin_pack_ef keeps error feedback as the previous y and a: it must equal
 * the reference bin_pack on the e that form stands for, scaled by the decay
 * (decay 1: on e itself, the formula before ef_decay), and every ISA must
 * equal the scalar bin_pack_ef (ynew included, streamed or not: the stream
 * flag alternates). */
static const float ef_a[] = {0.0f, 0.37f, 1e-45f, 3e38f};
static const float ef_decay[] = {1.0f, 0.5f, 0.3f, 0.0f};
#define NDECAY (sizeof(ef_decay) / sizeof(ef_decay[0]))

static float *ynew_new(size_t m, unsigned char fill_byte)
{
    void *p = NULL;
    ck_assert(posix_memalign(&p, 64, (m + 16) * sizeof(float)) == 0);
    memset(p, fill_byte, (m + 16) * sizeof(float));
    return p;
}

/* The first j where y[j] is not bitwise x[j] + e[j], or m: one assertion
 * per check, as each ck_assert writes to Check's pipe. */
static size_t first_bad_y(const float *x, const float *e, const float *y, size_t m)
{
    for (size_t j = 0; j < m; j++) {
        float want = x[j] + e[j];
        if (memcmp(&want, &y[j], sizeof(want)) != 0)
            return j;
    }
    return m;
}

/* e scaled by decay in place, one float multiply each; decay 1 leaves e
 * untouched, so that case checks the formula without the multiply. */
static void decay_e(float *e, size_t m, float decay)
{
    for (size_t j = 0; decay != 1.0f && j < m; j++)
        e[j] = decay * e[j];
}

START_TEST(vs_bin_pack_ef)
{
    const vcase_t *c = &cases[_i];
    size_t L = nf_lines(c->m);
    uint64_t *bs = lb_new(L), *bv = lb_new(L), *br = lb_new(L);
    float *ys = ynew_new(c->m, 0xA5), *yv = ynew_new(c->m, 0x5A);
    float *e = malloc((c->m + 1) * sizeof(float));
    for (int kind = 0; kind < KIND_COUNT; kind++) {
        bufs_t b;
        bufs_init(&b, c, kind);
        for (size_t t = 0; t < sizeof(ef_a) / sizeof(ef_a[0]) * NDECAY; t++) {
            float a = ef_a[t / NDECAY], d = ef_decay[t % NDECAY];
            memset(ys, 0xA5, c->m * sizeof(float));
            memset(yv, 0x5A, c->m * sizeof(float));
            double want = S->bin_pack_ef(b.x.p, b.e.p, a, d, ys, c->m, bs, 0);
            double got = c->K->bin_pack_ef(b.x.p, b.e.p, a, d, yv, c->m, bv, (int)(t & 1));
            ck_assert_msg(same_double(want, got), DIAG(c, "bin_pack_ef sum", kind, (int)t));
            ck_assert_msg(memcmp(bs, bv, L * NF_LINE_BYTES) == 0, DIAG(c, "bin_pack_ef bits", kind, (int)t));
            ck_assert_msg(memcmp(ys, yv, c->m * sizeof(float)) == 0, DIAG(c, "bin_pack_ef ynew", kind, (int)t));
            /* The scalar form against the reference on the e it stands for. */
            for (size_t j = 0; j < c->m; j++)
                e[j] = signbit(b.e.p[j]) ? b.e.p[j] + a : b.e.p[j] - a;
            decay_e(e, c->m, d);
            double ref = S->bin_pack(b.x.p, e, c->m, br);
            ck_assert_msg(same_double(ref, want), DIAG(c, "bin_pack_ef vs bin_pack sum", kind, (int)t));
            ck_assert_msg(memcmp(br, bs, L * NF_LINE_BYTES) == 0, DIAG(c, "bin_pack_ef vs bin_pack bits", kind, (int)t));
            ck_assert_msg(first_bad_y(b.x.p, e, ys, c->m) == c->m,
                          DIAG(c, "bin_pack_ef y", kind, (int)t));
        }
        bufs_free(&b);
    }
    free(bs), free(bv), free(br), free(ys), free(yv), free(e);
}
END_TEST

/* ter_y_ef keeps error feedback as the previous y, t and b: it must equal
 * abs_sum and y = x + decay * e on the e that form stands for, and every
 * ISA must equal the scalar ter_y_ef (ynew included, streamed or not: the
 * stream flag alternates). */
static const float ef_tb[][2] = {{0.0f, 0.0f}, {0.5f, 0.37f}, {INFINITY, 0.3f},
                                 {1e-45f, 3e38f}, {0.0f, 1.0f}};

START_TEST(vs_ter_y_ef)
{
    const vcase_t *c = &cases[_i];
    float *ys = ynew_new(c->m, 0xA5), *yv = ynew_new(c->m, 0x5A);
    float *e = malloc((c->m + 1) * sizeof(float));
    for (int kind = 0; kind < KIND_COUNT; kind++) {
        bufs_t b;
        bufs_init(&b, c, kind);
        for (size_t ti = 0; ti < sizeof(ef_tb) / sizeof(ef_tb[0]) * NDECAY; ti++) {
            float t = ef_tb[ti / NDECAY][0], bb = ef_tb[ti / NDECAY][1], d = ef_decay[ti % NDECAY];
            memset(ys, 0xA5, c->m * sizeof(float));
            memset(yv, 0x5A, c->m * sizeof(float));
            double want = S->ter_y_ef(b.x.p, b.e.p, t, bb, d, ys, c->m, 0);
            double got = c->K->ter_y_ef(b.x.p, b.e.p, t, bb, d, yv, c->m, (int)(ti & 1));
            ck_assert_msg(same_double(want, got), DIAG(c, "ter_y_ef sum", kind, (int)ti));
            ck_assert_msg(memcmp(ys, yv, c->m * sizeof(float)) == 0, DIAG(c, "ter_y_ef ynew", kind, (int)ti));
            /* The scalar form against abs_sum on the e it stands for. */
            for (size_t j = 0; j < c->m; j++) {
                float p = b.e.p[j];
                e[j] = p > t ? p - bb : p < -t ? p + bb : p;
            }
            decay_e(e, c->m, d);
            double ref = S->abs_sum(b.x.p, e, c->m);
            ck_assert_msg(same_double(ref, want), DIAG(c, "ter_y_ef vs abs_sum", kind, (int)ti));
            ck_assert_msg(first_bad_y(b.x.p, e, ys, c->m) == c->m,
                          DIAG(c, "ter_y_ef y", kind, (int)ti));
        }
        bufs_free(&b);
    }
    free(ys), free(yv), free(e);
}
END_TEST

/* ef_decay in the scalar kernels, by hand: y = x + decay * e, where e is
 * rebuilt from the previous y (binary: yprev -+ aprev; ternary: gated). */
START_TEST(ref_ef_decay)
{
    /* e = {3 - 1, -3 + 1, 0.5 - 1, -0.0 + 1, 0 - 1} = {2, -2, -0.5, 1, -1} */
    const float yp[5] = {3.0f, -3.0f, 0.5f, -0.0f, 0.0f}, x[5] = {1.0f, 1.0f, -0.0f, -0.0f, 0.75f};
    const float half[5] = {2.0f, 0.0f, -0.25f, 0.5f, 0.25f}, one[5] = {3.0f, -1.0f, -0.5f, 1.0f, -0.25f};
    float *y = ynew_new(5, 0), ya[5];
    uint64_t *bits = lb_new(1);
    double s = S->bin_pack_ef(x, yp, 1.0f, 0.5f, y, 5, bits, 0);
    ck_assert(memcmp(y, half, sizeof(half)) == 0);
    ck_assert_uint_eq(bits[0], 0x4); /* -0.25: the only sign set */
    ck_assert(s == 3.0);
    S->bin_pack_ef(x, yp, 1.0f, 1.0f, y, 5, bits, 0);
    ck_assert(memcmp(y, one, sizeof(one)) == 0);
    /* decay 0: y = x + 0 * e, so -0.0 + 0.0 is +0.0 (sign clear) while
     * -0.0 + -0.0 stays -0.0 */
    S->bin_pack_ef(x, yp, 1.0f, 0.0f, y, 5, bits, 0);
    ck_assert(y[0] == 1.0f && y[1] == 1.0f && y[4] == 0.75f);
    ck_assert(signbit(y[2]) && !signbit(y[3]));
    ck_assert_uint_eq(bits[0], 0x4);
    /* ternary, t = 1, b = 0.5: e = {2.5, -2.5, 0.5, -0.0, 0} */
    S->ter_y_ef(x, yp, 1.0f, 0.5f, 0.5f, ya, 5, 0);
    ck_assert(ya[0] == 2.25f && ya[1] == -0.25f && ya[2] == 0.25f && ya[4] == 0.75f);
    ck_assert(signbit(ya[3])); /* -0.0 + 0.5 * -0.0 */
    /* an e buffer (t = +Inf): e itself, scaled */
    S->ter_y_ef(x, yp, INFINITY, 0.0f, 0.5f, ya, 5, 0);
    ck_assert(ya[0] == 2.5f && ya[1] == -0.5f && ya[2] == 0.25f && ya[4] == 0.75f);
    free(y), free(bits);
}
END_TEST

static const unsigned finish_k[] = {1, 2, 3, 4, 5, 8, 16};
#define NFK (sizeof(finish_k) / sizeof(finish_k[0]))

/* Scale parameters: ordinary, results overflowing to Inf, denormal results. */
static const double finish_a[] = {0.3, 3e38, 1e-45};

static int nk_for(const vcase_t *c)
{
    return c->m >= BIG ? 2 : (int)NFK; /* the big size tries k = 1 and 2 only */
}

static void run_finish(const vcase_t *c, int ternary, int kind, int em, unsigned k, double a,
                       int stream, bufs_t *b, const uint64_t *c1, const uint64_t *c2)
{
    fbuf_t rs = b->r, es = b->e2;
    fbuf_t rv = fb_new(c->m, c->off), ev = fb_new(c->m, c->off);
    static const float ts[3] = {0.5f, -0.5f, 0.0f}; /* t < 0: both gates can hold */
    unsigned n = (unsigned)(rnd() % ((1u << k) + 3));
    float ai = (float)a * 0.5f + 0.125f, t = ts[rnd() % 3];
    fb_copy(&es, &b->e);
    if (em == E_INPLACE)
        fb_copy(&rs, &b->x);
    fb_copy(&rv, &rs);
    fb_copy(&ev, &es);
    const float *xs = em == E_INPLACE ? rs.p : em == E_SEP ? b->x.p : NULL;
    const float *xv = em == E_INPLACE ? rv.p : em == E_SEP ? b->x.p : NULL;
    float *eS = em ? es.p : NULL, *eV = em ? ev.p : NULL;
    if (!ternary) {
        S->bin_finish(rs.p, xs, eS, c1, k, c->m, n, a, ai, 0);
        c->K->bin_finish(rv.p, xv, eV, c1, k, c->m, n, a, ai, stream);
    } else {
        S->ter_finish(rs.p, xs, eS, c1, c2, k, c->m, a, t, ai);
        c->K->ter_finish(rv.p, xv, eV, c1, c2, k, c->m, a, t, ai);
    }
    ck_assert_msg(fb_same(&rs, &rv), "%s k=%u n=%u a=%g r differs at %zu: " "%s m=%zu off=%u kind=%s e=%d",
                  ternary ? "ter_finish" : "bin_finish", k, n, a, first_diff(&rs, &rv),
                  c->K->name, c->m, c->off, kind_name[kind], em);
    ck_assert_msg(fb_same(&es, &ev), "%s k=%u e differs: " "%s m=%zu off=%u kind=%s e=%d",
                  ternary ? "ter_finish" : "bin_finish", k, c->K->name, c->m, c->off,
                  kind_name[kind], em);
    free(rv.base), free(ev.base);
}

static void vs_finish(const vcase_t *c, int ternary)
{
    size_t L = nf_lines(c->m);
    for (int kind = 0; kind < KIND_COUNT; kind++) {
        bufs_t b;
        bufs_init(&b, c, kind);
        for (int ki = 0; ki < nk_for(c); ki++) {
            unsigned k = finish_k[ki];
            uint64_t *c1 = lb_new(L * k), *c2 = lb_new(L * k);
            lb_random(c1, L * k);
            lb_random(c2, L * k);
            for (int em = E_NONE; em < E_MODES; em++) /* every a meets every k, e mode; */
                run_finish(c, ternary, kind, em, k, finish_a[(ki + em + kind) % 3], /* streamed */
                           (ki + kind) & 1, &b, c1, c2); /* and not */
            free(c1), free(c2);
        }
        bufs_free(&b);
    }
}

START_TEST(vs_bin_finish)
{
    vs_finish(&cases[_i], 0);
}
END_TEST

START_TEST(vs_ter_finish)
{
    vs_finish(&cases[_i], 1);
}
END_TEST

/* The stream flag (docs/design.md, "Streaming stores") changes how outputs
 * are stored, never their bits: each kernel that takes it, streamed and not,
 * on the same inputs, gives the same sums, bits, ynew, r and e, sentinels
 * around r and e included, at every size and start of r. */
START_TEST(vs_stream)
{
    const vcase_t *c = &cases[_i];
    size_t L = nf_lines(c->m);
    uint64_t *b0 = lb_new(L), *b1 = lb_new(L), *cnt = lb_new(L * 2);
    float *y0 = ynew_new(c->m, 0xA5), *y1 = ynew_new(c->m, 0xA5);
    lb_random(cnt, L * 2);
    for (int kind = 0; kind < KIND_COUNT; kind++) {
        bufs_t b;
        bufs_init(&b, c, kind);
        double s0 = c->K->bin_pack_ef(b.x.p, b.e.p, 0.37f, 0.5f, y0, c->m, b0, 0);
        double s1 = c->K->bin_pack_ef(b.x.p, b.e.p, 0.37f, 0.5f, y1, c->m, b1, 1);
        ck_assert_msg(same_double(s0, s1), DIAG(c, "bin_pack_ef sum streamed", kind, 0));
        ck_assert_msg(memcmp(b0, b1, L * NF_LINE_BYTES) == 0, DIAG(c, "bin_pack_ef bits streamed", kind, 0));
        ck_assert_msg(memcmp(y0, y1, (c->m + 16) * sizeof(float)) == 0,
                      DIAG(c, "bin_pack_ef ynew streamed", kind, 0));
        s0 = c->K->ter_y_ef(b.x.p, b.e.p, 0.5f, 0.37f, 0.5f, y0, c->m, 0);
        s1 = c->K->ter_y_ef(b.x.p, b.e.p, 0.5f, 0.37f, 0.5f, y1, c->m, 1);
        ck_assert_msg(same_double(s0, s1), DIAG(c, "ter_y_ef sum streamed", kind, 0));
        ck_assert_msg(memcmp(y0, y1, (c->m + 16) * sizeof(float)) == 0,
                      DIAG(c, "ter_y_ef ynew streamed", kind, 0));
        for (int em = E_NONE; em <= E_SEP; em++) { /* r alone (streamable), r and e */
            fbuf_t r1 = fb_new(c->m, c->off), e1 = fb_new(c->m, c->off);
            fb_copy(&b.e2, &b.e);
            fb_copy(&e1, &b.e);
            for (unsigned k = 1; k <= 2; k++) {
                c->K->bin_finish(b.r.p, em ? b.x.p : NULL, em ? b.e2.p : NULL, cnt, k, c->m, 3,
                                 0.3, 0.25f, 0);
                c->K->bin_finish(r1.p, em ? b.x.p : NULL, em ? e1.p : NULL, cnt, k, c->m, 3,
                                 0.3, 0.25f, 1);
                ck_assert_msg(fb_same(&b.r, &r1), DIAG(c, "bin_finish r streamed", kind, em));
                ck_assert_msg(fb_same(&b.e2, &e1), DIAG(c, "bin_finish e streamed", kind, em));
            }
            free(r1.base), free(e1.base);
        }
        bufs_free(&b);
    }
    free(b0), free(b1), free(cnt), free(y0), free(y1);
}
END_TEST

static const float ter_t[] = {0.0f, 1.0f, FLT_TRUE_MIN, -0.5f, INFINITY};

START_TEST(vs_ter_pack)
{
    const vcase_t *c = &cases[_i];
    size_t L = nf_lines(c->m);
    uint64_t *ps = lb_new(L), *ms = lb_new(L), *pv = lb_new(L), *mv = lb_new(L);
    for (int kind = 0; kind < KIND_COUNT; kind++) {
        bufs_t b;
        bufs_init(&b, c, kind);
        for (int em = E_NONE; em <= E_SEP; em++) {
            for (unsigned it = 0; it < sizeof(ter_t) / sizeof(ter_t[0]); it++) {
                const float *e = em ? b.e.p : NULL;
                size_t ns = 7, nv = 9;
                memset(ps, 0xA5, (L + 1) * NF_LINE_BYTES), memset(ms, 0xA5, (L + 1) * NF_LINE_BYTES);
                memset(pv, 0x5A, L * NF_LINE_BYTES), memset(mv, 0x5A, L * NF_LINE_BYTES);
                memset(pv + L * 8, 0xA5, NF_LINE_BYTES), memset(mv + L * 8, 0xA5, NF_LINE_BYTES);
                double want = S->ter_pack(b.x.p, e, c->m, ter_t[it], ps, ms, &ns);
                double got = c->K->ter_pack(b.x.p, e, c->m, ter_t[it], pv, mv, &nv);
                ck_assert_msg(same_double(want, got), DIAG(c, "ter_pack sum", kind, em));
                ck_assert_msg(ns == nv, DIAG(c, "ter_pack nin", kind, em));
                ck_assert_msg(memcmp(ps, pv, (L + 1) * NF_LINE_BYTES) == 0, DIAG(c, "ter_pack plus", kind, em));
                ck_assert_msg(memcmp(ms, mv, (L + 1) * NF_LINE_BYTES) == 0, DIAG(c, "ter_pack minus", kind, em));
            }
        }
        bufs_free(&b);
    }
    free(ps), free(ms), free(pv), free(mv);
}
END_TEST

static const unsigned sum_nin[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 20};

START_TEST(vs_count_sum)
{
    const vcase_t *c = &cases[_i];
    size_t L = nf_lines(c->m);
    uint64_t *lines = lb_new(L * 20);
    const uint64_t *in[20];
    seed(c->m + c->off);
    lb_random(lines, L * 20);
    for (unsigned i = 0; i < 20; i++)
        in[i] = lines + i * L * NF_LINE_WORDS;
    for (unsigned ni = 0; ni < sizeof(sum_nin) / sizeof(sum_nin[0]); ni++) {
        unsigned nin = sum_nin[ni];
        const unsigned ks[2] = {nf_count_planes(nin), NF_COUNT_PLANES_MAX};
        for (int kk = 0; kk < 2; kk++) {
            uint64_t *cs = lb_new(L * ks[kk]), *cv = lb_new(L * ks[kk]);
            memset(cv, 0x5A, L * ks[kk] * NF_LINE_BYTES);
            S->count_sum(cs, ks[kk], in, nin, L);
            c->K->count_sum(cv, ks[kk], in, nin, L);
            ck_assert_msg(memcmp(cs, cv, (L * ks[kk] + 1) * NF_LINE_BYTES) == 0,
                          "%s count_sum nin=%u k=%u lines=%zu", c->K->name, nin, ks[kk], L);
            free(cs), free(cv);
        }
    }
    free(lines);
}
END_TEST

START_TEST(vs_count_merge)
{
    const vcase_t *c = &cases[_i];
    size_t L = nf_lines(c->m);
    seed(c->m * 3 + c->off);
    for (unsigned k = 1; k <= NF_COUNT_PLANES_MAX; k += (k < 4 ? 1 : 6)) {
        uint64_t *as = lb_new(L * k), *av = lb_new(L * k), *add = lb_new(L * k);
        lb_random(as, L * k);
        lb_random(add, L * k);
        memcpy(av, as, (L * k + 1) * NF_LINE_BYTES);
        S->count_merge(as, add, k, L);
        c->K->count_merge(av, add, k, L);
        ck_assert_msg(memcmp(as, av, (L * k + 1) * NF_LINE_BYTES) == 0, "%s count_merge k=%u lines=%zu",
                      c->K->name, k, L);
        free(as), free(av), free(add);
    }
}
END_TEST

START_TEST(vs_sum_f32)
{
    const vcase_t *c = &cases[_i];
    static const unsigned nins[] = {1, 2, 3, 5};
    for (int kind = 0; kind < KIND_COUNT; kind++) {
        fbuf_t in[5], spare = fb_new(c->m, 0);
        seed(c->m * 5 + c->off + (uint64_t)kind);
        for (unsigned i = 0; i < 5; i++) { /* each input at its own misalignment */
            in[i] = fb_new(c->m, (c->off + i) % OFF_MAX);
            fill(in[i].p, spare.p, c->m, kind);
        }
        for (unsigned ni = c->m >= BIG ? 1 : 0; ni < 4; ni += c->m >= BIG ? 2 : 1) {
            for (int alias = 0; alias < 2; alias++) {
                fbuf_t os = fb_new(c->m, c->off), ov = fb_new(c->m, c->off);
                const float *ps[5], *pv[5];
                for (unsigned i = 0; i < 5; i++)
                    ps[i] = pv[i] = in[i].p;
                if (alias) { /* out aliases in[0] (same offset) */
                    fb_copy(&os, &in[0]), fb_copy(&ov, &in[0]);
                    ps[0] = os.p, pv[0] = ov.p;
                }
                S->sum_f32(os.p, ps, nins[ni], c->m);
                c->K->sum_f32(ov.p, pv, nins[ni], c->m);
                ck_assert_msg(fb_same(&os, &ov), "%s sum_f32 nin=%u alias=%d m=%zu off=%u kind=%s at %zu",
                              c->K->name, nins[ni], alias, c->m, c->off, kind_name[kind],
                              first_diff(&os, &ov));
                free(os.base), free(ov.base);
            }
        }
        for (unsigned i = 0; i < 5; i++)
            free(in[i].base);
        free(spare.base);
    }
}
END_TEST

/* bf16 buffers are float buffers seen as halves, so that the sentinels and
 * comparisons above serve: m halves at `off` halves (0..31; odd: 2 bytes
 * off a float) past a 64-byte boundary. */
static fbuf_t hb_new(size_t m, unsigned off)
{
    return fb_new(m / 2 + 1, off / 2);
}

static uint16_t *hb_at(const fbuf_t *b, unsigned off)
{
    return (uint16_t *)b->p + (off & 1);
}

/* Inputs of the bf16 kernels beyond fill()'s kinds: raw encodings (NaNs of
 * every payload among them), a random top half with a low half at a
 * rounding boundary, and the hand-worked rows. */
static uint32_t rnd_bf16_bits(void)
{
    uint64_t u = rnd();
    switch (u & 3) {
    case 0: return (uint32_t)(u >> 32);
    case 1: return (uint32_t)(u >> 48) << 16 | bf16_lows[(u >> 8) % NLOWS];
    case 2: return bf16_rows[(u >> 8) % NBF16_ROWS].x;
    default: return f_bits(rnd_normal());
    }
}

#define KIND_BITS KIND_COUNT /* the bf16 tests' extra kind: rnd_bf16_bits() */

static const char *bf16_kind(int kind)
{
    return kind == KIND_BITS ? "bits" : kind_name[kind];
}

START_TEST(vs_bf16_pack)
{
    const vcase_t *c = &cases[_i];
    for (int kind = 0; kind <= KIND_BITS; kind++) {
        bufs_t b;
        bufs_init(&b, c, kind == KIND_BITS ? KIND_NORMAL : kind);
        for (size_t j = 0; kind == KIND_BITS && j < c->m; j++)
            b.x.p[j] = bits_f(rnd_bf16_bits());
        for (unsigned ho = c->off; ho < 2 * OFF_MAX; ho += OFF_MAX + 1) { /* out even and odd */
            fbuf_t hs = hb_new(c->m, ho), hv = hb_new(c->m, ho);
            fb_copy(&hv, &hs);
            S->bf16_pack(b.x.p, hb_at(&hs, ho), c->m);
            c->K->bf16_pack(b.x.p, hb_at(&hv, ho), c->m);
            ck_assert_msg(fb_same(&hs, &hv), "%s bf16_pack m=%zu off=%u out+%u halves kind=%s at %zu",
                          c->K->name, c->m, c->off, ho, bf16_kind(kind), first_diff(&hs, &hv));
            free(hs.base), free(hv.base);
        }
        bufs_free(&b);
    }
}
END_TEST

/* The sum written out plainly: widen each bf16 by a shift, add left to
 * right (acc == NULL: from in[0]). */
static void naive_sum_bf16(float *out, const float *acc, const uint16_t *const *in, unsigned nin,
                           size_t m)
{
    for (size_t j = 0; j < m; j++) {
        float s = acc ? acc[j] : widen_bf16(in[0][j]);
        for (unsigned i = acc ? 0 : 1; i < nin; i++)
            s = s + widen_bf16(in[i][j]);
        out[j] = s;
    }
}

/* Some ISA's sum (acc == NULL: sum_bf16) into a fresh buffer at the case's
 * start; out = acc's buffer instead when in place. */
static fbuf_t run_sum_bf16(const nf_kernels_t *K, const vcase_t *c, const fbuf_t *acc, int inplace,
                           const uint16_t *const *in, unsigned nin)
{
    fbuf_t o = fb_new(c->m, c->off);
    if (inplace)
        fb_copy(&o, acc);
    if (acc)
        K->sum_bf16_f32(o.p, inplace ? o.p : acc->p, in, nin, c->m);
    else
        K->sum_bf16(o.p, in, nin, c->m);
    return o;
}

/* Floats equal, or both NaN: a NaN's payload and sign may follow the
 * compiler's operand order in the test's own loop. */
static size_t naive_diff(const fbuf_t *a, const float *naive, size_t m)
{
    for (size_t j = 0; j < m; j++)
        if (memcmp(&a->p[j], &naive[j], sizeof(float)) && !(isnan(a->p[j]) && isnan(naive[j])))
            return j;
    return m;
}

/* nin 1..5 inputs, each at its own start (odd ones 2 bytes off a float):
 * sum_bf16, sum_bf16_f32 from a separate acc and in place (nin 0..5), each
 * against the scalar bit for bit and the naive loop; and the split: the
 * first k inputs by sum_bf16, continued by sum_bf16_f32, equal the sum of
 * all. */
START_TEST(vs_sum_bf16)
{
    const vcase_t *c = &cases[_i];
    const int big = c->m >= BIG;
    fbuf_t hin[5], acc = fb_new(c->m, c->off), spare = fb_new(c->m, 0);
    const uint16_t *in[5];
    float *naive = malloc((c->m + 1) * sizeof(float));
    seed(c->m * 7 + c->off);
    fill(acc.p, spare.p, c->m, KIND_SPECIAL);
    for (unsigned i = 0; i < 5; i++) {
        unsigned ho = (c->off + 7 * i) % (2 * OFF_MAX);
        hin[i] = hb_new(c->m, ho);
        uint16_t *h = hb_at(&hin[i], ho);
        for (size_t j = 0; j < c->m; j++) /* mostly sums of ordinary values */
            h[j] = (uint16_t)((rnd() & 7 ? f_bits(rnd_normal()) : rnd_bf16_bits()) >> 16);
        in[i] = h;
    }
    for (unsigned nin = 0; nin <= 5; nin += big ? 2 : 1) {
        for (int mode = 0; mode < 3; mode++) { /* sum_bf16, from acc, from acc in place */
            if (mode == 0 && nin == 0)
                continue;
            fbuf_t os = run_sum_bf16(S, c, mode ? &acc : NULL, mode == 2, in, nin);
            fbuf_t ov = run_sum_bf16(c->K, c, mode ? &acc : NULL, mode == 2, in, nin);
            ck_assert_msg(fb_same_nan(&os, &ov), "%s sum_bf16 nin=%u mode=%d m=%zu off=%u at %zu",
                          c->K->name, nin, mode, c->m, c->off, first_diff(&os, &ov));
            naive_sum_bf16(naive, mode ? acc.p : NULL, in, nin, c->m);
            size_t d = naive_diff(&os, naive, c->m);
            ck_assert_msg(d == c->m, "scalar sum_bf16 nin=%u mode=%d m=%zu: not the naive sum at %zu",
                          nin, mode, c->m, d);
            for (unsigned k = 1; mode == 0 && k < nin; k++) {
                fbuf_t part = run_sum_bf16(c->K, c, NULL, 0, in, k);
                fbuf_t all = run_sum_bf16(c->K, c, &part, 1, in + k, nin - k);
                ck_assert_msg(fb_same_nan(&all, &ov), "%s sum_bf16 nin=%u split at %u m=%zu off=%u",
                              c->K->name, nin, k, c->m, c->off);
                free(part.base), free(all.base);
            }
            free(os.base), free(ov.base);
        }
    }
    for (unsigned i = 0; i < 5; i++)
        free(hin[i].base);
    free(acc.base), free(spare.base), free(naive);
}
END_TEST

/* ------------------------------------------------------------ int-k routes */

/* The int-k kernels (int_y_ef, int_pack, int_finish): the reference against
 * hand-worked cases and against its own definition (the sum over simulated
 * ranks, the residual), then every ISA against the reference bit for bit on
 * their own sizes (around 16, a line of 512 and blocks), block sizes, bits
 * and starts. */

static const size_t int_sizes[] = {0, 1, 15, 16, 17, 31, 511, 512, 513, 4097, 100003};
#define NINT_SIZES (sizeof(int_sizes) / sizeof(int_sizes[0]))
static const unsigned int_offs[] = {0, 1, 5, 15};
#define NINT_OFFS (sizeof(int_offs) / sizeof(int_offs[0]))
static const size_t int_blocks[] = {32, 64, 128, 512, 4096};
#define NINT_BLOCKS (sizeof(int_blocks) / sizeof(int_blocks[0]))
#define INT_BIG 100003
#define MAX_ICASES ((NF_ISA_COUNT + 1) * NINT_SIZES * NINT_OFFS) /* + the tuned table */
static vcase_t icases[MAX_ICASES];
static int nicases;

static size_t nblocks(size_t m, size_t B)
{
    return (m + B - 1) / B;
}

/* The float whose encoding is u: a block max from bmax. */
static float float_of(uint32_t u)
{
    return bits_f(u);
}

/* Kinds beyond fill()'s: TINY, blocks of magnitudes around 2^-120 (below
 * it the block quantizes to zero), denormals among them; TIES, halves of
 * integers (and the edges of the rounding trick, 2^22, 2^23) at inverse 1. */
enum { IKIND_TINY = KIND_COUNT, IKIND_TIES, IKIND_COUNT };

static const char *ikind_name(int kind)
{
    return kind == IKIND_TINY ? "tiny" : kind == IKIND_TIES ? "ties" : kind_name[kind];
}

static float rnd_tiny(void)
{
    uint64_t u = rnd();
    float v = ldexpf(1.0f + (float)(u & 0xFFFF) / 65536.0f, -(int)(116 + (u >> 16) % 34));
    return (u >> 63) ? -v : v; /* 2^-116 .. 2^-149 and below: denormals, zeros */
}

static float rnd_tie(void)
{
    static const float edge[] = {0x1p22f, 0x1p22f - 0.5f, 0x1p22f + 1.0f, 0x1p23f, 0x1p23f - 1.0f,
                                 0x1p23f + 2.0f, 0x1.8p23f, 0x1p24f, 3.4e38f, 0.49999997f};
    uint64_t u = rnd();
    float v = (u & 7) ? (float)((int)((u >> 8) % 41) - 20) * 0.5f
                      : edge[(u >> 8) % (sizeof(edge) / sizeof(edge[0]))];
    return (u >> 63) ? -v : v;
}

/* A block max for int_y_ef's mprev and int_finish's M: mostly the true one
 * (tm), else scaled (clamped or spread levels) or special: zero, below and
 * at 2^-120, a denormal, the largest float, and (not for int_pack, whose M
 * is finite) +Inf and NaN. */
static float rnd_blockmax(float tm, int finite)
{
    static const float sp[] = {0.0f, 1e-37f, NF_INT_TINY, FLT_TRUE_MIN, FLT_MAX, INFINITY, NAN};
    uint64_t u = rnd();
    switch (u % 8) {
    case 0: return tm * 0.5f;
    case 1: return tm * 2.0f;
    case 2: return sp[(u >> 8) % (finite ? 5 : 7)];
    default: return tm;
    }
}

/* x and yprev of a kind over m elements, and per block of B the previous
 * block max mprev (may be Inf or NaN) and a finite M for int_pack. A NaN x
 * never meets a NaN x + decay * e (where the result would be whichever NaN
 * the compiler's operand order keeps): its yprev is 0 and its block's mprev
 * not +Inf (s = Inf makes e NaN); int_nan_meets_nan checks that case. */
static void int_fill(float *x, float *yp, float *mprev, float *mpack, size_t m, size_t B, int kind)
{
    if (kind < KIND_COUNT) {
        fill(x, yp, m, kind);
    } else {
        for (size_t j = 0; j < m; j++) {
            x[j] = kind == IKIND_TINY ? rnd_tiny() : rnd_tie();
            yp[j] = kind == IKIND_TINY ? rnd_tiny() : rnd_tie();
        }
    }
    if (kind == KIND_NONFINITE && m) { /* specials in yprev too */
        static const uint32_t nf[] = {0x7fc00000u, 0xffc00000u, 0x7f800000u, 0xff800000u, 0x7fa00001u};
        for (unsigned i = 0; i < 5; i++)
            yp[rnd() % m] = bits_f(nf[i]);
    }
    for (size_t b = 0; b < nblocks(m, B); b++) {
        float tp = 0.0f, ty = 0.0f;
        for (size_t j = b * B; j < m && j < (b + 1) * B; j++) {
            tp = fabsf(yp[j]) > tp && isfinite(yp[j]) ? fabsf(yp[j]) : tp;
            ty = fabsf(x[j]) > ty && isfinite(x[j]) ? fabsf(x[j]) : ty;
        }
        if (kind == IKIND_TIES) /* inverse 1 or 2, scale 1 or 0.5: exact ties */
            tp = ty = (rnd() & 1) ? 7.0f : 3.5f;
        mprev[b] = rnd_blockmax(tp, 0);
        mpack[b] = rnd_blockmax(ty, 1);
        for (size_t j = b * B; j < m && j < (b + 1) * B; j++) {
            if (isnan(x[j]) && mprev[b] == INFINITY)
                x[j] = 1.0f;
            if (isnan(x[j]))
                yp[j] = 0.0f;
        }
    }
}

#define IDIAG(c, what, kind) "%s %s m=%zu off=%u kind=%s", (c)->K->name, what, (c)->m, (c)->off, \
        ikind_name(kind)

static size_t first_diff_words(const void *a, const void *b, size_t n, size_t size)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)a + i * size, (const char *)b + i * size, size))
            return i;
    return n;
}

START_TEST(vs_int_y_ef)
{
    const vcase_t *c = &icases[_i];
    const size_t m = c->m;
    fbuf_t x = fb_new(m, c->off), yp = fb_new(m, (c->off * 7 + 3) % OFF_MAX);
    float *ys = ynew_new(m, 0xA5), *yv = ynew_new(m, 0xA5);
    const size_t nbmax = nblocks(m, NF_INT_BLOCK_MIN) + 1;
    float *mp = malloc(nbmax * sizeof(float)), *mk = malloc(nbmax * sizeof(float));
    uint32_t *bs = malloc(nbmax * sizeof(uint32_t)), *bv = malloc(nbmax * sizeof(uint32_t));
    ck_assert(mp && mk && bs && bv);
    for (int kind = 0; kind < IKIND_COUNT; kind++) {
        for (size_t bi = 0; bi < NINT_BLOCKS; bi++) {
            const size_t B = int_blocks[bi], nb = nblocks(m, B);
            seed(m * 13 + c->off * 5 + (uint64_t)kind * 101 + bi);
            int_fill(x.p, yp.p, mp, mk, m, B, kind);
            for (unsigned kb = 2; kb <= 4; kb++) {
                for (int mode = 0; mode < 3; mode++) { /* no yprev, e = yprev, e from mprev */
                    /* decay 1 and 0.5, and 0 where no x is NaN (0 * Inf) */
                    const unsigned t = kb + (unsigned)mode + (unsigned)bi;
                    const float decay = t % 3 == 0 ? 1.0f : t % 3 == 1 || kind == KIND_NONFINITE ||
                                                            kind == KIND_SPECIAL ? 0.5f : 0.0f;
                    const float *ypr = mode ? yp.p : NULL, *mpr = mode == 2 ? mp : NULL;
                    memset(ys, 0xA5, (m + 16) * sizeof(float));
                    memset(yv, 0xA5, (m + 16) * sizeof(float));
                    memset(bs, 0x5A, nbmax * sizeof(uint32_t));
                    memset(bv, 0x5A, nbmax * sizeof(uint32_t));
                    S->int_y_ef(x.p, ypr, mpr, kb, decay, mode ? ys : NULL, m, B, bs, 0);
                    c->K->int_y_ef(x.p, ypr, mpr, kb, decay, mode ? yv : NULL, m, B, bv,
                                   (int)(t & 1));
                    size_t d = first_diff_words(ys, yv, m + 16, sizeof(float));
                    ck_assert_msg(d == m + 16, "%s int_y_ef m=%zu off=%u kind=%s B=%zu kb=%u mode=%d "
                                  "decay=%g: ynew differs at %zu (0x%08x, not 0x%08x)", c->K->name, m,
                                  c->off, ikind_name(kind), B, kb, mode, (double)decay, d,
                                  d < m + 16 ? f_bits(yv[d]) : 0, d < m + 16 ? f_bits(ys[d]) : 0);
                    d = first_diff_words(bs, bv, nb + 1, sizeof(uint32_t));
                    ck_assert_msg(d == nb + 1, "%s int_y_ef m=%zu off=%u kind=%s B=%zu kb=%u mode=%d "
                                  "decay=%g: bmax[%zu] = 0x%08x, not 0x%08x", c->K->name, m, c->off,
                                  ikind_name(kind), B, kb, mode, (double)decay, d,
                                  d <= nb ? bv[d] : 0, d <= nb ? bs[d] : 0);
                }
            }
        }
    }
    free(x.base), free(yp.base), free(ys), free(yv), free(mp), free(mk), free(bs), free(bv);
}
END_TEST

START_TEST(vs_int_pack)
{
    const vcase_t *c = &icases[_i];
    const size_t m = c->m, L = nf_lines(m);
    fbuf_t y = fb_new(m, c->off), yp = fb_new(m, 0);
    const size_t nbmax = nblocks(m, NF_INT_BLOCK_MIN) + 1;
    float *mp = malloc(nbmax * sizeof(float)), *mk = malloc(nbmax * sizeof(float));
    uint64_t *ps = lb_new(L * 4), *pv = lb_new(L * 4);
    ck_assert(mp && mk);
    for (int kind = 0; kind < IKIND_COUNT; kind++) {
        if (kind == KIND_NONFINITE) /* the contract: y finite (its block max is) */
            continue;
        for (size_t bi = 0; bi < NINT_BLOCKS; bi++) {
            const size_t B = int_blocks[bi];
            seed(m * 17 + c->off * 3 + (uint64_t)kind * 7 + bi);
            int_fill(y.p, yp.p, mp, mk, m, B, kind);
            for (unsigned kb = 2; kb <= 4; kb++) {
                memset(ps, 0xA5, (L * kb + 1) * NF_LINE_BYTES); /* the guard line must survive */
                memset(pv, 0x5A, L * kb * NF_LINE_BYTES);
                memset(pv + L * kb * NF_LINE_WORDS, 0xA5, NF_LINE_BYTES);
                S->int_pack(y.p, mk, kb, m, B, ps);
                c->K->int_pack(y.p, mk, kb, m, B, pv);
                size_t d = first_diff_words(ps, pv, (L * kb + 1) * NF_LINE_WORDS, sizeof(uint64_t));
                ck_assert_msg(d == (L * kb + 1) * NF_LINE_WORDS,
                              "%s int_pack m=%zu off=%u kind=%s B=%zu kb=%u: word %zu (line %zu) "
                              "differs", c->K->name, m, c->off, ikind_name(kind), B, kb, d,
                              d / NF_LINE_WORDS);
            }
        }
    }
    free(y.base), free(yp.base), free(mp), free(mk), free(ps), free(pv);
}
END_TEST

START_TEST(vs_int_finish)
{
    const vcase_t *c = &icases[_i];
    const size_t m = c->m, L = nf_lines(m);
    static const unsigned big_kc[] = {1, 2, 3, 4, 5, 8, 13, 16};
    const size_t nbmax = nblocks(m, NF_INT_BLOCK_MIN) + 1;
    float *M = malloc(nbmax * sizeof(float));
    ck_assert_ptr_nonnull(M);
    seed(m * 19 + c->off);
    const unsigned nkc = m >= INT_BIG ? (unsigned)(sizeof(big_kc) / sizeof(big_kc[0])) : 16;
    for (unsigned kb = 2; kb <= 4; kb++) {
        for (unsigned ki = 0; ki < nkc; ki++) {
            const unsigned kc = m >= INT_BIG ? big_kc[ki] : ki + 1;
            const size_t B = int_blocks[(kb + ki) % NINT_BLOCKS];
            /* n = 2^kc - 1, the most kc planes count, or fewer ranks */
            const unsigned n = (ki + kb) % 3 ? (1u << kc) - 1 : (unsigned)(rnd() % (1u << kc));
            uint64_t *cnt = lb_new(L * kb * kc);
            lb_random(cnt, L * kb * kc);
            for (size_t b = 0; b < nblocks(m, B); b++)
                M[b] = rnd_blockmax(ldexpf(1.0f, (int)(rnd() % 40) - 20), 0);
            fbuf_t rs = fb_new(m, c->off), rv = fb_new(m, c->off);
            S->int_finish(rs.p, cnt, kc, M, kb, m, B, n, 0);
            c->K->int_finish(rv.p, cnt, kc, M, kb, m, B, n, (int)((kc + kb) & 1));
            ck_assert_msg(fb_same(&rs, &rv), "%s int_finish m=%zu off=%u B=%zu kb=%u kc=%u n=%u: "
                          "r differs at %zu", c->K->name, m, c->off, B, kb, kc, n,
                          first_diff(&rs, &rv));
            free(rs.base), free(rv.base), free(cnt);
        }
    }
    free(M);
}
END_TEST

/* The one case int_fill keeps out: x NaN and x + decay * e NaN from e too
 * (e NaN from yprev, or from a scale of Inf). The reference's addss keeps
 * x's NaN as GCC compiles it, but which operand comes first is the
 * compiler's choice; the ISA versions keep x's explicitly. Every ISA: ynew
 * is a NaN where the reference's is, x's own (quieted) where x is NaN, and
 * the block maxima agree up to the NaN's payload (both at least 0x7FC00000:
 * a quiet NaN). */
START_TEST(int_nan_meets_nan)
{
    const size_t m = 1000, B = 64, nb = nblocks(m, B);
    float *x = malloc(m * sizeof(float)), *yp = malloc(m * sizeof(float)), *mp = malloc(nb * sizeof(float));
    float *ys = ynew_new(m, 0), *yv = ynew_new(m, 0);
    uint32_t *bs = malloc(nb * sizeof(uint32_t)), *bv = malloc(nb * sizeof(uint32_t));
    seed(4242);
    for (size_t j = 0; j < m; j++) {
        x[j] = j % 3 ? rnd_normal() : bits_f(0x7FC00000u | (uint32_t)(rnd() & 0x3FFFFF));
        yp[j] = j % 2 ? rnd_normal() : bits_f(0xFFC00000u | (uint32_t)(rnd() & 0x3FFFFF));
    }
    for (size_t b = 0; b < nb; b++)
        mp[b] = b % 4 == 0 ? INFINITY : 4.0f;
    for (int isa = 0; isa < NF_ISA_COUNT; isa++) {
        const nf_kernels_t *K = nf_kernels_for((nf_isa_t)isa);
        if (!K)
            continue;
        for (unsigned kb = 2; kb <= 4; kb++) {
            S->int_y_ef(x, yp, mp, kb, 0.5f, ys, m, B, bs, 0);
            K->int_y_ef(x, yp, mp, kb, 0.5f, yv, m, B, bv, 0);
            size_t bad = m;
            for (size_t j = 0; j < m && bad == m; j++)
                if (memcmp(&ys[j], &yv[j], sizeof(float)) && !(isnan(ys[j]) && isnan(yv[j])))
                    bad = j;
            ck_assert_msg(bad == m, "%s int_y_ef kb=%u: ynew[%zu] 0x%08x, not 0x%08x", K->name, kb,
                          bad, bad < m ? f_bits(yv[bad]) : 0, bad < m ? f_bits(ys[bad]) : 0);
            for (size_t j = 0; j < m && isa > NF_ISA_SCALAR && bad == m; j++)
                if (isnan(x[j]) && f_bits(yv[j]) != (f_bits(x[j]) | 0x00400000u))
                    bad = j;
            ck_assert_msg(bad == m, "%s int_y_ef kb=%u: ynew[%zu] 0x%08x, not x's NaN 0x%08x",
                          K->name, kb, bad, bad < m ? f_bits(yv[bad]) : 0,
                          bad < m ? f_bits(x[bad]) : 0);
            for (size_t b = 0; b < nb; b++)
                ck_assert_msg(bs[b] == bv[b] || (bs[b] >= 0x7FC00000u && bv[b] >= 0x7FC00000u),
                              "%s int_y_ef kb=%u: bmax[%zu] 0x%08x, not 0x%08x", K->name, kb, b,
                              bv[b], bs[b]);
        }
    }
    free(x), free(yp), free(mp), free(ys), free(yv), free(bs), free(bv);
}
END_TEST

/* u = q + L of element j from kb planes (the layout of int_pack). */
static unsigned int_code_at(const uint64_t *planes, unsigned kb, size_t j)
{
    unsigned u = 0;
    for (unsigned p = 0; p < kb; p++)
        u |= (unsigned)((planes[((j / 512) * kb + p) * 8 + (j % 512) / 64] >> (j % 64)) & 1) << p;
    return u;
}

/* Hand-worked quantization: ties to even, clamping, -0.0, NaN, tiny blocks,
 * the planes' bits, the block maxima, the residual and the final scale. */
START_TEST(ref_int_hand)
{
    /* nf_int_scale and nf_int_q */
    float s, inv;
    ck_assert_uint_eq(nf_int_levels(4), 7);
    ck_assert_uint_eq(nf_int_levels(3), 3);
    ck_assert_uint_eq(nf_int_levels(2), 1);
    nf_int_scale(2.0f, 2, &s, &inv);
    ck_assert(s == 2.0f && inv == 0.5f);
    nf_int_scale(0x1p-121f, 4, &s, &inv); /* below NF_INT_TINY: zero */
    ck_assert(s == 0.0f && inv == 0.0f);
    nf_int_scale(NF_INT_TINY, 4, &s, &inv); /* at it: the divisions */
    ck_assert(s == NF_INT_TINY / 7.0f && inv == 7.0f / NF_INT_TINY && isfinite(inv));
    ck_assert_int_eq(nf_int_q(2.5f, 1.0f, 4), 2);  /* ties to even */
    ck_assert_int_eq(nf_int_q(3.5f, 1.0f, 4), 4);
    ck_assert_int_eq(nf_int_q(-2.5f, 1.0f, 4), -2);
    ck_assert_int_eq(nf_int_q(6.5f, 1.0f, 4), 6);
    ck_assert_int_eq(nf_int_q(7.5f, 1.0f, 4), 7);  /* 8, clamped */
    ck_assert_int_eq(nf_int_q(-1e30f, 1.0f, 3), -3);
    ck_assert_int_eq(nf_int_q(INFINITY, 1.0f, 2), 1);

    /* int_pack, kb = 2 (L = 1), M = 2: s = 2, inv = 0.5 */
    const float y2[8] = {0.9f, 1.0f, 3.0f, -1.0f, -3.0f, 2.0f, -2.0f, NAN};
    const unsigned u2[8] = {1, 1, 2, 1, 0, 2, 0, 1}; /* q + 1; NaN: INT_MIN + 1, low bits 01 */
    const float M2 = 2.0f;
    uint64_t *pl = lb_new(2);
    S->int_pack(y2, &M2, 2, 8, 32, pl);
    ck_assert_uint_eq(pl[0], 0x8B); /* plane 0: u & 1 */
    ck_assert_uint_eq(pl[8], 0x24); /* plane 1: u >> 1 */
    for (unsigned w = 1; w < 8; w++)
        ck_assert(pl[w] == 0 && pl[8 + w] == 0);
    for (size_t j = 0; j < 8; j++)
        ck_assert_uint_eq(int_code_at(pl, 2, j), u2[j]);
    free(pl);

    /* int_pack, kb = 4, M = 7: s = 1, inv = 1; a second block of 32 tiny */
    float y4[40] = {2.5f, 3.5f, -2.5f, -0.5f, 100.0f, -100.0f, 0.49999997f, 6.5f, 7.5f};
    const unsigned u4[9] = {9, 11, 5, 7, 14, 0, 7, 13, 14};
    const float M4[2] = {7.0f, 1e-37f};
    for (size_t j = 32; j < 40; j++)
        y4[j] = 5.0f; /* a tiny block: s = inv = 0, q = 0 whatever y */
    pl = lb_new(4);
    S->int_pack(y4, M4, 4, 40, 32, pl);
    for (size_t j = 0; j < 9; j++)
        ck_assert_uint_eq(int_code_at(pl, 4, j), u4[j]);
    for (size_t j = 9; j < 40; j++)
        ck_assert_uint_eq(int_code_at(pl, 4, j), 7); /* y = 0, or the tiny block: q = 0 */
    for (unsigned p = 0; p < 4; p++)
        ck_assert_uint_eq(pl[p * 8] >> 40, 0); /* past m */
    free(pl);

    /* int_y_ef, kb = 4, mprev = 7 (s = 1, inv = 1), blocks of 32 */
    const float p5[5] = {2.5f, -0.0f, 0.3f, 10.0f, -10.0f}, x5[5] = {1.0f, -0.0f, 0.0f, 0.0f, 0.0f};
    const float M7 = 7.0f;
    float yn[5];
    uint32_t bm[1];
    S->int_y_ef(x5, p5, &M7, 4, 1.0f, yn, 5, 32, bm, 0);
    /* e = {0.5, -0.0 - (+0.0) = -0.0, 0.3, 3, -3} (q = {2, 0, 0, 7, -7}) */
    ck_assert(yn[0] == 1.5f && yn[2] == 0.3f && yn[3] == 3.0f && yn[4] == -3.0f);
    ck_assert(yn[1] == 0.0f && signbit(yn[1])); /* -0.0 + -0.0: the sign of zero kept */
    ck_assert_uint_eq(bm[0], f_bits(3.0f));
    S->int_y_ef(x5, p5, &M7, 4, 0.5f, yn, 5, 32, bm, 0);
    ck_assert(yn[0] == 1.25f && yn[2] == 0.15f && yn[3] == 1.5f && yn[4] == -1.5f);
    ck_assert(signbit(yn[1]));
    ck_assert_uint_eq(bm[0], f_bits(1.5f));
    /* E-form (mprev NULL): e = yprev; no yprev: y = x, ynew untouched (NULL) */
    S->int_y_ef(x5, p5, NULL, 4, 1.0f, yn, 5, 32, bm, 0);
    ck_assert(yn[0] == 3.5f && yn[3] == 10.0f && signbit(yn[1]));
    ck_assert_uint_eq(bm[0], f_bits(10.0f));
    S->int_y_ef(p5, NULL, NULL, 4, 1.0f, NULL, 5, 32, bm, 0);
    ck_assert_uint_eq(bm[0], f_bits(10.0f));
    /* a tiny block: s = inv = 0, e = yprev; +Inf * 0 is NaN, (int)NaN is
     * INT_MIN, 0 * -2^31 is -0.0: e = Inf - -0.0 = Inf */
    const float tiny = 1e-37f, pi[3] = {0.25f, INFINITY, -0.0f}, xi[3] = {1.0f, 1.0f, 0.0f};
    S->int_y_ef(xi, pi, &tiny, 3, 1.0f, yn, 3, 32, bm, 0);
    ck_assert(yn[0] == 1.25f && yn[1] == INFINITY && yn[2] == 0.0f && !signbit(yn[2]));
    ck_assert_uint_eq(bm[0], 0x7F800000u);
    /* block maxima: an integer max of |y|'s encodings, blocks of 32 */
    float yb[96];
    for (size_t j = 0; j < 96; j++)
        yb[j] = 0.0f;
    yb[0] = -0.0f, yb[1] = FLT_TRUE_MIN, yb[2] = -2.0f;   /* block 0: 2.0 */
    yb[32] = -INFINITY, yb[40] = 1e38f;                    /* block 1: Inf */
    yb[64] = bits_f(0xFFC12345u), yb[65] = INFINITY;       /* block 2: the NaN, |y| */
    uint32_t b3[3];
    S->int_y_ef(yb, NULL, NULL, 2, 1.0f, NULL, 96, 32, b3, 0);
    ck_assert_uint_eq(b3[0], 0x40000000u);
    ck_assert_uint_eq(b3[1], 0x7F800000u);
    ck_assert_uint_eq(b3[2], 0x7FC12345u);
    yb[1] = -0.0f, yb[2] = 0.0f;
    S->int_y_ef(yb, NULL, NULL, 2, 1.0f, NULL, 33, 32, b3, 0); /* a short last block */
    ck_assert_uint_eq(b3[0], 0);
    ck_assert_uint_eq(b3[1], 0x7F800000u);

    /* int_finish, kb = 2, kc = 2, n = 3, M = 2 (s = 2): element 0 counts
     * c0 = 2, c1 = 3: v = 2 + 2 * 3 - 3 * 1 = 5, r = 10; element 1 none:
     * v = -3, r = -6; element 2 c1 = 1: v = -1, r = -2 */
    uint64_t *cnt = lb_new(4);
    memset(cnt, 0, 4 * NF_LINE_BYTES);
    cnt[1 * 8] |= 1;      /* bit line 0 (c0), plane 1: element 0 has c0 = 2 */
    cnt[2 * 8] |= 1 | 4;  /* bit line 1 (c1), plane 0: elements 0, 2 */
    cnt[3 * 8] |= 1;      /* bit line 1, plane 1: element 0 has c1 = 3 */
    float r[3];
    S->int_finish(r, cnt, 2, &M2, 2, 3, 32, 3, 0);
    ck_assert(r[0] == 10.0f && r[1] == -6.0f && r[2] == -2.0f);
    /* a tiny block: s = 0, r = 0 * v, -0.0 where v < 0 */
    S->int_finish(r, cnt, 2, &tiny, 2, 3, 32, 3, 0);
    ck_assert(r[0] == 0.0f && !signbit(r[0]) && signbit(r[1]) && signbit(r[2]));
    /* the double product rounded once: s = 0.1f / 3, v = 5 */
    const float Mt = 0.1f;
    nf_int_scale(Mt, 3, &s, &inv);
    memset(cnt, 0, 4 * NF_LINE_BYTES);
    cnt[0] = 1; /* bit line 0: c0 = 1 at element 0 */
    S->int_finish(r, cnt, 1, &Mt, 3, 1, 32, 1, 0); /* v = 1 - 1 * 3 = -2 */
    ck_assert(r[0] == (float)((double)s * -2.0));
    free(cnt);
}
END_TEST

/* The integer route end to end in the reference: 2..5 simulated ranks
 * quantize their data with the shared block max (the max of their bmax),
 * the planes are counted (count_sum), and int_finish gives s * (the sum of
 * the ranks' q) for every element, the q worked out here directly. Loop i:
 * ranks 2 + i % 4, bits 2 + i / 4 % 3, blocks 32 << (i % 5). */
START_TEST(ref_int_ranks)
{
    const unsigned R = 2 + (unsigned)_i % 4, kb = 2 + (unsigned)_i / 4 % 3;
    const size_t B = (size_t)32 << (_i % 5), m = 3001 + (size_t)_i, L = nf_lines(m);
    const size_t nb = nblocks(m, B);
    const unsigned kc = nf_count_planes(R);
    float *x[5], *M = malloc(nb * sizeof(float)), *r = malloc(m * sizeof(float));
    uint32_t *bm[5];
    uint64_t *pl[5], *cnt = lb_new(L * kb * kc);
    seed(900 + (uint64_t)_i);
    for (unsigned i = 0; i < R; i++) {
        x[i] = malloc(m * sizeof(float));
        bm[i] = malloc(nb * sizeof(uint32_t));
        pl[i] = lb_new(L * kb);
        for (size_t j = 0; j < m; j++) { /* each rank's and block's own magnitude */
            const int e = (int)((j / B * 7 + i * 3) % 9) - 4;
            x[i][j] = rnd() % 17 == 0 ? (rnd() & 1 ? -0.0f : 0.0f) : ldexpf(rnd_normal(), e);
        }
        S->int_y_ef(x[i], NULL, NULL, kb, 1.0f, NULL, m, B, bm[i], 0);
    }
    for (size_t b = 0; b < nb; b++) { /* the agreed max: max of the ranks' bmax */
        uint32_t mx = 0;
        float want = 0.0f;
        for (unsigned i = 0; i < R; i++) {
            mx = bm[i][b] > mx ? bm[i][b] : mx;
            for (size_t j = b * B; j < m && j < (b + 1) * B; j++)
                want = fabsf(x[i][j]) > want ? fabsf(x[i][j]) : want;
        }
        M[b] = float_of(mx);
        ck_assert(M[b] == want);
    }
    for (unsigned i = 0; i < R; i++)
        S->int_pack(x[i], M, kb, m, B, pl[i]);
    S->count_sum(cnt, kc, (const uint64_t *const *)pl, R, L * kb);
    S->int_finish(r, cnt, kc, M, kb, m, B, R, 0);
    for (size_t j = 0; j < m; j++) {
        float s, inv;
        int64_t sum = 0;
        nf_int_scale(M[j / B], kb, &s, &inv);
        for (unsigned i = 0; i < R; i++) {
            const int q = nf_int_q(x[i][j], inv, kb);
            ck_assert_uint_eq(int_code_at(pl[i], kb, j), (unsigned)(q + (int)nf_int_levels(kb)));
            sum += q;
            /* unclamped (|x| <= M): q is x * inv rounded, so within 1/2 of
             * it, and of x / s but for the rounding of inv and of the product */
            ck_assert(fabsf(x[i][j] * inv - (float)q) <= 0.5f);
            ck_assert(s == 0.0f ||
                      fabs((double)x[i][j] / (double)s - q) <= 0.5 + 1e-6 * (1.0 + fabs((double)q)));
        }
        const float want = (float)((double)s * (double)sum);
        ck_assert_msg(memcmp(&r[j], &want, sizeof(float)) == 0, "R=%u kb=%u B=%zu j=%zu: %g, not %g",
                      R, kb, B, j, (double)r[j], (double)want);
    }
    for (unsigned i = 0; i < R; i++)
        free(x[i]), free(bm[i]), free(pl[i]);
    free(M), free(r), free(cnt);
}
END_TEST

/* The residual int_y_ef rebuilds from the previous y and block max: with
 * x = 0 and decay 1, ynew = e, and y - e is exactly s * q (unclamped values,
 * |y| <= M); with decay 0.5 and data, ynew = x + 0.5f * e bit for bit. */
START_TEST(ref_int_residual)
{
    const unsigned kb = 2 + (unsigned)_i;
    const size_t m = 5000, B = 64, nb = nblocks(m, B);
    float *p = malloc(m * sizeof(float)), *x0 = calloc(m, sizeof(float)), *x = malloc(m * sizeof(float));
    float *e = ynew_new(m, 0), *y = ynew_new(m, 0), *M = malloc(nb * sizeof(float));
    uint32_t *bm = malloc(nb * sizeof(uint32_t));
    seed(77 + (uint64_t)_i);
    for (size_t j = 0; j < m; j++) {
        p[j] = ldexpf(rnd_normal(), (int)(j / B % 11) - 5);
        x[j] = rnd_normal();
    }
    S->int_y_ef(p, NULL, NULL, kb, 1.0f, NULL, m, B, bm, 0);
    for (size_t b = 0; b < nb; b++)
        M[b] = float_of(bm[b]);
    S->int_y_ef(x0, p, M, kb, 1.0f, e, m, B, bm, 0);
    S->int_y_ef(x, p, M, kb, 0.5f, y, m, B, bm, 0);
    for (size_t j = 0; j < m; j++) {
        float s, inv;
        nf_int_scale(M[j / B], kb, &s, &inv);
        const int q = nf_int_q(p[j], inv, kb);
        ck_assert_msg(p[j] - e[j] == s * (float)q, "kb=%u j=%zu: y - e = %a, s * q = %a", kb, j,
                      (double)(p[j] - e[j]), (double)(s * (float)q));
        ck_assert(fabsf(e[j]) <= 0.5f * s * (1.0f + 0x1p-20f));
        const float want = x[j] + 0.5f * (p[j] - s * (float)q);
        ck_assert(memcmp(&y[j], &want, sizeof(float)) == 0);
    }
    free(p), free(x0), free(x), free(e), free(y), free(M), free(bm);
}
END_TEST

/* ------------------------------------------------------------------ suite */

static const char *skip_reason(nf_isa_t isa)
{
#ifndef NF_HAVE_AVX2
    if (isa == NF_ISA_AVX2)
        return "not built (configure: compiler lacks AVX2 support or --disable-avx2)";
#endif
#ifndef NF_HAVE_AVX512
    if (isa == NF_ISA_AVX512)
        return "not built (configure: compiler lacks AVX-512 support or --disable-avx512)";
#endif
    return isa == NF_ISA_AVX512
        ? "this CPU/OS lacks AVX-512 F/BW/VL/DQ (or ZMM state is not enabled)"
        : "this CPU/OS lacks AVX2/BMI2/POPCNT (or YMM state is not enabled)";
}

static void build_cases(void)
{
    for (int isa = NF_ISA_AVX2; isa < NF_ISA_COUNT; isa++) {
        const nf_kernels_t *K = nf_kernels_for((nf_isa_t)isa);
        if (!K) {
            printf("SKIP: %s kernels not compared with the reference: %s\n",
                   nf_isa_name((nf_isa_t)isa), skip_reason((nf_isa_t)isa));
            continue;
        }
        for (size_t s = 0; s < NINT_SIZES; s++) /* the int-k kernels' own sizes */
            for (size_t o = 0; o < (int_sizes[s] >= INT_BIG ? 2 : NINT_OFFS); o++)
                icases[nicases++] = (vcase_t){K, int_sizes[s], int_offs[o]};
        for (size_t s = 0; s < NSIZES; s++) {
            if (sizes[s] >= BIG) {
                for (size_t o = 0; o < sizeof(big_offs) / sizeof(big_offs[0]); o++)
                    cases[ncases++] = (vcase_t){K, sizes[s], big_offs[o]};
                continue;
            }
            for (unsigned off = 0; off < OFF_MAX; off++)
                cases[ncases++] = (vcase_t){K, sizes[s], off};
        }
    }
    /* The tuned table: each entry in its slot (the entries themselves are
     * tested above), so every size at three starts. */
    const nf_kernels_t *T = nf_kernels_tuned(nf_isa_detect());
    for (size_t s = 0; s < NSIZES; s++)
        for (size_t o = 0; o < sizeof(big_offs) / sizeof(big_offs[0]); o++)
            cases[ncases++] = (vcase_t){T, sizes[s], big_offs[o]};
    for (size_t s = 0; s < NINT_SIZES; s++)
        icases[nicases++] = (vcase_t){T, int_sizes[s], int_offs[s % NINT_OFFS]};
    printf("kernel tests: %d ISA cases, %d int-k cases (best ISA here: %s; tuned: %s)\n", ncases,
           nicases, nf_isa_name(nf_isa_detect()), T->name);
    fflush(stdout);
}

/* The codec's rates (nf_codec.h): arguments out of range refused; every
 * stage measured, positive and finite, bf16's finish nothing, by one copy
 * and by two at once; nf_codec_ns
 * the measured rate at a measured size, between its neighbours' rates
 * between them, the end rates beyond, the stages' sum for stage -1. */
START_TEST(codec_rates)
{
    const nf_kernels_t *K = nf_kernels_for(nf_isa_detect());
    nf_codec_rates_t r;
    ck_assert_int_eq(nf_codec_measure(NULL, 2, 1, 1, &r), 1);
    ck_assert_int_eq(nf_codec_measure(K, 1, 1, 1, &r), 1);
    ck_assert_int_eq(nf_codec_measure(K, 65, 1, 1, &r), 1);
    ck_assert_int_eq(nf_codec_measure(K, 2, 0, 1, &r), 1);
    ck_assert_int_eq(nf_codec_measure(K, 2, NF_CODEC_SHARE_MAX + 1, 1, &r), 1);
    ck_assert_int_eq(nf_codec_measure(K, 2, 1, 0, &r), 1);
    ck_assert_int_eq(nf_codec_measure(K, 2, 1, 100, &r), 1);
    /* two copies at once: every stage timed, as one copy's */
    ck_assert_int_eq(nf_codec_measure(K, 2, 2, 1, &r), 0);
    ck_assert_uint_eq(r.ranks, 2);
    ck_assert_uint_eq(r.share, 2);
    for (int c = 0; c < NF_CODEC_COUNT; c++)
        for (int st = 0; st < NF_CODEC_STAGES; st++)
            for (int z = 0; z < NF_CODEC_SIZES; z++)
                ck_assert(c == NF_CODEC_BF16 && st == NF_CODEC_FINISH
                              ? r.ns[c][st][z] == 0.0
                              : isfinite(r.ns[c][st][z]) && r.ns[c][st][z] > 0.0);
    ck_assert_int_eq(nf_codec_measure(K, 3, 1, 3, &r), 0);
    ck_assert_uint_eq(r.share, 1);
    ck_assert_uint_eq(r.ranks, 3);
    for (int c = 0; c < NF_CODEC_COUNT; c++) {
        ck_assert_ptr_nonnull(nf_codec_name((nf_codec_t)c));
        for (int st = 0; st < NF_CODEC_STAGES; st++)
            for (int z = 0; z < NF_CODEC_SIZES; z++) {
                double v = r.ns[c][st][z];
                if (c == NF_CODEC_BF16 && st == NF_CODEC_FINISH)
                    ck_assert(v == 0.0);
                else
                    ck_assert_msg(isfinite(v) && v > 0.0 && v < 1000.0, "%s stage %d size %d: %g",
                                  nf_codec_name((nf_codec_t)c), st, z, v);
            }
        for (int z = 0; z < NF_CODEC_SIZES; z++) {
            size_t m = nf_codec_size[z];
            ck_assert(nf_codec_ns(&r, (nf_codec_t)c, NF_CODEC_PACK, m) ==
                      r.ns[c][NF_CODEC_PACK][z] * (double)m);
        }
        size_t mid = 3 * nf_codec_size[0]; /* between the first two sizes */
        double lo = r.ns[c][NF_CODEC_PACK][0], hi = r.ns[c][NF_CODEC_PACK][1];
        double rate = nf_codec_ns(&r, (nf_codec_t)c, NF_CODEC_PACK, mid) / (double)mid;
        ck_assert(rate >= fmin(lo, hi) - 1e-12 && rate <= fmax(lo, hi) + 1e-12);
        ck_assert(nf_codec_ns(&r, (nf_codec_t)c, NF_CODEC_PACK, 10) == lo * 10.0);
        size_t big = 4 * nf_codec_size[NF_CODEC_SIZES - 1];
        ck_assert(nf_codec_ns(&r, (nf_codec_t)c, NF_CODEC_REDUCE, big) ==
                  r.ns[c][NF_CODEC_REDUCE][NF_CODEC_SIZES - 1] * (double)big);
        double sum = 0.0;
        for (int st = 0; st < NF_CODEC_STAGES; st++)
            sum += nf_codec_ns(&r, (nf_codec_t)c, st, mid);
        ck_assert(fabs(nf_codec_ns(&r, (nf_codec_t)c, -1, mid) - sum) <= 1e-9 * sum);
    }
    ck_assert_ptr_null(nf_codec_name(NF_CODEC_COUNT));
    ck_assert(nf_codec_ns(&r, NF_CODEC_COUNT, -1, 1000) == 0.0);
    ck_assert(nf_codec_ns(NULL, NF_CODEC_FP32, -1, 1000) == 0.0);
}
END_TEST

static Suite *kernels_suite(void)
{
    Suite *s = suite_create("kernels");
    TCase *ref = tcase_create("reference");
    tcase_add_test(ref, ref_lane_order);
    tcase_add_test(ref, ref_three_ranks);
    tcase_add_test(ref, ref_ternary);
    tcase_add_test(ref, ref_ef_decay);
    tcase_add_loop_test(ref, ref_count_sum_full, 0, NF_COUNT_PLANES_MAX);
    tcase_add_test(ref, ref_count_merge);
    tcase_add_test(ref, ref_sum_f32);
    tcase_add_loop_test(ref, ref_bf16_pack, 0, (int)NBF16_ROWS);
    tcase_add_loop_test(ref, ref_bf16_nearest, 0, 16);
    tcase_add_test(ref, ref_bf16_nan);
    tcase_add_test(ref, ref_sum_bf16);
    tcase_add_test(ref, dispatch);
    tcase_add_test(ref, tuned_threads);
    tcase_add_test(ref, codec_rates);
    tcase_add_test(ref, ref_int_hand);
    tcase_add_loop_test(ref, ref_int_ranks, 0, 24);
    tcase_add_loop_test(ref, ref_int_residual, 0, 3);
    tcase_add_test(ref, int_nan_meets_nan);
    tcase_set_timeout(ref, 60);
    suite_add_tcase(s, ref);

    TCase *tuned = tcase_create("tuned");
    tcase_add_loop_test(tuned, tuned_cap, 0, NF_ISA_COUNT);
    suite_add_tcase(s, tuned);

    const struct {
        const char *name;
        const TTest *fn;
    } vs[] = {
        {"abs_sum", vs_abs_sum}, {"bin_pack", vs_bin_pack}, {"bin_pack_ef", vs_bin_pack_ef},
        {"bin_finish", vs_bin_finish},
        {"ter_pack", vs_ter_pack}, {"ter_y_ef", vs_ter_y_ef},
        {"ter_finish", vs_ter_finish}, {"count_sum", vs_count_sum},
        {"count_merge", vs_count_merge}, {"sum_f32", vs_sum_f32}, {"bf16_pack", vs_bf16_pack},
        {"sum_bf16", vs_sum_bf16}, {"stream", vs_stream},
    };
    for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]) && ncases > 0; i++) {
        TCase *tc = tcase_create(vs[i].name);
        tcase_add_loop_test(tc, vs[i].fn, 0, ncases);
        tcase_set_timeout(tc, 120);
        suite_add_tcase(s, tc);
    }
    const struct {
        const char *name;
        const TTest *fn;
    } ivs[] = {{"int_y_ef", vs_int_y_ef}, {"int_pack", vs_int_pack}, {"int_finish", vs_int_finish}};
    for (size_t i = 0; i < sizeof(ivs) / sizeof(ivs[0]) && nicases > 0; i++) {
        TCase *tc = tcase_create(ivs[i].name);
        tcase_add_loop_test(tc, ivs[i].fn, 0, nicases);
        tcase_set_timeout(tc, 120);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    /* The library takes NFCOLL_SIMD_TUNE from its settings; this test of
     * the kernels layer alone reads it (tests/kernels_tune_off.sh). */
    if (tune_off())
        nf_kernels_set_tune(0);
    build_cases();
    SRunner *sr = srunner_create(kernels_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

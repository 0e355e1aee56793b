/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scalar kernels: the specification every ISA must match bit for bit.
 * Written for obviousness, not speed; see nf_kernels.h for the contract.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "nf_kernels.h"

/* The fixed lane fold of nf_kernels.h. */
static double lane_fold(double lane[NF_LANES])
{
    for (unsigned w = NF_LANES / 2; w >= 1; w /= 2)
        for (unsigned i = 0; i < w; i++)
            lane[i] += lane[i + w];
    return lane[0];
}

/* e == NULL means y = x exactly (not x + 0.0f, which would turn -0.0 into +0.0). */
static inline float y_at(const float *x, const float *e, size_t j)
{
    return e ? x[j] + e[j] : x[j];
}

static inline int sign_set(float y)
{
    uint32_t u;
    memcpy(&u, &y, sizeof(u));
    return (int)(u >> 31);
}

/* Counter value at element j: k planes per line, plane p has weight 2^p. */
static inline uint64_t count_at(const uint64_t *cnt, unsigned k, size_t j)
{
    size_t l = j / NF_LINE_BITS, w = (j % NF_LINE_BITS) / 64;
    uint64_t c = 0;
    for (unsigned p = 0; p < k; p++)
        c |= ((cnt[(l * k + p) * NF_LINE_WORDS + w] >> (j % 64)) & 1) << p;
    return c;
}

static void zero_lines(uint64_t *bits, size_t m)
{
    memset(bits, 0, nf_lines(m) * NF_LINE_BYTES);
}

static double abs_sum_scalar(const float *x, const float *e, size_t m)
{
    double lane[NF_LANES] = {0};
    for (size_t j = 0; j < m; j++)
        lane[j % NF_LANES] += (double)fabsf(y_at(x, e, j));
    return lane_fold(lane);
}

static double bin_pack_scalar(const float *x, const float *e, size_t m, uint64_t *bits)
{
    double lane[NF_LANES] = {0};
    zero_lines(bits, m);
    for (size_t j = 0; j < m; j++) {
        float y = y_at(x, e, j);
        bits[j / 64] |= (uint64_t)sign_set(y) << (j % 64);
        lane[j % NF_LANES] += (double)fabsf(y);
    }
    return lane_fold(lane);
}

static double bin_pack_ef_scalar(const float *x, const float *yprev, float aprev, float decay,
                                 float *ynew, size_t m, uint64_t *bits, int stream)
{
    (void)stream; /* plain stores: the reference has no streaming */
    double lane[NF_LANES] = {0};
    zero_lines(bits, m);
    for (size_t j = 0; j < m; j++) {
        float p = yprev[j];
        float e = sign_set(p) ? p + aprev : p - aprev;
        float de = decay * e;
        float y = x[j] + de;
        ynew[j] = y;
        bits[j / 64] |= (uint64_t)sign_set(y) << (j % 64);
        lane[j % NF_LANES] += (double)fabsf(y);
    }
    return lane_fold(lane);
}

static double ter_y_ef_scalar(const float *x, const float *yprev, float tprev, float bprev,
                              float decay, float *ynew, size_t m, int stream)
{
    (void)stream;
    double lane[NF_LANES] = {0};
    for (size_t j = 0; j < m; j++) {
        float p = yprev[j];
        float e = p > tprev ? p - bprev : p < -tprev ? p + bprev : p;
        float de = decay * e;
        float y = x[j] + de;
        ynew[j] = y;
        lane[j % NF_LANES] += (double)fabsf(y);
    }
    return lane_fold(lane);
}

static void bin_finish_scalar(float *r, const float *x, float *e, const uint64_t *cnt,
                              unsigned k, size_t m, unsigned n, double a, float ai,
                              int stream)
{
    (void)stream;
    for (size_t j = 0; j < m; j++) {
        int64_t v = (int64_t)n - 2 * (int64_t)count_at(cnt, k, j);
        if (e) { /* before r[j]: x may alias r */
            float y = x[j] + e[j];
            e[j] = sign_set(y) ? y + ai : y - ai;
        }
        r[j] = (float)(a * (double)v);
    }
}

static double ter_pack_scalar(const float *x, const float *e, size_t m, float t,
                              uint64_t *plus, uint64_t *minus, size_t *nin)
{
    double lane[NF_LANES] = {0};
    size_t cnt = 0;
    zero_lines(plus, m);
    zero_lines(minus, m);
    for (size_t j = 0; j < m; j++) {
        float y = y_at(x, e, j);
        int p = y > t, q = y < -t;
        plus[j / 64] |= (uint64_t)p << (j % 64);
        minus[j / 64] |= (uint64_t)q << (j % 64);
        if (p || q) {
            lane[j % NF_LANES] += (double)fabsf(y);
            cnt++;
        }
    }
    *nin = cnt;
    return lane_fold(lane);
}

static void ter_finish_scalar(float *r, const float *x, float *e, const uint64_t *cntp,
                              const uint64_t *cntm, unsigned k, size_t m, double b,
                              float t, float bi)
{
    for (size_t j = 0; j < m; j++) {
        int64_t v = (int64_t)count_at(cntp, k, j) - (int64_t)count_at(cntm, k, j);
        if (e) {
            float y = x[j] + e[j];
            if (y > t)
                e[j] = y - bi;
            else if (y < -t)
                e[j] = y + bi;
            else
                e[j] = y;
        }
        r[j] = (float)(b * (double)v);
    }
}

/* Each input is a 1-bit number added to the k-plane counter with a ripple of
 * half adders, one 64-bit word of positions at a time. */
static void count_sum_scalar(uint64_t *cnt, unsigned k, const uint64_t *const *in,
                             unsigned nin, size_t nlines)
{
    for (size_t l = 0; l < nlines; l++) {
        for (unsigned w = 0; w < NF_LINE_WORDS; w++) {
            uint64_t *c = cnt + l * k * NF_LINE_WORDS + w;
            for (unsigned p = 0; p < k; p++)
                c[p * NF_LINE_WORDS] = 0;
            for (unsigned i = 0; i < nin; i++) {
                uint64_t carry = in[i][l * NF_LINE_WORDS + w];
                for (unsigned p = 0; p < k && carry; p++) {
                    uint64_t s = c[p * NF_LINE_WORDS];
                    c[p * NF_LINE_WORDS] = s ^ carry;
                    carry &= s;
                }
            }
        }
    }
}

/* Ripple-carry full adders, plane by plane. */
static void count_merge_scalar(uint64_t *acc, const uint64_t *add, unsigned k, size_t nlines)
{
    for (size_t l = 0; l < nlines; l++) {
        for (unsigned w = 0; w < NF_LINE_WORDS; w++) {
            uint64_t carry = 0;
            for (unsigned p = 0; p < k; p++) {
                size_t o = (l * k + p) * NF_LINE_WORDS + w;
                uint64_t a = acc[o], b = add[o];
                acc[o] = a ^ b ^ carry;
                carry = (a & b) | (carry & (a ^ b));
            }
        }
    }
}

static void sum_f32_scalar(float *out, const float *const *in, unsigned nin, size_t m)
{
    for (size_t j = 0; j < m; j++) {
        float s = in[0][j];
        for (unsigned i = 1; i < nin; i++)
            s += in[i][j];
        out[j] = s;
    }
}

/* A NaN is truncated, not rounded (the carry could run into the sign), and
 * quieted (truncation alone turns a NaN with a low-half payload into Inf). */
static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static float f32_of_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static void bf16_pack_scalar(const float *x, uint16_t *out, size_t m)
{
    for (size_t j = 0; j < m; j++)
        out[j] = bf16_of(x[j]);
}

static void sum_bf16_f32_scalar(float *out, const float *acc, const uint16_t *const *in,
                                unsigned nin, size_t m)
{
    for (size_t j = 0; j < m; j++) {
        float s = acc[j];
        for (unsigned i = 0; i < nin; i++)
            s += f32_of_bf16(in[i][j]);
        out[j] = s;
    }
}

static void sum_bf16_scalar(float *out, const uint16_t *const *in, unsigned nin, size_t m)
{
    for (size_t j = 0; j < m; j++) {
        float s = f32_of_bf16(in[0][j]);
        for (unsigned i = 1; i < nin; i++)
            s += f32_of_bf16(in[i][j]);
        out[j] = s;
    }
}

/* int-k: the bits of |y|, an integer whose order is |y|'s (NaN above Inf). */
static inline uint32_t abs_bits(float y)
{
    uint32_t u;
    memcpy(&u, &y, sizeof(u));
    return u & 0x7FFFFFFFu;
}

static void int_y_ef_scalar(const float *x, const float *yprev, const float *mprev, unsigned kb,
                            float decay, float *ynew, size_t m, size_t B, uint32_t *bmax,
                            int stream)
{
    (void)stream;
    for (size_t b = 0; b * B < m; b++) {
        size_t j1 = (b + 1) * B < m ? (b + 1) * B : m;
        float s = 0.0f, inv = 0.0f;
        uint32_t mx = 0;
        if (yprev != NULL && mprev != NULL)
            nf_int_scale(mprev[b], kb, &s, &inv);
        for (size_t j = b * B; j < j1; j++) {
            float y = x[j];
            if (yprev != NULL) {
                float p = yprev[j];
                float e = mprev != NULL ? p - s * (float)nf_int_q(p, inv, kb) : p;
                float de = decay * e;
                y = x[j] + de;
                ynew[j] = y;
            }
            uint32_t a = abs_bits(y);
            mx = a > mx ? a : mx;
        }
        bmax[b] = mx;
    }
}

static void int_pack_scalar(const float *y, const float *M, unsigned kb, size_t m, size_t B,
                            uint64_t *planes)
{
    int L = (int)nf_int_levels(kb);
    memset(planes, 0, nf_lines(m) * kb * NF_LINE_BYTES);
    for (size_t j = 0; j < m; j++) {
        float s, inv;
        nf_int_scale(M[j / B], kb, &s, &inv);
        unsigned u = (unsigned)(nf_int_q(y[j], inv, kb) + L);
        size_t l = j / NF_LINE_BITS, w = (j % NF_LINE_BITS) / 64;
        for (unsigned p = 0; p < kb; p++)
            planes[(l * kb + p) * NF_LINE_WORDS + w] |= (uint64_t)((u >> p) & 1u) << (j % 64);
    }
}

static void int_finish_scalar(float *r, const uint64_t *cnt, unsigned kc, const float *M,
                              unsigned kb, size_t m, size_t B, unsigned n, int stream)
{
    (void)stream;
    int64_t L = (int64_t)nf_int_levels(kb);
    for (size_t j = 0; j < m; j++) {
        size_t l = j / NF_LINE_BITS, o = j % NF_LINE_BITS;
        int64_t v = -(int64_t)n * L;
        for (unsigned p = 0; p < kb; p++) /* plane p's counter, read at element o */
            v += (int64_t)count_at(cnt + (l * kb + p) * kc * NF_LINE_WORDS, kc, o) << p;
        float s, inv;
        nf_int_scale(M[j / B], kb, &s, &inv);
        r[j] = (float)((double)s * (double)v);
    }
}

const nf_kernels_t nf_kernels_scalar = {
    .isa = NF_ISA_SCALAR,
    .name = "scalar",
    .abs_sum = abs_sum_scalar,
    .bin_pack = bin_pack_scalar,
    .bin_pack_ef = bin_pack_ef_scalar,
    .bin_finish = bin_finish_scalar,
    .ter_pack = ter_pack_scalar,
    .ter_y_ef = ter_y_ef_scalar,
    .ter_finish = ter_finish_scalar,
    .count_sum = count_sum_scalar,
    .count_merge = count_merge_scalar,
    .sum_f32 = sum_f32_scalar,
    .bf16_pack = bf16_pack_scalar,
    .sum_bf16 = sum_bf16_scalar,
    .sum_bf16_f32 = sum_bf16_f32_scalar,
    .int_y_ef = int_y_ef_scalar,
    .int_pack = int_pack_scalar,
    .int_finish = int_finish_scalar,
};

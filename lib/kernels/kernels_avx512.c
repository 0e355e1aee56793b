/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AVX-512 (F/BW/VL/DQ) kernels. Built only with this ISA's flags; reached only
 * through nf_kernels_for() after cpuid said yes. Bit-exact with the scalar
 * reference: 16 floats per vector keep element k in lane k % 16 of the lane
 * sums, tails use masked loads and stores (no scalar tail loop).
 *
 * Main loops pass a constant all-ones mask to the same inline block the tail
 * uses, so it folds into plain loads, stores and compares: no masked memory
 * access and no mask built per vector. The four kernels one EPYC ran at half
 * their AVX2 speed (ter_pack, bin_finish, ter_finish, sum_f32) were the four
 * with a run-time mask in every step of the main loop.
 */
#include "config.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "nf_kernels.h"

#define AI __attribute__((always_inline)) static inline

/* Vector paths hold counts in int32 lanes: n - 2c must fit. */
#define COUNT_N_MAX (1u << 30)

AI __mmask16 tail16(size_t left)
{
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
}

/* y = x + e, or exactly x when there is no e; masked-off lanes read as +0. */
AI __m512 load_y(const float *x, const float *e, size_t j, __mmask16 mk, int has_e)
{
    __m512 y = _mm512_maskz_loadu_ps(mk, x + j);
    if (has_e)
        y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(mk, e + j));
    return y;
}

/* Lanes 0-7 and 8-15 of the 16 double lane sums. Adding +0.0 for a masked-off
 * element is exact: lanes only ever hold +0.0, positive values, Inf or NaN. */
AI void lane_add(__m512d *lo, __m512d *hi, __m512 v)
{
    *lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    *hi = _mm512_add_pd(*hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
}

static double lane_fold(__m512d lo, __m512d hi)
{
    double lane[NF_LANES];
    _mm512_storeu_pd(lane, lo);
    _mm512_storeu_pd(lane + 8, hi);
    for (unsigned w = NF_LANES / 2; w >= 1; w /= 2)
        for (unsigned i = 0; i < w; i++)
            lane[i] += lane[i + w];
    return lane[0];
}

AI uint32_t sign_mask(__m512 y)
{
    return (uint32_t)_mm512_movepi32_mask(_mm512_castps_si512(y));
}

/* Pad the last line of a bit buffer with zeros after word nw. */
static void zero_pad(uint64_t *bits, size_t m, size_t nw)
{
    size_t end = nf_lines(m) * NF_LINE_WORDS;
    if (nw < end)
        memset(bits + nw, 0, (end - nw) * sizeof(*bits));
}

/* ---- abs_sum ---- */

AI double abs_sum_impl(const float *x, const float *e, size_t m, int has_e)
{
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    size_t j = 0;
    for (; j + 16 <= m; j += 16)
        lane_add(&lo, &hi, _mm512_abs_ps(load_y(x, e, j, 0xFFFF, has_e)));
    if (j < m)
        lane_add(&lo, &hi, _mm512_abs_ps(load_y(x, e, j, tail16(m - j), has_e)));
    return lane_fold(lo, hi);
}

static double abs_sum_avx512(const float *x, const float *e, size_t m)
{
    return e ? abs_sum_impl(x, e, m, 1) : abs_sum_impl(x, NULL, m, 0);
}

/* ---- bin_pack ---- */

AI uint64_t bin_word(const float *x, const float *e, size_t j, size_t left,
                     __m512d *lo, __m512d *hi, int has_e)
{
    uint64_t word = 0;
    #pragma GCC unroll 4
    for (unsigned q = 0; q < 4; q++) {
        if (q * 16 >= left)
            break;
        __m512 y = load_y(x, e, j + q * 16, tail16(left - q * 16), has_e);
        word |= (uint64_t)sign_mask(y) << (q * 16);
        lane_add(lo, hi, _mm512_abs_ps(y));
    }
    return word;
}

AI double bin_pack_impl(const float *x, const float *e, size_t m, uint64_t *bits, int has_e)
{
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    size_t w = 0;
    for (; (w + 1) * 64 <= m; w++)
        bits[w] = bin_word(x, e, w * 64, 64, &lo, &hi, has_e);
    if (w * 64 < m) {
        bits[w] = bin_word(x, e, w * 64, m - w * 64, &lo, &hi, has_e);
        w++;
    }
    zero_pad(bits, m, w);
    return lane_fold(lo, hi);
}

static double bin_pack_avx512(const float *x, const float *e, size_t m, uint64_t *bits)
{
    return e ? bin_pack_impl(x, e, m, bits, 1) : bin_pack_impl(x, NULL, m, bits, 0);
}

/* ---- bin_pack_ef ---- */

AI uint64_t bin_word_ef(const float *x, const float *yprev, __m512 av, __m512 dv, float *ynew,
                        size_t j, size_t left, __m512d *lo, __m512d *hi, int nt)
{
    uint64_t word = 0;
    #pragma GCC unroll 4
    for (unsigned q = 0; q < 4; q++) {
        if (q * 16 >= left)
            break;
        size_t i = j + q * 16;
        __mmask16 mk = tail16(left - q * 16);
        __m512 p = _mm512_maskz_loadu_ps(mk, yprev + i);
        __m512 e = _mm512_mask_add_ps(_mm512_sub_ps(p, av), (__mmask16)sign_mask(p), p, av);
        __m512 de = _mm512_mul_ps(dv, e);
        __m512 y = _mm512_maskz_add_ps(mk, _mm512_maskz_loadu_ps(mk, x + i), de);
        if (nt && mk == 0xFFFF)
            _mm512_stream_ps(ynew + i, y);
        else
            _mm512_mask_storeu_ps(ynew + i, mk, y);
        word |= (uint64_t)sign_mask(y) << (q * 16);
        lane_add(lo, hi, _mm512_abs_ps(y));
    }
    return word;
}

AI double bin_pack_ef_impl(const float *x, const float *yprev, float aprev, float decay,
                           float *ynew, size_t m, uint64_t *bits, int nt)
{
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    const __m512 av = _mm512_set1_ps(aprev), dv = _mm512_set1_ps(decay);
    size_t w = 0;
    for (; (w + 1) * 64 <= m; w++)
        bits[w] = bin_word_ef(x, yprev, av, dv, ynew, w * 64, 64, &lo, &hi, nt);
    if (w * 64 < m) {
        bits[w] = bin_word_ef(x, yprev, av, dv, ynew, w * 64, m - w * 64, &lo, &hi, nt);
        w++;
    }
    if (nt)
        _mm_sfence();
    zero_pad(bits, m, w);
    return lane_fold(lo, hi);
}

static double bin_pack_ef_avx512(const float *x, const float *yprev, float aprev, float decay,
                                 float *ynew, size_t m, uint64_t *bits, int stream)
{
    /* Streaming needs 64-byte aligned full vectors: ynew is aligned by contract. */
    if (stream && ((uintptr_t)ynew & 63) == 0)
        return bin_pack_ef_impl(x, yprev, aprev, decay, ynew, m, bits, 1);
    return bin_pack_ef_impl(x, yprev, aprev, decay, ynew, m, bits, 0);
}

/* ---- ter_y_ef ---- */

AI void ter_y16(const float *x, const float *yprev, __m512 tv, __m512 ntv, __m512 bv, __m512 dv,
                float *ynew, size_t i, __mmask16 mk, __m512d *lo, __m512d *hi, int nt)
{
    __m512 p = _mm512_maskz_loadu_ps(mk, yprev + i);
    __mmask16 gt = _mm512_cmp_ps_mask(p, tv, _CMP_GT_OQ);
    __mmask16 lt = _mm512_cmp_ps_mask(p, ntv, _CMP_LT_OQ);
    __m512 e = _mm512_mask_sub_ps(p, gt, p, bv);
    e = _mm512_mask_add_ps(e, lt, p, bv);
    __m512 de = _mm512_mul_ps(dv, e);
    __m512 y = _mm512_maskz_add_ps(mk, _mm512_maskz_loadu_ps(mk, x + i), de);
    if (nt && mk == 0xFFFF)
        _mm512_stream_ps(ynew + i, y);
    else
        _mm512_mask_storeu_ps(ynew + i, mk, y);
    lane_add(lo, hi, _mm512_abs_ps(y));
}

AI double ter_y_ef_impl(const float *x, const float *yprev, float tprev, float bprev,
                        float decay, float *ynew, size_t m, int nt)
{
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    const __m512 tv = _mm512_set1_ps(tprev), ntv = _mm512_set1_ps(-tprev);
    const __m512 bv = _mm512_set1_ps(bprev), dv = _mm512_set1_ps(decay);
    size_t j = 0;
    for (; j + 16 <= m; j += 16)
        ter_y16(x, yprev, tv, ntv, bv, dv, ynew, j, 0xFFFF, &lo, &hi, nt);
    if (j < m)
        ter_y16(x, yprev, tv, ntv, bv, dv, ynew, j, tail16(m - j), &lo, &hi, nt);
    if (nt)
        _mm_sfence();
    return lane_fold(lo, hi);
}

static double ter_y_ef_avx512(const float *x, const float *yprev, float tprev, float bprev,
                              float decay, float *ynew, size_t m, int stream)
{
    if (stream && ((uintptr_t)ynew & 63) == 0)
        return ter_y_ef_impl(x, yprev, tprev, bprev, decay, ynew, m, 1);
    return ter_y_ef_impl(x, yprev, tprev, bprev, decay, ynew, m, 0);
}

/* ---- counters -> values ---- */

/* The 32 bits of each plane covering elements j .. j+31 (j a multiple of 32)
 * are a mask for 32 16-bit lanes: plane p adds 2^p where its bit is set, one
 * masked add per plane for 32 elements (a count of k <= 16 planes fits in
 * 16 bits), then the lanes are widened to two vectors of 16 int32. */
AI __m512i count32_u16(const uint64_t *cnt, unsigned k, size_t j)
{
    const unsigned char *b = (const unsigned char *)cnt
        + (j / NF_LINE_BITS) * k * NF_LINE_BYTES + (j % NF_LINE_BITS) / 8;
    __m512i w = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (unsigned p = 0; p < k; p++) {
        uint32_t bits;
        memcpy(&bits, b + p * NF_LINE_BYTES, sizeof(bits));
        w = _mm512_mask_add_epi16(w, (__mmask32)bits, w, _mm512_set1_epi16((short)(1u << p)));
    }
    return w;
}

AI void widen32(__m512i w, __m512i c[2])
{
    c[0] = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(w));
    c[1] = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(w, 1));
}

/* Counter values of elements j .. j+31 in c[0] (first 16) and c[1]. */
AI void count32(const uint64_t *cnt, unsigned k, size_t j, __m512i c[2])
{
    widen32(count32_u16(cnt, k, j), c);
}

/* P - M of two counters for elements j .. j+31 (each counted unsigned:
 * with k = 16 the difference needs 17 bits). */
AI void diff32(const uint64_t *cntp, const uint64_t *cntm, unsigned k, size_t j, __m512i v[2])
{
    __m512i p[2], q[2];
    widen32(count32_u16(cntp, k, j), p);
    widen32(count32_u16(cntm, k, j), q);
    v[0] = _mm512_sub_epi32(p[0], q[0]);
    v[1] = _mm512_sub_epi32(p[1], q[1]);
}

/* (float)(s * (double)v) for 16 int32 v, rounded once. */
AI __m512 scale16(__m512i v, __m512d s)
{
    __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(s, _mm512_cvtepi32_pd(_mm512_castsi512_si256(v))));
    __m256 hi = _mm512_cvtpd_ps(_mm512_mul_pd(s, _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(v, 1))));
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

/* Small counters: results for every index come from a table built with the
 * reference's own formula, so a lookup (vpermps / vpermt2ps, 16 or 32
 * entries) replaces the double arithmetic and is exact by construction.
 * Entry i holds (float)(s * (double)(i - bias)); a NaN scale stays NaN. */
typedef struct {
    __m512 lo, hi;
    int wide; /* 32 entries */
} tbl_t;

static tbl_t tbl_make(double s, int64_t bias, int wide)
{
    float t[32];
    for (int64_t i = 0; i < 32; i++)
        t[i] = (float)(s * (double)(i - bias));
    return (tbl_t){_mm512_loadu_ps(t), _mm512_loadu_ps(t + 16), wide};
}

AI __m512 tbl_get(const tbl_t *t, __m512i idx)
{
    return t->wide ? _mm512_permutex2var_ps(t->lo, idx, t->hi) : _mm512_permutexvar_ps(idx, t->lo);
}

/* ---- bin_finish ---- */

/* use_tbl: 0 none, 1 for k <= 4, 2 for k == 5; entry c is the reference's
 * (float)(a * (double)(n - 2c)). */
static tbl_t bin_tbl(double a, unsigned n, int use_tbl)
{
    tbl_t tbl = {_mm512_setzero_ps(), _mm512_setzero_ps(), use_tbl == 2};
    if (use_tbl) {
        float t[32];
        for (int64_t c = 0; c < 32; c++)
            t[c] = (float)(a * (double)((int64_t)n - 2 * c));
        tbl.lo = _mm512_loadu_ps(t), tbl.hi = _mm512_loadu_ps(t + 16);
    }
    return tbl;
}

/* Sixteen elements from j with counts c; mk is all ones (a constant) except
 * in the tail. */
AI void bin_block(float *r, const float *x, float *e, __m512i c, size_t j, __mmask16 mk,
                  __m512i nv, __m512d av, __m512 aiv, const tbl_t *tbl, int has_e, int use_tbl)
{
    __m512 rv = use_tbl ? tbl_get(tbl, c) : scale16(_mm512_sub_epi32(nv, _mm512_add_epi32(c, c)), av);
    if (has_e) { /* before r: x may alias r */
        __m512 y = load_y(x, e, j, mk, 1);
        __m512 en = _mm512_mask_add_ps(_mm512_sub_ps(y, aiv), (__mmask16)sign_mask(y), y, aiv);
        _mm512_mask_storeu_ps(e + j, mk, en);
    }
    _mm512_mask_storeu_ps(r + j, mk, rv);
}

AI void bin_finish_impl(float *r, const float *x, float *e, const uint64_t *cnt, unsigned k,
                        size_t m, unsigned n, double a, float ai, int has_e, int use_tbl)
{
    const __m512i nv = _mm512_set1_epi32((int)n);
    const __m512d av = _mm512_set1_pd(a);
    const __m512 aiv = _mm512_set1_ps(ai);
    const tbl_t tbl = bin_tbl(a, n, use_tbl);
    for (size_t j = 0; j < m; j += 32) {
        __m512i c[2];
        count32(cnt, k, j, c);
        if (j + 32 <= m) {
            bin_block(r, x, e, c[0], j, 0xFFFF, nv, av, aiv, &tbl, has_e, use_tbl);
            bin_block(r, x, e, c[1], j + 16, 0xFFFF, nv, av, aiv, &tbl, has_e, use_tbl);
            continue;
        }
        bin_block(r, x, e, c[0], j, tail16(m - j), nv, av, aiv, &tbl, has_e, use_tbl);
        if (m - j > 16)
            bin_block(r, x, e, c[1], j + 16, tail16(m - j - 16), nv, av, aiv, &tbl, has_e, use_tbl);
    }
}

/* Results rv of elements j .. j+15 into r, whose first element sits o floats
 * into its line: one streamed line of r per block (see bin_finish_stream). */
AI void stream16(float *r, size_t m, unsigned o, __m512i idx, size_t j, __m512 rv, __m512 *prev)
{
    if (o == 0) { /* aligned already: block j is line j */
        if (m - j >= 16)
            _mm512_stream_ps(r + j, rv);
        else
            _mm512_mask_storeu_ps(r + j, tail16(m - j), rv);
    } else if (j == 0) { /* elements [0, 16 - o) end r's first line */
        _mm512_mask_storeu_ps(r, tail16(m < 16 - o ? m : 16 - o), rv);
    } else { /* line holding elements [j - o, j - o + 16) */
        __m512 line = _mm512_permutex2var_ps(*prev, idx, rv);
        size_t left = m - (j - o);
        if (left >= 16)
            _mm512_stream_ps(r + j - o, line);
        else
            _mm512_mask_storeu_ps(r + j - o, tail16(left), line);
    }
    *prev = rv;
}

/*
 * Results of a large buffer without error feedback: streamed to 64-byte
 * aligned lines whatever r's alignment, so no line is read for ownership.
 * Counts are taken 32 elements at a time from element 0, results stored 16
 * at a time (j a multiple of 16); vpermt2ps joins the tail of one block with
 * the head of the next so that each store covers exactly one cache line of r.
 */
AI void bin_finish_stream(float *r, const uint64_t *cnt, unsigned k, size_t m, unsigned n,
                          double a, int use_tbl)
{
    const unsigned o = (unsigned)(((uintptr_t)r >> 2) & 15); /* r's float offset in its line */
    const __m512i nv = _mm512_set1_epi32((int)n);
    const __m512d av = _mm512_set1_pd(a);
    const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32((int)(16 - o)),
                                         _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                           11, 12, 13, 14, 15));
    const tbl_t tbl = bin_tbl(a, n, use_tbl);
    __m512 prev = _mm512_setzero_ps();
    size_t j = 0; /* the last block's start */
    for (size_t j0 = 0; j0 < m; j0 += 32) {
        __m512i c[2];
        count32(cnt, k, j0, c);
#pragma GCC unroll 2
        for (unsigned h = 0; h < 2; h++) {
            if (j0 + 16 * h >= m)
                break;
            j = j0 + 16 * h;
            stream16(r, m, o, idx, j,
                     use_tbl ? tbl_get(&tbl, c[h])
                             : scale16(_mm512_sub_epi32(nv, _mm512_add_epi32(c[h], c[h])), av),
                     &prev);
        }
    }
    size_t done = j + (16 - o); /* o > 0: stored up to here */
    if (o != 0 && m > 0 && done < m) /* the last block's last elements */
        _mm512_mask_storeu_ps(r + done, tail16(m - done), _mm512_permutex2var_ps(prev, idx, prev));
    _mm_sfence();
}

/* Small k is passed as a constant so the plane loops unroll. */
#define BIN_SMALL_K(KK, TBL)                                                      \
    case KK:                                                                   \
        if (e)                                                                 \
            bin_finish_impl(r, x, e, cnt, KK, m, n, a, ai, 1, TBL);            \
        else if (stream)                                                       \
            bin_finish_stream(r, cnt, KK, m, n, a, TBL);                       \
        else                                                                   \
            bin_finish_impl(r, NULL, NULL, cnt, KK, m, n, a, ai, 0, TBL);      \
        return;

static void bin_finish_avx512(float *r, const float *x, float *e, const uint64_t *cnt,
                              unsigned k, size_t m, unsigned n, double a, float ai, int nt)
{
    if (k > NF_COUNT_PLANES_MAX || n > COUNT_N_MAX) {
        nf_kernels_scalar.bin_finish(r, x, e, cnt, k, m, n, a, ai, 0);
        return;
    }
    const int stream = nt && ((uintptr_t)r & 3) == 0;
    switch (k) {
        BIN_SMALL_K(1, 1)
        BIN_SMALL_K(2, 1)
        BIN_SMALL_K(3, 1)
        BIN_SMALL_K(4, 1)
        BIN_SMALL_K(5, 2)
    default:
        if (e)
            bin_finish_impl(r, x, e, cnt, k, m, n, a, ai, 1, 0);
        else if (stream)
            bin_finish_stream(r, cnt, k, m, n, a, 0);
        else
            bin_finish_impl(r, NULL, NULL, cnt, k, m, n, a, ai, 0, 0);
    }
}

/* ---- ter_pack ---- */

/* One 64-bit word of plus and minus bits from j; left >= 64 except in the
 * tail. The gated-in count is one popcount per word. */
AI uint64_t ter_word(const float *x, const float *e, size_t j, size_t left, __m512 tv, __m512 ntv,
                     __m512d *lo, __m512d *hi, uint64_t *mw, size_t *cnt, int has_e)
{
    uint64_t pw = 0, nw = 0;
    #pragma GCC unroll 4
    for (unsigned q = 0; q < 4; q++) {
        if (q * 16 >= left)
            break;
        __mmask16 mk = tail16(left - q * 16);
        __m512 y = load_y(x, e, j + q * 16, mk, has_e);
        __mmask16 gp = _mm512_mask_cmp_ps_mask(mk, y, tv, _CMP_GT_OQ);
        __mmask16 gm = _mm512_mask_cmp_ps_mask(mk, y, ntv, _CMP_LT_OQ);
        pw |= (uint64_t)gp << (q * 16);
        nw |= (uint64_t)gm << (q * 16);
        lane_add(lo, hi, _mm512_maskz_mov_ps(_kor_mask16(gp, gm), _mm512_abs_ps(y)));
    }
    *mw = nw;
    *cnt += (size_t)__builtin_popcountll(pw | nw); /* gated in: either gate */
    return pw;
}

AI double ter_pack_impl(const float *x, const float *e, size_t m, float t, uint64_t *plus,
                        uint64_t *minus, size_t *nin, int has_e)
{
    const __m512 tv = _mm512_set1_ps(t), ntv = _mm512_set1_ps(-t);
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    size_t cnt = 0, w = 0;
    for (; (w + 1) * 64 <= m; w++)
        plus[w] = ter_word(x, e, w * 64, 64, tv, ntv, &lo, &hi, &minus[w], &cnt, has_e);
    if (w * 64 < m) {
        plus[w] = ter_word(x, e, w * 64, m - w * 64, tv, ntv, &lo, &hi, &minus[w], &cnt, has_e);
        w++;
    }
    zero_pad(plus, m, w);
    zero_pad(minus, m, w);
    *nin = cnt;
    return lane_fold(lo, hi);
}

static double ter_pack_avx512(const float *x, const float *e, size_t m, float t,
                              uint64_t *plus, uint64_t *minus, size_t *nin)
{
    return e ? ter_pack_impl(x, e, m, t, plus, minus, nin, 1)
             : ter_pack_impl(x, NULL, m, t, plus, minus, nin, 0);
}

/* ---- ter_finish ---- */

/* Sixteen elements from j with v = P - M (+ bias with a table), as bin_block. */
AI void ter_block(float *r, const float *x, float *e, __m512i v, size_t j, __mmask16 mk,
                  __m512d bv, __m512 tv, __m512 ntv, __m512 biv, const tbl_t *tbl, int has_e,
                  int use_tbl)
{
    __m512 rv = use_tbl ? tbl_get(tbl, v) : scale16(v, bv);
    if (has_e) {
        __m512 y = load_y(x, e, j, mk, 1);
        /* plus wins when both gates hold (t < 0), as in the reference */
        __m512 en = _mm512_mask_add_ps(y, _mm512_cmp_ps_mask(y, ntv, _CMP_LT_OQ), y, biv);
        en = _mm512_mask_sub_ps(en, _mm512_cmp_ps_mask(y, tv, _CMP_GT_OQ), y, biv);
        _mm512_mask_storeu_ps(e + j, mk, en);
    }
    _mm512_mask_storeu_ps(r + j, mk, rv);
}

AI void ter_finish_impl(float *r, const float *x, float *e, const uint64_t *cntp,
                        const uint64_t *cntm, unsigned k, size_t m, double b, float t,
                        float bi, int has_e, int use_tbl)
{
    const __m512d bv = _mm512_set1_pd(b);
    const __m512 tv = _mm512_set1_ps(t), ntv = _mm512_set1_ps(-t), biv = _mm512_set1_ps(bi);
    /* v = P - M lies in [-(2^k - 1), 2^k - 1]: index v + 2^k - 1 */
    const int64_t bias = use_tbl ? ((int64_t)1 << k) - 1 : 0;
    const __m512i biasv = _mm512_set1_epi32((int)bias);
    tbl_t tbl = {_mm512_setzero_ps(), _mm512_setzero_ps(), 0};
    if (use_tbl)
        tbl = tbl_make(b, bias, use_tbl == 2);
    for (size_t j = 0; j < m; j += 32) {
        __m512i v[2];
        diff32(cntp, cntm, k, j, v);
        v[0] = _mm512_add_epi32(v[0], biasv), v[1] = _mm512_add_epi32(v[1], biasv);
        if (j + 32 <= m) {
            ter_block(r, x, e, v[0], j, 0xFFFF, bv, tv, ntv, biv, &tbl, has_e, use_tbl);
            ter_block(r, x, e, v[1], j + 16, 0xFFFF, bv, tv, ntv, biv, &tbl, has_e, use_tbl);
            continue;
        }
        ter_block(r, x, e, v[0], j, tail16(m - j), bv, tv, ntv, biv, &tbl, has_e, use_tbl);
        if (m - j > 16)
            ter_block(r, x, e, v[1], j + 16, tail16(m - j - 16), bv, tv, ntv, biv, &tbl, has_e,
                      use_tbl);
    }
}

#define TER_SMALL_K(KK, TBL)                                                      \
    case KK:                                                                   \
        if (e)                                                                 \
            ter_finish_impl(r, x, e, cntp, cntm, KK, m, b, t, bi, 1, TBL);     \
        else                                                                   \
            ter_finish_impl(r, NULL, NULL, cntp, cntm, KK, m, b, t, bi, 0, TBL); \
        return;

static void ter_finish_avx512(float *r, const float *x, float *e, const uint64_t *cntp,
                              const uint64_t *cntm, unsigned k, size_t m, double b,
                              float t, float bi)
{
    if (k > NF_COUNT_PLANES_MAX) {
        nf_kernels_scalar.ter_finish(r, x, e, cntp, cntm, k, m, b, t, bi);
        return;
    }
    switch (k) { /* 1: k <= 3 (15 table entries), 2: k == 4 (31 entries) */
        TER_SMALL_K(1, 1)
        TER_SMALL_K(2, 1)
        TER_SMALL_K(3, 1)
        TER_SMALL_K(4, 2)
    default:
        if (e)
            ter_finish_impl(r, x, e, cntp, cntm, k, m, b, t, bi, 1, 0);
        else
            ter_finish_impl(r, NULL, NULL, cntp, cntm, k, m, b, t, bi, 0, 0);
    }
}

/* ---- bit-sliced counters ---- */

#define XOR3(a, b, c) _mm512_ternarylogic_epi64((a), (b), (c), 0x96)
#define MAJ(a, b, c) _mm512_ternarylogic_epi64((a), (b), (c), 0xE8)

/* Up to 7 one-bit inputs -> a 3-bit sum (s[0..2]) with four full adders. */
AI void csa7(const uint64_t *const *in, unsigned g, size_t l, __m512i s[3])
{
    __m512i v[7];
    #pragma GCC unroll 7
    for (unsigned i = 0; i < 7; i++)
        v[i] = i < g ? _mm512_load_si512(in[i] + l * NF_LINE_WORDS) : _mm512_setzero_si512();
    __m512i s1 = XOR3(v[0], v[1], v[2]), c1 = MAJ(v[0], v[1], v[2]);
    __m512i s2 = XOR3(v[3], v[4], v[5]), c2 = MAJ(v[3], v[4], v[5]);
    __m512i c3 = MAJ(s1, s2, v[6]);
    s[0] = XOR3(s1, s2, v[6]);
    s[1] = XOR3(c1, c2, c3);
    s[2] = MAJ(c1, c2, c3);
}

/* Lines per block when more than 7 inputs stream through the counter: the
 * block's counter lines stay in L1/L2 while groups of 7 inputs pass. */
#define CS_BLOCK 32

static void count_sum_avx512(uint64_t *cnt, unsigned k, const uint64_t *const *in,
                             unsigned nin, size_t nlines)
{
    const __m512i zero = _mm512_setzero_si512();
    for (size_t l0 = 0; l0 < nlines; l0 += CS_BLOCK) {
        size_t l1 = nlines - l0 < CS_BLOCK ? nlines : l0 + CS_BLOCK;
        unsigned g = nin < 7 ? nin : 7;
        for (size_t l = l0; l < l1; l++) { /* first group writes the counter */
            __m512i s[3];
            __m512i *c = (__m512i *)(cnt + l * k * NF_LINE_WORDS);
            csa7(in, g, l, s);
            for (unsigned p = 0; p < k; p++)
                _mm512_store_si512(c + p, p < 3 ? s[p] : zero);
        }
        for (unsigned i = g; i < nin; i += 7) { /* later groups ripple-add into it */
            unsigned gi = nin - i < 7 ? nin - i : 7;
            for (size_t l = l0; l < l1; l++) {
                __m512i s[3], carry = zero;
                __m512i *c = (__m512i *)(cnt + l * k * NF_LINE_WORDS);
                csa7(in + i, gi, l, s);
                for (unsigned p = 0; p < k; p++) {
                    __m512i a = _mm512_load_si512(c + p), b = p < 3 ? s[p] : zero;
                    _mm512_store_si512(c + p, XOR3(a, b, carry));
                    carry = MAJ(a, b, carry);
                }
            }
        }
    }
}

static void count_merge_avx512(uint64_t *acc, const uint64_t *add, unsigned k, size_t nlines)
{
    for (size_t l = 0; l < nlines; l++) {
        __m512i carry = _mm512_setzero_si512();
        __m512i *c = (__m512i *)(acc + l * k * NF_LINE_WORDS);
        const __m512i *d = (const __m512i *)(add + l * k * NF_LINE_WORDS);
        for (unsigned p = 0; p < k; p++) {
            __m512i a = _mm512_load_si512(c + p), b = _mm512_load_si512(d + p);
            _mm512_store_si512(c + p, XOR3(a, b, carry));
            carry = MAJ(a, b, carry);
        }
    }
}

/* ---- sum_f32 ---- */

/* mk: all ones (a constant) except in the tail. */
AI void sum16(float *out, const float *const *in, unsigned nin, size_t j, __mmask16 mk)
{
    __m512 s = _mm512_maskz_loadu_ps(mk, in[0] + j);
    for (unsigned i = 1; i < nin; i++)
        s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(mk, in[i] + j));
    _mm512_mask_storeu_ps(out + j, mk, s);
}

static void sum_f32_avx512(float *out, const float *const *in, unsigned nin, size_t m)
{
    size_t j = 0;
    for (; j + 16 <= m; j += 16)
        sum16(out, in, nin, j, 0xFFFF);
    if (j < m)
        sum16(out, in, nin, j, tail16(m - j));
}

/* ---- bf16 ---- */

AI __mmask32 tail32(size_t left)
{
    return left >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << left) - 1);
}

/* The encodings of 16 floats after the reference's rounding: the bf16 are
 * their top halves. A NaN takes the quiet bit instead of the rounding. */
AI __m512i bf16_round16(__m512i u)
{
    const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7F800000));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
    return _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
}

/* Word 2i + 1 of a:b for i = 0..31: the top halves of 32 dwords, in order. */
static const uint16_t odd_words[32] __attribute__((aligned(64))) = {
    1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
    33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63,
};

/* Thirty-two elements from j; mk is all ones (a constant) except in the tail. */
AI void bf16_pack32(const float *x, uint16_t *out, size_t j, __mmask32 mk, __m512i idx)
{
    __m512i a = bf16_round16(_mm512_maskz_loadu_epi32((__mmask16)mk, x + j));
    __m512i b = bf16_round16(_mm512_maskz_loadu_epi32((__mmask16)(mk >> 16), x + j + 16));
    _mm512_mask_storeu_epi16(out + j, mk, _mm512_permutex2var_epi16(a, idx, b));
}

static void bf16_pack_avx512(const float *x, uint16_t *out, size_t m)
{
    const __m512i idx = _mm512_load_si512(odd_words);
    size_t j = 0;
    for (; j + 32 <= m; j += 32)
        bf16_pack32(x, out, j, 0xFFFFFFFFu, idx);
    if (j < m)
        bf16_pack32(x, out, j, tail32(m - j), idx);
}

/* Thirty-two bf16 from p as floats, even elements in ev and odd ones in od:
 * a bf16's bits shifted to the top half are its exact float. Summing in
 * this order needs no shuffle per input, only one pair per 32 results. */
AI void bf16_widen32(const uint16_t *p, __mmask32 mk, __m512 *ev, __m512 *od)
{
    const __m512i v = _mm512_maskz_loadu_epi16(mk, p);
    *ev = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    *od = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xFFFF0000u)));
}

AI void sum_bf16_32(float *out, const float *acc, const uint16_t *const *in, unsigned nin,
                    size_t j, __mmask32 mk, int has_acc)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i ilv = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i one = _mm512_set1_epi32(1), eight = _mm512_set1_epi32(8);
    __m512 ev, od;
    unsigned i = 0;
    if (has_acc) {
        __m512 lo = _mm512_maskz_loadu_ps((__mmask16)mk, acc + j);
        __m512 hi = _mm512_maskz_loadu_ps((__mmask16)(mk >> 16), acc + j + 16);
        ev = _mm512_permutex2var_ps(lo, even, hi);
        od = _mm512_permutex2var_ps(lo, _mm512_add_epi32(even, one), hi);
    } else {
        bf16_widen32(in[i++] + j, mk, &ev, &od);
    }
    for (; i < nin; i++) {
        __m512 e, o;
        bf16_widen32(in[i] + j, mk, &e, &o);
        ev = _mm512_add_ps(ev, e);
        od = _mm512_add_ps(od, o);
    }
    _mm512_mask_storeu_ps(out + j, (__mmask16)mk, _mm512_permutex2var_ps(ev, ilv, od));
    _mm512_mask_storeu_ps(out + j + 16, (__mmask16)(mk >> 16),
                          _mm512_permutex2var_ps(ev, _mm512_add_epi32(ilv, eight), od));
}

AI void sum_bf16_impl(float *out, const float *acc, const uint16_t *const *in, unsigned nin,
                      size_t m, int has_acc)
{
    size_t j = 0;
    for (; j + 32 <= m; j += 32)
        sum_bf16_32(out, acc, in, nin, j, 0xFFFFFFFFu, has_acc);
    if (j < m)
        sum_bf16_32(out, acc, in, nin, j, tail32(m - j), has_acc);
}

static void sum_bf16_avx512(float *out, const uint16_t *const *in, unsigned nin, size_t m)
{
    sum_bf16_impl(out, NULL, in, nin, m, 0);
}

static void sum_bf16_f32_avx512(float *out, const float *acc, const uint16_t *const *in,
                                unsigned nin, size_t m)
{
    sum_bf16_impl(out, acc, in, nin, m, 1);
}

/* ---- integer routes (int_y_ef, int_pack, int_finish) ---- */

/* Vector paths: 2..4 bits and power-of-two blocks of 32 elements or more,
 * so that a vector of 16 never straddles two blocks; anything else goes to
 * the reference. */
AI int int_ok(unsigned kb, size_t B)
{
    return kb >= 2 && kb <= 4 && B >= NF_INT_BLOCK_MIN && (B & (B - 1)) == 0;
}

/* nf_int_q of 16 lanes as int32: the float product rounded to nearest
 * even, then min(L, t) and max(-L, t) with the bound first, which is the
 * reference's t > L ? L : t < -L ? -L : t (a NaN passes through both), then
 * truncation, which turns a NaN into INT_MIN as the reference's (int) does
 * (cvttss2si). */
AI __m512i int_q16(__m512 y, __m512 inv, __m512 Lv, __m512 nLv)
{
    __m512 t = _mm512_roundscale_ps(_mm512_mul_ps(y, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    t = _mm512_max_ps(nLv, _mm512_min_ps(Lv, t));
    return _mm512_cvttps_epi32(t);
}

/* (float)nf_int_q of 16 lanes without leaving floats: t = (a + 1.5 * 2^23)
 * - 1.5 * 2^23 is a rounded to an integer, ties to even, for |a| < 2^22
 * (the sum's ulp is 1, and 1.5 * 2^23 is even), and +0.0 for 0 as
 * (float)(int) gives; for |a| >= 2^22 it is at least 2^22 in magnitude with
 * a's sign, so the clamp gives +-L as for the exact rounding. The clamp
 * lets a NaN through, and the last max turns it into -2^31, the
 * reference's (float)(int)NaN. */
AI __m512 int_qf16(__m512 y, __m512 inv, __m512 Lv, __m512 nLv)
{
    const __m512 big = _mm512_set1_ps(0x1.8p23f);
    __m512 t = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(y, inv), big), big);
    t = _mm512_max_ps(nLv, _mm512_min_ps(Lv, t));
    return _mm512_max_ps(t, _mm512_set1_ps(-0x1p31f));
}

/* Sixteen elements of int_y_ef from i (has_y: with yprev; has_m: with
 * mprev); mk is all ones (a constant) except in the tail. The bits of |y|
 * go into the running max mx. */
AI void int_y16(const float *x, const float *yprev, float *ynew, size_t i, __mmask16 mk,
                __m512 sv, __m512 iv, __m512 Lv, __m512 nLv, __m512 dv, __m512i *mx, int has_y,
                int has_m, int nt)
{
    __m512 y = _mm512_maskz_loadu_ps(mk, x + i);
    if (has_y) {
        __m512 p = _mm512_maskz_loadu_ps(mk, yprev + i), e = p;
        if (has_m) /* p - s * (float)q, as the reference: no FMA */
            e = _mm512_sub_ps(p, _mm512_mul_ps(int_qf16(p, iv, Lv, nLv), sv));
        /* x + de, but x + 0 where x is NaN: x's NaN (quieted) whichever
         * operand order the compiler picks for the add (as kernels_avx2.c);
         * lanes past the end are 0 */
        const __m512 de = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, y, _CMP_ORD_Q), _mm512_mul_ps(e, dv));
        y = _mm512_maskz_add_ps(mk, y, de);
        if (nt && mk == 0xFFFF)
            _mm512_stream_ps(ynew + i, y);
        else
            _mm512_mask_storeu_ps(ynew + i, mk, y);
    }
    *mx = _mm512_max_epi32(*mx, _mm512_and_si512(_mm512_castps_si512(y), _mm512_set1_epi32(0x7FFFFFFF)));
}

AI void int_y_ef_impl(const float *x, const float *yprev, const float *mprev, unsigned kb,
                      float decay, float *ynew, size_t m, size_t B, uint32_t *bmax, int has_y,
                      int has_m, int nt)
{
    const float L = (float)nf_int_levels(kb);
    const __m512 Lv = _mm512_set1_ps(L), nLv = _mm512_set1_ps(-L), dv = _mm512_set1_ps(decay);
    for (size_t b = 0, j0 = 0; j0 < m; b++, j0 += B) {
        const size_t j1 = m - j0 > B ? j0 + B : m;
        float s = 0.0f, inv = 0.0f;
        if (has_m)
            nf_int_scale(mprev[b], kb, &s, &inv);
        const __m512 sv = _mm512_set1_ps(s), iv = _mm512_set1_ps(inv);
        __m512i mx0 = _mm512_setzero_si512(), mx1 = _mm512_setzero_si512();
        size_t j = j0;
        for (; j + 32 <= j1; j += 32) {
            int_y16(x, yprev, ynew, j, 0xFFFF, sv, iv, Lv, nLv, dv, &mx0, has_y, has_m, nt);
            int_y16(x, yprev, ynew, j + 16, 0xFFFF, sv, iv, Lv, nLv, dv, &mx1, has_y, has_m, nt);
        }
        for (; j < j1; j += 16) /* the buffer's last block: its last 1..31 */
            int_y16(x, yprev, ynew, j, tail16(j1 - j), sv, iv, Lv, nLv, dv, &mx0, has_y, has_m, nt);
        bmax[b] = (uint32_t)_mm512_reduce_max_epi32(_mm512_max_epi32(mx0, mx1));
    }
    if (nt)
        _mm_sfence();
}

static void int_y_ef_avx512(const float *x, const float *yprev, const float *mprev, unsigned kb,
                            float decay, float *ynew, size_t m, size_t B, uint32_t *bmax,
                            int stream)
{
    if (!int_ok(kb, B)) {
        nf_kernels_scalar.int_y_ef(x, yprev, mprev, kb, decay, ynew, m, B, bmax, 0);
        return;
    }
    const int nt = stream && ((uintptr_t)ynew & 63) == 0;
    if (yprev == NULL)
        int_y_ef_impl(x, NULL, NULL, kb, decay, NULL, m, B, bmax, 0, 0, 0);
    else if (mprev == NULL)
        nt ? int_y_ef_impl(x, yprev, NULL, kb, decay, ynew, m, B, bmax, 1, 0, 1)
           : int_y_ef_impl(x, yprev, NULL, kb, decay, ynew, m, B, bmax, 1, 0, 0);
    else
        nt ? int_y_ef_impl(x, yprev, mprev, kb, decay, ynew, m, B, bmax, 1, 1, 1)
           : int_y_ef_impl(x, yprev, mprev, kb, decay, ynew, m, B, bmax, 1, 1, 0);
}

/* One 64-bit word of each of the kb planes, elements j .. j+63 (left of
 * them in the buffer, at least 64 when full; bits past the end are zero);
 * inv0 for the first 32, inv1 for the others. q truncated to its low byte
 * (vpmovdb) plus L is the low byte of u = q + L, for a NaN's INT_MIN too;
 * each plane's 64 bits are then one vptestmb. */
AI void int_word(const float *y, size_t j, size_t left, __m512 inv0, __m512 inv1, __m512 Lv,
                 __m512 nLv, __m512i Lb, unsigned kb, uint64_t *w, int full)
{
    __m128i b[4];
    #pragma GCC unroll 4
    for (unsigned g = 0; g < 4; g++) {
        const __mmask16 mk = full ? (__mmask16)0xFFFF : left > 16 * g ? tail16(left - 16 * g) : 0;
        b[g] = _mm512_cvtepi32_epi8(int_q16(_mm512_maskz_loadu_ps(mk, y + j + 16 * g),
                                            g < 2 ? inv0 : inv1, Lv, nLv));
    }
    __m512i u = _mm512_castsi128_si512(b[0]);
    u = _mm512_inserti32x4(u, b[1], 1);
    u = _mm512_inserti32x4(u, b[2], 2);
    u = _mm512_inserti32x4(u, b[3], 3);
    u = _mm512_add_epi8(u, Lb);
    const uint64_t keep = full ? ~0ull : (1ull << left) - 1;
    #pragma GCC unroll 4
    for (unsigned p = 0; p < kb; p++)
        w[p * NF_LINE_WORDS] =
            (uint64_t)_mm512_test_epi8_mask(u, _mm512_set1_epi8((char)(1 << p))) & keep;
}

AI void int_pack_impl(const float *y, const float *M, unsigned kb, size_t m, size_t B,
                      uint64_t *planes)
{
    const float L = (float)nf_int_levels(kb);
    const __m512 Lv = _mm512_set1_ps(L), nLv = _mm512_set1_ps(-L);
    const __m512i Lb = _mm512_set1_epi8((char)nf_int_levels(kb));
    const unsigned lgB = (unsigned)__builtin_ctzll(B); /* B is a power of two */
    float s, inv0 = 0.0f, inv1 = 0.0f;
    for (size_t l = 0; l * NF_LINE_BITS < m; l++) {
        uint64_t *pl = planes + l * kb * NF_LINE_WORDS;
        unsigned w = 0;
        for (; w < NF_LINE_WORDS && l * NF_LINE_BITS + 64 * w < m; w++) {
            const size_t j = l * NF_LINE_BITS + 64 * w, left = m - j;
            if ((j & (B - 1)) == 0) /* a block starts here (every word when B = 32) */
                nf_int_scale(M[j >> lgB], kb, &s, &inv0);
            if (B == 32 && left > 32)
                nf_int_scale(M[(j + 32) >> lgB], kb, &s, &inv1);
            else
                inv1 = inv0;
            if (left >= 64)
                int_word(y, j, 64, _mm512_set1_ps(inv0), _mm512_set1_ps(inv1), Lv, nLv, Lb, kb,
                         pl + w, 1);
            else
                int_word(y, j, left, _mm512_set1_ps(inv0), _mm512_set1_ps(inv1), Lv, nLv, Lb, kb,
                         pl + w, 0);
        }
        for (; w < NF_LINE_WORDS; w++) /* the last line's words past the end */
            for (unsigned p = 0; p < kb; p++)
                pl[p * NF_LINE_WORDS + w] = 0;
    }
}

static void int_pack_avx512(const float *y, const float *M, unsigned kb, size_t m, size_t B,
                            uint64_t *planes)
{
    if (!int_ok(kb, B)) {
        nf_kernels_scalar.int_pack(y, M, kb, m, B, planes);
        return;
    }
    switch (kb) { /* constant kb: the plane loops unroll */
    case 2: int_pack_impl(y, M, 2, m, B, planes); break;
    case 3: int_pack_impl(y, M, 3, m, B, planes); break;
    default: int_pack_impl(y, M, 4, m, B, planes); break;
    }
}

/* ---- int_finish ----
 *
 * v = sum_p 2^p c_p over the kb counters of kc planes: when the largest
 * sum (2^kb - 1)(2^kc - 1) fits a byte (kb + kc <= 8), each counter plane's
 * 64 bits are the mask of one masked byte add of its weight 2^(p + t), 64
 * elements per add. Otherwise the counters are first added as bit-sliced
 * numbers (full adders by vpternlog on 512 positions), which leaves P <= 20
 * planes, decoded by masked 16-bit adds, 32 elements each (planes 16 and up
 * into a second accumulator).
 *
 * r = (float)((double)s * (double)v) is computed as the float product
 * (float)v * s: |v| < 2^20, so (float)v is exact and the double product of
 * a float and v (at most 24 + 20 significant bits, far from double's
 * overflow and underflow) is exact, and rounding it once to float is
 * rounding the exact product once, which is what the float multiply does:
 * the same bits, Inf (overflow, or s = Inf) and NaN (Inf * 0) included.
 */

#define INT_P_MAX 20 /* P for kb = 4, kc = 16 */

static unsigned int_sum_planes(unsigned kb, unsigned kc)
{
    const uint64_t top = ((1ull << kb) - 1) * ((1ull << kc) - 1);
    unsigned P = 0;
    while (P < 64 && (top >> P) != 0)
        P++;
    return P;
}

/* r of sixteen elements at j: (float)(v - nL) * s; mk all ones (a
 * constant) except in the tail; streamed with nt (r + j then 64-byte
 * aligned). */
AI void int_store16(float *r, size_t j, __mmask16 mk, __m512i v, __m512i nL, __m512 sv, int nt)
{
    const __m512 rv = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(v, nL)), sv);
    if (nt && mk == 0xFFFF)
        _mm512_stream_ps(r + j, rv);
    else
        _mm512_mask_storeu_ps(r + j, mk, rv);
}

/* Results of elements j .. j+63 from their values as 64 bytes (small) or
 * as two vectors of 32 uint16 plus the high parts (v16[2], hi[2]); scales
 * s0 (first 32) and s1. */
AI void int_out64(float *r, size_t j, size_t m, __m512i by, const __m512i v16[2],
                  const __m512i hi[2], int has_hi, __m512 s0, __m512 s1, __m512i nL, int small,
                  int full, int nt)
{
    __m512i v[4];
    if (small) {
        v[0] = _mm512_cvtepu8_epi32(_mm512_castsi512_si128(by));
        v[1] = _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(by, 1));
        v[2] = _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(by, 2));
        v[3] = _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(by, 3));
    } else {
        #pragma GCC unroll 2
        for (unsigned h = 0; h < 2; h++) {
            v[2 * h] = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(v16[h]));
            v[2 * h + 1] = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(v16[h], 1));
            if (has_hi) {
                v[2 * h] = _mm512_add_epi32(v[2 * h], _mm512_slli_epi32(_mm512_cvtepu16_epi32(
                                                          _mm512_castsi512_si256(hi[h])), 16));
                v[2 * h + 1] = _mm512_add_epi32(v[2 * h + 1], _mm512_slli_epi32(_mm512_cvtepu16_epi32(
                                                                  _mm512_extracti64x4_epi64(hi[h], 1)), 16));
            }
        }
    }
    #pragma GCC unroll 4
    for (unsigned q = 0; q < 4; q++) {
        const __mmask16 mk = full ? (__mmask16)0xFFFF : m - j > 16 * q ? tail16(m - j - 16 * q) : 0;
        if (full || mk)
            int_store16(r, j + 16 * q, mk, v[q], nL, q < 2 ? s0 : s1, nt);
    }
}

/* Bit-sliced sum of line l's counters: plane w (8 words) at sw + 8 w, w < P. */
static void int_sum_line(const uint64_t *cnt, unsigned kc, unsigned kb, size_t l, unsigned P,
                         uint64_t *sw)
{
    const __m512i *c = (const __m512i *)(cnt + l * kb * kc * NF_LINE_WORDS);
    const __m512i zero = _mm512_setzero_si512();
    __m512i S[INT_P_MAX];
    for (unsigned w = 0; w < P; w++)
        S[w] = w < kc ? _mm512_load_si512(c + w) : zero;
    for (unsigned p = 1; p < kb; p++) {
        __m512i carry = zero;
        for (unsigned t = 0; t < kc; t++) {
            __m512i x = S[p + t], b = _mm512_load_si512(c + p * kc + t);
            S[p + t] = XOR3(x, b, carry);
            carry = MAJ(x, b, carry);
        }
        for (unsigned w = p + kc; w < P; w++) { /* the sums of each prefix of counters */
            __m512i x = S[w];                    /* stay below 2^P: no carry leaves */
            S[w] = _mm512_xor_si512(x, carry);
            carry = _mm512_and_si512(x, carry);
        }
    }
    for (unsigned w = 0; w < P; w++)
        _mm512_store_si512(sw + w * NF_LINE_WORDS, S[w]);
}

AI void int_finish_impl(float *r, const uint64_t *cnt, unsigned kc, const float *M, unsigned kb,
                        size_t m, size_t B, unsigned n, int small, int nt)
{
    const __m512i nL = _mm512_set1_epi32((int)(n * nf_int_levels(kb)));
    const unsigned lgB = (unsigned)__builtin_ctzll(B), P = small ? 0 : int_sum_planes(kb, kc);
    uint64_t sw[INT_P_MAX * NF_LINE_WORDS] __attribute__((aligned(64)));
    float s0 = 0.0f, s1 = 0.0f, inv;
    for (size_t l = 0; l * NF_LINE_BITS < m; l++) {
        const uint64_t *c = cnt + l * kb * kc * NF_LINE_WORDS;
        if (!small)
            int_sum_line(cnt, kc, kb, l, P, sw);
        for (unsigned w = 0; w < NF_LINE_WORDS && l * NF_LINE_BITS + 64 * w < m; w++) {
            const size_t j = l * NF_LINE_BITS + 64 * w;
            if ((j & (B - 1)) == 0) /* a block starts here (every word when B = 32) */
                nf_int_scale(M[j >> lgB], kb, &s0, &inv);
            if (B == 32 && m - j > 32)
                nf_int_scale(M[(j + 32) >> lgB], kb, &s1, &inv);
            else
                s1 = s0;
            __m512i by = _mm512_setzero_si512(), v16[2], hi[2];
            if (small) { /* plane t of counter p: weight 2^(p + t) */
                #pragma GCC unroll 4
                for (unsigned p = 0; p < kb; p++)
                    for (unsigned t = 0; t < kc; t++)
                        by = _mm512_mask_add_epi8(by, (__mmask64)c[(p * kc + t) * NF_LINE_WORDS + w],
                                                  by, _mm512_set1_epi8((char)(1 << (p + t))));
            } else {
                v16[0] = v16[1] = hi[0] = hi[1] = _mm512_setzero_si512();
                for (unsigned x = 0; x < P; x++) {
                    const uint64_t bits = sw[x * NF_LINE_WORDS + w];
                    const __m512i wt = _mm512_set1_epi16((short)(1u << (x % 16)));
                    __m512i *acc = x < 16 ? v16 : hi;
                    acc[0] = _mm512_mask_add_epi16(acc[0], (__mmask32)bits, acc[0], wt);
                    acc[1] = _mm512_mask_add_epi16(acc[1], (__mmask32)(bits >> 32), acc[1], wt);
                }
            }
            const __m512 sv0 = _mm512_set1_ps(s0), sv1 = _mm512_set1_ps(s1);
            if (m - j >= 64)
                int_out64(r, j, m, by, v16, hi, P > 16, sv0, sv1, nL, small, 1, nt);
            else
                int_out64(r, j, m, by, v16, hi, P > 16, sv0, sv1, nL, small, 0, nt);
        }
    }
    if (nt)
        _mm_sfence();
}

static void int_finish_avx512(float *r, const uint64_t *cnt, unsigned kc, const float *M,
                              unsigned kb, size_t m, size_t B, unsigned n, int stream)
{
    if (!int_ok(kb, B) || kc < 1 || kc > NF_COUNT_PLANES_MAX || n > 65535) {
        nf_kernels_scalar.int_finish(r, cnt, kc, M, kb, m, B, n, 0);
        return;
    }
    const int nt = stream && ((uintptr_t)r & 63) == 0;
#define INT_FIN(KB, SMALL) nt ? int_finish_impl(r, cnt, kc, M, KB, m, B, n, SMALL, 1) \
                              : int_finish_impl(r, cnt, kc, M, KB, m, B, n, SMALL, 0)
    if (kb + kc > 8)
        INT_FIN(kb, 0);
    else if (kb == 2)
        INT_FIN(2, 1);
    else if (kb == 3)
        INT_FIN(3, 1);
    else
        INT_FIN(4, 1);
#undef INT_FIN
}

const nf_kernels_t nf_kernels_avx512 = {
    .isa = NF_ISA_AVX512,
    .name = "avx512",
    .abs_sum = abs_sum_avx512,
    .bin_pack = bin_pack_avx512,
    .bin_pack_ef = bin_pack_ef_avx512,
    .bin_finish = bin_finish_avx512,
    .ter_pack = ter_pack_avx512,
    .ter_y_ef = ter_y_ef_avx512,
    .ter_finish = ter_finish_avx512,
    .count_sum = count_sum_avx512,
    .count_merge = count_merge_avx512,
    .sum_f32 = sum_f32_avx512,
    .bf16_pack = bf16_pack_avx512,
    .sum_bf16 = sum_bf16_avx512,
    .sum_bf16_f32 = sum_bf16_f32_avx512,
    .int_y_ef = int_y_ef_avx512,
    .int_pack = int_pack_avx512,
    .int_finish = int_finish_avx512,
};

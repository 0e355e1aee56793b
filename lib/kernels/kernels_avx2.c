/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AVX2 kernels. Built only with this ISA's flags; reached only through
 * nf_kernels_for() after cpuid said yes. Bit-exact with the scalar reference:
 * 16 elements per step keep element k in lane k % 16 of the four double lane
 * accumulators; tails use vmaskmov loads and stores (masked-off lanes read 0).
 */
#include "config.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "nf_kernels.h"

#define AI __attribute__((always_inline)) static inline

/* Vector paths hold counts in int32 lanes: n - 2c must fit. */
#define COUNT_N_MAX (1u << 30)

/* All-ones in the first min(left, 8) lanes. */
AI __m256i tail8(size_t left)
{
    int n = left >= 8 ? 8 : (int)left;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

AI __m256 load8(const float *p, __m256i mk, int full)
{
    return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mk);
}

AI void store8(float *p, __m256i mk, int full, __m256 v)
{
    if (full)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, mk, v);
}

/* y = x + e, or exactly x when there is no e. */
AI __m256 load_y(const float *x, const float *e, size_t j, __m256i mk, int full, int has_e)
{
    __m256 y = load8(x + j, mk, full);
    if (has_e)
        y = _mm256_add_ps(y, load8(e + j, mk, full));
    return y;
}

AI __m256 abs8(__m256 v)
{
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

/* Double lane sums: acc[0..3] hold lanes 0-3, 4-7, 8-11, 12-15. Eight floats
 * starting at lane `half` * 8 go to acc[2*half] and acc[2*half+1]. Adding
 * +0.0 for masked-off elements is exact (lanes are never -0.0). */
AI void lane_add(__m256d acc[4], unsigned half, __m256 v)
{
    acc[2 * half] = _mm256_add_pd(acc[2 * half], _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    acc[2 * half + 1] = _mm256_add_pd(acc[2 * half + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

static double lane_fold(const __m256d acc[4])
{
    double lane[NF_LANES];
    #pragma GCC unroll 4
    for (unsigned i = 0; i < 4; i++)
        _mm256_storeu_pd(lane + 4 * i, acc[i]);
    for (unsigned w = NF_LANES / 2; w >= 1; w /= 2)
        for (unsigned i = 0; i < w; i++)
            lane[i] += lane[i + w];
    return lane[0];
}

AI void acc_zero(__m256d acc[4])
{
    #pragma GCC unroll 4
    for (unsigned i = 0; i < 4; i++)
        acc[i] = _mm256_setzero_pd();
}

static void zero_pad(uint64_t *bits, size_t m, size_t nw)
{
    size_t end = nf_lines(m) * NF_LINE_WORDS;
    if (nw < end)
        memset(bits + nw, 0, (end - nw) * sizeof(*bits));
}

/* ---- abs_sum ---- */

AI double abs_sum_impl(const float *x, const float *e, size_t m, int has_e)
{
    __m256d acc[4];
    acc_zero(acc);
    size_t j = 0;
    for (; j + 16 <= m; j += 16) {
        lane_add(acc, 0, abs8(load_y(x, e, j, _mm256_setzero_si256(), 1, has_e)));
        lane_add(acc, 1, abs8(load_y(x, e, j + 8, _mm256_setzero_si256(), 1, has_e)));
    }
    #pragma GCC unroll 2
    for (unsigned h = 0; h < 2; h++) {
        if (j + 8 * h >= m)
            break;
        lane_add(acc, h, abs8(load_y(x, e, j + 8 * h, tail8(m - j - 8 * h), 0, has_e)));
    }
    return lane_fold(acc);
}

static double abs_sum_avx2(const float *x, const float *e, size_t m)
{
    return e ? abs_sum_impl(x, e, m, 1) : abs_sum_impl(x, NULL, m, 0);
}

/* ---- bin_pack ---- */

AI uint64_t bin_word(const float *x, const float *e, size_t j, size_t left, __m256d acc[4],
                     int full, int has_e)
{
    uint64_t word = 0;
    #pragma GCC unroll 8
    for (unsigned q = 0; q < 8; q++) {
        if (!full && q * 8 >= left)
            break;
        __m256 y = load_y(x, e, j + q * 8, full ? _mm256_setzero_si256() : tail8(left - q * 8),
                          full, has_e);
        word |= (uint64_t)(unsigned)_mm256_movemask_ps(y) << (q * 8);
        lane_add(acc, q & 1, abs8(y));
    }
    return word;
}

AI double bin_pack_impl(const float *x, const float *e, size_t m, uint64_t *bits, int has_e)
{
    __m256d acc[4];
    acc_zero(acc);
    size_t w = 0;
    for (; (w + 1) * 64 <= m; w++)
        bits[w] = bin_word(x, e, w * 64, 64, acc, 1, has_e);
    if (w * 64 < m) {
        bits[w] = bin_word(x, e, w * 64, m - w * 64, acc, 0, has_e);
        w++;
    }
    zero_pad(bits, m, w);
    return lane_fold(acc);
}

static double bin_pack_avx2(const float *x, const float *e, size_t m, uint64_t *bits)
{
    return e ? bin_pack_impl(x, e, m, bits, 1) : bin_pack_impl(x, NULL, m, bits, 0);
}

/* ---- bin_pack_ef ---- */

AI uint64_t bin_word_ef(const float *x, const float *yprev, __m256 av, __m256 dv, float *ynew,
                        size_t j, size_t left, __m256d acc[4], int full, int nt)
{
    const __m256 signbit = _mm256_set1_ps(-0.0f);
    uint64_t word = 0;
    #pragma GCC unroll 8
    for (unsigned q = 0; q < 8; q++) {
        if (!full && q * 8 >= left)
            break;
        size_t i = j + q * 8;
        __m256i mk = full ? _mm256_setzero_si256() : tail8(left - q * 8);
        __m256 p = load8(yprev + i, mk, full);
        /* p - a where the sign bit is clear, p + a where set: p - (a with p's sign). */
        __m256 e = _mm256_sub_ps(p, _mm256_or_ps(av, _mm256_and_ps(p, signbit)));
        __m256 y = _mm256_add_ps(load8(x + i, mk, full), _mm256_mul_ps(dv, e));
        if (!full) /* lanes past the end must add nothing and pack no sign */
            y = _mm256_and_ps(y, _mm256_castsi256_ps(mk));
        if (full && nt)
            _mm256_stream_ps(ynew + i, y);
        else
            store8(ynew + i, mk, full, y);
        word |= (uint64_t)(unsigned)_mm256_movemask_ps(y) << (q * 8);
        lane_add(acc, q & 1, abs8(y));
    }
    return word;
}

AI double bin_pack_ef_impl(const float *x, const float *yprev, float aprev, float decay,
                           float *ynew, size_t m, uint64_t *bits, int nt)
{
    __m256d acc[4];
    const __m256 av = _mm256_set1_ps(aprev), dv = _mm256_set1_ps(decay);
    acc_zero(acc);
    size_t w = 0;
    for (; (w + 1) * 64 <= m; w++)
        bits[w] = bin_word_ef(x, yprev, av, dv, ynew, w * 64, 64, acc, 1, nt);
    if (w * 64 < m) {
        bits[w] = bin_word_ef(x, yprev, av, dv, ynew, w * 64, m - w * 64, acc, 0, nt);
        w++;
    }
    if (nt)
        _mm_sfence();
    zero_pad(bits, m, w);
    return lane_fold(acc);
}

static double bin_pack_ef_avx2(const float *x, const float *yprev, float aprev, float decay,
                               float *ynew, size_t m, uint64_t *bits, int stream)
{
    if (stream && ((uintptr_t)ynew & 31) == 0)
        return bin_pack_ef_impl(x, yprev, aprev, decay, ynew, m, bits, 1);
    return bin_pack_ef_impl(x, yprev, aprev, decay, ynew, m, bits, 0);
}

/* ---- ter_y_ef ---- */

AI void ter_y8(const float *x, const float *yprev, __m256 tv, __m256 ntv, __m256 bv, __m256 dv,
               float *ynew, size_t i, __m256i mk, int full, __m256d acc[4], unsigned half,
               int nt)
{
    __m256 p = load8(yprev + i, mk, full);
    __m256 gt = _mm256_cmp_ps(p, tv, _CMP_GT_OQ), lt = _mm256_cmp_ps(p, ntv, _CMP_LT_OQ);
    __m256 e = _mm256_blendv_ps(p, _mm256_sub_ps(p, bv), gt);
    e = _mm256_blendv_ps(e, _mm256_add_ps(p, bv), lt);
    __m256 y = _mm256_add_ps(load8(x + i, mk, full), _mm256_mul_ps(dv, e));
    if (!full) /* lanes past the end add nothing */
        y = _mm256_and_ps(y, _mm256_castsi256_ps(mk));
    if (full && nt)
        _mm256_stream_ps(ynew + i, y);
    else
        store8(ynew + i, mk, full, y);
    lane_add(acc, half, abs8(y));
}

AI double ter_y_ef_impl(const float *x, const float *yprev, float tprev, float bprev,
                        float decay, float *ynew, size_t m, int nt)
{
    __m256d acc[4];
    const __m256 tv = _mm256_set1_ps(tprev), ntv = _mm256_set1_ps(-tprev);
    const __m256 bv = _mm256_set1_ps(bprev), dv = _mm256_set1_ps(decay);
    const __m256i none = _mm256_setzero_si256();
    acc_zero(acc);
    size_t j = 0;
    for (; j + 16 <= m; j += 16) {
        ter_y8(x, yprev, tv, ntv, bv, dv, ynew, j, none, 1, acc, 0, nt);
        ter_y8(x, yprev, tv, ntv, bv, dv, ynew, j + 8, none, 1, acc, 1, nt);
    }
    for (unsigned half = 0; j < m; j += 8, half++)
        ter_y8(x, yprev, tv, ntv, bv, dv, ynew, j, tail8(m - j), 0, acc, half, nt);
    if (nt)
        _mm_sfence();
    return lane_fold(acc);
}

static double ter_y_ef_avx2(const float *x, const float *yprev, float tprev, float bprev,
                            float decay, float *ynew, size_t m, int stream)
{
    if (stream && ((uintptr_t)ynew & 31) == 0)
        return ter_y_ef_impl(x, yprev, tprev, bprev, decay, ynew, m, 1);
    return ter_y_ef_impl(x, yprev, tprev, bprev, decay, ynew, m, 0);
}

/* ---- counters -> values, 32 elements at a time ---- */

/* Counter values of elements j .. j+31 (j a multiple of 32) into c[0..3],
 * Horner from the top plane down: broadcast the plane's 32 bits, pick each
 * lane's bit with a compare (true = -1, so subtracting it adds 1). */
AI void count32(const uint64_t *cnt, unsigned k, size_t j, __m256i c[4])
{
    const unsigned char *base = (const unsigned char *)cnt
        + (j / NF_LINE_BITS) * k * NF_LINE_BYTES + (j % NF_LINE_BITS) / 8;
    const __m256i sel0 = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    #pragma GCC unroll 4
    for (unsigned q = 0; q < 4; q++)
        c[q] = _mm256_setzero_si256();
    for (unsigned p = k; p-- > 0;) {
        uint32_t bw;
        memcpy(&bw, base + p * NF_LINE_BYTES, sizeof(bw));
        __m256i b = _mm256_set1_epi32((int)bw);
        #pragma GCC unroll 4
        for (unsigned q = 0; q < 4; q++) {
            __m256i sel = _mm256_slli_epi32(sel0, (int)(8 * q));
            c[q] = _mm256_add_epi32(c[q], c[q]);
            c[q] = _mm256_sub_epi32(c[q], _mm256_cmpeq_epi32(_mm256_and_si256(b, sel), sel));
        }
    }
}

AI uint32_t load32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* Small counters (k <= 4): the 4 planes' bytes for 8 elements are gathered
 * into one dword per lane (byte p = plane p), each lane shifts its own bit
 * to the bottom of every byte, and one multiply by 0x01020408 collects the
 * four bytes (weights 1, 2, 4, 8) into bits 24..31; the cross products stay
 * below bit 21 or above bit 31 for bytes up to 2. Same values as count32. */
AI __m256i gather_planes(const uint64_t *cnt, unsigned k, size_t j)
{
    const unsigned char *base = (const unsigned char *)cnt
        + (j / NF_LINE_BITS) * k * NF_LINE_BYTES + (j % NF_LINE_BITS) / 8;
    /* planes into dwords 0..3 straight from the loads: a stack array reloaded
     * as 16 bytes would stall on store forwarding */
    __m128i d = k ? _mm_cvtsi32_si128((int)load32(base)) : _mm_setzero_si128();
    if (k > 1)
        d = _mm_insert_epi32(d, (int)load32(base + NF_LINE_BYTES), 1);
    if (k > 2)
        d = _mm_insert_epi32(d, (int)load32(base + 2 * NF_LINE_BYTES), 2);
    if (k > 3)
        d = _mm_insert_epi32(d, (int)load32(base + 3 * NF_LINE_BYTES), 3);
    return _mm256_broadcastsi128_si256(d);
}

/* Block q's bits: byte p of every lane's dword = that lane's bit of plane p. */
AI __m256i plane_bytes(__m256i dv, unsigned q)
{
    /* every dword <- bytes q, 4+q, 8+q, 12+q: byte q of planes 0..3 */
    const __m256i pick = _mm256_set1_epi32((int)(0x0C080400u + 0x01010101u * q));
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(dv, pick), lane),
                            _mm256_set1_epi32(0x01010101));
}

/* Bytes b0..b3 of each dword (each below 4) -> b0 + 2 b1 + 4 b2 + 8 b3. */
AI __m256i weigh_bytes(__m256i w)
{
    return _mm256_srli_epi32(_mm256_mullo_epi32(w, _mm256_set1_epi32(0x01020408)), 24);
}

AI void count32_small(const uint64_t *cnt, unsigned k, size_t j, __m256i c[4])
{
    const __m256i dv = gather_planes(cnt, k, j);
#pragma GCC unroll 4
    for (unsigned q = 0; q < 4; q++)
        c[q] = weigh_bytes(plane_bytes(dv, q));
}

/* P - M + 7 for k <= 3 in one multiply: byte p holds P_p + (1 - M_p), in
 * 0..2, and the weights 1, 2, 4 of planes 0..2 add up the bias 7. */
AI void diff32_small(const uint64_t *cntp, const uint64_t *cntm, unsigned k, size_t j,
                     __m256i idx[4])
{
    const __m256i dp = gather_planes(cntp, k, j), dm = gather_planes(cntm, k, j);
    const __m256i ones3 = _mm256_set1_epi32(0x00010101);
#pragma GCC unroll 4
    for (unsigned q = 0; q < 4; q++)
        idx[q] = weigh_bytes(_mm256_add_epi32(plane_bytes(dp, q),
                                              _mm256_xor_si256(plane_bytes(dm, q), ones3)));
}

/* (float)(s * (double)v) for 8 int32 v, rounded once. */
AI __m256 scale8(__m256i v, __m256d s)
{
    __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(s, _mm256_cvtepi32_pd(_mm256_castsi256_si128(v))));
    __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(s, _mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1))));
    return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
}

/* Results for indices 0..15 from a table built with the reference's own
 * formula: exact by construction, two vpermps and a blend on index bit 3. */
typedef struct {
    __m256 lo, hi;
} tbl_t;

AI __m256 tbl_get(const tbl_t *t, __m256i idx)
{
    __m256 a = _mm256_permutevar8x32_ps(t->lo, idx), b = _mm256_permutevar8x32_ps(t->hi, idx);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

static tbl_t tbl_from(const float t[16])
{
    return (tbl_t){_mm256_loadu_ps(t), _mm256_loadu_ps(t + 8)};
}

/* ---- bin_finish ---- */

/* Eight elements from j: left >= 8 unless this is the tail. */
AI void bin_block(float *r, const float *x, float *e, size_t j, size_t left, __m256i c,
                  __m256i nv, __m256d av, __m256 aiv, const tbl_t *tbl, int has_e, int small,
                  int full)
{
    __m256i mk = full || left >= 8 ? _mm256_set1_epi32(-1) : tail8(left);
    __m256 rv = small ? tbl_get(tbl, c) : scale8(_mm256_sub_epi32(nv, _mm256_add_epi32(c, c)), av);
    if (has_e) { /* before r: x may alias r */
        __m256 y = load_y(x, e, j, mk, full, 1);
        __m256 en = _mm256_blendv_ps(_mm256_sub_ps(y, aiv), _mm256_add_ps(y, aiv), y);
        store8(e + j, mk, full, en);
    }
    store8(r + j, mk, full, rv);
}

AI void bin_finish_impl(float *r, const float *x, float *e, const uint64_t *cnt, unsigned k,
                        size_t m, unsigned n, double a, float ai, int has_e, int small)
{
    const __m256i nv = _mm256_set1_epi32((int)n);
    const __m256d av = _mm256_set1_pd(a);
    const __m256 aiv = _mm256_set1_ps(ai);
    tbl_t tbl = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    if (small) { /* k <= 4: entry c is the reference's (float)(a * (double)(n - 2c)) */
        float t[16];
        for (int64_t c = 0; c < 16; c++)
            t[c] = (float)(a * (double)((int64_t)n - 2 * c));
        tbl = tbl_from(t);
    }
    for (size_t j0 = 0; j0 < m; j0 += 32) {
        __m256i c[4];
        if (small)
            count32_small(cnt, k, j0, c);
        else
            count32(cnt, k, j0, c);
        if (j0 + 32 <= m) { /* plain loads and stores: vmaskmov is slow on some CPUs */
            #pragma GCC unroll 4
            for (unsigned q = 0; q < 4; q++)
                bin_block(r, x, e, j0 + 8 * q, 8, c[q], nv, av, aiv, &tbl, has_e, small, 1);
        } else {
            for (unsigned q = 0; q < 4 && j0 + 8 * q < m; q++)
                bin_block(r, x, e, j0 + 8 * q, m - j0 - 8 * q, c[q], nv, av, aiv, &tbl, has_e, small, 0);
        }
    }
}

static void bin_finish_avx2(float *r, const float *x, float *e, const uint64_t *cnt,
                            unsigned k, size_t m, unsigned n, double a, float ai, int stream)
{
    (void)stream; /* r is written through the caches */
    if (k > NF_COUNT_PLANES_MAX || n > COUNT_N_MAX) {
        nf_kernels_scalar.bin_finish(r, x, e, cnt, k, m, n, a, ai, 0);
        return;
    }
    if (k <= 4) {
        if (e)
            bin_finish_impl(r, x, e, cnt, k, m, n, a, ai, 1, 1);
        else
            bin_finish_impl(r, NULL, NULL, cnt, k, m, n, a, ai, 0, 1);
    } else {
        if (e)
            bin_finish_impl(r, x, e, cnt, k, m, n, a, ai, 1, 0);
        else
            bin_finish_impl(r, NULL, NULL, cnt, k, m, n, a, ai, 0, 0);
    }
}

/* ---- ter_pack ---- */

AI uint64_t ter_word(const float *x, const float *e, size_t j, size_t left, __m256 tv,
                     __m256 ntv, __m256d acc[4], uint64_t *mw, size_t *cnt, int full, int has_e)
{
    uint64_t pw = 0;
    #pragma GCC unroll 8
    for (unsigned q = 0; q < 8; q++) {
        if (!full && q * 8 >= left)
            break;
        __m256i mk = full ? _mm256_set1_epi32(-1) : tail8(left - q * 8);
        __m256 y = load_y(x, e, j + q * 8, mk, full, has_e);
        __m256 gp = _mm256_and_ps(_mm256_cmp_ps(y, tv, _CMP_GT_OQ), _mm256_castsi256_ps(mk));
        __m256 gm = _mm256_and_ps(_mm256_cmp_ps(y, ntv, _CMP_LT_OQ), _mm256_castsi256_ps(mk));
        __m256 g = _mm256_or_ps(gp, gm);
        pw |= (uint64_t)(unsigned)_mm256_movemask_ps(gp) << (q * 8);
        *mw |= (uint64_t)(unsigned)_mm256_movemask_ps(gm) << (q * 8);
        *cnt += (size_t)__builtin_popcount((unsigned)_mm256_movemask_ps(g));
        lane_add(acc, q & 1, _mm256_and_ps(abs8(y), g));
    }
    return pw;
}

AI double ter_pack_impl(const float *x, const float *e, size_t m, float t, uint64_t *plus,
                        uint64_t *minus, size_t *nin, int has_e)
{
    const __m256 tv = _mm256_set1_ps(t), ntv = _mm256_set1_ps(-t);
    __m256d acc[4];
    acc_zero(acc);
    size_t cnt = 0, w = 0;
    for (; (w + 1) * 64 <= m; w++) {
        uint64_t mw = 0;
        plus[w] = ter_word(x, e, w * 64, 64, tv, ntv, acc, &mw, &cnt, 1, has_e);
        minus[w] = mw;
    }
    if (w * 64 < m) {
        uint64_t mw = 0;
        plus[w] = ter_word(x, e, w * 64, m - w * 64, tv, ntv, acc, &mw, &cnt, 0, has_e);
        minus[w] = mw;
        w++;
    }
    zero_pad(plus, m, w);
    zero_pad(minus, m, w);
    *nin = cnt;
    return lane_fold(acc);
}

static double ter_pack_avx2(const float *x, const float *e, size_t m, float t,
                            uint64_t *plus, uint64_t *minus, size_t *nin)
{
    return e ? ter_pack_impl(x, e, m, t, plus, minus, nin, 1)
             : ter_pack_impl(x, NULL, m, t, plus, minus, nin, 0);
}

/* ---- ter_finish ---- */

/* Eight elements from j with v = P - M: left >= 8 unless this is the tail. */
AI void ter_block(float *r, const float *x, float *e, size_t j, size_t left, __m256i v,
                  __m256d bv, __m256 tv, __m256 ntv, __m256 biv, const tbl_t *tbl, int has_e,
                  int small, int full)
{
    __m256i mk = full || left >= 8 ? _mm256_set1_epi32(-1) : tail8(left);
    __m256 rv = small ? tbl_get(tbl, v) : scale8(v, bv); /* small: v is P - M + 7 */
    if (has_e) {
        __m256 y = load_y(x, e, j, mk, full, 1);
        /* plus wins when both gates hold (t < 0), as in the reference */
        __m256 en = _mm256_blendv_ps(y, _mm256_add_ps(y, biv), _mm256_cmp_ps(y, ntv, _CMP_LT_OQ));
        en = _mm256_blendv_ps(en, _mm256_sub_ps(y, biv), _mm256_cmp_ps(y, tv, _CMP_GT_OQ));
        store8(e + j, mk, full, en);
    }
    store8(r + j, mk, full, rv);
}

AI void ter_finish_impl(float *r, const float *x, float *e, const uint64_t *cntp,
                        const uint64_t *cntm, unsigned k, size_t m, double b, float t,
                        float bi, int has_e, int small)
{
    const __m256d bv = _mm256_set1_pd(b);
    const __m256 tv = _mm256_set1_ps(t), ntv = _mm256_set1_ps(-t), biv = _mm256_set1_ps(bi);
    tbl_t tbl = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    if (small) { /* k <= 3: v = P - M in [-7, 7], entry v + 7 */
        float tt[16];
        for (int64_t i = 0; i < 16; i++)
            tt[i] = (float)(b * (double)(i - 7));
        tbl = tbl_from(tt);
    }
    for (size_t j0 = 0; j0 < m; j0 += 32) {
        __m256i cp[4], cm[4];
        if (small) {
            diff32_small(cntp, cntm, k, j0, cp);
#pragma GCC unroll 4
            for (unsigned q = 0; q < 4; q++)
                cm[q] = _mm256_setzero_si256();
        } else {
            count32(cntp, k, j0, cp);
            count32(cntm, k, j0, cm);
        }
        if (j0 + 32 <= m) {
            #pragma GCC unroll 4
            for (unsigned q = 0; q < 4; q++)
                ter_block(r, x, e, j0 + 8 * q, 8, _mm256_sub_epi32(cp[q], cm[q]), bv, tv, ntv,
                          biv, &tbl, has_e, small, 1);
        } else {
            for (unsigned q = 0; q < 4 && j0 + 8 * q < m; q++)
                ter_block(r, x, e, j0 + 8 * q, m - j0 - 8 * q, _mm256_sub_epi32(cp[q], cm[q]), bv,
                          tv, ntv, biv, &tbl, has_e, small, 0);
        }
    }
}

static void ter_finish_avx2(float *r, const float *x, float *e, const uint64_t *cntp,
                            const uint64_t *cntm, unsigned k, size_t m, double b,
                            float t, float bi)
{
    if (k > NF_COUNT_PLANES_MAX) {
        nf_kernels_scalar.ter_finish(r, x, e, cntp, cntm, k, m, b, t, bi);
        return;
    }
    if (e) {
        if (k <= 3)
            ter_finish_impl(r, x, e, cntp, cntm, k, m, b, t, bi, 1, 1);
        else
            ter_finish_impl(r, x, e, cntp, cntm, k, m, b, t, bi, 1, 0);
    } else {
        if (k <= 3)
            ter_finish_impl(r, NULL, NULL, cntp, cntm, k, m, b, t, bi, 0, 1);
        else
            ter_finish_impl(r, NULL, NULL, cntp, cntm, k, m, b, t, bi, 0, 0);
    }
}

/* ---- bit-sliced counters, half a line (256 positions) per vector ---- */

AI __m256i xor3(__m256i a, __m256i b, __m256i c)
{
    return _mm256_xor_si256(_mm256_xor_si256(a, b), c);
}

AI __m256i maj(__m256i a, __m256i b, __m256i c)
{
    return _mm256_or_si256(_mm256_and_si256(a, b), _mm256_and_si256(c, _mm256_xor_si256(a, b)));
}

/* Up to 7 one-bit inputs -> a 3-bit sum with four full adders; o is the word
 * offset of the half line. */
AI void csa7(const uint64_t *const *in, unsigned g, size_t o, __m256i s[3])
{
    __m256i v[7];
    #pragma GCC unroll 7
    for (unsigned i = 0; i < 7; i++)
        v[i] = i < g ? _mm256_load_si256((const __m256i *)(in[i] + o)) : _mm256_setzero_si256();
    __m256i s1 = xor3(v[0], v[1], v[2]), c1 = maj(v[0], v[1], v[2]);
    __m256i s2 = xor3(v[3], v[4], v[5]), c2 = maj(v[3], v[4], v[5]);
    __m256i c3 = maj(s1, s2, v[6]);
    s[0] = xor3(s1, s2, v[6]);
    s[1] = xor3(c1, c2, c3);
    s[2] = maj(c1, c2, c3);
}

/* Lines per block when more than 7 inputs stream through the counter. */
#define CS_BLOCK 32

static void count_sum_avx2(uint64_t *cnt, unsigned k, const uint64_t *const *in,
                           unsigned nin, size_t nlines)
{
    const __m256i zero = _mm256_setzero_si256();
    for (size_t l0 = 0; l0 < nlines; l0 += CS_BLOCK) {
        size_t l1 = nlines - l0 < CS_BLOCK ? nlines : l0 + CS_BLOCK;
        unsigned g = nin < 7 ? nin : 7;
        for (size_t o = l0 * NF_LINE_WORDS; o < l1 * NF_LINE_WORDS; o += 4) {
            __m256i s[3];
            __m256i *c = (__m256i *)(cnt + (o / NF_LINE_WORDS) * k * NF_LINE_WORDS + o % NF_LINE_WORDS);
            csa7(in, g, o, s);
            for (unsigned p = 0; p < k; p++)
                _mm256_store_si256(c + 2 * p, p < 3 ? s[p] : zero);
        }
        for (unsigned i = g; i < nin; i += 7) {
            unsigned gi = nin - i < 7 ? nin - i : 7;
            for (size_t o = l0 * NF_LINE_WORDS; o < l1 * NF_LINE_WORDS; o += 4) {
                __m256i s[3], carry = zero;
                __m256i *c = (__m256i *)(cnt + (o / NF_LINE_WORDS) * k * NF_LINE_WORDS + o % NF_LINE_WORDS);
                csa7(in + i, gi, o, s);
                for (unsigned p = 0; p < k; p++) {
                    __m256i a = _mm256_load_si256(c + 2 * p), b = p < 3 ? s[p] : zero;
                    _mm256_store_si256(c + 2 * p, xor3(a, b, carry));
                    carry = maj(a, b, carry);
                }
            }
        }
    }
}

static void count_merge_avx2(uint64_t *acc, const uint64_t *add, unsigned k, size_t nlines)
{
    for (size_t l = 0; l < nlines; l++) {
        #pragma GCC unroll 2
        for (unsigned h = 0; h < 2; h++) {
            __m256i carry = _mm256_setzero_si256();
            __m256i *c = (__m256i *)(acc + l * k * NF_LINE_WORDS + 4 * h);
            const __m256i *d = (const __m256i *)(add + l * k * NF_LINE_WORDS + 4 * h);
            for (unsigned p = 0; p < k; p++) {
                __m256i a = _mm256_load_si256(c + 2 * p), b = _mm256_load_si256(d + 2 * p);
                _mm256_store_si256(c + 2 * p, xor3(a, b, carry));
                carry = maj(a, b, carry);
            }
        }
    }
}

/* ---- sum_f32 ---- */

static void sum_f32_avx2(float *out, const float *const *in, unsigned nin, size_t m)
{
    size_t j = 0;
    for (; j + 8 <= m; j += 8) {
        __m256 s = _mm256_loadu_ps(in[0] + j);
        for (unsigned i = 1; i < nin; i++)
            s = _mm256_add_ps(s, _mm256_loadu_ps(in[i] + j));
        _mm256_storeu_ps(out + j, s);
    }
    if (j < m) {
        __m256i mk = tail8(m - j);
        __m256 s = _mm256_maskload_ps(in[0] + j, mk);
        for (unsigned i = 1; i < nin; i++)
            s = _mm256_add_ps(s, _mm256_maskload_ps(in[i] + j, mk));
        _mm256_maskstore_ps(out + j, mk, s);
    }
}

/* ---- bf16 ---- */

/* The top halves of 8 floats' encodings after the reference's rounding (a
 * NaN takes the quiet bit instead), in the low halves of the lanes. */
AI __m256i bf16_round8(__m256i u)
{
    const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7F800000));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), nan);
    return _mm256_srli_epi32(r, 16);
}

/* Sixteen elements from j; left >= 16 except in the tail. */
AI void bf16_pack16(const float *x, uint16_t *out, size_t j, size_t left, int full)
{
    __m256i a = bf16_round8(_mm256_castps_si256(load8(x + j, tail8(left), full)));
    __m256i b = bf16_round8(_mm256_castps_si256(load8(x + j + 8, tail8(left > 8 ? left - 8 : 0), full)));
    /* packus interleaves the 128-bit halves: a0-3 b0-3 a4-7 b4-7 */
    __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
    if (full) {
        _mm256_storeu_si256((__m256i *)(out + j), h);
    } else {
        uint16_t t[16];
        _mm256_storeu_si256((__m256i *)t, h);
        memcpy(out + j, t, left * sizeof(*out));
    }
}

static void bf16_pack_avx2(const float *x, uint16_t *out, size_t m)
{
    size_t j = 0;
    for (; j + 16 <= m; j += 16)
        bf16_pack16(x, out, j, 16, 1);
    if (j < m)
        bf16_pack16(x, out, j, m - j, 0);
}

/* Sixteen bf16 from p (zeros past left) as floats, even elements in ev and
 * odd ones in od: a bf16's bits shifted to the top half are its exact float.
 * Summing in this order needs no shuffle per input. */
AI void bf16_widen16(const uint16_t *p, size_t left, int full, __m256 *ev, __m256 *od)
{
    __m256i v;
    if (full) {
        v = _mm256_loadu_si256((const __m256i *)p);
    } else {
        uint16_t t[16] = {0};
        memcpy(t, p, left * sizeof(*p));
        v = _mm256_loadu_si256((const __m256i *)t);
    }
    *ev = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    *od = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u)));
}

AI void sum_bf16_16(float *out, const float *acc, const uint16_t *const *in, unsigned nin,
                    size_t j, size_t left, int full, int has_acc)
{
    const __m256i mk0 = tail8(left), mk1 = tail8(left > 8 ? left - 8 : 0);
    __m256 ev, od;
    unsigned i = 0;
    if (has_acc) { /* lanes of ev: elements 0 2 4 6 | 8 10 12 14 */
        __m256 lo = load8(acc + j, mk0, full), hi = load8(acc + j + 8, mk1, full);
        __m256 a = _mm256_permute2f128_ps(lo, hi, 0x20), b = _mm256_permute2f128_ps(lo, hi, 0x31);
        ev = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
        od = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    } else {
        bf16_widen16(in[i++] + j, left, full, &ev, &od);
    }
    for (; i < nin; i++) {
        __m256 e, o;
        bf16_widen16(in[i] + j, left, full, &e, &o);
        ev = _mm256_add_ps(ev, e);
        od = _mm256_add_ps(od, o);
    }
    __m256 l = _mm256_unpacklo_ps(ev, od), h = _mm256_unpackhi_ps(ev, od); /* 0-3 8-11, 4-7 12-15 */
    store8(out + j, mk0, full, _mm256_permute2f128_ps(l, h, 0x20));
    store8(out + j + 8, mk1, full, _mm256_permute2f128_ps(l, h, 0x31));
}

AI void sum_bf16_impl(float *out, const float *acc, const uint16_t *const *in, unsigned nin,
                      size_t m, int has_acc)
{
    size_t j = 0;
    for (; j + 16 <= m; j += 16)
        sum_bf16_16(out, acc, in, nin, j, 16, 1, has_acc);
    if (j < m)
        sum_bf16_16(out, acc, in, nin, j, m - j, 0, has_acc);
}

static void sum_bf16_avx2(float *out, const uint16_t *const *in, unsigned nin, size_t m)
{
    sum_bf16_impl(out, NULL, in, nin, m, 0);
}

static void sum_bf16_f32_avx2(float *out, const float *acc, const uint16_t *const *in,
                              unsigned nin, size_t m)
{
    sum_bf16_impl(out, acc, in, nin, m, 1);
}

/* ---- integer routes (int_y_ef, int_pack, int_finish) ---- */

/* Vector paths: 2..4 bits (u = q + L fits a nibble; NaN codes as below) and
 * blocks of whole groups of 32 elements, so that a vector never straddles
 * two blocks; anything else goes to the reference. */
AI int int_ok(unsigned kb, size_t B)
{
    return kb >= 2 && kb <= 4 && B >= NF_INT_BLOCK_MIN && (B & (B - 1)) == 0;
}

/* (float)nf_int_q of 8 lanes through integers, for e = p - s * q: vcvtps2dq
 * rounds the product in the default rounding mode (nearest, ties to even;
 * libnfcoll never changes it), the clamp runs on int32 lanes (integer
 * ports, beside the float ones), and the conversion back gives +0.0 for 0,
 * as (float)(int) does. A product of 2^31 or more in magnitude converts to
 * INT_MIN, so q is -L where the reference has +-L; e is the same: then
 * |p| >= 2^31 s / L, so |s q| <= |p| 2^-28, below half an ulp of p, and
 * p - s q rounds to p either way. */
AI __m256 int_qi8(__m256 y, __m256 inv, __m256i Li, __m256i nLi)
{
    __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(y, inv));
    return _mm256_cvtepi32_ps(_mm256_max_epi32(nLi, _mm256_min_epi32(Li, q)));
}

/* Largest of 8 uint32 below 2^31. */
AI uint32_t hmax8(__m256i v)
{
    __m128i h = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(h);
}

/* Eight elements of int_y_ef from i (has_y: with yprev; has_m: with mprev),
 * the bits of |y| into the running max mx. */
AI void int_y8(const float *x, const float *yprev, float *ynew, size_t i, __m256i mk, int full,
               __m256 sv, __m256 iv, __m256i Li, __m256i nLi, __m256 dv, __m256i *mx, int has_y,
               int has_m, int nt)
{
    __m256 y = load8(x + i, mk, full);
    if (has_y) {
        __m256 p = load8(yprev + i, mk, full), e = p;
        if (has_m) /* p - s * (float)q, as the reference: no FMA */
            e = _mm256_sub_ps(p, _mm256_mul_ps(int_qi8(p, iv, Li, nLi), sv));
        /* x + de, but x + 0 where x is NaN: x's NaN (quieted) whichever
         * operand order the compiler picks for the add. When x and de are
         * both NaN the reference's NaN is its compiler's choice too (GCC at
         * -O2 puts x first, as here; at -O1 de); test_kernels: int_nan_meets_nan */
        const __m256 de = _mm256_and_ps(_mm256_mul_ps(e, dv), _mm256_cmp_ps(y, y, _CMP_ORD_Q));
        y = _mm256_add_ps(y, de);
        if (!full) /* lanes past the end count nothing (s = Inf makes them NaN) */
            y = _mm256_and_ps(y, _mm256_castsi256_ps(mk));
        if (full && nt)
            _mm256_stream_ps(ynew + i, y);
        else
            store8(ynew + i, mk, full, y);
    }
    *mx = _mm256_max_epi32(*mx, _mm256_and_si256(_mm256_castps_si256(y), _mm256_set1_epi32(0x7FFFFFFF)));
}

AI void int_y_ef_impl(const float *x, const float *yprev, const float *mprev, unsigned kb,
                      float decay, float *ynew, size_t m, size_t B, uint32_t *bmax, int has_y,
                      int has_m, int nt)
{
    const int L = (int)nf_int_levels(kb);
    const __m256i Li = _mm256_set1_epi32(L), nLi = _mm256_set1_epi32(-L);
    const __m256 dv = _mm256_set1_ps(decay);
    const __m256i none = _mm256_setzero_si256();
    for (size_t b = 0, j0 = 0; j0 < m; b++, j0 += B) {
        const size_t j1 = m - j0 > B ? j0 + B : m;
        float s = 0.0f, inv = 0.0f;
        if (has_m)
            nf_int_scale(mprev[b], kb, &s, &inv);
        const __m256 sv = _mm256_set1_ps(s), iv = _mm256_set1_ps(inv);
        __m256i mx0 = _mm256_setzero_si256(), mx1 = _mm256_setzero_si256();
        size_t j = j0;
        for (; j + 16 <= j1; j += 16) {
            int_y8(x, yprev, ynew, j, none, 1, sv, iv, Li, nLi, dv, &mx0, has_y, has_m, nt);
            int_y8(x, yprev, ynew, j + 8, none, 1, sv, iv, Li, nLi, dv, &mx1, has_y, has_m, nt);
        }
        for (; j < j1; j += 8) /* the buffer's last block: its last 1..15 */
            int_y8(x, yprev, ynew, j, tail8(j1 - j), 0, sv, iv, Li, nLi, dv, &mx0, has_y, has_m, nt);
        bmax[b] = hmax8(_mm256_max_epi32(mx0, mx1));
    }
    if (nt)
        _mm_sfence();
}

static void int_y_ef_avx2(const float *x, const float *yprev, const float *mprev, unsigned kb,
                          float decay, float *ynew, size_t m, size_t B, uint32_t *bmax,
                          int stream)
{
    if (!int_ok(kb, B)) {
        nf_kernels_scalar.int_y_ef(x, yprev, mprev, kb, decay, ynew, m, B, bmax, 0);
        return;
    }
    const int nt = stream && ((uintptr_t)ynew & 31) == 0;
    if (yprev == NULL)
        int_y_ef_impl(x, NULL, NULL, kb, decay, NULL, m, B, bmax, 0, 0, 0);
    else if (mprev == NULL)
        nt ? int_y_ef_impl(x, yprev, NULL, kb, decay, ynew, m, B, bmax, 1, 0, 1)
           : int_y_ef_impl(x, yprev, NULL, kb, decay, ynew, m, B, bmax, 1, 0, 0);
    else
        nt ? int_y_ef_impl(x, yprev, mprev, kb, decay, ynew, m, B, bmax, 1, 1, 1)
           : int_y_ef_impl(x, yprev, mprev, kb, decay, ynew, m, B, bmax, 1, 1, 0);
}

/* The low kb bits of u = q + L of 32 elements from j (left of them in the
 * buffer, all when full) as 32 bytes in element order. The product is
 * clamped to [-L, L] first (min, then max: the reference's order), then
 * rounded by vcvtps2dq in the default rounding mode (nearest, ties to
 * even, which libnfcoll never changes): rounding and clamping commute, L
 * being an integer, so this is roundevenf's value clamped, for every
 * finite product. Lanes past the end hold L (their y is 0). */
AI __m256i int_u32(const float *y, size_t j, size_t left, __m256 iv, __m256 Lv, __m256 nLv,
                   __m256i Lb, int full)
{
    __m256i q[4];
    #pragma GCC unroll 4
    for (unsigned g = 0; g < 4; g++) {
        __m256 v = full ? _mm256_loadu_ps(y + j + 8 * g)
                 : left > 8 * g ? _mm256_maskload_ps(y + j + 8 * g, tail8(left - 8 * g))
                                : _mm256_setzero_ps();
        v = _mm256_max_ps(nLv, _mm256_min_ps(Lv, _mm256_mul_ps(v, iv)));
        q[g] = _mm256_cvtps_epi32(v);
    }
    /* packs work within 128-bit halves: dwords come out as q0 0-3, q1 0-3,
     * q2 0-3, q3 0-3 | q0 4-7, ...; vpermd puts them in order */
    __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    return _mm256_add_epi8(b, Lb);
}

/* Bit p of each of 32 bytes: shifted to the byte's top bit (a 16-bit shift
 * moves no bit across into a byte's top), then vpmovmskb. */
AI uint32_t byte_bits(__m256i u, unsigned p)
{
    return (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(u, (int)(7 - p)));
}

/* The blocks met in order, 32 elements at a time: the inverse of the block
 * of the next 32 elements (block boundaries are multiples of 32). */
typedef struct {
    size_t next; /* first element of the next block */
    size_t b;    /* that block's index */
} int_blk_t;

AI float int_blk_inv(int_blk_t *k, const float *M, unsigned kb, size_t B, size_t j, float inv)
{
    if (j == k->next) {
        float s;
        nf_int_scale(M[k->b], kb, &s, &inv);
        k->next += B, k->b++;
    }
    return inv;
}

/* One 64-bit word of each of the kb planes, elements j .. j+63 (left of them
 * in the buffer, at least 64 when full; bits past the end are zero). */
AI void int_word(const float *y, const float *M, unsigned kb, size_t B, size_t j, size_t left,
                 int_blk_t *blk, float *inv, __m256 Lv, __m256 nLv, __m256i Lb, uint64_t *w,
                 int full)
{
    *inv = int_blk_inv(blk, M, kb, B, j, *inv);
    __m256i u0 = int_u32(y, j, left, _mm256_set1_ps(*inv), Lv, nLv, Lb, full);
    __m256i u1 = _mm256_setzero_si256();
    if (full || left > 32) {
        *inv = int_blk_inv(blk, M, kb, B, j + 32, *inv);
        u1 = int_u32(y, j + 32, left - 32, _mm256_set1_ps(*inv), Lv, nLv, Lb, full);
    }
    const uint64_t keep = full ? ~0ull : (1ull << left) - 1;
    #pragma GCC unroll 4
    for (unsigned p = 0; p < kb; p++)
        w[p * NF_LINE_WORDS] = ((uint64_t)byte_bits(u1, p) << 32 | byte_bits(u0, p)) & keep;
}

AI void int_pack_impl(const float *y, const float *M, unsigned kb, size_t m, size_t B,
                      uint64_t *planes)
{
    const float L = (float)nf_int_levels(kb);
    const __m256 Lv = _mm256_set1_ps(L), nLv = _mm256_set1_ps(-L);
    const __m256i Lb = _mm256_set1_epi8((char)nf_int_levels(kb));
    int_blk_t blk = {0, 0};
    float inv = 0.0f;
    for (size_t l = 0; l * NF_LINE_BITS < m; l++) {
        uint64_t *pl = planes + l * kb * NF_LINE_WORDS;
        const size_t j0 = l * NF_LINE_BITS;
        unsigned w = 0;
        if (m - j0 >= NF_LINE_BITS) { /* a whole line */
            for (; w < NF_LINE_WORDS; w++)
                int_word(y, M, kb, B, j0 + 64 * w, 64, &blk, &inv, Lv, nLv, Lb, pl + w, 1);
            continue;
        }
        for (; j0 + 64 * w < m; w++) {
            const size_t j = j0 + 64 * w;
            if (m - j >= 64)
                int_word(y, M, kb, B, j, 64, &blk, &inv, Lv, nLv, Lb, pl + w, 1);
            else
                int_word(y, M, kb, B, j, m - j, &blk, &inv, Lv, nLv, Lb, pl + w, 0);
        }
        for (; w < NF_LINE_WORDS; w++) /* the last line's words past the end */
            for (unsigned p = 0; p < kb; p++)
                pl[p * NF_LINE_WORDS + w] = 0;
    }
}

static void int_pack_avx2(const float *y, const float *M, unsigned kb, size_t m, size_t B,
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
 * Per half line (256 elements): the kb counters of kc planes are added
 * with their weights 2^p as bit-sliced numbers (full adders on 256
 * positions at once), which leaves P planes, P the bits of the largest sum
 * (2^kb - 1)(2^kc - 1); each 8 of those planes are transposed to one byte
 * per element (bytes, then the bits of each 8 x 8 block); the bytes are
 * widened to int32, less n L, and scaled.
 *
 * r = (float)((double)s * (double)v) is computed as the float product
 * (float)v * s: |v| < 2^20, so (float)v is exact and the double product of
 * a float and v (at most 24 + 20 significant bits, far from double's
 * overflow and underflow) is exact, and rounding it once to float is
 * rounding the exact product once, which is what the float multiply does:
 * the same bits, Inf (overflow, or s = Inf) and NaN (Inf * 0) included.
 */

#define INT_P_MAX 20 /* P for kb = 4, kc = 16 */
#define HALF (NF_LINE_BITS / 2)

static unsigned int_sum_planes(unsigned kb, unsigned kc)
{
    const uint64_t top = ((1ull << kb) - 1) * ((1ull << kc) - 1);
    unsigned P = 0;
    while (P < 64 && (top >> P) != 0)
        P++;
    return P;
}

/* The counters of half h of line l; bit line i (= p * kc + t within the
 * line) at c[2 * i]. */
AI const __m256i *int_half_cnt(const uint64_t *cnt, unsigned kc, unsigned kb, size_t h0)
{
    return (const __m256i *)(cnt + (h0 / NF_LINE_BITS) * kb * kc * NF_LINE_WORDS) +
           (h0 / HALF) % 2;
}

/* The weighted sum when it fits 8 planes (kc <= 8 - kb), in registers:
 * with kb constant the loops run over 8 - kb planes per counter whatever kc
 * is, the planes past kc zero. */
AI void int_sum8(const __m256i *c, unsigned kc, unsigned kb, __m256i s[8])
{
    const __m256i zero = _mm256_setzero_si256();
    const unsigned KC = 8 - kb;
    #pragma GCC unroll 8
    for (unsigned w = 0; w < 8; w++)
        s[w] = w < kc ? _mm256_load_si256(c + 2 * w) : zero;
    #pragma GCC unroll 4
    for (unsigned p = 1; p < kb; p++) {
        __m256i carry = zero;
        #pragma GCC unroll 8
        for (unsigned t = 0; t < KC; t++) {
            __m256i x = s[p + t], b = t < kc ? _mm256_load_si256(c + 2 * (p * kc + t)) : zero;
            s[p + t] = xor3(x, b, carry);
            carry = maj(x, b, carry);
        }
        #pragma GCC unroll 8
        for (unsigned w = p + KC; w < 8; w++) { /* the sums of each prefix of counters */
            __m256i x = s[w];                    /* stay below 2^8: no carry leaves */
            s[w] = _mm256_xor_si256(x, carry);
            carry = _mm256_and_si256(x, carry);
        }
    }
}

/* Any P (up to INT_P_MAX planes, in memory): plane w into S[w], and zeros
 * up to the next multiple of 8. */
AI void int_sum_any(const __m256i *c, unsigned kc, unsigned kb, unsigned P, __m256i *S)
{
    const __m256i zero = _mm256_setzero_si256();
    for (unsigned w = 0; w < (P + 7) / 8 * 8; w++)
        S[w] = w < kc ? _mm256_load_si256(c + 2 * w) : zero;
    for (unsigned p = 1; p < kb; p++) {
        __m256i carry = zero;
        for (unsigned t = 0; t < kc; t++) {
            __m256i x = S[p + t], b = _mm256_load_si256(c + 2 * (p * kc + t));
            S[p + t] = xor3(x, b, carry);
            carry = maj(x, b, carry);
        }
        for (unsigned w = p + kc; w < P; w++) {
            __m256i x = S[w];
            S[w] = _mm256_xor_si256(x, carry);
            carry = _mm256_and_si256(x, carry);
        }
    }
}

/* An 8 x 8 bit matrix in each 64-bit lane, row i = byte i, transposed
 * (bit j of byte i <-> bit i of byte j; Hacker's Delight, transpose8). */
AI __m256i bits8x8(__m256i x)
{
    __m256i t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64(x, 7)),
                                 _mm256_set1_epi64x(0x00AA00AA00AA00AAll));
    x = _mm256_xor_si256(x, _mm256_xor_si256(t, _mm256_slli_epi64(t, 7)));
    t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64(x, 14)),
                         _mm256_set1_epi64x(0x0000CCCC0000CCCCll));
    x = _mm256_xor_si256(x, _mm256_xor_si256(t, _mm256_slli_epi64(t, 14)));
    t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64(x, 28)),
                         _mm256_set1_epi64x(0x00000000F0F0F0F0ll));
    return _mm256_xor_si256(x, _mm256_xor_si256(t, _mm256_slli_epi64(t, 28)));
}

/* Eight planes of 256 positions -> one byte per position into T (bit w =
 * plane w). Bytes first: each 64-bit lane of the unpacked vector i gathers
 * byte k of the 8 planes (row w = plane w) for k = 2i, 2i + 1 in the low 128
 * bits and 16 + 2i, 17 + 2i in the high; the bit transpose then turns row
 * w's bit j into byte j's bit w: positions 16i .. 16i + 15 in the low half
 * and 128 + 16i .. in the high half, stored to their places. */
AI void int_transpose(const __m256i s[8], uint8_t *T)
{
    __m256i a[8], b[8];
    #pragma GCC unroll 4
    for (unsigned i = 0; i < 4; i++) {
        a[2 * i] = _mm256_unpacklo_epi8(s[2 * i], s[2 * i + 1]);
        a[2 * i + 1] = _mm256_unpackhi_epi8(s[2 * i], s[2 * i + 1]);
    }
    #pragma GCC unroll 2
    for (unsigned g = 0; g < 2; g++) { /* planes 0-3, then 4-7 */
        b[4 * g] = _mm256_unpacklo_epi16(a[4 * g], a[4 * g + 2]);
        b[4 * g + 1] = _mm256_unpackhi_epi16(a[4 * g], a[4 * g + 2]);
        b[4 * g + 2] = _mm256_unpacklo_epi16(a[4 * g + 1], a[4 * g + 3]);
        b[4 * g + 3] = _mm256_unpackhi_epi16(a[4 * g + 1], a[4 * g + 3]);
    }
    #pragma GCC unroll 8
    for (unsigned i = 0; i < 8; i++) {
        __m256i c = bits8x8(i & 1 ? _mm256_unpackhi_epi32(b[i / 2], b[4 + i / 2])
                                  : _mm256_unpacklo_epi32(b[i / 2], b[4 + i / 2]));
        _mm_store_si128((__m128i *)(T + 16 * i), _mm256_castsi256_si128(c));
        _mm_store_si128((__m128i *)(T + HALF / 2 + 16 * i), _mm256_extracti128_si256(c, 1));
    }
}

/* The half line's results from its G byte planes T[g] (weight 2^(8g)):
 * o[i] = (float)(v_i - nL) * sc[i / 32]; streamed with nt (o 32-byte
 * aligned). */
AI void int_out(float *o, const uint8_t (*T)[HALF], unsigned G, const float sc[8], __m256i nL,
                int nt)
{
    #pragma GCC unroll 4
    for (unsigned j = 0; j < HALF; j += 8) {
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(T[0] + j)));
        for (unsigned g = 1; g < G; g++)
            v = _mm256_add_epi32(v, _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                                          (const __m128i *)(T[g] + j))), (int)(8 * g)));
        const __m256 rv = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, nL)),
                                        _mm256_broadcast_ss(&sc[j / 32]));
        if (nt)
            _mm256_stream_ps(o + j, rv);
        else
            _mm256_storeu_ps(o + j, rv);
    }
}

/* small: kb + kc <= 8 (one byte plane, the sum in registers, kb constant). */
AI void int_finish_impl(float *r, const uint64_t *cnt, unsigned kc, const float *M, unsigned kb,
                        size_t m, size_t B, unsigned n, int small, int nt)
{
    const __m256i nL = _mm256_set1_epi32((int)(n * nf_int_levels(kb)));
    const unsigned P = small ? 8 : int_sum_planes(kb, kc), G = small ? 1 : (P + 7) / 8;
    __m256i S[(INT_P_MAX + 7) / 8 * 8];
    uint8_t T[(INT_P_MAX + 7) / 8][HALF] __attribute__((aligned(32)));
    const unsigned lgB = (unsigned)__builtin_ctzll(B); /* B is a power of two */
    float sc[8] __attribute__((aligned(32))), inv;
    for (size_t h0 = 0; h0 < m; h0 += HALF) {
        /* the scale of each 32 elements: a block is 32 of them or more */
        for (unsigned q = 0; q < 8; q++) {
            const size_t j = h0 + 32 * q;
            if (j >= m)
                sc[q] = 0.0f;
            else if (q == 0 || (j & (B - 1)) == 0)
                nf_int_scale(M[j >> lgB], kb, &sc[q], &inv);
            else
                sc[q] = sc[q - 1];
        }
        const __m256i *c = int_half_cnt(cnt, kc, kb, h0);
        if (small) {
            int_sum8(c, kc, kb, S);
            int_transpose(S, T[0]);
        } else {
            int_sum_any(c, kc, kb, P, S);
            for (unsigned g = 0; g < G; g++)
                int_transpose(S + 8 * g, T[g]);
        }
        const uint8_t(*Tc)[HALF] = (const uint8_t(*)[HALF])T;
        if (m - h0 >= HALF) { /* G constant in each call: the group loop unrolls */
            if (G == 1)
                int_out(r + h0, Tc, 1, sc, nL, nt);
            else if (G == 2)
                int_out(r + h0, Tc, 2, sc, nL, nt);
            else
                int_out(r + h0, Tc, 3, sc, nL, nt);
        } else { /* the last elements: the whole half line, then a copy */
            float o[HALF];
            int_out(o, Tc, G, sc, nL, 0);
            memcpy(r + h0, o, (m - h0) * sizeof(float));
        }
    }
    if (nt)
        _mm_sfence();
}

static void int_finish_avx2(float *r, const uint64_t *cnt, unsigned kc, const float *M,
                            unsigned kb, size_t m, size_t B, unsigned n, int stream)
{
    if (!int_ok(kb, B) || kc < 1 || kc > NF_COUNT_PLANES_MAX || n > 65535) {
        nf_kernels_scalar.int_finish(r, cnt, kc, M, kb, m, B, n, 0);
        return;
    }
    const int nt = stream && ((uintptr_t)r & 31) == 0;
#define INT_FIN(KB, SMALL) nt ? int_finish_impl(r, cnt, kc, M, KB, m, B, n, SMALL, 1) \
                              : int_finish_impl(r, cnt, kc, M, KB, m, B, n, SMALL, 0)
    if (kb + kc > 8 && kb == 2)
        INT_FIN(2, 0);
    else if (kb + kc > 8 && kb == 3)
        INT_FIN(3, 0);
    else if (kb + kc > 8)
        INT_FIN(4, 0);
    else if (kb == 2)
        INT_FIN(2, 1);
    else if (kb == 3)
        INT_FIN(3, 1);
    else
        INT_FIN(4, 1);
#undef INT_FIN
}

const nf_kernels_t nf_kernels_avx2 = {
    .isa = NF_ISA_AVX2,
    .name = "avx2",
    .abs_sum = abs_sum_avx2,
    .bin_pack = bin_pack_avx2,
    .bin_pack_ef = bin_pack_ef_avx2,
    .bin_finish = bin_finish_avx2,
    .ter_pack = ter_pack_avx2,
    .ter_y_ef = ter_y_ef_avx2,
    .ter_finish = ter_finish_avx2,
    .count_sum = count_sum_avx2,
    .count_merge = count_merge_avx2,
    .sum_f32 = sum_f32_avx2,
    .bf16_pack = bf16_pack_avx2,
    .sum_bf16 = sum_bf16_avx2,
    .sum_bf16_f32 = sum_bf16_f32_avx2,
    .int_y_ef = int_y_ef_avx2,
    .int_pack = int_pack_avx2,
    .int_finish = int_finish_avx2,
};

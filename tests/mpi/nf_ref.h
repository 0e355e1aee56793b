/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An independent, deliberately naive implementation of docs/design.md, "Routes"
 * for the multi-rank tests: every rank rebuilds all ranks' inputs and
 * error-feedback state and computes the exact expected result locally.
 */
#ifndef NF_REF_H
#define NF_REF_H

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 16 double lanes, element k into lane k % 16, folded pairwise. */
static inline double ref_lane_sum(const float *y, const unsigned char *take, size_t m)
{
    double lane[16] = {0};
    for (size_t k = 0; k < m; k++)
        if (take == NULL || take[k])
            lane[k % 16] += fabs((double)y[k]);
    for (int w = 8; w >= 1; w /= 2)
        for (int i = 0; i < w; i++)
            lane[i] += lane[i + w];
    return lane[0];
}

static inline uint64_t ref_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Gradient-like input of rank r for call c: mostly N(0,1)-ish values with
 * some exact +-0 and a spread of magnitudes. */
static inline void ref_input(float *x, size_t m, int rank, int call, unsigned seed)
{
    uint64_t s = 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed << 32) ^ ((uint64_t)rank << 16) ^ (uint64_t)call;
    for (int i = 0; i < 4; i++)
        ref_rng(&s);
    for (size_t k = 0; k < m; k++) {
        uint64_t v = ref_rng(&s);
        double u = (double)(v >> 11) / 9007199254740992.0 - 0.5;
        float f = (float)(u * (double)(1u << (v & 7)));
        if ((v & 0xff00) == 0)
            f = (v & 0x10000) ? -0.0f : 0.0f;
        x[k] = f;
    }
}

static inline int ref_sign(float y) { return signbit(y) ? -1 : 1; }

/* y_i = x_i + e_i for every rank; ys is n x m. With an ef_decay other than
 * 1, y_i = x_i + decay * e_i: a float product, then a float add. */
static inline void ref_y(float *ys, const float *xs, const float *es, int n, size_t m, float decay)
{
    for (size_t k = 0; k < (size_t)n * m; k++) {
        if (es == NULL) {
            ys[k] = xs[k];
        } else if (decay == 1.0f) {
            ys[k] = xs[k] + es[k];
        } else {
            float de = decay * es[k]; /* rounded to float: no FMA (-ffp-contract=off) */
            ys[k] = xs[k] + de;
        }
    }
}

/* G-Binary expected result with ef_decay `decay`; updates es (n x m), the
 * whole residual, when non-NULL. */
static inline void ref_binary_d(float *r, const float *xs, float *es, int n, size_t m, float decay)
{
    float *ys = malloc((size_t)n * m * sizeof(float) + 1);
    double *ai = malloc((size_t)n * sizeof(double));
    double a = 0.0;
    ref_y(ys, xs, es, n, m, decay);
    for (int i = 0; i < n; i++) {
        ai[i] = ref_lane_sum(ys + (size_t)i * m, NULL, m) / (double)m;
        a += ai[i];
    }
    a /= n;
    for (size_t j = 0; j < m; j++) {
        int c = 0;
        for (int i = 0; i < n; i++)
            c += ref_sign(ys[(size_t)i * m + j]) > 0;
        r[j] = (float)(a * (double)(2 * c - n));
    }
    for (int i = 0; es != NULL && i < n; i++)
        for (size_t j = 0; j < m; j++) {
            float y = ys[(size_t)i * m + j], af = (float)ai[i];
            es[(size_t)i * m + j] = ref_sign(y) > 0 ? y - af : y + af;
        }
    free(ys);
    free(ai);
}

/* NFCOLL_SCALE_BLOCK, which the library's binary segments take (0: none). */
static inline size_t ref_block_env(void)
{
    const char *v = getenv("NFCOLL_SCALE_BLOCK");
    return v != NULL && v[0] != '\0' ? (size_t)strtoul(v, NULL, 10) : 0;
}

/* G-Binary with one scale per block of `block` elements (scale_block; 0:
 * one per segment): ref_binary_d on each block, as its own segment. */
static inline void ref_binary_b(float *r, const float *xs, float *es, int n, size_t m, float decay,
                                size_t block)
{
    if (block == 0 || block >= m) {
        ref_binary_d(r, xs, es, n, m, decay);
        return;
    }
    float *sx = malloc((size_t)n * block * sizeof(float)), *se = malloc((size_t)n * block * sizeof(float));
    for (size_t o = 0; o < m; o += block) {
        size_t nb = m - o < block ? m - o : block;
        for (int i = 0; i < n; i++) {
            memcpy(sx + (size_t)i * nb, xs + (size_t)i * m + o, nb * sizeof(float));
            if (es != NULL)
                memcpy(se + (size_t)i * nb, es + (size_t)i * m + o, nb * sizeof(float));
        }
        ref_binary_d(r + o, sx, es != NULL ? se : NULL, n, nb, decay);
        for (int i = 0; es != NULL && i < n; i++)
            memcpy(es + (size_t)i * m + o, se + (size_t)i * nb, nb * sizeof(float));
    }
    free(sx);
    free(se);
}

static inline void ref_binary(float *r, const float *xs, float *es, int n, size_t m)
{
    ref_binary_d(r, xs, es, n, m, 1.0f);
}

/* NFCOLL_INT_BLOCK is not a setting: the integer routes' block is the
 * policy's `block` key, 128 without one. */
#define REF_INT_BLOCK 128

/* int-k with blocks of `block` (NF_Allreduce(3)): per block, M = the max
 * over ranks and elements of |y|; s = M / L and inv = L / M in float (both
 * 0 when M < 2^-120); q = clamp(round-half-even(y * inv), -L, L) per rank;
 * r = (float)((double)s * sum of q); e = y - s * q. Written from the man
 * page, not from the kernels. */
static inline void ref_int(float *r, const float *xs, float *es, int n, size_t m, unsigned kb,
                           float decay, size_t block)
{
    float *ys = malloc((size_t)n * m * sizeof(float) + 1);
    const int L = (1 << (kb - 1)) - 1;
    ref_y(ys, xs, es, n, m, decay);
    for (size_t o = 0; o < m; o += block) {
        size_t end = o + block < m ? o + block : m;
        float M = 0.0f;
        for (int i = 0; i < n; i++)
            for (size_t j = o; j < end; j++)
                M = fabsf(ys[(size_t)i * m + j]) > M ? fabsf(ys[(size_t)i * m + j]) : M;
        float s = 0.0f, inv = 0.0f;
        if (M >= 0x1p-120f)
            s = M / (float)L, inv = (float)L / M;
        for (size_t j = o; j < end; j++) {
            long sum = 0;
            for (int i = 0; i < n; i++) {
                float y = ys[(size_t)i * m + j];
                float t = nearbyintf(y * inv);
                int q = t > (float)L ? L : t < (float)-L ? -L : (int)t;
                sum += q;
                if (es != NULL)
                    es[(size_t)i * m + j] = y - s * (float)q;
            }
            r[j] = (float)((double)s * (double)sum);
        }
    }
    free(ys);
}

/* G-Ternary expected result with ef_decay `decay`; updates es when non-NULL. */
static inline void ref_ternary_d(float *r, const float *xs, float *es, int n, size_t m, double gamma,
                                 float decay)
{
    float *ys = malloc((size_t)n * m * sizeof(float) + 1);
    signed char *q = malloc((size_t)n * m + 1);
    unsigned char *take = malloc(m + 1);
    double *bi = malloc((size_t)n * sizeof(double)), b = 0.0;
    ref_y(ys, xs, es, n, m, decay);
    for (int i = 0; i < n; i++) {
        const float *y = ys + (size_t)i * m;
        float t = (float)(gamma * (ref_lane_sum(y, NULL, m) / (double)m));
        size_t nin = 0;
        for (size_t j = 0; j < m; j++) {
            q[(size_t)i * m + j] = y[j] > t ? 1 : y[j] < -t ? -1 : 0;
            take[j] = q[(size_t)i * m + j] != 0;
            nin += take[j];
        }
        bi[i] = nin ? ref_lane_sum(y, take, m) / (double)nin : 0.0;
        b += bi[i];
    }
    b /= n;
    for (size_t j = 0; j < m; j++) {
        int v = 0;
        for (int i = 0; i < n; i++)
            v += q[(size_t)i * m + j];
        r[j] = (float)(b * (double)v);
    }
    for (int i = 0; es != NULL && i < n; i++)
        for (size_t j = 0; j < m; j++) {
            float y = ys[(size_t)i * m + j], bf = (float)bi[i];
            int qq = q[(size_t)i * m + j];
            es[(size_t)i * m + j] = qq > 0 ? y - bf : qq < 0 ? y + bf : y;
        }
    free(ys);
    free(q);
    free(take);
    free(bi);
}

static inline void ref_ternary(float *r, const float *xs, float *es, int n, size_t m, double gamma)
{
    ref_ternary_d(r, xs, es, n, m, gamma, 1.0f);
}

/* Node of each rank, as libnfcoll groups them: NFCOLL_RANKS_PER_NODE
 * consecutive ranks when that is set, else the ranks sharing memory
 * (MPI_COMM_TYPE_SHARED), numbered by their lowest rank. n entries. */
static int ref_node_of[4096];

static inline void ref_nodes_init(int n)
{
    const char *v = getenv("NFCOLL_RANKS_PER_NODE");
    int rpn = v != NULL ? atoi(v) : 0, rank, lowest;
    if (rpn > 0) {
        for (int i = 0; i < n && i < 4096; i++)
            ref_node_of[i] = i / rpn;
        return;
    }
    MPI_Comm node;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Allreduce(&rank, &lowest, 1, MPI_INT, MPI_MIN, node);
    MPI_Allgather(&lowest, 1, MPI_INT, ref_node_of, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Comm_free(&node);
}

/* x rounded to bfloat16 (nearest, ties to the even neighbour; a NaN keeps
 * its sign and top payload bits and is made quiet), as a float. */
static inline float ref_bf16(float x)
{
    uint32_t u, lo, hi;
    memcpy(&u, &x, sizeof(u));
    if (isnan(x)) {
        u = (u & 0xffff0000u) | 0x00400000u;
    } else {
        lo = u & 0xffff0000u, hi = lo + 0x10000u; /* the two bf16 neighbours (hi may be Inf) */
        uint32_t rest = u & 0xffffu;
        u = rest > 0x8000u || (rest == 0x8000u && (lo & 0x10000u)) ? hi : lo;
    }
    memcpy(&x, &u, sizeof(x));
    return x;
}

static inline void ref_fp32(float *r, const float *xs, int n, size_t m);

/* The bf16 route: every rank's input rounded to bf16, then the fp32 route's
 * sum of those values. */
static inline void ref_bf16_sum(float *r, const float *xs, int n, size_t m)
{
    float *b = malloc((size_t)n * m * sizeof(float) + 1);
    for (size_t k = 0; k < (size_t)n * m; k++)
        b[k] = ref_bf16(xs[k]);
    ref_fp32(r, b, n, m);
    free(b);
}

/* Exact FP32 sum: in rank order within a node, starting from the node's
 * first rank, then the node sums in the order of their first ranks. */
static inline void ref_fp32(float *r, const float *xs, int n, size_t m)
{
    int leads[4096], nl = 0;
    for (int i = 0; i < n; i++) {
        int first = 1;
        for (int p = 0; p < i && first; p++)
            first = ref_node_of[p] != ref_node_of[i];
        if (first)
            leads[nl++] = i;
    }
    for (size_t j = 0; j < m; j++) {
        float total = 0.0f;
        for (int l = 0; l < nl; l++) {
            float acc = xs[(size_t)leads[l] * m + j];
            for (int i = leads[l] + 1; i < n; i++)
                if (ref_node_of[i] == ref_node_of[leads[l]])
                    acc += xs[(size_t)i * m + j];
            total = l == 0 ? acc : total + acc;
        }
        r[j] = total;
    }
}

#endif

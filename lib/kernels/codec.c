/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The codecs' cost per element (nf_codec.h): each route's stages run with
 * a kernel table on buffers of three sizes, as the library runs them for a
 * call with one rank per node, and timed. docs/design.md, "Predicting a
 * call's time".
 *
 * Each stage is timed on its second run in a row, as a call finds the
 * buffers just written (the gradient by backward, the lines by the pack):
 * sizes in the caches run from them.
 * The reduce stage reads n inputs; two distinct buffers stand for them in
 * turn (n of 16 MiB each would not fit a small machine): at the largest
 * size the first two come from DRAM and the others, the same addresses
 * again, from the caches, so beyond 2 ranks the stage is timed faster than
 * n distinct buffers would run.
 * With share copies, each runs the whole measurement in a thread of its
 * own on buffers it touched first, and a barrier starts each timed run of
 * every copy together: their stages contend for the memory as the ranks of
 * a node do when their calls run at once.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nf_codec.h"

const size_t nf_codec_size[NF_CODEC_SIZES] = {(size_t)1 << 16, (size_t)1 << 19, (size_t)1 << 22};

#define CODEC_RANKS_MAX 64u
#define CODEC_REPS_MAX 99

static const char *const codec_names[NF_CODEC_COUNT] = {"fp32", "bf16", "binary", "ternary",
                                                        "int4"};

/* Bit lines per 512 elements of a codec's contribution: ternary's plus and
 * minus, int4's four planes; the largest sizes the line buffers. */
#define CODEC_LINES_MAX 4
#define CODEC_INT_BITS 4
#define CODEC_INT_BLOCK NF_INT_BLOCK_DEFAULT

const char *nf_codec_name(nf_codec_t codec)
{
    return (unsigned)codec < NF_CODEC_COUNT ? codec_names[codec] : NULL;
}

typedef struct codec_bufs {
    float *x, *yprev, *ynew, *r, *in2;  /* floats of the largest size */
    uint16_t *h[2];                      /* bf16 inputs */
    uint64_t *bits[2], *cnt;             /* CODEC_LINES_MAX lines per 512 */
    float *bm;                           /* int4: the block maxima, as agreed */
    uint32_t *bmax;                      /* int4: int_y_ef's block maxima */
} codec_bufs_t;

static double codec_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

static void *codec_alloc(size_t bytes, void **all, int *n)
{
    bytes = (bytes + NF_LINE_BYTES - 1) / NF_LINE_BYTES * NF_LINE_BYTES;
    void *p = aligned_alloc(NF_LINE_BYTES, bytes);
    if (p != NULL)
        memset(p, 0, bytes); /* touched: no page faults inside the timings */
    all[(*n)++] = p;
    return p;
}

static _Thread_local volatile double codec_sink; /* one per copy: no race */

/* One stage of one codec over m elements, ns. */
static double codec_stage(const nf_kernels_t *k, const codec_bufs_t *b, nf_codec_t codec,
                          int stage, size_t m, unsigned n, unsigned planes)
{
    const void *in[CODEC_RANKS_MAX];
    size_t lines = nf_lines(m), nl = codec == NF_CODEC_TERNARY ? 2 * lines
                                    : codec == NF_CODEC_INT4  ? CODEC_INT_BITS * lines
                                                              : lines;
    int stream = m >= NF_STREAM_MIN;
    for (unsigned i = 0; i < n; i++)
        in[i] = codec == NF_CODEC_BF16   ? (const void *)b->h[i & 1]
                : codec == NF_CODEC_FP32 ? (const void *)(i & 1 ? b->in2 : b->r)
                                         : (const void *)b->bits[i & 1];
    double t0 = codec_now(), s = 0.0;
    size_t nin = 0;
    switch (codec * NF_CODEC_STAGES + stage) {
    case NF_CODEC_FP32 * NF_CODEC_STAGES + NF_CODEC_PACK:
    case NF_CODEC_FP32 * NF_CODEC_STAGES + NF_CODEC_FINISH:
        memcpy(b->ynew, b->x, m * sizeof(float));
        break;
    case NF_CODEC_FP32 * NF_CODEC_STAGES + NF_CODEC_REDUCE:
        k->sum_f32(b->r, (const float *const *)in, n, m);
        break;
    case NF_CODEC_BF16 * NF_CODEC_STAGES + NF_CODEC_PACK:
        k->bf16_pack(b->x, b->h[0], m);
        break;
    case NF_CODEC_BF16 * NF_CODEC_STAGES + NF_CODEC_REDUCE:
        k->sum_bf16(b->r, (const uint16_t *const *)in, n, m);
        break;
    case NF_CODEC_BINARY * NF_CODEC_STAGES + NF_CODEC_PACK:
        s = k->bin_pack_ef(b->x, b->yprev, 0.01f, 1.0f, b->ynew, m, b->bits[0], stream);
        break;
    case NF_CODEC_TERNARY * NF_CODEC_STAGES + NF_CODEC_PACK:
        s = k->ter_y_ef(b->x, b->yprev, 0.02f, 0.01f, 1.0f, b->ynew, m, stream);
        s += k->ter_pack(b->ynew, NULL, m, (float)(s / (double)m), b->bits[0],
                         b->bits[0] + lines * NF_LINE_WORDS, &nin);
        break;
    case NF_CODEC_INT4 * NF_CODEC_STAGES + NF_CODEC_PACK:
        /* the residual from the previous call's y and block maxima, then
         * the planes with this call's maxima (one rank: its own are the
         * agreed ones, the same bits as floats) */
        k->int_y_ef(b->x, b->yprev, b->bm, CODEC_INT_BITS, 1.0f, b->ynew, m, CODEC_INT_BLOCK,
                    b->bmax, stream);
        memcpy(b->bm, b->bmax, (m + CODEC_INT_BLOCK - 1) / CODEC_INT_BLOCK * sizeof(float));
        k->int_pack(b->ynew, b->bm, CODEC_INT_BITS, m, CODEC_INT_BLOCK, b->bits[0]);
        break;
    case NF_CODEC_BINARY * NF_CODEC_STAGES + NF_CODEC_REDUCE:
    case NF_CODEC_TERNARY * NF_CODEC_STAGES + NF_CODEC_REDUCE:
    case NF_CODEC_INT4 * NF_CODEC_STAGES + NF_CODEC_REDUCE:
        k->count_sum(b->cnt, planes, (const uint64_t *const *)in, n, nl);
        break;
    case NF_CODEC_BINARY * NF_CODEC_STAGES + NF_CODEC_FINISH:
        k->bin_finish(b->r, NULL, NULL, b->cnt, planes, m, n, 0.01, 0.01f, stream);
        break;
    case NF_CODEC_TERNARY * NF_CODEC_STAGES + NF_CODEC_FINISH:
        k->ter_finish(b->r, NULL, NULL, b->cnt, b->cnt + lines * planes * NF_LINE_WORDS, planes,
                      m, 0.01, 0.02f, 0.01f);
        break;
    case NF_CODEC_INT4 * NF_CODEC_STAGES + NF_CODEC_FINISH:
        k->int_finish(b->r, b->cnt, planes, b->bm, CODEC_INT_BITS, m, CODEC_INT_BLOCK, n, stream);
        break;
    default: /* bf16's finish: nothing */
        break;
    }
    double t = codec_now() - t0;
    codec_sink += s + (double)nin + (double)b->r[m - 1];
    return t;
}

static int codec_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One copy of the measurement: its own buffers, every stage at every size
 * reps times, each timed run (the second of two) started together with the
 * other copies' at a barrier (with one copy, none). */
typedef struct codec_worker {
    const nf_kernels_t *k;
    unsigned ranks, planes, share;
    int reps;
    pthread_barrier_t *bar;
    struct codec_worker *all;   /* every copy's, to agree on failure */
    double *t;                  /* reps x codecs x stages x sizes */
    int ok;
} codec_worker_t;

#define T_AT(t, rep, c, st, z)                                                              \
    (t)[(((size_t)(rep) * NF_CODEC_COUNT + (c)) * NF_CODEC_STAGES + (st)) * NF_CODEC_SIZES + (z)]

static void codec_wait(codec_worker_t *w)
{
    if (w->bar != NULL)
        pthread_barrier_wait(w->bar);
}

static void *codec_worker(void *arg)
{
    codec_worker_t *w = arg;
    const size_t M = nf_codec_size[NF_CODEC_SIZES - 1], L = CODEC_LINES_MAX * nf_lines(M);
    const size_t NB = M / CODEC_INT_BLOCK + 1;
    void *all[13];
    int na = 0, ok = 1;
    codec_bufs_t b;
    /* each copy touches its own buffers first, on the core it runs on */
    b.x = codec_alloc(M * sizeof(float), all, &na);
    b.yprev = codec_alloc(M * sizeof(float), all, &na);
    b.ynew = codec_alloc(M * sizeof(float), all, &na);
    b.r = codec_alloc(M * sizeof(float), all, &na);
    b.in2 = codec_alloc(M * sizeof(float), all, &na);
    for (int i = 0; i < 2; i++) {
        b.h[i] = codec_alloc(M * sizeof(uint16_t), all, &na);
        b.bits[i] = codec_alloc(L * NF_LINE_BYTES, all, &na);
    }
    b.cnt = codec_alloc(L * w->planes * NF_LINE_BYTES, all, &na);
    b.bm = codec_alloc(NB * sizeof(float), all, &na);
    b.bmax = codec_alloc(NB * sizeof(uint32_t), all, &na);
    for (int i = 0; i < na; i++)
        ok &= all[i] != NULL;
    w->ok = ok;
    codec_wait(w);
    for (unsigned i = 0; i < w->share; i++)
        ok &= w->all[i].ok;
    if (ok) {
        uint64_t s = 0x9E3779B97F4A7C15ull;
        for (size_t j = 0; j < M; j++) { /* signs and magnitudes that vary */
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            b.x[j] = (float)((int64_t)(s >> 11) - (1ll << 52)) * 0x1p-52f;
            b.in2[j] = b.x[j];
            b.yprev[j] = 0.5f * b.x[(j * 7) % M];
        }
        w->k->bf16_pack(b.x, b.h[1], M);
        /* int4's first previous block maxima: yprev's own */
        w->k->int_y_ef(b.yprev, NULL, NULL, CODEC_INT_BITS, 1.0f, NULL, M, CODEC_INT_BLOCK, b.bmax, 0);
        memcpy(b.bm, b.bmax, NB * sizeof(float));
        for (int rep = 0; rep < w->reps; rep++)
            for (int z = 0; z < NF_CODEC_SIZES; z++)
                for (int c = 0; c < NF_CODEC_COUNT; c++)
                    for (int st = 0; st < NF_CODEC_STAGES; st++) {
                        /* the second of two runs: a call's buffers were
                         * written just before it (the gradient, the lines) */
                        codec_stage(w->k, &b, (nf_codec_t)c, st, nf_codec_size[z], w->ranks,
                                    w->planes);
                        codec_wait(w);
                        T_AT(w->t, rep, c, st, z) = codec_stage(
                            w->k, &b, (nf_codec_t)c, st, nf_codec_size[z], w->ranks, w->planes);
                    }
    }
    for (int i = 0; i < na; i++)
        free(all[i]);
    return NULL;
}

/* Copies 1..share-1 wait here until the first has started them all (or
 * given up: then they return at once). */
typedef struct codec_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state; /* 0 wait, 1 go, -1 give up */
} codec_gate_t;

typedef struct codec_start {
    codec_gate_t *gate;
    codec_worker_t *w;
} codec_start_t;

static void *codec_gated(void *arg)
{
    codec_start_t *s = arg;
    pthread_mutex_lock(&s->gate->mu);
    while (s->gate->state == 0)
        pthread_cond_wait(&s->gate->cv, &s->gate->mu);
    int go = s->gate->state > 0;
    pthread_mutex_unlock(&s->gate->mu);
    return go ? codec_worker(s->w) : NULL;
}

static void codec_open(codec_gate_t *g, int state)
{
    pthread_mutex_lock(&g->mu);
    g->state = state;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

int nf_codec_measure(const nf_kernels_t *k, unsigned ranks, unsigned share, int reps,
                     nf_codec_rates_t *out)
{
    if (k == NULL || out == NULL || ranks < 2 || ranks > CODEC_RANKS_MAX || share < 1 ||
        share > NF_CODEC_SHARE_MAX || reps < 1 || reps > CODEC_REPS_MAX)
        return 1;
    const size_t nt = (size_t)reps * NF_CODEC_COUNT * NF_CODEC_STAGES * NF_CODEC_SIZES;
    codec_worker_t w[NF_CODEC_SHARE_MAX];
    codec_start_t st[NF_CODEC_SHARE_MAX];
    pthread_t th[NF_CODEC_SHARE_MAX];
    pthread_barrier_t bar;
    codec_gate_t gate = {.state = 0};
    double *t = malloc(sizeof(double) * nt * share);
    if (t == NULL)
        return 1;
    int sync = pthread_mutex_init(&gate.mu, NULL) == 0;
    if (sync && pthread_cond_init(&gate.cv, NULL) != 0) {
        pthread_mutex_destroy(&gate.mu);
        sync = 0;
    }
    if (sync && share > 1 && pthread_barrier_init(&bar, NULL, share) != 0) {
        pthread_cond_destroy(&gate.cv);
        pthread_mutex_destroy(&gate.mu);
        sync = 0;
    }
    if (!sync) {
        free(t);
        return 1;
    }
    for (unsigned i = 0; i < share; i++)
        w[i] = (codec_worker_t){.k = k, .ranks = ranks, .planes = nf_count_planes(ranks),
                                .share = share, .reps = reps, .bar = share > 1 ? &bar : NULL,
                                .all = w, .t = t + nt * i};
    unsigned started = 1;
    for (; started < share; started++) {
        st[started] = (codec_start_t){&gate, &w[started]};
        if (pthread_create(&th[started], NULL, codec_gated, &st[started]) != 0)
            break;
    }
    int ok = started == share;
    codec_open(&gate, ok ? 1 : -1);
    if (ok)
        codec_worker(&w[0]);
    for (unsigned i = 1; i < started; i++)
        pthread_join(th[i], NULL);
    if (share > 1)
        pthread_barrier_destroy(&bar);
    pthread_cond_destroy(&gate.cv);
    pthread_mutex_destroy(&gate.mu);
    for (unsigned i = 0; i < share; i++)
        ok &= w[i].ok;
    if (!ok) {
        free(t);
        return 1;
    }
    out->ranks = ranks;
    out->share = share;
    double v[CODEC_REPS_MAX];
    for (int c = 0; c < NF_CODEC_COUNT; c++)
        for (int s = 0; s < NF_CODEC_STAGES; s++)
            for (int z = 0; z < NF_CODEC_SIZES; z++) {
                for (int rep = 0; rep < reps; rep++) { /* the slowest copy's run */
                    v[rep] = 0.0;
                    for (unsigned i = 0; i < share; i++)
                        if (T_AT(w[i].t, rep, c, s, z) > v[rep])
                            v[rep] = T_AT(w[i].t, rep, c, s, z);
                }
                qsort(v, (size_t)reps, sizeof(double), codec_cmp);
                double med = reps % 2 ? v[reps / 2] : 0.5 * (v[reps / 2 - 1] + v[reps / 2]);
                out->ns[c][s][z] = c == NF_CODEC_BF16 && s == NF_CODEC_FINISH
                                       ? 0.0
                                       : med / (double)nf_codec_size[z];
            }
    free(t);
    return 0;
}
#undef T_AT

static double codec_stage_ns(const nf_codec_rates_t *r, nf_codec_t codec, int stage, size_t m)
{
    const double *ns = r->ns[codec][stage];
    if (m <= nf_codec_size[0])
        return ns[0] * (double)m;
    for (int z = 1; z < NF_CODEC_SIZES; z++)
        if (m <= nf_codec_size[z]) {
            double lo = log2((double)nf_codec_size[z - 1]), hi = log2((double)nf_codec_size[z]);
            double w = (log2((double)m) - lo) / (hi - lo);
            return ((1.0 - w) * ns[z - 1] + w * ns[z]) * (double)m;
        }
    return ns[NF_CODEC_SIZES - 1] * (double)m;
}

double nf_codec_ns(const nf_codec_rates_t *r, nf_codec_t codec, int stage, size_t m)
{
    if (r == NULL || (unsigned)codec >= NF_CODEC_COUNT || stage >= NF_CODEC_STAGES)
        return 0.0;
    if (stage >= 0)
        return codec_stage_ns(r, codec, stage, m);
    double t = 0.0;
    for (int st = 0; st < NF_CODEC_STAGES; st++)
        t += codec_stage_ns(r, codec, st, m);
    return t;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* Calibration (nf_calib.h). */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_agree.h"
#include "nf_calib.h"
#include "nf_ctx.h"
#include "nf_decide.h"
#include "nf_file.h"
#include "nf_intern.h"
#include "nf_log.h"
#include "nf_profile.h"
#include "nf_region.h"
#include "nf_settings.h"
#include "nf_util.h"

#define NF_CALIB_MAX 4096 /* segments measured; more are not profiled */
/* The lag cosine is measured on a segment's calls (tried, counted from 0)
 * in [NF_CALIB_LAG_FROM, NF_CALIB_LAG_TO): the first calls of a training
 * run look alike under every optimizer (docs/design.md, "Calibration"). */
#define NF_CALIB_LAG_FROM 20
#define NF_CALIB_LAG_TO 100

/* The shadows: every low-bit route, run beside the exact sum on the same
 * input. The lag cosine is binary's (shadow 0). */
static const nf_route_t nf_calib_route[] = {NF_ROUTE_BINARY, NF_ROUTE_TERNARY, NF_ROUTE_INT4,
                                            NF_ROUTE_INT3, NF_ROUTE_INT2};
#define NF_CALIB_SHADOWS (sizeof(nf_calib_route) / sizeof(nf_calib_route[0]))

typedef struct nf_calib_seg {
    char name[NF_REGION_NAME_MAX + 24];
    uint64_t elements, calls;
    uint64_t nonfinite;    /* calls skipped: a NaN or Inf in the exact sum or a shadow */
    uint64_t fallback;     /* calls skipped: a shadow ran fp32 (ranks' layouts differed,
                              the segment could not grow, the lanes do not fit) */
    double cos[NF_CALIB_SHADOWS], rel[NF_CALIB_SHADOWS]; /* sums over calls, per shadow */
    uint64_t ncos;         /* calls in cos and rel (at most K) */
    double lag;            /* sum of lag cosines over nlag calls */
    uint64_t nlag;
} nf_calib_seg_t;

static struct {
    pthread_mutex_t lock;
    char *path;
    nf_wfile_t out;  /* rank 0: the profile's temp file, created at init */
    unsigned calls;
    double admit;
    nf_calib_seg_t *v;
    size_t n, cap;
    nf_keymap_t index; /* (region id, 0) or (0, bytes + 1) -> index in v */
    double decay; /* the shadows' where the rule names none (nf_decide_shadow_decay) */
} nf_cal = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The profile's temp file, created now rather than after the whole run:
 * rank 0 keeps it for MPI_Finalize; every other rank creates one and
 * removes it, so that each rank says what is wrong with the path (on one
 * file system, all alike). The run goes on either way: its sums are exact,
 * and rank 0 tries again at MPI_Finalize. */
static void nf_calib_open_out(void)
{
    if (nf_wfile_open(&nf_cal.out, nf_cal.path) != NF_OK) { /* logged the reason */
        nf_log_warn("the calibration profile %s cannot be written (rank 0 writes it at "
                    "MPI_Finalize): this run's measurements would be lost", nf_cal.path);
        return;
    }
    if (nf_log_rank() > 0)
        nf_wfile_abort(&nf_cal.out);
}

void nf_calib_init(const char *path, unsigned calls, double admit)
{
    if (nf_cal.out.fp != NULL)
        nf_wfile_abort(&nf_cal.out);
    free(nf_cal.path);
    nf_cal.path = path != NULL ? strdup(path) : NULL;
    nf_cal.calls = calls > 0 ? calls : 20;
    nf_cal.admit = admit;
    nf_cal.decay = nf_decide_shadow_decay(nf_settings_load());
    if (nf_cal.path != NULL)
        nf_calib_open_out();
}

int nf_calib_on(void) { return nf_cal.path != NULL; }

const char *nf_calib_name(const nf_seg_t *g, char *buf, size_t len)
{
    return nf_decide_profile_name(g->name, g->m, buf, len);
}

/* The record of a segment's profile name (made on first sight, named
 * then); NULL past the bound. Found by integers: a region by its interned
 * id, anything else by its size (buffer:BYTES). */
static nf_calib_seg_t *nf_calib_find(const nf_seg_t *g)
{
    uint64_t a = g->name != NULL ? g->id : 0;
    uint64_t b = g->name != NULL ? 0 : (uint64_t)g->m * sizeof(float) + 1;
    char buf[64];
    uint32_t at = nf_keymap_get(&nf_cal.index, a, b);
    if (at != UINT32_MAX)
        return &nf_cal.v[at];
    if (nf_cal.n >= NF_CALIB_MAX)
        return NULL;
    if (nf_cal.n == nf_cal.cap) {
        size_t cap = nf_cal.cap ? 2 * nf_cal.cap : 64;
        nf_calib_seg_t *v = realloc(nf_cal.v, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        nf_cal.v = v, nf_cal.cap = cap;
    }
    if (nf_keymap_put(&nf_cal.index, a, b, (uint32_t)nf_cal.n) != NF_OK)
        return NULL;
    nf_calib_seg_t *s = &nf_cal.v[nf_cal.n++];
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", nf_calib_name(g, buf, sizeof(buf)));
    s->elements = g->m;
    return s;
}

/* Cosine similarity and relative L2 error of got against want (double
 * sums in element order: every rank computes the same bits).
 * NF_ERR_UNSUPPORTED when a sum is not finite (a NaN or Inf in either, or
 * an overflow): no measurement. */
static nf_status_t nf_calib_compare(const float *got, const float *want, size_t m, double *cos,
                                    double *rel)
{
    double dot = 0.0, gg = 0.0, ww = 0.0, dd = 0.0;
    for (size_t j = 0; j < m; j++) {
        double g = got[j], w = want[j];
        dot += g * w, gg += g * g, ww += w * w, dd += (g - w) * (g - w);
    }
    if (!isfinite(dot) || !isfinite(gg) || !isfinite(ww) || !isfinite(dd))
        return NF_ERR_UNSUPPORTED;
    *cos = gg > 0.0 && ww > 0.0 ? dot / sqrt(gg * ww) : (gg == ww ? 1.0 : 0.0);
    *rel = ww > 0.0 ? sqrt(dd / ww) : (dd > 0.0 ? 1.0 : 0.0);
    return isfinite(*cos) && isfinite(*rel) ? NF_OK : NF_ERR_UNSUPPORTED;
}

static uint64_t nf_calib_tried(const nf_calib_seg_t *r)
{
    return r->calls + r->nonfinite + r->fallback;
}

/* Whether r wants its cosines measured: fewer than K measured, and fewer
 * than 2K tried (a segment that never measures, such as one whose ranks'
 * layouts differ, stops costing shadows). */
static int nf_calib_cos_open(const nf_calib_seg_t *r)
{
    return r->calls < nf_cal.calls && nf_calib_tried(r) < 2ull * nf_cal.calls;
}

/* Whether the lag cosine can be measured on c at all: the binary shadow
 * keeps a residual only with the settings' error feedback on and count
 * lanes that fit (nf_run_shadow). Agreed alike on every rank. */
static int nf_calib_lag_possible(const nf_comm_t *c)
{
    return c->lowbit_ok && nf_ctx.cfg.settings != NULL && nf_ctx.cfg.settings->ef;
}

/* Whether the call r tries now falls in the lag cosine's window. */
static int nf_calib_lag_open(const nf_calib_seg_t *r)
{
    uint64_t t = nf_calib_tried(r);
    return t >= NF_CALIB_LAG_FROM && t < NF_CALIB_LAG_TO;
}

/* Whether r wants more calls: its cosines, or its lag cosine while it can
 * be measured and the segment has not skipped 2K calls (one that never
 * measures stops costing shadows, as for the cosines). */
static int nf_calib_open(const nf_calib_seg_t *r, int lag_possible)
{
    return nf_calib_cos_open(r) ||
           (lag_possible && nf_calib_tried(r) < NF_CALIB_LAG_TO &&
            r->nonfinite + r->fallback < 2ull * nf_cal.calls);
}

/* Whether some segment still needs measurements. Ranks whose layouts
 * differ see different segments, so this is one rank's wish: the ranks
 * agree on it (nf_calib_agree). */
static int nf_calib_wanted(const nf_comm_t *c, const nf_seg_t *seg, size_t nseg)
{
    int want = 0, lag = nf_calib_lag_possible(c);
    pthread_mutex_lock(&nf_cal.lock);
    for (size_t s = 0; s < nseg && !want; s++) {
        nf_calib_seg_t *r = nf_calib_find(&seg[s]);
        want = r != NULL && nf_calib_open(r, lag);
    }
    pthread_mutex_unlock(&nf_cal.lock);
    return want;
}

/* A segment's measurement, when every shadow ran its low-bit route on it
 * and every sum is finite; else the call is counted as skipped. */
static void nf_calib_record(const nf_comm_t *c, const nf_seg_t *seg, size_t nseg,
                            const nf_seg_t *const ran[NF_CALIB_SHADOWS], const float *exact,
                            float *const shadow[NF_CALIB_SHADOWS], const double *lag)
{
    int possible = nf_calib_lag_possible(c);
    pthread_mutex_lock(&nf_cal.lock);
    for (size_t s = 0; s < nseg; s++) {
        const nf_seg_t *g = &seg[s];
        nf_calib_seg_t *r = nf_calib_find(g);
        if (r == NULL || !nf_calib_open(r, possible))
            continue;
        double cs[NF_CALIB_SHADOWS], rl[NF_CALIB_SHADOWS];
        int bad = 0, lowbit = 1;
        for (size_t w = 0; w < NF_CALIB_SHADOWS; w++) {
            bad |= ran[w][s].nonfinite ||
                   nf_calib_compare(shadow[w] + g->off, exact + g->off, g->m, &cs[w],
                                    &rl[w]) != NF_OK;
            lowbit &= nf_route_lowbit(ran[w][s].ran);
        }
        if (!bad && lowbit && nf_calib_lag_open(r) && isfinite(lag[s]))
            r->lag += lag[s], r->nlag++;
        if (bad) {
            r->nonfinite++;
        } else if (!lowbit) {
            r->fallback++;
        } else {
            if (nf_calib_cos_open(r)) {
                for (size_t w = 0; w < NF_CALIB_SHADOWS; w++)
                    r->cos[w] += cs[w], r->rel[w] += rl[w];
                r->ncos++;
            }
            r->calls++;
        }
    }
    pthread_mutex_unlock(&nf_cal.lock);
}

/* The shadows' residuals per communicator, one table per shadow, as if
 * that route had run all along: calibration's own, in a slot of core's
 * nf_comm_t; not kept in checkpoints (a calibration run is its own run). */
typedef struct nf_calib_comm {
    nf_residual_table_t shadow[NF_CALIB_SHADOWS];
} nf_calib_comm_t;

static void nf_calib_comm_free(nf_comm_t *c, void *p)
{
    nf_calib_comm_t *s = p;
    (void)c;
    if (s == NULL)
        return;
    for (size_t w = 0; w < NF_CALIB_SHADOWS; w++)
        nf_residual_table_free(&s->shadow[w]);
    free(s);
}

static const nf_comm_slot_ops_t nf_calib_slot_ops = {"calibration", NULL, nf_calib_comm_free,
                                                     NULL, NULL};
static int nf_calib_slot = -1;
static pthread_once_t nf_calib_slot_once = PTHREAD_ONCE_INIT;

static void nf_calib_slot_init(void)
{
    if (nf_comm_slot_register(&nf_calib_slot_ops, &nf_calib_slot) != NF_OK)
        nf_calib_slot = -1;
}

/* c's shadow tables, made on first use; NULL without memory or a slot (the
 * shadows then run without error feedback, said once). */
static nf_calib_comm_t *nf_calib_comm(nf_comm_t *c)
{
    nf_calib_comm_t *s = NULL;
    pthread_once(&nf_calib_slot_once, nf_calib_slot_init);
    if (nf_calib_slot >= 0 && (s = atomic_load(&c->slot[nf_calib_slot])) == NULL &&
        (s = calloc(1, sizeof(*s))) != NULL)
        atomic_store(&c->slot[nf_calib_slot], s);
    if (s == NULL)
        nf_log_warn_once("no memory for calibration's shadow residuals: the shadows run "
                         "without error feedback");
    return s;
}

/* The lag cosine of segment g: this rank's binary shadow residual (what
 * the last call left, before this call adds it) against this call's input
 * x. Rank-local (rank 0's is the one written); NaN when the residual is
 * not there yet or is zero. */
static double nf_calib_lag(nf_residual_table_t *t, const float *x, const nf_seg_t *g)
{
    nf_res_key_t key = {.addr = x + g->off, .name = g->name, .id = g->id};
    nf_status_t why;
    nf_residual_t *r = nf_residual_get(t, &key, g->m, &why); /* the one the shadow uses next */
    float e[256];
    double dot = 0.0, ee = 0.0, xx = 0.0;
    if (r == NULL)
        return NAN;
    for (size_t j0 = 0; j0 < g->m; j0 += 256) {
        size_t n = g->m - j0 < 256 ? g->m - j0 : 256;
        const float *xs = x + g->off + j0;
        nf_residual_e_copy(r, j0, n, e);
        for (size_t j = 0; j < n; j++)
            dot += (double)e[j] * xs[j], ee += (double)e[j] * e[j], xx += (double)xs[j] * xs[j];
    }
    return ee > 0.0 && xx > 0.0 && isfinite(dot) ? dot / sqrt(ee * xx) : NAN;
}

/* Whether segment g's lag cosine is wanted on this call. */
static int nf_calib_lag_wanted(const nf_seg_t *g)
{
    pthread_mutex_lock(&nf_cal.lock);
    nf_calib_seg_t *r = nf_calib_find(g);
    int want = r != NULL && nf_calib_lag_open(r);
    pthread_mutex_unlock(&nf_cal.lock);
    return want;
}

/* Every shadow of the call, from the input copy x into its buffer; tmp
 * (NF_CALIB_SHADOWS * nseg) holds the segments once per shadow as decided
 * (what a rule left unset still unset) and gets them as each shadow ran
 * them, lag (nseg) the lag cosines (NaN where none is wanted). */
static nf_status_t nf_calib_shadows(nf_comm_t *c, const float *x, size_t m, const nf_seg_t *seg,
                                    size_t nseg, nf_seg_t *tmp, float *const out[NF_CALIB_SHADOWS],
                                    double *lag)
{
    nf_status_t st = NF_OK;
    nf_calib_comm_t *cc = nf_calib_comm(c);
    /* only the writer's lag reaches the profile: the other ranks skip the pass */
    int possible = nf_calib_lag_possible(c) && nf_log_rank() == 0;
    for (size_t s = 0; s < nseg; s++)
        lag[s] = cc != NULL && possible && nf_calib_lag_wanted(&seg[s])
                     ? nf_calib_lag(&cc->shadow[0], x, &seg[s])
                     : NAN;
    for (size_t w = 0; st == NF_OK && w < NF_CALIB_SHADOWS; w++) {
        nf_seg_t *t = tmp + w * nseg;
        for (size_t s = 0; s < nseg; s++) {
            t[s].route = nf_calib_route[w];
            t[s].ef = -1; /* the settings' error feedback, as a route would run */
            /* ef_decay and scale_block stay the segment's: under such a
             * rule calibration measures the route as the rule runs it;
             * a decay nothing names is calibration's own */
            if (t[s].ef_decay < 0.0) /* integer routes: as auto runs them, the settings' */
                t[s].ef_decay = nf_route_intk(t[s].route) > 0 ? nf_settings_load()->ef_decay
                                                              : nf_cal.decay;
        }
        st = nf_run_shadow(c, cc != NULL ? &cc->shadow[w] : NULL, x, out[w], m, t, nseg);
    }
    return st;
}

/* Whether this call runs the shadows, on every rank alike: a rank whose
 * segments are all measured must still join a rank that sees a new one (a
 * region bound late, or on that rank only), and the shadows need memory on
 * every rank. One BOR allreduce per calibrated call, a second only when
 * some ranks want the shadows and others had not allocated for them. */
static int nf_calib_agree(nf_comm_t *c, int want, size_t bytes, float **x)
{
    enum { NF_CAL_WANT = 1u, NF_CAL_NOMEM = 2u, NF_CAL_IDLE = 4u };
    unsigned all = 0;
    *x = want ? malloc(bytes) : NULL;
    unsigned mine = !want ? NF_CAL_IDLE : *x == NULL ? NF_CAL_NOMEM : NF_CAL_WANT;
    if (nf_agree_any(c->priv, mine, &all) != NF_OK)
        all = NF_CAL_NOMEM;
    if ((all & NF_CAL_WANT) && (all & NF_CAL_IDLE) && !(all & NF_CAL_NOMEM)) {
        if (*x == NULL)
            *x = malloc(bytes);
        if (nf_agree_status(c->priv, *x != NULL ? NF_OK : NF_ERR_NO_MEMORY) != NF_OK)
            all |= NF_CAL_NOMEM;
    }
    if ((all & NF_CAL_WANT) && !(all & NF_CAL_NOMEM))
        return 1;
    free(*x);
    *x = NULL;
    return 0;
}

nf_status_t nf_calib_run(nf_comm_t *c, const nf_run_args_t *a, nf_seg_t *seg, size_t nseg)
{
    size_t m = (size_t)a->count;
    const float *in = a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf;
    float *x = NULL;
    nf_seg_t *tmp = NULL;
    double *lag = NULL;
    /* the input, then each shadow's result, then the segments once per shadow */
    size_t at = ((1 + NF_CALIB_SHADOWS) * m * sizeof(float) + 15) & ~(size_t)15;
    size_t lag_at = at + NF_CALIB_SHADOWS * nseg * sizeof(nf_seg_t);
    /* nf_comm_ready is agreed (a failed setup is broken on every rank). */
    int want = nf_comm_ready(c) == NF_OK &&
               nf_calib_agree(c, nf_calib_wanted(c, seg, nseg), lag_at + nseg * sizeof(double), &x);
    if (want) {
        memcpy(x, in, m * sizeof(float)); /* the exact run may overwrite it */
        tmp = (nf_seg_t *)(void *)((char *)x + at);
        lag = (double *)(void *)((char *)x + lag_at);
        for (size_t s = 0; s < nseg; s++) /* as decided: the exact run fills in the settings */
            for (size_t w = 0; w < NF_CALIB_SHADOWS; w++)
                tmp[w * nseg + s] = seg[s];
    }
    for (size_t s = 0; s < nseg; s++)
        seg[s].route = NF_ROUTE_FP32;
    nf_status_t st = nf_run_plan(c, a, seg, nseg);
    if (st == NF_OK && want) {
        float *out[NF_CALIB_SHADOWS];
        const nf_seg_t *ran[NF_CALIB_SHADOWS];
        for (size_t w = 0; w < NF_CALIB_SHADOWS; w++)
            out[w] = x + (1 + w) * m, ran[w] = tmp + w * nseg;
        st = nf_calib_shadows(c, x, m, seg, nseg, tmp, out, lag);
        if (st == NF_OK)
            nf_calib_record(c, seg, nseg, ran, a->recvbuf, out, lag);
    }
    free(x);
    return st;
}

/* After the entries, as comments: the calls each segment skipped. NF_OK,
 * or NF_ERR_IO with errno. */
static nf_status_t nf_calib_skips(FILE *fp, uint64_t *skipped)
{
    int bad = 0;
    *skipped = 0;
    for (size_t i = 0; i < nf_cal.n && !bad; i++) {
        const nf_calib_seg_t *r = &nf_cal.v[i];
        if (r->nonfinite == 0 && r->fallback == 0)
            continue;
        *skipped += r->nonfinite + r->fallback;
        bad = fprintf(fp, "# skipped %s: %" PRIu64 " calls with a NaN or Inf, %" PRIu64
                      " that ran a fallback's fp32, %" PRIu64 " measured\n", r->name,
                      r->nonfinite, r->fallback, r->ncos) < 0;
    }
    return bad ? NF_ERR_IO : NF_OK;
}

static void nf_calib_write(void)
{
    nf_profile_entry_t *e = calloc(nf_cal.n + 1, sizeof(*e));
    nf_wfile_t *f = &nf_cal.out;
    uint64_t skipped = 0;
    if (f->fp == NULL && nf_wfile_open(f, nf_cal.path) != NF_OK)
        f->fp = NULL; /* logged why */
    if (e == NULL || f->fp == NULL) {
        nf_log_warn("cannot write the calibration profile %s", nf_cal.path);
        if (f->fp != NULL)
            nf_wfile_abort(f);
        free(e);
        return;
    }
    size_t n = 0, short_lag = 0;
    int lag_on = nf_ctx.cfg.settings != NULL && nf_ctx.cfg.settings->ef;
    for (size_t i = 0; i < nf_cal.n; i++) {
        const nf_calib_seg_t *r = &nf_cal.v[i];
        if (r->ncos == 0)
            continue;
        double k = (double)r->ncos;
        e[n] = (nf_profile_entry_t){.segment = r->name, .elements = r->elements,
                                    .calls = r->ncos, .cos_binary = r->cos[0] / k,
                                    .cos_ternary = r->cos[1] / k,
                                    .relerr_binary = r->rel[0] / k,
                                    .relerr_ternary = r->rel[1] / k};
        for (size_t w = 2; w < NF_CALIB_SHADOWS; w++) /* int4, int3, int2 */
            e[n].cos_int[w - 2] = r->cos[w] / k, e[n].relerr_int[w - 2] = r->rel[w] / k;
        /* chosen from the value written (%.4f), so that the file agrees
         * with the rule: 0.49996 is written 0.5000, which is >= 0.5 */
        e[n].cos_int[0] = round(e[n].cos_int[0] * 1e4) / 1e4 + 0.0;
        e[n].route = nf_profile_choose(&e[n], nf_cal.admit);
        /* likewise: -0.00004 is written -0.0000, which is not < 0 */
        e[n].lag_cosine = r->nlag > 0 ? round(r->lag / (double)r->nlag * 1e4) / 1e4 + 0.0 : NAN;
        /* The integer routes take the whole residual (the settings' decay
         * where the user set one): no decay is chosen for them, and the lag
         * cosine stays as evidence. */
        e[n].ef_decay = nf_route_intk(e[n].route) > 0
                            ? -1.0
                            : nf_profile_choose_decay(e[n].lag_cosine, r->nlag);
        /* the lag window's warning only where a decay would have been chosen */
        short_lag += e[n].ef_decay < 0 && lag_on &&
                     (e[n].route == NF_ROUTE_BINARY || e[n].route == NF_ROUTE_TERNARY);
        n++;
    }
    if (nf_profile_write(f->fp, e, n) != NF_OK || nf_calib_skips(f->fp, &skipped) != NF_OK) {
        nf_log_warn("writing the calibration profile %s failed: %m", nf_cal.path);
        nf_wfile_abort(f);
    } else if (nf_wfile_commit(f) == NF_OK) {
        nf_log_info(1, "calibration profile of %zu segments written to %s (%" PRIu64
                    " calls skipped, listed in it)", n, nf_cal.path, skipped);
        if (short_lag > 0)
            nf_log_warn("calibration profile %s: %zu of %zu segments measured fewer than %d "
                        "calls of the lag cosine's window (calls %d-%d of a segment), so no "
                        "error-feedback decay was chosen for them (ef_decay '-': the settings'); "
                        "calibrate for at least %d calls, %d fill the window",
                        nf_cal.path, short_lag, n, NF_PROFILE_LAG_MIN, NF_CALIB_LAG_FROM + 1,
                        NF_CALIB_LAG_TO, NF_CALIB_LAG_FROM + NF_PROFILE_LAG_MIN, NF_CALIB_LAG_TO);
    }
    free(e);
}

void nf_calib_finish(int write)
{
    pthread_mutex_lock(&nf_cal.lock);
    if (write && nf_cal.path != NULL)
        nf_calib_write();
    else if (nf_cal.out.fp != NULL)
        nf_wfile_abort(&nf_cal.out);
    free(nf_cal.v);
    nf_keymap_free(&nf_cal.index);
    free(nf_cal.path);
    nf_cal.v = NULL, nf_cal.n = nf_cal.cap = 0, nf_cal.path = NULL;
    pthread_mutex_unlock(&nf_cal.lock);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* Training-health monitoring (nf_health.h). */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nf_health.h"
#include "nf_log.h"
#include "nf_regstats.h"
#include "nf_route.h"
#include "nf_segstate.h"
#include "nf_segtab.h"

static nf_policy_health_t nf_hcfg;
static pthread_mutex_t nf_hloss_lock = PTHREAD_MUTEX_INITIALIZER;
static double nf_hloss_sum;
static unsigned nf_hloss_n;

void nf_health_init(const nf_policy_health_t *cfg)
{
    nf_hcfg = cfg != NULL ? *cfg : nf_policy_health_defaults;
}

int nf_health_on(void) { return nf_hcfg.on; }

void nf_health_report(double loss)
{
    pthread_mutex_lock(&nf_hloss_lock);
    nf_hloss_sum += loss, nf_hloss_n++;
    pthread_mutex_unlock(&nf_hloss_lock);
}

double nf_health_take_loss(void)
{
    pthread_mutex_lock(&nf_hloss_lock);
    double v = nf_hloss_n > 0 ? nf_hloss_sum / nf_hloss_n : NAN;
    nf_hloss_sum = 0.0, nf_hloss_n = 0;
    pthread_mutex_unlock(&nf_hloss_lock);
    return v;
}

/* A communicator's health: the segments' cool-downs in their records
 * (nf_segstate.h: each segment maps to its own record on each rank; the
 * signals are agreed per segment index), and the loss window. */
struct nf_health_comm {
    nf_segstate_t *segs;  /* the records' health parts */
    double *losses;       /* the last loss_window agreed losses, a ring */
    unsigned nloss, at;
};

nf_health_comm_t *nf_health_comm_new(nf_segstate_t *segs)
{
    nf_health_comm_t *h = calloc(1, sizeof(*h));
    if (h != NULL)
        h->segs = segs;
    return h;
}

void nf_health_comm_free(nf_health_comm_t *h)
{
    if (h == NULL)
        return;
    free(h->losses);
    free(h);
}

void nf_health_comm_save(const nf_health_comm_t *h, nf_wbuf_t *b)
{
    nf_segstate_save(h->segs, NF_SEG_HEALTH, b);
    nf_wbuf_u64(b, h->losses != NULL ? h->nloss : 0);
    nf_wbuf_u64(b, h->at);
    for (unsigned i = 0; h->losses != NULL && i < h->nloss; i++) {
        uint64_t u;
        memcpy(&u, &h->losses[i], sizeof(u));
        nf_wbuf_u64(b, u);
    }
}

nf_status_t nf_health_comm_load(nf_health_comm_t *h, nf_rbuf_t *r, int commit)
{
    uint64_t nloss, at, w = nf_hcfg.loss_window;
    nf_status_t st = nf_segstate_load(commit ? h->segs : NULL, NF_SEG_HEALTH, r, commit);
    if (st != NF_OK)
        return st;
    if (nf_rbuf_u64(r, &nloss) != NF_OK || nf_rbuf_u64(r, &at) != NF_OK || nloss > w ||
        (nloss > 0 && at >= w) || nloss > (r->n - r->at) / 8)
        return NF_ERR_PARSE;
    if (commit && nloss > 0 && h->losses == NULL && (h->losses = calloc(w, sizeof(double))) == NULL)
        return NF_ERR_NO_MEMORY;
    for (uint64_t i = 0; i < nloss; i++) {
        uint64_t u = 0;
        double v;
        if (nf_rbuf_u64(r, &u) != NF_OK)
            return NF_ERR_PARSE;
        memcpy(&v, &u, sizeof(v));
        if (commit)
            h->losses[i] = v;
    }
    if (commit)
        h->nloss = (unsigned)nloss, h->at = nloss > 0 ? (unsigned)at : 0;
    return NF_OK;
}

static nf_hseg_t *nf_hseg(nf_health_comm_t *h, const nf_seg_t *seg, size_t n, size_t i,
                          int make)
{
    nf_segrec_t *r = nf_segstate_get(h->segs, seg, n, i, NF_SEG_HEALTH, make);
    nf_hseg_t *s = r != NULL ? &r->health : NULL;
    if (s != NULL && s->bytes == 0) /* new */
        s->id = seg[i].id, s->bytes = seg[i].m * sizeof(float);
    return s;
}

static const char *nf_hseg_name(const nf_hseg_t *s, char *buf, size_t len)
{
    return nf_seg_name(s->id, s->bytes, buf, len);
}

void nf_health_apply(nf_health_comm_t *h, nf_seg_t *seg, nf_seg_note_t *note, size_t n,
                     uint64_t call)
{
    for (size_t i = 0; i < n; i++) { /* asked, cooling, health: reset by the caller */
        nf_hseg_t *s = h != NULL && nf_route_lowbit(seg[i].route) ? nf_hseg(h, seg, n, i, 0)
                                                                  : NULL;
        if (s == NULL)
            continue;
        if (s->left == 0) {
            s->since++;
            if (s->back) { /* the first call on its route again */
                char buf[40];
                s->back = 0;
                note[i].health = "reentry";
                /* Its residual is the error of calls a cool-down ago, and
                 * after a divergence large enough to read as ef_growth at
                 * once: it starts over. */
                seg[i].resid = NF_RESID_RESTART;
                nf_regstats_reentry(nf_hseg_name(s, buf, sizeof(buf)), call);
            }
            continue;
        }
        note[i].health = nf_health_signal_name(s->why);
        seg[i].route = NF_ROUTE_FP32;
        seg[i].resid = NF_RESID_CLAIM;
        note[i].cooling = 1;
        if (--s->left == 0)
            s->since = 0, s->back = 1;
    }
}

/* Losses may be negative or change sign (log-likelihoods, regularised
 * objectives, returns), so a spike is measured against the window's own
 * scale, not as a ratio to its mean: a loss that exceeds the window's
 * largest by more than (loss_spike - 1) times (|mean| + standard deviation).
 * For a constant positive loss L this is the ratio rule, loss > loss_spike
 * * L; a constant negative loss or one that alternates within its range
 * never spikes. */
static int nf_health_is_spike(const double *v, unsigned n, double loss)
{
    double sum = 0.0, max = v[0], var = 0.0;
    for (unsigned i = 0; i < n; i++)
        sum += v[i], max = v[i] > max ? v[i] : max;
    double mean = sum / n;
    for (unsigned i = 0; i < n; i++)
        var += (v[i] - mean) * (v[i] - mean);
    double scale = fabs(mean) + sqrt(var / n);
    return loss > max + (nf_hcfg.loss_spike - 1.0) * scale;
}

/* Whether loss is a spike against the window; it joins the window either
 * way. */
static int nf_health_spike(nf_health_comm_t *h, double loss)
{
    unsigned w = nf_hcfg.loss_window;
    if (isnan(loss))
        return 0;
    if (!isfinite(loss)) /* +Inf is a spike, -Inf none; neither joins the window,
                            whose mean and spread would stay NaN for its length */
        return loss > 0.0;
    if (h->losses == NULL && (h->losses = calloc(w, sizeof(double))) == NULL)
        return 0;
    int spike = h->nloss > 0 && nf_health_is_spike(h->losses, h->nloss, loss);
    h->losses[h->at] = loss;
    h->at = (h->at + 1) % w;
    if (h->nloss < w)
        h->nloss++;
    return spike;
}

static void nf_health_start(nf_hseg_t *s, nf_health_signal_t why, uint64_t call)
{
    /* A repeat within a cool-down's length of the last one doubles it. */
    unsigned len = s->len == 0 || s->since > s->len ? nf_hcfg.cooldown : 2 * s->len;
    s->len = len < nf_hcfg.cooldown_max ? len : nf_hcfg.cooldown_max;
    s->left = s->len, s->why = why, s->since = 0, s->back = 0;
    char buf[40];
    const char *name = nf_hseg_name(s, buf, sizeof(buf));
    nf_regstats_health(name, why, call);
    nf_log_info(1, "segment %s unhealthy (%s) at call %llu: fp32 for %u calls", name,
                nf_health_signal_name(why), (unsigned long long)call, s->len);
}

void nf_health_observe(nf_health_comm_t *h, nf_seg_t *seg, const nf_seg_note_t *note, size_t n,
                       double loss, uint64_t call)
{
    if (h == NULL)
        return;
    int spike = nf_health_spike(h, loss);
    /* A loss spike affects every low-bit segment of the communicator: the
     * ones this call reduced below, and every one seen before. */
    for (size_t k = 0; spike && k < nf_segstate_count(h->segs); k++) {
        nf_segrec_t *r = nf_segstate_at(h->segs, k);
        if ((r->parts & NF_SEG_HEALTH) && r->health.left == 0)
            nf_health_start(&r->health, NF_HEALTH_LOSS_SPIKE, call);
    }
    for (size_t i = 0; i < n; i++) {
        nf_seg_t *g = &seg[i];
        if (!nf_route_lowbit(g->route) || note[i].cooling)
            continue; /* only a segment that ran (or tried) low-bit */
        nf_health_signal_t why = g->nonfinite ? NF_HEALTH_NONFINITE
                                 : g->ef_ratio > nf_hcfg.ef_growth ? NF_HEALTH_EF_GROWTH
                                 : spike ? NF_HEALTH_LOSS_SPIKE : NF_HEALTH_N;
        nf_hseg_t *s = nf_hseg(h, seg, n, i, 1); /* known from now on (loss spikes) */
        if (s == NULL || why == NF_HEALTH_N || s->left > 0)
            continue; /* healthy, or already cooling by this call's spike */
        nf_health_start(s, why, call);
        if (why == NF_HEALTH_EF_GROWTH && g->res != NULL)
            nf_residual_zero(g->res); /* what grew: start it over */
    }
}

/* Calibration (nf_calib.h). */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_agree.h"
#include "nf_calib.h"
#include "nf_file.h"
#include "nf_log.h"
#include "nf_policy.h"
#include "nf_region.h"
#include "nf_util.h"

#define NF_CALIB_MAX 4096 /* segments measured; more are not profiled */

typedef struct nf_calib_seg {
    char name[NF_REGION_NAME_MAX + 24];
    uint64_t elements, calls;
    double cos[2], rel[2]; /* sums over calls: binary, ternary */
} nf_calib_seg_t;

static struct {
    pthread_mutex_t lock;
    char *path;
    unsigned calls;
    double admit;
    nf_calib_seg_t *v;
    size_t n, cap;
} nf_cal = {.lock = PTHREAD_MUTEX_INITIALIZER};

void nf_calib_init(const char *path, unsigned calls, double admit)
{
    free(nf_cal.path);
    nf_cal.path = path != NULL ? strdup(path) : NULL;
    nf_cal.calls = calls > 0 ? calls : 20;
    nf_cal.admit = admit;
}

int nf_calib_on(void) { return nf_cal.path != NULL; }

const char *nf_calib_name(const nf_seg_t *g, char *buf, size_t len)
{
    if (g->name != NULL)
        return g->name;
    snprintf(buf, len, "buffer:%llu", (unsigned long long)(g->m * sizeof(float)));
    return buf;
}

/* The record for name (made on first sight); NULL past the bound. */
static nf_calib_seg_t *nf_calib_find(const char *name, uint64_t m)
{
    for (size_t i = 0; i < nf_cal.n; i++)
        if (strcmp(nf_cal.v[i].name, name) == 0)
            return &nf_cal.v[i];
    if (nf_cal.n >= NF_CALIB_MAX)
        return NULL;
    if (nf_cal.n == nf_cal.cap) {
        size_t cap = nf_cal.cap ? 2 * nf_cal.cap : 64;
        nf_calib_seg_t *v = realloc(nf_cal.v, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        nf_cal.v = v, nf_cal.cap = cap;
    }
    nf_calib_seg_t *s = &nf_cal.v[nf_cal.n++];
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->elements = m;
    return s;
}

/* Cosine similarity and relative L2 error of got against want (double
 * sums in element order: every rank computes the same bits). */
static void nf_calib_compare(const float *got, const float *want, size_t m, double *cos,
                             double *rel)
{
    double dot = 0.0, gg = 0.0, ww = 0.0, dd = 0.0;
    for (size_t j = 0; j < m; j++) {
        double g = got[j], w = want[j];
        dot += g * w, gg += g * g, ww += w * w, dd += (g - w) * (g - w);
    }
    *cos = gg > 0.0 && ww > 0.0 ? dot / sqrt(gg * ww) : (gg == ww ? 1.0 : 0.0);
    *rel = ww > 0.0 ? sqrt(dd / ww) : (dd > 0.0 ? 1.0 : 0.0);
}

/* Whether some segment still needs measurements (decided from what every
 * rank recorded alike, so every rank runs the shadows in the same calls). */
static int nf_calib_wanted(const nf_seg_t *seg, size_t nseg)
{
    char buf[64];
    int want = 0;
    pthread_mutex_lock(&nf_cal.lock);
    for (size_t s = 0; s < nseg && !want; s++) {
        nf_calib_seg_t *r = nf_calib_find(nf_calib_name(&seg[s], buf, sizeof(buf)), seg[s].m);
        want = r != NULL && r->calls < nf_cal.calls;
    }
    pthread_mutex_unlock(&nf_cal.lock);
    return want;
}

static void nf_calib_record(const nf_seg_t *seg, size_t nseg, const float *exact,
                            float *const shadow[2])
{
    char buf[64];
    pthread_mutex_lock(&nf_cal.lock);
    for (size_t s = 0; s < nseg; s++) {
        const nf_seg_t *g = &seg[s];
        nf_calib_seg_t *r = nf_calib_find(nf_calib_name(g, buf, sizeof(buf)), g->m);
        if (r == NULL || r->calls >= nf_cal.calls)
            continue;
        for (int w = 0; w < 2; w++) {
            double cs, rl;
            nf_calib_compare(shadow[w] + g->off, exact + g->off, g->m, &cs, &rl);
            r->cos[w] += cs, r->rel[w] += rl;
        }
        r->calls++;
    }
    pthread_mutex_unlock(&nf_cal.lock);
}

/* Both shadows of the call, from the input copy x into the two buffers. */
static nf_status_t nf_calib_shadows(nf_comm_t *c, const float *x, size_t m, const nf_seg_t *seg,
                                    size_t nseg, float *const out[2])
{
    nf_seg_t *tmp = malloc(nseg * sizeof(*tmp));
    nf_status_t st = tmp == NULL ? NF_ERR_NO_MEMORY : NF_OK;
    for (unsigned w = 0; st == NF_OK && w < 2; w++) {
        for (size_t s = 0; s < nseg; s++) {
            tmp[s] = seg[s];
            tmp[s].route = w == 0 ? NF_ROUTE_BINARY : NF_ROUTE_TERNARY;
            tmp[s].ef = -1; /* the settings' error feedback, as a route would run */
            /* ef_decay stays the segment's: under an ef_decay rule calibration
             * measures the decayed route */
        }
        st = nf_run_shadow(c, x, out[w], m, tmp, nseg, w);
    }
    free(tmp);
    return st;
}

nf_status_t nf_calib_run(nf_comm_t *c, const nf_run_args_t *a, nf_seg_t *seg, size_t nseg)
{
    size_t m = (size_t)a->count;
    const float *in = a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf;
    int want = nf_calib_wanted(seg, nseg) && nf_comm_ready(c) == NF_OK;
    float *x = want ? malloc(3 * m * sizeof(float)) : NULL;
    /* Without memory for the copies, every rank must still take the same
     * path: the shadows' collectives are agreed through their header, so a
     * rank that skips them would leave the others waiting. Agree first. */
    if (want && nf_agree_status(c->priv, x != NULL ? NF_OK : NF_ERR_NO_MEMORY) != NF_OK) {
        free(x);
        x = NULL, want = 0;
    }
    if (want)
        memcpy(x, in, m * sizeof(float)); /* the exact run may overwrite it */
    for (size_t s = 0; s < nseg; s++)
        seg[s].route = NF_ROUTE_FP32;
    nf_status_t st = nf_run_plan(c, a, seg, nseg);
    if (st == NF_OK && want) {
        float *const out[2] = {x + m, x + 2 * m};
        st = nf_calib_shadows(c, x, m, seg, nseg, out);
        if (st == NF_OK)
            nf_calib_record(seg, nseg, a->recvbuf, out);
    }
    free(x);
    return st;
}

static void nf_calib_write(void)
{
    nf_profile_entry_t *e = calloc(nf_cal.n + 1, sizeof(*e));
    nf_wfile_t f;
    if (e == NULL || nf_wfile_open(&f, nf_cal.path) != NF_OK) {
        nf_log_warn("cannot write the calibration profile %s", nf_cal.path);
        free(e);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < nf_cal.n; i++) {
        const nf_calib_seg_t *r = &nf_cal.v[i];
        if (r->calls == 0)
            continue;
        double k = (double)r->calls;
        e[n] = (nf_profile_entry_t){.segment = r->name, .elements = r->elements,
                                    .calls = r->calls, .cos_binary = r->cos[0] / k,
                                    .cos_ternary = r->cos[1] / k,
                                    .relerr_binary = r->rel[0] / k,
                                    .relerr_ternary = r->rel[1] / k};
        e[n].route = nf_profile_choose(e[n].cos_binary, e[n].cos_ternary, nf_cal.admit);
        n++;
    }
    if (nf_profile_write(f.fp, e, n) != 0) {
        nf_log_warn("writing the calibration profile %s failed: %m", nf_cal.path);
        nf_wfile_abort(&f);
    } else if (nf_wfile_commit(&f) == NF_OK) {
        nf_log_info(1, "calibration profile of %zu segments written to %s", n, nf_cal.path);
    }
    free(e);
}

void nf_calib_finish(int write)
{
    pthread_mutex_lock(&nf_cal.lock);
    if (write && nf_cal.path != NULL)
        nf_calib_write();
    free(nf_cal.v);
    free(nf_cal.path);
    nf_cal.v = NULL, nf_cal.n = nf_cal.cap = 0, nf_cal.path = NULL;
    pthread_mutex_unlock(&nf_cal.lock);
}

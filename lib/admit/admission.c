/* SPDX-License-Identifier: BSD-3-Clause */
/* Admission (nf_admit.h) and its per-communicator decision cache. */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_admit.h"
#include "nf_agree.h"
#include "nf_calib.h"
#include "nf_dcache.h"
#include "nf_decide.h"
#include "nf_handles.h"
#include "nf_health.h"
#include "nf_route.h"
#include "nf_warmup.h"
#include "nf_layout.h"
#include "nf_log.h"
#include "nf_plan.h"
#include "nf_profile.h"
#include "nf_regstats.h"
#include "nf_stats.h"
#include "nf_trace.h"
#include "nf_util.h"

static nf_policy_t *nf_pol;
static int nf_pol_state; /* 0: none, 1: loaded, -1: failed to load */
static unsigned nf_pol_fields;
static nf_profile_t *nf_prof; /* what route = auto reads */
static nf_layout_t *nf_lay;   /* regions of unmodified programs' calls */
static nf_decide_ctx_t nf_dx; /* the above, for nf_decide.h */
static const nf_settings_t *nf_adm_settings; /* what a rule's unset keys inherit */

/* Every rank parses the same file: rank 0 reports what the parser found. */
static void nf_policy_diag(const nf_policy_diag_t *d, void *arg)
{
    (void)arg;
    if (nf_log_rank() > 0)
        return;
    if (d->severity == NF_POLICY_ERROR)
        nf_log_error("%s:%d: %s", d->file, d->line, d->message);
    else
        nf_log_warn("%s:%d: %s", d->file, d->line, d->message);
}

/* The files the policy names: a profile that does not load leaves every
 * `route = auto` segment on fp32, a layout that does not load binds
 * nothing; both say why (file:line) on rank 0. */
static void nf_admit_files(void)
{
    const char *prof = nf_policy_profile(nf_pol), *lay = nf_policy_regions(nf_pol);
    if (prof != NULL && nf_profile_load(prof, nf_policy_diag, NULL, &nf_prof) != NF_OK &&
        nf_log_rank() <= 0)
        nf_log_warn("profile %s was not loaded: route = auto takes fp32", prof);
    if (lay != NULL && nf_layout_load(lay, nf_policy_diag, NULL, &nf_lay) != NF_OK &&
        nf_log_rank() <= 0)
        nf_log_warn("region layout %s was not loaded: no call is cut by it", lay);
}

static void nf_adm_register(void);

void nf_admit_init(const nf_settings_t *s, int rank)
{
    nf_adm_settings = s;
    nf_adm_register(); /* before any checkpoint is loaded: its part names this slot */
    if (s->policy != NULL) {
        nf_status_t st = nf_policy_load(s->policy, nf_policy_diag, NULL, &nf_pol);
        nf_pol_state = st == NF_OK ? 1 : -1;
        nf_pol_fields = nf_policy_fields(nf_pol);
        if (st != NF_OK && nf_log_rank() <= 0)
            nf_log_warn("NFCOLL_POLICY=%s was not loaded (%s): every MPI_Allreduce goes to "
                        "PMPI_Allreduce", s->policy, nf_strerror(st));
        else
            nf_admit_files();
    }
    const char *trace = s->trace != NULL ? s->trace : nf_policy_trace(nf_pol);
    if (trace != NULL)
        nf_trace_open(trace, rank);
    nf_calib_init(s->calibrate != NULL ? s->calibrate : nf_policy_calibrate(nf_pol),
                  nf_policy_calibrate_calls(nf_pol), nf_policy_admit_cosine(nf_pol));
    nf_health_init(nf_policy_health(nf_pol));
    nf_dx = (nf_decide_ctx_t){.pol = nf_pol, .layout = nf_lay, .prof = nf_prof,
                              .calibrate = nf_calib_on(), .count_bits = s->count_bits};
}

void nf_admit_finalize(void)
{
    nf_trace_close();
    nf_calib_finish(nf_log_rank() == 0);
    nf_profile_free(nf_prof);
    nf_layout_free(nf_lay);
    nf_policy_free(nf_pol);
    nf_pol = NULL, nf_prof = NULL, nf_lay = NULL;
    nf_dx = (nf_decide_ctx_t){0};
    nf_pol_state = 0;
    nf_pol_fields = 0;
}

const nf_policy_t *nf_admit_policy(void) { return nf_pol; }

uint64_t nf_admit_hash(void)
{
    if (nf_pol_state < 0)
        return 0x6661696c6564ull; /* "failed" */
    uint64_t h = nf_policy_hash(nf_pol);
    if (nf_prof != NULL || nf_lay != NULL || nf_calib_on()) {
        h = nf_hash_u64(nf_hash_u64(h, nf_profile_hash(nf_prof)), nf_layout_hash(nf_lay));
        h = nf_hash_u64(h, (uint64_t)nf_calib_on());
    }
    return h;
}

int nf_admit_wanted(void) { return nf_pol_state != 0 || nf_trace_on() || nf_calib_on(); }

const char *nf_admit_stats_dest(const nf_settings_t *s)
{
    return s->stats != NULL ? s->stats : nf_policy_stats(nf_pol);
}

/* ---- the per-communicator decision cache ----
 * As UCX's protocol selection: a one-entry cache on the raw call (datatype
 * and op handles, count; predefined datatypes only; the buffer when
 * regions are bound) in front of the table of decisions (nf_dcache.h),
 * each kept under one packed key of what nf_decide can tell apart:
 * datatype, op, whether it is a float sum, its bytes (their size class
 * when no layout or profile reads them), and the buffer with the region
 * generation when bound regions cut it. A miss runs nf_decide for the
 * whole call; a hit reads the decision and never writes it. Valid while no
 * rule can change its answer with the call index: from the first call on
 * for a policy without `calls`, after the last call range otherwise
 * (before that, every call is decided in the scratch record). */

typedef struct nf_adm_comm {
    uint64_t calls;      /* admitted on this communicator: the `calls` index */
    nf_segstate_t *segs;  /* per-segment state (warm-up counts, health's cool-downs),
                             made by the first call that keeps some */
    int warmed;           /* a rule's warm-up has counted on this communicator */
    nf_health_comm_t *health; /* the loss window, when the policy watches health */
    nf_dcache_t dc;       /* decisions */
    /* the one-entry cache: the last call's handles, count, buffer and
     * region generation, and its decision while that is still its fill */
    MPI_Datatype last_dt;
    MPI_Op last_op;
    int last_count;
    const void *last_x;
    unsigned last_gen;
    uint64_t last_bytes, last_fill;
    nf_drec_t *last;
} nf_adm_comm_t;

static void nf_adm_free(nf_comm_t *c, void *p)
{
    nf_adm_comm_t *s = p;
    (void)c;
    if (s == NULL)
        return;
    nf_dcache_free(&s->dc);
    nf_health_comm_free(s->health);
    nf_segstate_free(s->segs);
    free(s);
}

/* ---- checkpoints: what a restored run needs to continue bit for bit ----
 * u64 format (1), u64 the call index, then the warm-up counts and health's
 * state, each behind a u8 present flag (docs/design.md, "Checkpoints"). */

#define NF_ADM_CKPT_FORMAT 1

static nf_status_t nf_adm_save(nf_comm_t *c, void *state, unsigned char **buf, size_t *len)
{
    nf_adm_comm_t *s = state;
    nf_wbuf_t b = {0};
    unsigned char has;
    (void)c;
    if (s == NULL)
        return NF_OK; /* no call yet: nothing to keep */
    nf_wbuf_u64(&b, NF_ADM_CKPT_FORMAT);
    nf_wbuf_u64(&b, s->calls);
    has = s->warmed && s->segs != NULL;
    nf_wbuf_put(&b, &has, 1);
    if (has)
        nf_warmup_save(s->segs, &b);
    has = s->health != NULL;
    nf_wbuf_put(&b, &has, 1);
    if (has)
        nf_health_comm_save(s->health, &b);
    if (b.bad) {
        free(b.p);
        return NF_ERR_NO_MEMORY;
    }
    *buf = b.p, *len = b.n;
    return NF_OK;
}

static nf_adm_comm_t *nf_adm_state(nf_comm_t *c);
static nf_adm_comm_t *nf_adm_peek(const nf_comm_t *c);

/* What a part holds: the call index and new tables (NULL: none kept). */
typedef struct nf_adm_loaded {
    uint64_t calls;
    nf_segstate_t *segs;
    int warmed;
    nf_health_comm_t *health;
} nf_adm_loaded_t;

/* Read a part: into fresh tables when out is not NULL (commit), else a
 * check only. NF_ERR_PARSE on malformed input or no memory (out's tables
 * freed). */
static nf_status_t nf_adm_load_parts(nf_rbuf_t *r, nf_adm_loaded_t *out)
{
    uint64_t format, calls;
    unsigned char has_w, has_h;
    nf_adm_loaded_t l = {0};
    int bad = nf_rbuf_u64(r, &format) != 0 || format != NF_ADM_CKPT_FORMAT ||
              nf_rbuf_u64(r, &calls) != 0 || nf_rbuf_get(r, &has_w, 1) != 0 || has_w > 1;
    if (!bad && out != NULL && (l.segs = nf_segstate_new()) == NULL)
        bad = 1;
    if (!bad && has_w)
        bad = nf_warmup_load(l.segs, r, out != NULL) != NF_OK;
    l.warmed = has_w;
    if (!bad)
        bad = nf_rbuf_get(r, &has_h, 1) != 0 || has_h > 1;
    if (!bad && has_h && out != NULL && (l.health = nf_health_comm_new(l.segs)) == NULL)
        bad = 1;
    if (!bad && has_h)
        bad = nf_health_comm_load(l.health, r, out != NULL) != 0;
    bad = bad || r->at != r->n;
    if (bad || out == NULL) {
        nf_health_comm_free(l.health);
        nf_segstate_free(l.segs);
        return bad ? NF_ERR_PARSE : NF_OK;
    }
    l.calls = calls;
    *out = l;
    return NF_OK;
}

/* A part checked (commit 0), or installed (commit 1): the tables are read
 * into new ones and swapped in whole, so a failure (no memory) leaves the
 * state as it was. No part (len 0 at commit: the file kept nothing of
 * admission's) starts admission's state over, as in a new process. */
static nf_status_t nf_adm_load(nf_comm_t *c, const unsigned char *buf, size_t len, int commit,
                               char *why, size_t whylen)
{
    nf_rbuf_t r = {buf, len, 0};
    nf_adm_loaded_t l = {0};
    nf_adm_comm_t *s = commit ? (len > 0 ? nf_adm_state(c) : nf_adm_peek(c)) : NULL;
    if (commit && len == 0 && s == NULL)
        return NF_OK;
    if ((commit && s == NULL) || (len > 0 && nf_adm_load_parts(&r, commit ? &l : NULL) != 0)) {
        snprintf(why, whylen, "admission's state (warm-up counts, health, call index) is "
                 "malformed at byte %zu of %zu, saved under another health loss_window, or "
                 "there is no memory for it", r.at, len);
        if (commit)
            nf_log_error("NF_Residuals_load: %s; this rank keeps its own", why);
        return commit ? NF_ERR_NO_MEMORY : NF_ERR_PARSE;
    }
    if (!commit)
        return NF_OK;
    nf_health_comm_free(s->health);
    nf_segstate_free(s->segs);
    s->calls = l.calls, s->segs = l.segs, s->warmed = l.warmed, s->health = l.health;
    /* The call index may go back before the policy's `calls` ranges
     * settled: decisions kept since are not this index's. */
    nf_dcache_free(&s->dc);
    s->last = NULL;
    return NF_OK;
}

/* Admission's state per communicator hangs in a slot of core's nf_comm_t. */
static const nf_comm_slot_ops_t nf_adm_slot_ops = {"admission", NULL, nf_adm_free, nf_adm_save,
                                                   nf_adm_load};
static int nf_adm_slot = -1;
static pthread_once_t nf_adm_slot_once = PTHREAD_ONCE_INIT;

static void nf_adm_slot_init(void)
{
    if (nf_comm_slot_register(&nf_adm_slot_ops, &nf_adm_slot) != NF_OK)
        nf_adm_slot = -1;
}

/* The state, or NULL before the first call on c made it. */
static nf_adm_comm_t *nf_adm_peek(const nf_comm_t *c)
{
    return nf_adm_slot >= 0 ? atomic_load(&c->slot[nf_adm_slot]) : NULL;
}

static void nf_adm_register(void) { pthread_once(&nf_adm_slot_once, nf_adm_slot_init); }

static nf_adm_comm_t *nf_adm_state(nf_comm_t *c)
{
    nf_adm_register();
    if (nf_adm_slot < 0)
        return NULL;
    nf_adm_comm_t *s = atomic_load(&c->slot[nf_adm_slot]);
    if (s == NULL) {
        s = calloc(1, sizeof(nf_adm_comm_t));
        atomic_store(&c->slot[nf_adm_slot], s);
    }
    return s;
}

/* Sizes the policy cannot tell apart share a class; a layout cuts by
 * bytes and a profile names a buffer by them: then the bytes. */
static uint64_t nf_adm_size(uint64_t bytes, int exact)
{
    if (exact || nf_lay != NULL || nf_prof != NULL)
        return bytes;
    return (nf_pol_fields & NF_POLICY_F_BYTES) ? (uint64_t)nf_policy_size_class(nf_pol, bytes)
                                                : 0;
}

static void nf_adm_query(const nf_comm_t *c, uint64_t call, nf_dtype_t dt, nf_opkind_t op,
                         uint64_t bytes, nf_policy_query_t *q)
{
    *q = (nf_policy_query_t){.region = NULL, .comm_name = c->name, .comm_size = c->size,
                             .datatype = dt, .op = op, .bytes = bytes, .call = call};
}

/* Whether a segment of this call could match a rule whose pmpi-ness differs
 * from another's (so ranks that cut the call differently could disagree on
 * running it whole on pmpi). Any region name can match a `region` rule;
 * without one, a segment differs from its call only in bytes, at most the
 * call's: every size class up to it is tried. Once per cache entry. */
static int nf_adm_split(const nf_policy_query_t *call)
{
    if (nf_pol_fields & NF_POLICY_F_REGION)
        return 1;
    if (!(nf_pol_fields & NF_POLICY_F_BYTES))
        return 0;
    unsigned top = nf_policy_size_class(nf_pol, call->bytes);
    int pmpi = -1;
    for (unsigned k = 0; k <= top; k++) {
        nf_policy_query_t q = *call;
        nf_policy_action_t a;
        q.bytes = nf_policy_size_class_low(nf_pol, k);
        nf_policy_match(nf_pol, &q, &a);
        if (pmpi >= 0 && pmpi != (a.route == NF_ROUTE_PMPI))
            return 1;
        pmpi = a.route == NF_ROUTE_PMPI;
    }
    return 0;
}

/* A profile entry route = auto ignored (nf_decide_auto): said once. */
static void nf_adm_stale(const nf_profile_entry_t *pe, uint64_t m)
{
    if (pe != NULL)
        nf_log_warn_once_root(nf_log_rank() <= 0, "the profile's entry for %s measured %llu "
                              "elements, the segment has %llu: ignored, it takes fp32 (further "
                              "such entries are not reported)", pe->segment,
                              (unsigned long long)pe->elements, (unsigned long long)m);
}

/* "file:line" into buf, keeping a long file name's tail. */
static void nf_adm_where(char *buf, size_t len, const char *file, int line)
{
    char all[4200];
    int n = snprintf(all, sizeof(all), "%s:%d", file, line);
    size_t from = n > 0 && (size_t)n >= len ? (size_t)n - (len - 1) : 0;
    snprintf(buf, len, "%s", file[0] != '\0' ? all + from : "");
}

/* The stats' record of why a region segment of a new plan got its route. */
static void nf_adm_record(const nf_seg_t *g, const nf_policy_action_t *a,
                          const nf_decide_reason_t *r)
{
    nf_rs_why_t w = {.route = r->why == NF_WHY_CALIBRATE ? NF_ROUTE_FP32 : g->route,
                     .cos_binary = NAN, .cos_ternary = NAN, .cos_int4 = NAN, .lag_cosine = NAN,
                     .admit_cosine = nf_policy_admit_cosine(nf_pol), .warmup = a->warmup};
    nf_decide_params_t p;
    if (g->id == 0)
        return;
    nf_decide_params(a, r, g->route, nf_adm_settings != NULL ? nf_adm_settings : nf_settings_load(),
                     &p);
    w.ef_decay = p.ef_decay, w.scale_block = p.scale_block;
    snprintf(w.decay_by, sizeof(w.decay_by), "%s", p.decay_by != NULL ? p.decay_by : "");
    snprintf(w.block_by, sizeof(w.block_by), "%s", p.block_by != NULL ? p.block_by : "");
    w.block = p.block;
    snprintf(w.int_block_by, sizeof(w.int_block_by), "%s", p.int_block_by != NULL ? p.int_block_by : "");
    snprintf(w.by, sizeof(w.by), "%s", nf_decide_why_name(r->why));
    snprintf(w.rule, sizeof(w.rule), "%s", a->rule);
    nf_adm_where(w.where, sizeof(w.where), a->file, a->line);
    if (r->pe != NULL) {
        const char *f = nf_profile_file(nf_prof);
        nf_adm_where(w.entry, sizeof(w.entry), f != NULL ? f : "-",
                     nf_profile_line(nf_prof, r->pe));
        w.entry_elements = r->pe->elements;
        w.cos_binary = r->pe->cos_binary, w.cos_ternary = r->pe->cos_ternary;
        w.cos_int4 = r->pe->cos_int[0];
        w.lag_cosine = r->pe->lag_cosine;
    }
    nf_regstats_why(g->id, &w);
}

/* Whether the communicator lets a call leave pmpi (nf_decide's comm_ok):
 * nf_adm_comm_check says why not, per call. */
static int nf_adm_comm_ok(const nf_comm_t *c)
{
    return !c->is_inter && c->size >= 2 && c->use != NF_COMM_POLICY;
}

/* Decide the call keyed k into r (nf_decide, whole): its segments into
 * r->plan, their reasons into the stats, a stale profile entry said once.
 * NF_OK, or NF_ERR_NO_MEMORY: r holds a decision to run this call with
 * but not one to keep. */
static nf_status_t nf_adm_fill(nf_comm_t *c, nf_adm_comm_t *s, nf_drec_t *r,
                               const nf_dkey_t *k, int count, uint64_t bytes)
{
    long np = 0;
    nf_status_t st = NF_OK;
    nf_policy_query_t q;
    nf_decide_call_t dc = {.comm_name = c->name, .comm_size = c->size, .dt = k->dt,
                           .op = k->op, .bytes = bytes,
                           .count = (uint64_t)(count > 0 ? count : 0), .call = s->calls};
    if (k->x != NULL && (np = nf_plan_parts(&r->plan, k->x, (size_t)count)) < 0)
        np = 0, st = NF_ERR_NO_MEMORY; /* not cut by its regions: the layout's, if any */
    dc.parts = r->plan.dparts, dc.nparts = (size_t)np;
    if (nf_decide(&nf_dx, &dc, nf_adm_comm_ok(c), &r->d) != NF_OK)
        st = NF_ERR_NO_MEMORY; /* not cut: runs whole */
    nf_adm_stale(r->d.stale, r->d.stale_m);
    nf_adm_query(c, s->calls, k->dt, k->op, bytes, &q);
    r->split = nf_adm_split(&q);
    if (r->d.cut == NF_CUT_NONE)
        return st;
    if (nf_plan_take(&r->plan, &r->d, (size_t)np) < 0)
        return NF_ERR_NO_MEMORY;
    for (size_t i = 0; i < r->plan.n; i++)
        nf_adm_record(&r->plan.tmpl[i], &r->plan.act[i], &r->plan.note[i].why);
    return st;
}

/* The decision for this call: from the cache when it may answer (a hit
 * reads the record, never writes it), else made (kept when the cache may
 * keep it). The call's bytes into *bytes_out. */
static nf_drec_t *nf_adm_lookup(nf_comm_t *c, nf_adm_comm_t *s, const void *x, int count,
                                MPI_Datatype datatype, MPI_Op op, uint64_t *bytes_out)
{
    unsigned gen = nf_region_generation();
    if (s->last != NULL && s->last->fill == s->last_fill && s->last_dt == datatype &&
        s->last_op == op && s->last_count == count &&
        ((gen == 0 && s->last->key.x == NULL) || (s->last_x == x && s->last_gen == gen))) {
        *bytes_out = s->last_bytes;
        return s->last;
    }
    int tsize = 0;
    if (PMPI_Type_size(datatype, &tsize) != MPI_SUCCESS)
        tsize = 0; /* an invalid datatype: PMPI_Allreduce will say so */
    uint64_t bytes = (uint64_t)count * (uint64_t)tsize;
    nf_dkey_t k = {.dt = nf_dtype_of(datatype), .op = nf_opkind_of(op)};
    k.fsum = count > 0 && nf_decide_float_sum(k.dt, k.op, bytes, (uint64_t)count);
    if (k.fsum && gen != 0 && nf_region_any(x, (size_t)count))
        k.x = x, k.gen = gen;
    k.size = nf_adm_size(bytes, k.x != NULL);
    *bytes_out = bytes;
    /* the policy may answer otherwise next call: not kept */
    int keep = !(nf_pol_fields & NF_POLICY_F_CALLS) || s->calls >= nf_policy_calls_settled(nf_pol);
    nf_drec_t *r = keep ? nf_dcache_find(&s->dc, &k) : NULL;
    if (r == NULL) {
        r = nf_dcache_take(&s->dc, &k, keep);
        if (nf_adm_fill(c, s, r, &k, count, bytes) != NF_OK)
            return nf_dcache_drop(&s->dc, r); /* run it, keep nothing: retried next call */
        if (!keep)
            return r;
        nf_dcache_bound(&s->dc, r);
    }
    /* A derived type's handle can be freed and given to another type, of
     * another size: only predefined handles (never freed) key the
     * one-entry cache. A user op's handle may be reused too, but every
     * user op is one kind to the policy. */
    if (k.dt != NF_DT_DERIVED)
        s->last = r, s->last_fill = r->fill, s->last_dt = datatype, s->last_op = op,
        s->last_count = count, s->last_x = x, s->last_gen = gen, s->last_bytes = bytes;
    return r;
}

/* Fallbacks of the whole call that only the communicator can tell. */
static nf_route_t nf_adm_comm_check(const nf_comm_t *c, nf_route_t route)
{
    if (route != NF_ROUTE_PMPI && (c->is_inter || c->size < 2)) {
        nf_stats_fallback(NF_FALLBACK_COMM);
        return NF_ROUTE_PMPI;
    }
    /* Ranks that disagree on the policy or the communicator's name could
     * pick different routes: all of them take pmpi. */
    if (route != NF_ROUTE_PMPI && c->use == NF_COMM_POLICY) {
        nf_stats_fallback(NF_FALLBACK_POLICY);
        return NF_ROUTE_PMPI;
    }
    return route;
}

/* The trace's last column: what kept a segment off its route, or NULL. */
static const char *nf_adm_why(const nf_seg_note_t *t)
{
    return t->warmup ? "warmup" : t->health;
}

/* The trace's records of the call (one per segment), with the route each
 * ran on. Nothing when no trace is open. */
static void nf_admit_trace(const nf_comm_t *c, const nf_decision_t *d)
{
    if (!nf_trace_on() || d->entry == NULL)
        return;
    const nf_drec_t *r = d->entry;
    nf_policy_query_t q;
    nf_adm_query(c, d->call, r->key.dt, r->key.op, d->bytes, &q);
    if (!d->fused) {
        const nf_seg_t *g = &d->seg[0];
        const nf_seg_note_t *t = &d->note[0];
        nf_trace_why_t why = {t->why, nf_adm_why(t), g->fallback};
        nf_trace_record(c->rank, &q, t->cooling || t->warmup ? t->asked : d->route,
                        &r->d.whole, NULL, 0, g->m, g->ran, &why);
        return;
    }
    for (size_t i = 0; i < d->nseg; i++) {
        const nf_seg_t *g = &d->seg[i];
        q.bytes = (uint64_t)g->m * sizeof(float);
        const nf_seg_note_t *t = &d->note[i];
        nf_trace_why_t why = {t->why, nf_adm_why(t), g->fallback};
        nf_trace_record(c->rank, &q, t->cooling || t->warmup ? t->asked : g->route,
                        &r->plan.act[i], g->name, g->off, g->m, g->ran, &why);
    }
}

/* Whether ranks can disagree on running this call whole on pmpi: its cut
 * depends on what each rank bound, and a segment may match a rule of
 * another pmpi-ness than the call's (nf_adm_split). Only from what every
 * rank sees alike (policy, call, communicator), so all or none agree. A
 * calibration run reduces every float sum, so nothing of it is pmpi. */
static int nf_adm_may_differ(const nf_comm_t *c, const nf_drec_t *r)
{
    return r->split && !nf_calib_on() && r->key.fsum &&
           r->d.whole.segment != NF_POLICY_SEGMENT_BUFFER && c->use == NF_COMM_OK &&
           !c->is_inter && c->size >= 2;
}

/* pmpi or libnfcoll's protocol for the whole call, agreed: a rank in
 * PMPI_Allreduce and one in the protocol would wait for each other. Ranks
 * that both enter the protocol compare their layouts there (`layout`
 * fallback); a mix of both runs pmpi on every rank. 1 when every rank runs
 * pmpi. docs/design.md, "Agreement". */
static int nf_adm_agree_pmpi(const nf_comm_t *c, int pmpi)
{
    enum { NF_ADM_PMPI = 1u, NF_ADM_PROTOCOL = 2u };
    unsigned all = 0;
    if (nf_agree_any(c->priv, pmpi ? NF_ADM_PMPI : NF_ADM_PROTOCOL, &all) != NF_OK)
        return 1; /* MPI failed under us: PMPI_Allreduce will say so */
    if (all != (NF_ADM_PMPI | NF_ADM_PROTOCOL))
        return pmpi;
    nf_log_warn_once_root(c->rank == 0, "ranks cut a call into different segments (bound "
                          "regions differ) and some would run it whole on pmpi: running "
                          "pmpi on every rank");
    nf_stats_fallback(NF_FALLBACK_LAYOUT);
    return 1;
}

void nf_admit_after(nf_comm_t *c, nf_decision_t *d, nf_status_t st)
{
    nf_adm_comm_t *s = nf_adm_peek(c);
    if (st == NF_OK && d->health && s != NULL)
        nf_health_observe(s->health, d->seg, d->note, d->nseg, d->loss_mean, d->call);
    nf_admit_trace(c, d);
}

/* Warm-up, then health: segments warming up or cooling down run fp32; a
 * call with a low-bit segment left carries this rank's reported loss and
 * measures the signals. act: the segments' policy actions. */
static void nf_adm_health(nf_adm_comm_t *s, nf_decision_t *d, const nf_policy_action_t *act)
{
    int warm = 0;
    for (size_t i = 0; i < d->nseg; i++) { /* why is the plan's, kept */
        nf_seg_note_t *t = &d->note[i];
        t->asked = d->seg[i].route, t->warmup = 0, t->cooling = 0, t->health = NULL;
        warm |= act[i].warmup > 0;
    }
    if (d->calibrate || d->route == NF_ROUTE_PMPI)
        return;
    if ((warm || nf_health_on()) && s->segs == NULL)
        s->segs = nf_segstate_new();
    /* without memory for the records, the segments run their routes */
    if (warm && s->segs != NULL) {
        s->warmed = 1;
        nf_warmup_apply(s->segs, d->seg, d->note, act, d->nseg, d->call);
    }
    if (!nf_health_on())
        return;
    if (s->segs == NULL || (s->health == NULL && (s->health = nf_health_comm_new(s->segs)) == NULL))
        return; /* no memory: the call runs unwatched, as with health off */
    nf_health_apply(s->health, d->seg, d->note, d->nseg, d->call);
    for (size_t i = 0; i < d->nseg && !d->health; i++)
        d->health = nf_route_lowbit(d->seg[i].route);
    d->loss = d->health ? nf_health_take_loss() : NAN;
}

void nf_admit_decide(nf_comm_t *c, const void *x, int count, MPI_Datatype datatype, MPI_Op op,
                     nf_decision_t *out)
{
    nf_adm_comm_t *s = nf_adm_state(c);
    size_t m = count > 0 ? (size_t)count : 0;
    *out = (nf_decision_t){.route = NF_ROUTE_PMPI, .seg = &out->one, .nseg = 1,
                           .note = &out->one_note};
    out->one = (nf_seg_t){.m = m, .route = NF_ROUTE_PMPI, .ef = -1, .gamma = -1.0,
                          .ef_decay = -1.0, .fallback = NF_FALLBACK_NONE, .scale_block = -1,
                          .block = 0};
    if (s == NULL) /* no memory for the cache: pmpi is always correct */
        return;
    nf_drec_t *r = nf_adm_lookup(c, s, x, count, datatype, op, &out->bytes);
    const nf_decide_t *d = &r->d;
    out->call = s->calls++;
    out->entry = r;
    /* Without memory for its segments a fused call runs whole, on fp32. */
    int fused = d->cut == NF_CUT_FUSED && r->plan.n > 0;
    /* The communicator is checked below, with its fallback counters. */
    nf_route_t want = nf_decide_want(d, 1);
    if (nf_adm_may_differ(c, r) && nf_adm_agree_pmpi(c, want == NF_ROUTE_PMPI))
        fused = 0, want = NF_ROUTE_PMPI;
    out->route = nf_adm_comm_check(c, want);
    out->calibrate = d->calibrate && out->route != NF_ROUTE_PMPI;
    if (fused && out->route != NF_ROUTE_PMPI) {
        nf_plan_t *p = &r->plan;
        nf_plan_start(p); /* its segments as decided, to run and watch */
        out->fused = 1;
        out->seg = p->seg, out->nseg = p->n, out->note = p->note;
        nf_adm_health(s, out, p->act);
        return;
    }
    out->one.ef = d->whole.ef, out->one.gamma = d->whole.gamma;
    out->one.ef_decay = d->whole.ef_decay, out->one.scale_block = d->whole.scale_block;
    out->one.block = d->whole.block;
    if (out->route != NF_ROUTE_PMPI)
        out->one.route = d->route, out->one_note.why = d->why;
    nf_adm_health(s, out, &d->whole);
}

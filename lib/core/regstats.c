/* SPDX-License-Identifier: BSD-3-Clause */
/* Per-region counters (nf_regstats.h). A small open-addressed table by
 * name under a mutex, found from a call by the region's interned id through
 * an array of entries (no name is hashed per call). */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nf_ctx.h"
#include "nf_intern.h"
#include "nf_regstats.h"
#include "nf_region.h"
#include "nf_traffic.h"
#include "nf_util.h"

enum { NF_RS_CALLS, NF_RS_ELEMS, NF_RS_UP, NF_RS_TOTAL, NF_RS_N };
#define NF_RS_SLOTS (2 * NF_REGSTATS_MAX) /* a power of two */
#define NF_RS_OTHER "(other)"

/* Call indices are kept + 1: 0 is "never". */
typedef struct nf_rs_tally {
    uint64_t n, last;               /* events, and the last one's call */
} nf_rs_tally_t;

typedef struct nf_rs_when {
    uint64_t first_cool, last_cool; /* the first and last cool-down's start */
    nf_rs_tally_t reentry;          /* re-entries after a cool-down */
    nf_rs_tally_t warmup;           /* calls run fp32 for a warm-up */
    int signal;                     /* of the last cool-down */
} nf_rs_when_t;

typedef struct nf_rs_entry {
    char name[NF_REGION_NAME_MAX + 32]; /* "" : empty slot */
    uint64_t v[NF_ROUTE_COUNT][NF_RS_N];
    uint64_t health[NF_HEALTH_N];  /* events by signal */
    uint64_t fallback[NF_FALLBACK_COUNT]; /* calls that ran other than given, by reason */
    nf_rs_when_t when;
    int has_why;
    nf_rs_why_t why;
} nf_rs_entry_t;

static const char *const nf_health_names[NF_HEALTH_N] = {
    [NF_HEALTH_NONFINITE] = "nonfinite",
    [NF_HEALTH_EF_GROWTH] = "ef_growth",
    [NF_HEALTH_LOSS_SPIKE] = "loss_spike",
};

const char *nf_health_signal_name(nf_health_signal_t s)
{
    return (unsigned)s < NF_HEALTH_N ? nf_health_names[s] : "unknown";
}

typedef struct nf_rs_table {
    nf_rs_entry_t slot[NF_RS_SLOTS];
    unsigned n;
} nf_rs_table_t;

static pthread_mutex_t nf_rs_lock = PTHREAD_MUTEX_INITIALIZER;
static nf_rs_table_t *nf_rs;      /* this process */
static nf_rs_table_t *nf_rs_sum;  /* rank 0 after a gather */
static nf_rs_entry_t **nf_rs_by_id; /* this process's entries by region id */
static uint32_t nf_rs_by_id_cap;

/* The entry for name, made when there is room (else "(other)"). */
static nf_rs_entry_t *nf_rs_get(nf_rs_table_t *t, const char *name)
{
    uint64_t h = nf_hash_str(NF_HASH_INIT, name);
    for (unsigned i = 0; i < NF_RS_SLOTS; i++) {
        nf_rs_entry_t *e = &t->slot[(h + i) & (NF_RS_SLOTS - 1)];
        if (strcmp(e->name, name) == 0)
            return e;
        if (e->name[0] == '\0') {
            if (t->n >= NF_REGSTATS_MAX - 1 && strcmp(name, NF_RS_OTHER) != 0)
                return nf_rs_get(t, NF_RS_OTHER);
            snprintf(e->name, sizeof(e->name), "%s", name);
            t->n++;
            return e;
        }
    }
    return NULL; /* unreachable: the table is twice the cap */
}

/* Under the lock: the entry of region id, through the array (made on
 * first sight, and indexed when there is memory). */
static nf_rs_entry_t *nf_rs_of(uint32_t id)
{
    if (id < nf_rs_by_id_cap && nf_rs_by_id[id] != NULL)
        return nf_rs_by_id[id];
    const char *name = nf_intern_name(id);
    nf_rs_entry_t *e = nf_rs != NULL && name != NULL ? nf_rs_get(nf_rs, name) : NULL;
    if (e != NULL && nf_id_array_grow(&nf_rs_by_id, &nf_rs_by_id_cap, id, sizeof(e)) == 0)
        nf_rs_by_id[id] = e;
    return e;
}

void nf_regstats_add(uint32_t id, nf_route_t route, uint64_t elements, uint64_t upstream,
                     uint64_t total, int fallback)
{
    pthread_mutex_lock(&nf_rs_lock);
    if (nf_rs == NULL)
        nf_rs = calloc(1, sizeof(*nf_rs));
    nf_rs_entry_t *e = nf_rs_of(id);
    if (e != NULL) {
        uint64_t *v = e->v[route];
        v[NF_RS_CALLS]++, v[NF_RS_ELEMS] += elements, v[NF_RS_UP] += upstream;
        v[NF_RS_TOTAL] += total;
        if (fallback >= 0 && fallback < NF_FALLBACK_COUNT)
            e->fallback[fallback]++;
    }
    pthread_mutex_unlock(&nf_rs_lock);
}

void nf_regstats_why(uint32_t id, const nf_rs_why_t *w)
{
    pthread_mutex_lock(&nf_rs_lock);
    if (nf_rs == NULL)
        nf_rs = calloc(1, sizeof(*nf_rs));
    nf_rs_entry_t *e = nf_rs_of(id);
    if (e != NULL)
        e->why = *w, e->has_why = 1;
    pthread_mutex_unlock(&nf_rs_lock);
}

/* Under the lock: the entry of a health segment's name. */
static nf_rs_entry_t *nf_rs_named(const char *name)
{
    if (nf_rs == NULL)
        nf_rs = calloc(1, sizeof(*nf_rs));
    return nf_rs != NULL ? nf_rs_get(nf_rs, name) : NULL;
}

void nf_regstats_health(const char *name, nf_health_signal_t signal, uint64_t call)
{
    pthread_mutex_lock(&nf_rs_lock);
    nf_rs_entry_t *e = nf_rs_named(name);
    if (e != NULL) {
        e->health[signal]++;
        if (e->when.first_cool == 0)
            e->when.first_cool = call + 1;
        e->when.last_cool = call + 1, e->when.signal = (int)signal;
    }
    pthread_mutex_unlock(&nf_rs_lock);
}

/* One more event of a tally (reentry: 1, warm-up: 0) of name, at call. */
static void nf_rs_tally(const char *name, int reentry, uint64_t call)
{
    pthread_mutex_lock(&nf_rs_lock);
    nf_rs_entry_t *e = nf_rs_named(name);
    if (e != NULL) {
        nf_rs_tally_t *t = reentry ? &e->when.reentry : &e->when.warmup;
        t->n++, t->last = call + 1;
    }
    pthread_mutex_unlock(&nf_rs_lock);
}

void nf_regstats_reentry(const char *name, uint64_t call) { nf_rs_tally(name, 1, call); }

void nf_regstats_warmup(const char *name, uint64_t call) { nf_rs_tally(name, 0, call); }

/* This process's used entries, packed. */
static size_t nf_rs_pack(nf_rs_entry_t **out)
{
    size_t n = 0;
    *out = NULL;
    if (nf_rs == NULL || nf_rs->n == 0)
        return 0;
    *out = malloc(nf_rs->n * sizeof(nf_rs_entry_t));
    if (*out == NULL)
        return 0;
    for (unsigned i = 0; i < NF_RS_SLOTS; i++)
        if (nf_rs->slot[i].name[0] != '\0')
            (*out)[n++] = nf_rs->slot[i];
    return n;
}

/* Admission's reason is every rank's (the policy is agreed): the first
 * rank's that has one. Counts add up as the calls do; of the call indices
 * (agreed events: the same on every rank) the earliest first and the
 * latest last. */
static void nf_rs_merge_why(nf_rs_entry_t *e, const nf_rs_entry_t *v)
{
    nf_rs_when_t *w = &e->when;
    const nf_rs_when_t *o = &v->when;
    if (!e->has_why && v->has_why)
        e->why = v->why, e->has_why = 1;
    for (int f = 0; f < NF_FALLBACK_COUNT; f++)
        e->fallback[f] += v->fallback[f];
    if (o->first_cool != 0 && (w->first_cool == 0 || o->first_cool < w->first_cool))
        w->first_cool = o->first_cool;
    if (o->last_cool > w->last_cool)
        w->last_cool = o->last_cool, w->signal = o->signal;
    nf_rs_tally_t *wt[2] = {&w->reentry, &w->warmup};
    const nf_rs_tally_t *ot[2] = {&o->reentry, &o->warmup};
    for (int i = 0; i < 2; i++) {
        wt[i]->n += ot[i]->n;
        wt[i]->last = ot[i]->last > wt[i]->last ? ot[i]->last : wt[i]->last;
    }
}

static void nf_rs_merge(const nf_rs_entry_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        nf_rs_entry_t *e = nf_rs_get(nf_rs_sum, v[i].name);
        for (int r = 0; e != NULL && r < NF_ROUTE_COUNT; r++)
            for (int f = 0; f < NF_RS_N; f++)
                e->v[r][f] += v[i].v[r][f];
        for (int h = 0; e != NULL && h < NF_HEALTH_N; h++)
            e->health[h] += v[i].health[h];
        if (e != NULL)
            nf_rs_merge_why(e, &v[i]);
    }
}

nf_status_t nf_regstats_gather(MPI_Comm comm)
{
    int rank, size, bytes;
    nf_rs_entry_t *mine, *all = NULL;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    pthread_mutex_lock(&nf_rs_lock);
    bytes = (int)(nf_rs_pack(&mine) * sizeof(nf_rs_entry_t));
    pthread_mutex_unlock(&nf_rs_lock);
    int *counts = rank == 0 ? calloc((size_t)size, 2 * sizeof(int)) : NULL;
    nf_status_t st = nf_mpi_status(PMPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, comm));
    size_t total = 0;
    for (int i = 0; rank == 0 && counts != NULL && i < size; i++)
        counts[size + i] = (int)total, total += (size_t)counts[i];
    if (rank == 0 && (counts == NULL || (all = malloc(total + 1)) == NULL))
        st = NF_ERR_NO_MEMORY; /* still take part below, receiving nothing */
    if (st == NF_OK || st == NF_ERR_NO_MEMORY) {
        nf_status_t g = nf_mpi_status(PMPI_Gatherv(mine, bytes, MPI_BYTE, all, counts,
                                                   counts != NULL ? counts + size : NULL,
                                                   MPI_BYTE, 0, comm));
        st = st == NF_OK ? g : st;
    }
    if (rank == 0 && st == NF_OK && (nf_rs_sum = calloc(1, sizeof(*nf_rs_sum))) != NULL)
        nf_rs_merge(all, total / sizeof(nf_rs_entry_t));
    free(mine);
    free(all);
    free(counts);
    return st;
}

static const char *const nf_rs_keys[NF_RS_N] = {"calls", "elements", "upstream_bytes",
                                                "total_bytes"};

void nf_regstats_table(FILE *fp)
{
    if (nf_rs_sum == NULL || nf_rs_sum->n == 0)
        return;
    fprintf(fp, "%-32s %-8s %10s %14s %14s %14s\n", "region", "route", "calls", "elements",
            "upstream", "total");
    for (unsigned i = 0; i < NF_RS_SLOTS; i++) {
        const nf_rs_entry_t *e = &nf_rs_sum->slot[i];
        for (int r = 0; e->name[0] != '\0' && r < NF_ROUTE_COUNT; r++) {
            const uint64_t *v = e->v[r];
            if (v[NF_RS_CALLS] == 0)
                continue;
            fprintf(fp, "%-32s %-8s %10llu %14llu %14llu %14llu\n", e->name,
                    nf_route_name((nf_route_t)r), (unsigned long long)v[NF_RS_CALLS],
                    (unsigned long long)v[NF_RS_ELEMS], (unsigned long long)v[NF_RS_UP],
                    (unsigned long long)v[NF_RS_TOTAL]);
        }
    }
}

static int nf_rs_any_calls(const nf_rs_entry_t *e)
{
    for (int r = 0; r < NF_ROUTE_COUNT; r++)
        if (e->v[r][NF_RS_CALLS] != 0)
            return 1;
    return 0;
}

static int nf_rs_any_health(const nf_rs_entry_t *e)
{
    for (int h = 0; h < NF_HEALTH_N; h++)
        if (e->health[h] != 0)
            return 1;
    return 0;
}

/* The health events: one line per segment that had any. */
void nf_regstats_health_table(FILE *fp)
{
    int first = 1;
    for (unsigned i = 0; nf_rs_sum != NULL && i < NF_RS_SLOTS; i++) {
        const nf_rs_entry_t *e = &nf_rs_sum->slot[i];
        if (e->name[0] == '\0' || !nf_rs_any_health(e))
            continue;
        if (first)
            fprintf(fp, "health events (summed over ranks):\n");
        fprintf(fp, "  %-32s", e->name);
        for (int h = 0; h < NF_HEALTH_N; h++)
            fprintf(fp, " %s=%llu", nf_health_names[h], (unsigned long long)e->health[h]);
        fprintf(fp, "\n");
        first = 0;
    }
}

/* A JSON object keyed by region name: the summed entries keep() takes,
 * each valued by put(). Region names are printable non-space ASCII. */
static void nf_rs_json_object(FILE *fp, int (*keep)(const nf_rs_entry_t *),
                              void (*put)(FILE *, const nf_rs_entry_t *))
{
    int first = 1;
    fprintf(fp, "{");
    for (unsigned i = 0; nf_rs_sum != NULL && i < NF_RS_SLOTS; i++) {
        const nf_rs_entry_t *e = &nf_rs_sum->slot[i];
        if (e->name[0] == '\0' || !keep(e))
            continue;
        fprintf(fp, "%s\n    ", first ? "" : ",");
        nf_json_str(fp, e->name);
        fprintf(fp, ": {");
        put(fp, e);
        fprintf(fp, "}");
        first = 0;
    }
    fprintf(fp, "%s}", first ? "" : "\n  ");
}

static void nf_rs_health_put(FILE *fp, const nf_rs_entry_t *e)
{
    for (int h = 0; h < NF_HEALTH_N; h++)
        fprintf(fp, "%s\"%s\": %llu", h ? ", " : "", nf_health_names[h],
                (unsigned long long)e->health[h]);
}

void nf_regstats_health_json(FILE *fp) { nf_rs_json_object(fp, nf_rs_any_health, nf_rs_health_put); }

static void nf_rs_routes_put(FILE *fp, const nf_rs_entry_t *e)
{
    int fr = 1;
    for (int r = 0; r < NF_ROUTE_COUNT; r++) {
        if (e->v[r][NF_RS_CALLS] == 0)
            continue;
        fprintf(fp, "%s\"%s\": {", fr ? "" : ", ", nf_route_name((nf_route_t)r));
        for (int f = 0; f < NF_RS_N; f++)
            fprintf(fp, "%s\"%s\": %llu", f ? ", " : "", nf_rs_keys[f],
                    (unsigned long long)e->v[r][f]);
        fprintf(fp, "}");
        fr = 0;
    }
}

void nf_regstats_json(FILE *fp) { nf_rs_json_object(fp, nf_rs_any_calls, nf_rs_routes_put); }

/* ---- why each region ran where it ran ---- */

static int nf_rs_any_why(const nf_rs_entry_t *e)
{
    int any = e->has_why || e->when.first_cool != 0 || e->when.reentry.n != 0 ||
              e->when.warmup.n != 0;
    for (int f = 0; f < NF_FALLBACK_COUNT; f++)
        any |= e->fallback[f] != 0;
    return any;
}

/* A recorded call index (+ 1, 0: never) as JSON. */
static void nf_rs_json_call(FILE *fp, const char *key, uint64_t v)
{
    if (v == 0)
        fprintf(fp, ", \"%s\": null", key);
    else
        fprintf(fp, ", \"%s\": %llu", key, (unsigned long long)(v - 1));
}

static void nf_rs_json_num(FILE *fp, const char *key, double v)
{
    char buf[48];
    if (isfinite(v))
        fprintf(fp, ", \"%s\": %s", key, nf_format_fixed4(buf, sizeof(buf), v));
    else
        fprintf(fp, ", \"%s\": null", key);
}

/* A word as JSON, null when empty. */
static void nf_rs_json_word(FILE *fp, const char *key, const char *v)
{
    fprintf(fp, v[0] != '\0' ? ", \"%s\": \"%s\"" : ", \"%s\": null", key, v);
}

static void nf_rs_why_json_one(FILE *fp, const nf_rs_entry_t *e)
{
    const nf_rs_why_t *w = &e->why;
    const nf_rs_when_t *t = &e->when;
    uint64_t cools = 0;
    for (int h = 0; h < NF_HEALTH_N; h++)
        cools += e->health[h];
    if (e->has_why) {
        fprintf(fp, "\"route\": \"%s\", \"by\": ", nf_route_name(w->route));
        nf_json_str(fp, w->by);
        fprintf(fp, ", \"rule\": ");
        nf_json_str(fp, w->rule);
        fprintf(fp, ", \"where\": ");
        nf_json_str(fp, w->where);
        fprintf(fp, ", \"entry\": ");
        if (w->entry[0] != '\0') {
            nf_json_str(fp, w->entry);
            fprintf(fp, ", \"entry_elements\": %llu", (unsigned long long)w->entry_elements);
        } else {
            fprintf(fp, "null");
        }
        nf_rs_json_num(fp, "cos_binary", w->cos_binary);
        nf_rs_json_num(fp, "cos_ternary", w->cos_ternary);
        nf_rs_json_num(fp, "cos_int4", w->cos_int4);
        nf_rs_json_num(fp, "admit_cosine", w->admit_cosine);
        fprintf(fp, ", \"warmup\": %llu", (unsigned long long)w->warmup);
        nf_rs_json_num(fp, "lag_cosine", w->lag_cosine);
        nf_rs_json_num(fp, "ef_decay", w->ef_decay);
        nf_rs_json_word(fp, "ef_decay_by", w->decay_by);
        if (w->scale_block >= 0)
            fprintf(fp, ", \"scale_block\": %ld", w->scale_block);
        else
            fprintf(fp, ", \"scale_block\": null");
        nf_rs_json_word(fp, "scale_block_by", w->block_by);
        if (w->block >= 0)
            fprintf(fp, ", \"block\": %ld", w->block);
        else
            fprintf(fp, ", \"block\": null");
        nf_rs_json_word(fp, "block_by", w->int_block_by);
    } else {
        fprintf(fp, "\"route\": null, \"by\": null");
    }
    fprintf(fp, ", \"cooldowns\": %llu, \"last_signal\": ", (unsigned long long)cools);
    if (t->last_cool != 0)
        fprintf(fp, "\"%s\"", nf_health_signal_name((nf_health_signal_t)t->signal));
    else
        fprintf(fp, "null");
    nf_rs_json_call(fp, "first_cooldown_call", t->first_cool);
    nf_rs_json_call(fp, "last_cooldown_call", t->last_cool);
    fprintf(fp, ", \"reentries\": %llu", (unsigned long long)t->reentry.n);
    nf_rs_json_call(fp, "last_reentry_call", t->reentry.last);
    fprintf(fp, ", \"warmup_calls\": %llu", (unsigned long long)t->warmup.n);
    nf_rs_json_call(fp, "last_warmup_call", t->warmup.last);
    fprintf(fp, ", \"fallbacks\": {");
    for (int f = 0, first = 1; f < NF_FALLBACK_COUNT; f++) {
        if (e->fallback[f] == 0)
            continue;
        fprintf(fp, "%s\"%s\": %llu", first ? "" : ", ", nf_fallback_name((nf_fallback_t)f),
                (unsigned long long)e->fallback[f]);
        first = 0;
    }
    fprintf(fp, "}");
}

void nf_regstats_why_json(FILE *fp) { nf_rs_json_object(fp, nf_rs_any_why, nf_rs_why_json_one); }

static void nf_rs_why_line(FILE *fp, const nf_rs_entry_t *e)
{
    const nf_rs_why_t *w = &e->why;
    const nf_rs_when_t *t = &e->when;
    fprintf(fp, "  %-32s", e->name);
    if (e->has_why) {
        fprintf(fp, " %s by %s", nf_route_name(w->route), w->by);
        char b[48], tb[48], a[48];
        if (w->entry[0] != '\0') {
            fprintf(fp, " %s (%llu elements, cos_binary %s, cos_ternary %s", w->entry,
                    (unsigned long long)w->entry_elements,
                    nf_format_fixed4(b, sizeof(b), w->cos_binary),
                    nf_format_fixed4(tb, sizeof(tb), w->cos_ternary));
            if (!isnan(w->cos_int4)) /* a v3 profile's entry */
                fprintf(fp, ", cos_int4 %s", nf_format_fixed4(b, sizeof(b), w->cos_int4));
            fprintf(fp, "; admit_cosine %s)", nf_format_fixed4(a, sizeof(a), w->admit_cosine));
        }
        fprintf(fp, ", rule %s %s", w->rule, w->where[0] ? w->where : "(built-in)");
        if (w->warmup != 0)
            fprintf(fp, " (warmup %llu)", (unsigned long long)w->warmup);
        if (w->decay_by[0] != '\0') {
            if (isfinite(w->ef_decay))
                fprintf(fp, "; ef_decay %s by %s", nf_format_fixed4(b, sizeof(b), w->ef_decay),
                        w->decay_by);
            else
                fprintf(fp, "; error feedback off");
            if (isfinite(w->lag_cosine))
                fprintf(fp, " (lag cosine %s)", nf_format_fixed4(b, sizeof(b), w->lag_cosine));
            if (w->scale_block > 0)
                fprintf(fp, "; scale_block %ld by %s", w->scale_block, w->block_by);
            if (w->block > 0)
                fprintf(fp, "; block %ld by %s", w->block, w->int_block_by);
        }
    }
    if (t->warmup.n != 0)
        fprintf(fp, "; warm-up on fp32 %llu calls, last at call %llu",
                (unsigned long long)t->warmup.n, (unsigned long long)(t->warmup.last - 1));
    if (t->last_cool != 0)
        fprintf(fp, "; cool-downs from call %llu, last at call %llu (%s)",
                (unsigned long long)(t->first_cool - 1), (unsigned long long)(t->last_cool - 1),
                nf_health_signal_name((nf_health_signal_t)t->signal));
    if (t->reentry.n != 0)
        fprintf(fp, "; re-entered %llu times, last at call %llu",
                (unsigned long long)t->reentry.n, (unsigned long long)(t->reentry.last - 1));
    for (int f = 0; f < NF_FALLBACK_COUNT; f++)
        if (e->fallback[f] != 0)
            fprintf(fp, "; fallback %s %llu calls", nf_fallback_name((nf_fallback_t)f),
                    (unsigned long long)e->fallback[f]);
    fprintf(fp, "\n");
}

void nf_regstats_why_table(FILE *fp)
{
    int first = 1;
    for (unsigned i = 0; nf_rs_sum != NULL && i < NF_RS_SLOTS; i++) {
        const nf_rs_entry_t *e = &nf_rs_sum->slot[i];
        if (e->name[0] == '\0' || !nf_rs_any_why(e))
            continue;
        if (first)
            fprintf(fp, "admission (why each region ran where it ran; counts summed over "
                    "ranks, call indices the communicator's):\n");
        nf_rs_why_line(fp, e);
        first = 0;
    }
}

void nf_regstats_reset(void)
{
    pthread_mutex_lock(&nf_rs_lock);
    free(nf_rs);
    free(nf_rs_sum);
    free(nf_rs_by_id);
    nf_rs = nf_rs_sum = NULL;
    nf_rs_by_id = NULL, nf_rs_by_id_cap = 0;
    pthread_mutex_unlock(&nf_rs_lock);
}

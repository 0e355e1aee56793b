/* SPDX-License-Identifier: BSD-3-Clause */
/* nfcoll_replay's per-region reasons (replay_why.h). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nf_traffic.h" /* nf_json_str */
#include "nf_util.h"
#include "replay_why.h"

static void *rw_alloc(void *p, size_t n)
{
    if ((p = realloc(p, n)) == NULL) {
        fprintf(stderr, "nfcoll_replay: out of memory\n");
        exit(1);
    }
    return p;
}

/* Segments come in the same order call after call: the search starts
 * after the last one found. */
void replay_whys_note(replay_whys_t *t, const nf_decide_t *d, const nf_decide_seg_t *g)
{
    replay_why_t *w = NULL;
    for (size_t k = 0; k < t->n && w == NULL; k++) {
        size_t i = (t->hint + k) % t->n;
        if (strcmp(t->v[i].region, g->name) == 0)
            w = &t->v[i], t->hint = i + 1;
    }
    if (w == NULL) {
        if (t->n == t->cap)
            t->v = rw_alloc(t->v, (t->cap = t->cap ? 2 * t->cap : 16) * sizeof(*t->v));
        w = &t->v[t->n++];
        w->region = rw_alloc(NULL, strlen(g->name) + 1);
        strcpy(w->region, g->name);
    }
    w->route = d->calibrate ? NF_ROUTE_FP32 : g->route, w->why = g->why, w->act = g->act;
}

/* "file:line" as a JSON string ("" for the built-in default). */
static void rw_json_where(FILE *fp, const char *file, int line)
{
    char *buf = rw_alloc(NULL, strlen(file) + 16);
    sprintf(buf, "%s:%d", file, line);
    nf_json_str(fp, file[0] != '\0' ? buf : "");
    free(buf);
}

static void rw_json_num(FILE *fp, const char *key, double v)
{
    char b[48];
    fprintf(fp, ", \"%s\": %s", key, isfinite(v) ? nf_format_fixed4(b, sizeof(b), v) : "null");
}

static void rw_json_word(FILE *fp, const char *key, const char *v)
{
    fprintf(fp, v != NULL ? ", \"%s\": \"%s\"" : ", \"%s\": null", key, v != NULL ? v : "");
}

/* As the stats JSON writes its decision fields (which keep the last 191
 * bytes of a longer file:line). */
void replay_whys_json(FILE *fp, const replay_whys_t *t, const nf_profile_t *prof,
                      const nf_policy_t *pol)
{
    char b[48];
    fprintf(fp, "{");
    for (size_t i = 0; i < t->n; i++) {
        const replay_why_t *w = &t->v[i];
        const nf_profile_entry_t *pe = w->why.pe;
        fprintf(fp, "%s\n    ", i ? "," : "");
        nf_json_str(fp, w->region);
        fprintf(fp, ": {\"route\": \"%s\", \"by\": \"%s\", \"rule\": ",
                nf_route_name(w->route), nf_decide_why_name(w->why.why));
        nf_json_str(fp, w->act.rule);
        fprintf(fp, ", \"where\": ");
        rw_json_where(fp, w->act.file, w->act.line);
        fprintf(fp, ", \"entry\": ");
        if (pe != NULL) {
            rw_json_where(fp, nf_profile_file(prof), nf_profile_line(prof, pe));
            fprintf(fp, ", \"entry_elements\": %llu, \"cos_binary\": %s",
                    (unsigned long long)pe->elements,
                    nf_format_fixed4(b, sizeof(b), pe->cos_binary));
            fprintf(fp, ", \"cos_ternary\": %s", nf_format_fixed4(b, sizeof(b), pe->cos_ternary));
            rw_json_num(fp, "cos_int4", pe->cos_int[0]); /* null: a v1 or v2 profile's */
        } else {
            fprintf(fp, "null, \"cos_binary\": null, \"cos_ternary\": null, \"cos_int4\": null");
        }
        fprintf(fp, ", \"admit_cosine\": %s, \"warmup\": %llu",
                nf_format_fixed4(b, sizeof(b), nf_policy_admit_cosine(pol)),
                (unsigned long long)w->act.warmup);
        nf_decide_params_t p;
        nf_decide_params(&w->act, &w->why, w->route, nf_settings_load(), &p);
        rw_json_num(fp, "lag_cosine", pe != NULL ? pe->lag_cosine : NAN);
        rw_json_num(fp, "ef_decay", p.ef_decay);
        rw_json_word(fp, "ef_decay_by", p.decay_by);
        if (p.scale_block >= 0)
            fprintf(fp, ", \"scale_block\": %ld", p.scale_block);
        else
            fprintf(fp, ", \"scale_block\": null");
        rw_json_word(fp, "scale_block_by", p.block_by);
        if (p.block >= 0)
            fprintf(fp, ", \"block\": %ld", p.block);
        else
            fprintf(fp, ", \"block\": null");
        rw_json_word(fp, "block_by", p.int_block_by);
        fprintf(fp, "}");
    }
    fprintf(fp, "%s}", t->n ? "\n  " : "");
}

void replay_whys_free(replay_whys_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].region);
    free(t->v);
    memset(t, 0, sizeof(*t));
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Layout files (`[policy] regions`): named regions inside the buffers of an
 * unmodified program, by message size. Format and rules in nf_layout.h and
 * nfcoll-policy(5). No MPI calls.
 *
 * Loading checks each line alone, then, in file order, that no NAME repeats
 * and no range overlaps within one BYTES: the later line is the one dropped,
 * and the message names the earlier. A lookup is a binary search over the
 * kept entries sorted by (bytes, off).
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_layout.h"
#include "nf_policy_int.h"
#include "nf_util.h"

struct nf_layout {
    char *file;
    nf_layout_entry_t *e;   /* sorted by (bytes, off); names owned */
    size_t n;
    uint64_t hash;
};

/* Lines that passed the per-line checks, in file order. */
typedef struct nf_lparse {
    const char *file;
    nf_policy_diag_fn fn;
    void *arg;
    nf_layout_entry_t *e;
    size_t n, cap;
} nf_lparse_t;

static void nf_lay_drop(const nf_lparse_t *lp, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void nf_lay_drop(const nf_lparse_t *lp, int line, const char *fmt, ...)
{
    char msg[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    nf_pol_diagf(lp->fn, lp->arg, NF_POLICY_DISABLED, lp->file, line, "%s; entry dropped", msg);
}

/* --------------------------------------------------------- one line alone */

/* The checks of one field say what is wrong (the entry is dropped) and
 * return NF_ERR_PARSE. */
static nf_status_t nf_lay_bytes(const nf_lparse_t *lp, int line, const nf_pol_field_t *f,
                                uint64_t *bytes)
{
    char buf[64], show[48];

    if (f->len >= sizeof(buf)) {
        nf_lay_drop(lp, line, "bad BYTES '%s' (expected a size such as 4096, 64K or 1M)",
                    nf_pol_field_show(f, show, sizeof(show)));
        return NF_ERR_PARSE;
    }
    memcpy(buf, f->s, f->len);
    buf[f->len] = '\0';
    if (nf_policy_parse_size(buf, bytes) != NF_OK) {
        nf_lay_drop(lp, line, "bad BYTES '%s' (expected a size such as 4096, 64K or 1M)",
                    nf_pol_field_show(f, show, sizeof(show)));
        return NF_ERR_PARSE;
    }
    if (*bytes == 0 || *bytes % 4 != 0) {
        nf_lay_drop(lp, line, "BYTES %" PRIu64 " is not a positive multiple of 4 (a whole number of floats)",
                    *bytes);
        return NF_ERR_PARSE;
    }
    return NF_OK;
}

/* OFFSET and COUNT, and that the range fits in a call of e->bytes. */
static nf_status_t nf_lay_range(const nf_lparse_t *lp, int line, const nf_pol_field_t *f,
                                nf_layout_entry_t *e)
{
    char show[48];
    uint64_t elems = e->bytes / 4;

    if (nf_pol_field_u64(&f[2], &e->off) != NF_OK) {
        nf_lay_drop(lp, line, "bad OFFSET '%s' (expected a decimal element index)",
                    nf_pol_field_show(&f[2], show, sizeof(show)));
        return NF_ERR_PARSE;
    }
    if (nf_pol_field_u64(&f[3], &e->count) != NF_OK || e->count == 0) {
        nf_lay_drop(lp, line, "bad COUNT '%s' (expected a decimal number of elements, at least 1)",
                    nf_pol_field_show(&f[3], show, sizeof(show)));
        return NF_ERR_PARSE;
    }
    if (e->off > elems || e->count > elems - e->off) {
        nf_lay_drop(lp, line, "'%s' ends past the call: OFFSET %" PRIu64 " + COUNT %" PRIu64
                    " is more than the %" PRIu64 " floats of %" PRIu64 " bytes",
                    nf_pol_field_show(&f[1], show, sizeof(show)), e->off, e->count, elems, e->bytes);
        return NF_ERR_PARSE;
    }
    return NF_OK;
}

/* Check one entry line; keep it as a candidate. NF_OK also for a line
 * dropped (said why): NF_ERR_NO_MEMORY is the only error. */
static nf_status_t nf_lay_line(nf_lparse_t *lp, int line, const char *s, size_t len)
{
    nf_pol_field_t f[4];
    nf_layout_entry_t e = {0};
    char why[256];
    int n = nf_pol_fields(s, len, f, 4);
    char *name;

    if (n != 4) {
        nf_lay_drop(lp, line, "expected BYTES NAME OFFSET COUNT, found %d field%s", n, n == 1 ? "" : "s");
        return NF_OK;
    }
    if (nf_lay_bytes(lp, line, &f[0], &e.bytes) != NF_OK)
        return NF_OK;
    if (nf_pol_name_check(&f[1], "NAME", why, sizeof(why)) != NF_OK) {
        nf_lay_drop(lp, line, "%s", why);
        return NF_OK;
    }
    if (nf_lay_range(lp, line, f, &e) != NF_OK)
        return NF_OK;
    if (lp->n == lp->cap) {
        size_t cap = lp->cap ? 2 * lp->cap : 16;
        nf_layout_entry_t *grown = realloc(lp->e, cap * sizeof(*grown));
        if (grown == NULL)
            return NF_ERR_NO_MEMORY;
        lp->e = grown;
        lp->cap = cap;
    }
    name = strndup(f[1].s, f[1].len);
    if (name == NULL)
        return NF_ERR_NO_MEMORY;
    e.name = name;
    e.line = line;
    lp->e[lp->n++] = e;
    return NF_OK;
}

/* ----------------------------------------------- lines against each other */

/* Pointers into the candidates, so that ties fall back on file order. */
static int nf_lay_cmp_name(const void *a, const void *b)
{
    const nf_layout_entry_t *x = *(const nf_layout_entry_t *const *)a, *y = *(const nf_layout_entry_t *const *)b;
    int c;

    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? -1 : 1;
    c = strcmp(x->name, y->name);
    return c != 0 ? c : (x > y) - (x < y);
}

static int nf_lay_cmp_off(const void *a, const void *b)
{
    const nf_layout_entry_t *x = *(const nf_layout_entry_t *const *)a, *y = *(const nf_layout_entry_t *const *)b;

    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? -1 : 1;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return (x > y) - (x < y);
}

/* first[i]: the line where candidate i's (BYTES, NAME) first appeared, when
 * that is another line; else 0. */
static void nf_lay_dup_names(const nf_lparse_t *lp, const nf_layout_entry_t **by, int *first)
{
    for (size_t i = 0; i < lp->n; i++)
        by[i] = &lp->e[i];
    qsort(by, lp->n, sizeof(*by), nf_lay_cmp_name);
    for (size_t i = 0, run = 0; i < lp->n; i++) {
        if (i > 0 && by[i]->bytes == by[run]->bytes && strcmp(by[i]->name, by[run]->name) == 0)
            first[by[i] - lp->e] = by[run]->line;
        else
            run = i;
    }
}

/* A Fenwick tree over places in (bytes, off) order marks the entries kept so
 * far. Kept entries of one size never overlap, so a new one can overlap
 * only its nearest kept neighbours on either side. */
typedef struct nf_fenwick { size_t n; size_t *t; } nf_fenwick_t;

static void nf_fw_add(nf_fenwick_t *fw, size_t i)
{
    for (i++; i <= fw->n; i += i & (~i + 1))
        fw->t[i]++;
}

/* Marked places before i. */
static size_t nf_fw_count(const nf_fenwick_t *fw, size_t i)
{
    size_t s = 0;

    for (; i > 0; i -= i & (~i + 1))
        s += fw->t[i];
    return s;
}

/* The place of the k-th marked one (k >= 1). */
static size_t nf_fw_kth(const nf_fenwick_t *fw, size_t k)
{
    size_t pos = 0, step = 1;

    while (step * 2 <= fw->n)
        step *= 2;
    for (; step > 0; step /= 2) {
        if (pos + step <= fw->n && fw->t[pos + step] < k) {
            pos += step;
            k -= fw->t[pos];
        }
    }
    return pos;
}

static int nf_lay_overlap(const nf_layout_entry_t *a, const nf_layout_entry_t *b)
{
    return a->bytes == b->bytes && a->off < b->off + b->count && b->off < a->off + a->count;
}

/* The kept entry e overlaps, if any: by[] is in (bytes, off) order and
 * place is e's place in it. */
static const nf_layout_entry_t *nf_lay_neighbour(const nf_fenwick_t *fw, const nf_layout_entry_t **by,
                                                 size_t place, size_t kept)
{
    const nf_layout_entry_t *e = by[place];
    size_t before = nf_fw_count(fw, place);

    if (before > 0 && nf_lay_overlap(e, by[nf_fw_kth(fw, before)]))
        return by[nf_fw_kth(fw, before)];
    if (before < kept && nf_lay_overlap(e, by[nf_fw_kth(fw, before + 1)]))
        return by[nf_fw_kth(fw, before + 1)];
    return NULL;
}

/* In file order, keep each candidate that repeats no name and overlaps no
 * entry kept before it; by[] ends in (bytes, off) order with dropped ones
 * set to NULL (at once: lookups only ever visit kept places). */
static void nf_lay_select(const nf_lparse_t *lp, const nf_layout_entry_t **by, const int *first,
                          size_t *place, nf_fenwick_t *fw)
{
    size_t kept = 0;

    for (size_t i = 0; i < lp->n; i++)
        by[i] = &lp->e[i];
    qsort(by, lp->n, sizeof(*by), nf_lay_cmp_off);
    for (size_t i = 0; i < lp->n; i++)
        place[by[i] - lp->e] = i;
    for (size_t i = 0; i < lp->n; i++) {
        const nf_layout_entry_t *e = &lp->e[i], *o;
        if (first[i] != 0) {
            nf_lay_drop(lp, e->line, "NAME '%s' appears twice for %" PRIu64 "-byte calls (first at line %d)",
                        e->name, e->bytes, first[i]);
            by[place[i]] = NULL;
        } else if ((o = nf_lay_neighbour(fw, by, place[i], kept)) != NULL) {
            nf_lay_drop(lp, e->line, "'%s' [%" PRIu64 ", %" PRIu64 ") overlaps '%s' [%" PRIu64 ", %" PRIu64
                        ") of line %d in %" PRIu64 "-byte calls", e->name, e->off, e->off + e->count, o->name,
                        o->off, o->off + o->count, o->line, e->bytes);
            by[place[i]] = NULL;
        } else {
            nf_fw_add(fw, place[i]);
            kept++;
        }
    }
}

/* ------------------------------------------------------------- the result */

static uint64_t nf_lay_hash(const nf_layout_t *l)
{
    uint64_t h = nf_hash_u64(NF_HASH_INIT, l->n);

    for (size_t i = 0; i < l->n; i++) {
        const nf_layout_entry_t *e = &l->e[i];
        h = nf_hash_u64(nf_hash_u64(nf_hash_u64(h, e->bytes), e->off), e->count);
        h = nf_hash_str(nf_hash_u64(h, strlen(e->name)), e->name);
    }
    return h != 0 ? h : 1;
}

/* The kept candidates, in (bytes, off) order, into l; names change owner. */
static nf_status_t nf_lay_build(nf_lparse_t *lp, nf_layout_t *l)
{
    const nf_layout_entry_t **by = malloc((lp->n + 1) * sizeof(*by));
    size_t *place = malloc((lp->n + 1) * sizeof(*place));
    int *first = calloc(lp->n + 1, sizeof(*first));
    nf_fenwick_t fw = {lp->n, calloc(lp->n + 1, sizeof(size_t))};
    nf_status_t rc = NF_ERR_NO_MEMORY;

    l->e = malloc((lp->n + 1) * sizeof(*l->e));
    if (by != NULL && place != NULL && first != NULL && fw.t != NULL && l->e != NULL) {
        nf_lay_dup_names(lp, by, first);
        nf_lay_select(lp, by, first, place, &fw);
        for (size_t i = 0; i < lp->n; i++) {
            if (by[i] != NULL) {
                l->e[l->n++] = *by[i];
                lp->e[by[i] - lp->e].name = NULL;
            }
        }
        l->hash = nf_lay_hash(l);
        rc = NF_OK;
    }
    free(fw.t);
    free(first);
    free(place);
    free(by);
    return rc;
}

static void nf_lparse_clear(nf_lparse_t *lp)
{
    for (size_t i = 0; i < lp->n; i++)
        free((char *)lp->e[i].name);
    free(lp->e);
}

/* ------------------------------------------------------------------ public */

nf_status_t nf_layout_parse(const char *text, size_t len, const char *name, nf_policy_diag_fn fn, void *arg,
                            nf_layout_t **out)
{
    nf_pol_lines_t it = {text, text + len, 0};
    nf_lparse_t lp = {NULL, fn, arg, NULL, 0, 0};
    nf_layout_t *l;
    nf_status_t rc = NF_ERR_NO_MEMORY;
    const char *s;
    size_t n;

    if ((text == NULL && len > 0) || out == NULL)
        return NF_ERR_INVALID;
    l = calloc(1, sizeof(*l));
    if (l == NULL || (l->file = strdup(name != NULL ? name : "<layout>")) == NULL) {
        free(l);
        return NF_ERR_NO_MEMORY;
    }
    lp.file = l->file;
    while (nf_pol_next_line(&it, &s, &n))
        if (!nf_pol_comment(s, n) && nf_lay_line(&lp, it.line, s, n) != NF_OK)
            goto out;
    rc = nf_lay_build(&lp, l);
    if (rc == NF_OK && l->n == 0)
        nf_pol_diagf(fn, arg, NF_POLICY_WARNING, l->file, 0,
                     "no layout entries (expected lines of BYTES NAME OFFSET COUNT): no buffer gets regions");
out:
    nf_lparse_clear(&lp);
    if (rc != NF_OK) {
        nf_pol_diagf(fn, arg, NF_POLICY_ERROR, l->file, 0, "out of memory");
        nf_layout_free(l);
        return rc;
    }
    *out = l;
    return NF_OK;
}

nf_status_t nf_layout_load(const char *path, nf_policy_diag_fn fn, void *arg, nf_layout_t **out)
{
    char *text;
    size_t len;
    nf_status_t rc;

    if (path == NULL || out == NULL)
        return NF_ERR_INVALID;
    rc = nf_pol_read_file(path, "layout file", fn, arg, &text, &len);
    if (rc != NF_OK)
        return rc;
    rc = nf_layout_parse(text, len, path, fn, arg, out);
    free(text);
    return rc;
}

size_t nf_layout_find(const nf_layout_t *l, uint64_t bytes, const nf_layout_entry_t **first)
{
    size_t lo = 0, hi = l != NULL ? l->n : 0, end;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->e[mid].bytes < bytes)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (end = lo; l != NULL && end < l->n && l->e[end].bytes == bytes; end++)
        ;
    *first = end > lo ? &l->e[lo] : NULL;
    return end - lo;
}

uint64_t nf_layout_hash(const nf_layout_t *l) { return l != NULL ? l->hash : 0; }
size_t nf_layout_count(const nf_layout_t *l) { return l != NULL ? l->n : 0; }

void nf_layout_free(nf_layout_t *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->n; i++)
        free((char *)l->e[i].name);
    free(l->e);
    free(l->file);
    free(l);
}

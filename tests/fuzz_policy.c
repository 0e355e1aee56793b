/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer harness for the policy layer's parsers (make fuzz): every input
 * goes to the policy parser and matcher, the layout parser and the profile
 * parser. Any input must either load or be refused with diagnostics.
 *  - A loaded policy must match, explain and hash without faults, and
 *    give only blocks the parser accepts (0, or a power of two from
 *    NF_INT_BLOCK_MIN to NF_INT_BLOCK_MAX). The
 *    input's last bytes also feed the query strings, so the glob matcher
 *    sees hostile names; datatypes and ops run over their enums and one
 *    past (not known).
 *  - A loaded layout must keep what it promises: per size, entries sorted,
 *    disjoint, inside the call, with valid names, each found by its size.
 *  - A loaded profile must find every segment, and write out text that
 *    parses back to the same segments and routes.
 */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_kernels.h"
#include "nf_layout.h"
#include "nf_policy.h"
#include "nf_profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void ignore(const nf_policy_diag_t *d, void *arg)
{
    size_t *n = arg;
    *n += strlen(d->message) + strlen(d->file);
}

/* Past nf_policy_calls_settled, the call index changes nothing; the size
 * class is a search over the policy's bounds, which must stay in them. */
static void settled_check(const nf_policy_t *p, const nf_policy_query_t *q, const nf_policy_action_t *a)
{
    nf_policy_query_t later = *q;
    nf_policy_action_t b;

    (void)nf_policy_size_class(p, q->bytes);
    if (q->call < nf_policy_calls_settled(p))
        return;
    later.call = q->call + 1000;
    nf_policy_match(p, &later, &b);
    if (b.index != a->index)
        __builtin_trap();
}

static void exercise(const nf_policy_t *p, const uint8_t *data, size_t size)
{
    char name[64], buf[512];
    size_t n = size < sizeof(name) - 1 ? size : sizeof(name) - 1;
    nf_policy_action_t a;

    memcpy(name, data + size - n, n);
    name[n] = '\0';
    for (unsigned i = 0; i < 40; i++) {
        nf_policy_query_t q = {
            i % 3 == 0 ? NULL : name, i % 2 ? "MPI_COMM_WORLD" : name, (int)(i % 9),
            (nf_dtype_t)(i * 7 % (NF_DT_N + 1)), (nf_opkind_t)(i * 3 % (NF_OP_N + 1)),
            (uint64_t)1 << (i % 34), i % 7};
        nf_policy_match(p, &q, &a);
        if (a.route >= NF_ROUTE_COUNT || a.rule == NULL || a.file == NULL)
            __builtin_trap();
        if (a.block != 0 && (a.block < (long)NF_INT_BLOCK_MIN || a.block > (long)NF_INT_BLOCK_MAX ||
                             (a.block & (a.block - 1)) != 0))
            __builtin_trap();
        settled_check(p, &q, &a);
        if (i % 8 == 0)
            nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    }
}

static void fuzz_policy(const uint8_t *data, size_t size)
{
    nf_policy_t *p = NULL;
    size_t sink = 0;

    if (nf_policy_parse((const char *)data, size, "fuzz.policy", ignore, &sink, &p) == NF_OK) {
        if (p == NULL || nf_policy_hash(p) == 0)
            __builtin_trap();
        exercise(p, data, size);
        nf_policy_free(p);
    } else if (p != NULL) {
        __builtin_trap();
    }
}

/* ------------------------------------------------------------- layout */

static void check_layout_run(const nf_layout_entry_t *e, size_t n, uint64_t bytes)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(e[i].name);
        if (e[i].bytes != bytes || bytes == 0 || bytes % 4 != 0 || e[i].count == 0 ||
            e[i].off + e[i].count > bytes / 4 || e[i].off + e[i].count < e[i].off)
            __builtin_trap();
        if (i > 0 && e[i - 1].off + e[i - 1].count > e[i].off)
            __builtin_trap();
        if (len == 0 || len > 127)
            __builtin_trap();
        for (size_t k = 0; k < len; k++)
            if (e[i].name[k] < 0x21 || e[i].name[k] > 0x7e)
                __builtin_trap();
        for (size_t j = 0; j < i; j++)
            if (strcmp(e[i].name, e[j].name) == 0)
                __builtin_trap();
    }
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The distinct sizes the lines of the input start with: every kept entry
 * has one of them. Returns how many, sorted, in a malloc'd array. */
static size_t line_sizes(const uint8_t *data, size_t size, uint64_t **out)
{
    uint64_t *v = malloc((size / 2 + 2) * sizeof(*v));
    size_t n = 0, u = 0;

    if (v == NULL)
        __builtin_trap();
    for (size_t i = 0; i < size;) {
        char tok[64];
        size_t k = 0;
        while (i < size && (data[i] == ' ' || (data[i] >= '\t' && data[i] <= '\r' && data[i] != '\n')))
            i++;
        while (i < size && data[i] > ' ' && k < sizeof(tok) - 1)
            tok[k++] = (char)data[i++];
        tok[k] = '\0';
        if (nf_policy_parse_size(tok, &v[n]) == NF_OK)
            n++;
        while (i < size && data[i] != '\n')
            i++;
        i++;
    }
    qsort(v, n, sizeof(*v), u64_cmp);
    for (size_t i = 0; i < n; i++)
        if (u == 0 || v[i] != v[u - 1])
            v[u++] = v[i];
    *out = v;
    return u;
}

static void fuzz_layout(const uint8_t *data, size_t size)
{
    nf_layout_t *l = NULL;
    const nf_layout_entry_t *e;
    uint64_t *sizes, probe = 0;
    size_t sink = 0, total = 0, nsizes, n;

    if (nf_layout_parse((const char *)data, size, "fuzz.layout", ignore, &sink, &l) != NF_OK) {
        if (l != NULL)
            __builtin_trap();
        return;
    }
    if (l == NULL || nf_layout_hash(l) == 0)
        __builtin_trap();
    nsizes = line_sizes(data, size, &sizes);
    for (size_t i = 0; i < nsizes; i++) {
        n = nf_layout_find(l, sizes[i], &e);
        if ((n == 0) != (e == NULL))
            __builtin_trap();
        check_layout_run(e, n, sizes[i]);
        total += n;
    }
    if (total != nf_layout_count(l))
        __builtin_trap();
    memcpy(&probe, data, size < sizeof(probe) ? size : sizeof(probe));
    n = nf_layout_find(l, probe, &e);
    check_layout_run(e, n, probe);
    free(sizes);
    nf_layout_free(l);
}

/* ------------------------------------------------------------ profile */

/* Written out and read back: the same segments, numbers of elements and
 * calls, and routes (the cosines and errors come back rounded to %.4f). */
static void profile_round_trip(const nf_profile_t *p)
{
    size_t n = nf_profile_count(p), len = 0, sink = 0;
    nf_profile_entry_t *e = malloc((n + 1) * sizeof(*e));
    nf_profile_t *q = NULL;
    char *text = NULL;
    FILE *m = open_memstream(&text, &len);

    if (e == NULL || m == NULL)
        __builtin_trap();
    for (size_t i = 0; i < n; i++) {
        e[i] = *nf_profile_entry(p, i);
        for (int k = 0; k < 3; k++) /* a v1 or v2 entry has none: the writer writes v3 */
            if (isnan(e[i].cos_int[k]) || isnan(e[i].relerr_int[k]))
                e[i].cos_int[k] = 0.0, e[i].relerr_int[k] = 0.0;
    }
    if (nf_profile_write(m, e, n) != 0 || fclose(m) != 0)
        __builtin_trap();
    if (nf_profile_parse(text, len, "fuzz.profile (written)", ignore, &sink, &q) != NF_OK ||
        nf_profile_count(q) != n)
        __builtin_trap();
    for (size_t i = 0; i < n; i++) {
        const nf_profile_entry_t *a = nf_profile_entry(p, i), *b = nf_profile_entry(q, i);
        if (strcmp(a->segment, b->segment) != 0 || a->elements != b->elements || a->calls != b->calls ||
            a->route != b->route)
            __builtin_trap();
    }
    nf_profile_free(q);
    free(text);
    free(e);
}

static void fuzz_profile(const uint8_t *data, size_t size)
{
    nf_profile_t *p = NULL;
    size_t sink = 0;
    char name[64];
    size_t n = size < sizeof(name) - 1 ? size : sizeof(name) - 1;

    if (nf_profile_parse((const char *)data, size, "fuzz.profile", ignore, &sink, &p) != NF_OK) {
        if (p != NULL)
            __builtin_trap();
        return;
    }
    if (p == NULL || nf_profile_hash(p) == 0)
        __builtin_trap();
    for (size_t i = 0; i < nf_profile_count(p); i++) {
        const nf_profile_entry_t *e = nf_profile_entry(p, i);
        if (nf_profile_find(p, e->segment) != e)
            __builtin_trap();
        if (!nf_profile_route_ok(e->route))
            __builtin_trap();
    }
    memcpy(name, data + size - n, n);
    name[n] = '\0';
    (void)nf_profile_find(p, name);
    profile_round_trip(p);
    nf_profile_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_policy(data, size);
    fuzz_layout(data, size);
    fuzz_profile(data, size);
    return 0;
}

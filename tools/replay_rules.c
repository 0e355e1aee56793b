/* SPDX-License-Identifier: BSD-3-Clause */
/* nfcoll_replay's decisions per rule (replay_rules.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "nf_traffic.h"
#include "replay_rules.h"

void replay_rules_add(replay_rules_t *t, const nf_policy_action_t *a, nf_route_t route,
                      uint64_t bytes)
{
    replay_rule_t *r = NULL;
    for (size_t i = 0; i < t->n && r == NULL; i++)
        if (strcmp(t->rule[i].name, a->rule) == 0)
            r = &t->rule[i];
    if (r == NULL) {
        if (t->n == t->cap) {
            t->cap = t->cap ? 2 * t->cap : 16;
            t->rule = realloc(t->rule, t->cap * sizeof(*t->rule));
            if (t->rule == NULL) {
                fprintf(stderr, "nfcoll_replay: out of memory\n");
                exit(1);
            }
        }
        r = &t->rule[t->n++];
        *r = (replay_rule_t){.name = a->rule, .file = a->file, .line = a->line, .index = a->index};
    }
    r->decisions[route]++;
    r->bytes += bytes;
}

static int replay_rule_order(const void *a, const void *b)
{
    const replay_rule_t *x = a, *y = b;
    int kx = x->index >= 0 ? x->index : strcmp(x->name, "default") == 0 ? -2 : -1;
    int ky = y->index >= 0 ? y->index : strcmp(y->name, "default") == 0 ? -2 : -1;
    unsigned ux = (unsigned)kx, uy = (unsigned)ky; /* negatives sort last */
    return ux < uy ? -1 : ux > uy;
}

void replay_rules_sort(replay_rules_t *t)
{
    if (t->n > 0)
        qsort(t->rule, t->n, sizeof(*t->rule), replay_rule_order);
}

/* A rule's decisions, and where it is ("-" for the built-in pmpi). */
static uint64_t replay_rule_sum(const replay_rule_t *r, char *where, size_t len)
{
    uint64_t n = 0;
    for (int k = 0; k < NF_ROUTE_COUNT; k++)
        n += r->decisions[k];
    if (r->file[0] != '\0')
        snprintf(where, len, "%s:%d", r->file, r->line);
    else
        snprintf(where, len, "-");
    return n;
}

void replay_rules_table(FILE *fp, const replay_rules_t *t)
{
    fprintf(fp, "%-16s %10s", "rule", "decisions");
    for (int k = 0; k < NF_ROUTE_COUNT; k++)
        fprintf(fp, " %10s", nf_route_name((nf_route_t)k));
    fprintf(fp, " %14s  %s\n", "bytes", "where");
    for (size_t i = 0; i < t->n; i++) {
        const replay_rule_t *u = &t->rule[i];
        char where[4200];
        uint64_t n = replay_rule_sum(u, where, sizeof(where));
        fprintf(fp, "%-16s %10llu", u->name, (unsigned long long)n);
        for (int k = 0; k < NF_ROUTE_COUNT; k++)
            fprintf(fp, " %10llu", (unsigned long long)u->decisions[k]);
        fprintf(fp, " %14llu  %s\n", (unsigned long long)u->bytes, where);
    }
}

void replay_rules_json(FILE *fp, const replay_rules_t *t)
{
    for (size_t i = 0; i < t->n; i++) {
        const replay_rule_t *u = &t->rule[i];
        char where[4200];
        uint64_t n = replay_rule_sum(u, where, sizeof(where));
        fprintf(fp, "%s\n    ", i ? "," : "");
        nf_json_str(fp, u->name);
        fprintf(fp, ": {\"where\": ");
        nf_json_str(fp, where);
        fprintf(fp, ", \"decisions\": %llu, \"bytes\": %llu, \"routes\": {",
                (unsigned long long)n, (unsigned long long)u->bytes);
        for (int r = 0; r < NF_ROUTE_COUNT; r++)
            fprintf(fp, "%s\"%s\": %llu", r ? ", " : "", nf_route_name((nf_route_t)r),
                    (unsigned long long)u->decisions[r]);
        fprintf(fp, "}}");
    }
}

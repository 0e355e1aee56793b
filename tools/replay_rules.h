/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nfcoll_replay's decisions per rule (replay_rules.c): how many calls and
 * segments each rule sent to each route, and the bytes it decided; as a
 * text table (a column per route) and as the JSON "rules" object. No MPI.
 */
#ifndef NF_REPLAY_RULES_H
#define NF_REPLAY_RULES_H

#include <stdint.h>
#include <stdio.h>

#include "nf_policy.h"

typedef struct replay_rule {
    const char *name, *file;   /* the policy's strings */
    int line, index;
    uint64_t decisions[NF_ROUTE_COUNT], bytes;
} replay_rule_t;

typedef struct replay_rules {
    replay_rule_t *rule;
    size_t n, cap;
} replay_rules_t;

/* One decision of a's rule: route, for bytes. Exits without memory. */
void replay_rules_add(replay_rules_t *t, const nf_policy_action_t *a, nf_route_t route,
                      uint64_t bytes);
/* Rules in file order, then [default], then the built-in pmpi. */
void replay_rules_sort(replay_rules_t *t);
void replay_rules_table(FILE *fp, const replay_rules_t *t);
/* The members of the JSON "rules" object. */
void replay_rules_json(FILE *fp, const replay_rules_t *t);

#endif

/* What one allreduce call moves per rank, by route (traffic.c): the model
 * the stats count and nfcoll_replay recomputes. docs/design.md,
 * "Observability". No MPI. */
#ifndef NF_TRAFFIC_H
#define NF_TRAFFIC_H

#include <stdint.h>
#include <stdio.h>

#include "nfcoll.h"

typedef struct nf_traffic {
    uint64_t upstream, total, ring;
} nf_traffic_t;

/* Bytes per rank for a call of `bytes` of user data on n ranks whose
 * counters have k planes (nf_count_planes(n)). */
void nf_traffic_model(nf_route_t route, uint64_t bytes, unsigned n, unsigned k, nf_traffic_t *t);
/* The same with nsc scales per rank instead of one (binary's scale_block:
 * nf_traffic_scales). */
void nf_traffic_model_scales(nf_route_t route, uint64_t bytes, unsigned n, unsigned k,
                             uint64_t nsc, nf_traffic_t *t);
/* Scales a segment of bytes sends on route with scale_block block (0: one
 * per segment; only binary cuts it into blocks). */
uint64_t nf_traffic_scales(nf_route_t route, uint64_t bytes, uint64_t block);

/* Count one call of bytes on route into s[route], as NFCOLL_STATS does. */
void nf_traffic_count(nf_route_stats_t s[NF_ROUTE_COUNT], nf_route_t route, uint64_t bytes,
                      unsigned n, unsigned k);
void nf_traffic_count_scales(nf_route_stats_t s[NF_ROUTE_COUNT], nf_route_t route,
                             uint64_t bytes, unsigned n, unsigned k, uint64_t nsc);

/* The stats' writers (stats.c; nfcoll_replay): the route table, a line per
 * route, with an internode column when internode is not NULL and an "all"
 * line when all is set; and the JSON "routes" object's members. */
void nf_traffic_table(FILE *fp, const nf_route_stats_t s[NF_ROUTE_COUNT],
                      const uint64_t *internode, int all);
void nf_traffic_json(FILE *fp, const nf_route_stats_t s[NF_ROUTE_COUNT], const char *indent);
/* s as a JSON string, quotes and escapes included. */
void nf_json_str(FILE *fp, const char *s);

#endif

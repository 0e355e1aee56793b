/* What one allreduce call moves per rank, by route (traffic.c): the model
 * the stats count and nfcoll_replay recomputes. docs/design.md,
 * "Observability". No MPI. */
#ifndef NF_TRAFFIC_H
#define NF_TRAFFIC_H

#include <stdint.h>

#include "nfcoll.h"

typedef struct nf_traffic {
    uint64_t upstream, total, ring;
} nf_traffic_t;

/* Bytes per rank for a call of `bytes` of user data on n ranks whose
 * counters have k planes (nf_count_planes(n)). */
void nf_traffic_model(nf_route_t route, uint64_t bytes, unsigned n, unsigned k, nf_traffic_t *t);

#endif

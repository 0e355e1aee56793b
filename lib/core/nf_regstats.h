/* Per-region counters (regstats.c): calls, elements and traffic per route
 * for every bound region a call reduced, for the stats report. Bounded:
 * past NF_REGSTATS_MAX names, further regions are counted under "(other)". */
#ifndef NF_REGSTATS_H
#define NF_REGSTATS_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include "nfcoll.h"

#define NF_REGSTATS_MAX 1024

/* A region segment's call, by the region's interned id (nf_intern.h). */
void nf_regstats_add(uint32_t id, nf_route_t route, uint64_t elements, uint64_t upstream,
                     uint64_t total);

/* Health events by signal, per segment name (a region, or buffer:BYTES). */
typedef enum nf_health_signal {
    NF_HEALTH_NONFINITE = 0,
    NF_HEALTH_EF_GROWTH,
    NF_HEALTH_LOSS_SPIKE,
    NF_HEALTH_N
} nf_health_signal_t;
const char *nf_health_signal_name(nf_health_signal_t s);
void nf_regstats_health(const char *name, nf_health_signal_t signal);

/* Collective over comm: rank 0 gets every rank's counters summed by name.
 * Then the table's text and JSON (an object keyed by region name) on fp. */
nf_status_t nf_regstats_gather(MPI_Comm comm);
void nf_regstats_table(FILE *fp);
void nf_regstats_json(FILE *fp);
void nf_regstats_health_table(FILE *fp);
void nf_regstats_health_json(FILE *fp);

void nf_regstats_reset(void);

#endif

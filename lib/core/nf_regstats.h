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

void nf_regstats_add(const char *name, nf_route_t route, uint64_t elements, uint64_t upstream,
                     uint64_t total);

/* Collective over comm: rank 0 gets every rank's counters summed by name.
 * Then the table's text and JSON (an object keyed by region name) on fp. */
nf_status_t nf_regstats_gather(MPI_Comm comm);
void nf_regstats_table(FILE *fp);
void nf_regstats_json(FILE *fp);

void nf_regstats_reset(void);

#endif

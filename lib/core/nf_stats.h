/* Per-route traffic counters and the report at MPI_Finalize (stats.c).
 * The public getters are in the API layer. */
#ifndef NF_STATS_H
#define NF_STATS_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "nfcoll.h"
#include "nf_traffic.h"

void nf_stats_count(nf_route_t route, uint64_t bytes, unsigned n, unsigned k);
void nf_stats_fallback(nf_fallback_t reason);
/* Bytes this rank handed to inter-node PMPI calls for a route's data (the
 * leaders' exchanges, scales sent to ranks on other nodes). */
void nf_stats_internode(nf_route_t route, uint64_t bytes);
uint64_t nf_stats_read_internode(nf_route_t route);

/* Memory placed for libnfcoll and how much of it was verified on the
 * placement node (bytes * resident fraction), for the report. */
typedef enum nf_place_kind { NF_PLACED_BUFFER = 0, NF_PLACED_RESIDUAL = 1 } nf_place_kind_t;
void nf_stats_placed(nf_place_kind_t kind, size_t bytes, double resident_frac);

/* Read and reset this process's counters. */
void nf_stats_read(nf_route_t route, nf_route_stats_t *s);
uint64_t nf_stats_read_fallbacks(nf_fallback_t reason);
void nf_stats_zero(void);


/* Collective over comm: sum counters to rank 0, which prints a table
 * (dest NULL or "1") or writes JSON (any other dest: a path). */
nf_status_t nf_stats_report(MPI_Comm comm, const char *dest);

#endif

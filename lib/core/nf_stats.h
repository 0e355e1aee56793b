/* SPDX-License-Identifier: BSD-3-Clause */
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
/* The same with nsc scales per rank (nf_traffic_model_scales). */
void nf_stats_count_scales(nf_route_t route, uint64_t bytes, unsigned n, unsigned k,
                           uint64_t nsc);
void nf_stats_fallback(nf_fallback_t reason);
/* Bytes this rank handed to inter-node PMPI calls for a route's data (the
 * leaders' exchanges, scales sent to ranks on other nodes). */
void nf_stats_internode(nf_route_t route, uint64_t bytes);
uint64_t nf_stats_read_internode(nf_route_t route);

/* Memory placed for libnfcoll and how much of it was verified on the
 * placement node (bytes * resident fraction), for the report. */
typedef enum nf_place_kind { NF_PLACED_BUFFER = 0, NF_PLACED_RESIDUAL = 1 } nf_place_kind_t;
void nf_stats_placed(nf_place_kind_t kind, size_t bytes, double resident_frac);

/* Residual memory (residual.c): the bytes held now, after every change,
 * for the peak; one more residual dropped to stay within
 * NFCOLL_RESIDUAL_MAX. */
void nf_stats_residual_held(size_t bytes);
void nf_stats_residual_dropped(void);

/* Calls this thread has counted (nf_stats_count), and in *thread a token
 * for the thread. The runner counts a call after the call is done with its
 * residuals and before the next call fetches any, so a change of the pair
 * between two residual lookups on one table means a new call (residual.c
 * keeps the current call's residuals). */
uint64_t nf_stats_thread_calls(const void **thread);

/* Read and reset this process's counters. */
void nf_stats_read(nf_route_t route, nf_route_stats_t *s);
uint64_t nf_stats_read_fallbacks(nf_fallback_t reason);
void nf_stats_zero(void);


/* Collective over comm: sum counters to rank 0, which prints a table
 * (dest NULL or "1") or writes JSON (any other dest: a path). */
nf_status_t nf_stats_report(MPI_Comm comm, const char *dest);

#endif

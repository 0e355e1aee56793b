/* Per-region counters (nf_regstats.h). A small open-addressed table by
 * name under a mutex, found from a call by the region's interned id through
 * an array of entries (no name is hashed per call). */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nf_ctx.h"
#include "nf_intern.h"
#include "nf_regstats.h"
#include "nf_region.h"
#include "nf_util.h"

enum { NF_RS_CALLS, NF_RS_ELEMS, NF_RS_UP, NF_RS_TOTAL, NF_RS_N };
#define NF_RS_SLOTS (2 * NF_REGSTATS_MAX) /* a power of two */
#define NF_RS_OTHER "(other)"

typedef struct nf_rs_entry {
    char name[NF_REGION_NAME_MAX + 32]; /* "" : empty slot */
    uint64_t v[NF_ROUTE_COUNT][NF_RS_N];
    uint64_t health[NF_HEALTH_N];  /* events by signal */
} nf_rs_entry_t;

static const char *const nf_health_names[NF_HEALTH_N] = {
    [NF_HEALTH_NONFINITE] = "nonfinite",
    [NF_HEALTH_EF_GROWTH] = "ef_growth",
    [NF_HEALTH_LOSS_SPIKE] = "loss_spike",
};

const char *nf_health_signal_name(nf_health_signal_t s)
{
    return (unsigned)s < NF_HEALTH_N ? nf_health_names[s] : "unknown";
}

typedef struct nf_rs_table {
    nf_rs_entry_t slot[NF_RS_SLOTS];
    unsigned n;
} nf_rs_table_t;

static pthread_mutex_t nf_rs_lock = PTHREAD_MUTEX_INITIALIZER;
static nf_rs_table_t *nf_rs;      /* this process */
static nf_rs_table_t *nf_rs_sum;  /* rank 0 after a gather */
static nf_rs_entry_t **nf_rs_by_id; /* this process's entries by region id */
static uint32_t nf_rs_by_id_cap;

/* The entry for name, made when there is room (else "(other)"). */
static nf_rs_entry_t *nf_rs_get(nf_rs_table_t *t, const char *name)
{
    uint64_t h = nf_hash_str(NF_HASH_INIT, name);
    for (unsigned i = 0; i < NF_RS_SLOTS; i++) {
        nf_rs_entry_t *e = &t->slot[(h + i) & (NF_RS_SLOTS - 1)];
        if (strcmp(e->name, name) == 0)
            return e;
        if (e->name[0] == '\0') {
            if (t->n >= NF_REGSTATS_MAX - 1 && strcmp(name, NF_RS_OTHER) != 0)
                return nf_rs_get(t, NF_RS_OTHER);
            snprintf(e->name, sizeof(e->name), "%s", name);
            t->n++;
            return e;
        }
    }
    return NULL; /* unreachable: the table is twice the cap */
}

/* Under the lock: the entry of region id, through the array (made on
 * first sight, and indexed when there is memory). */
static nf_rs_entry_t *nf_rs_of(uint32_t id)
{
    if (id < nf_rs_by_id_cap && nf_rs_by_id[id] != NULL)
        return nf_rs_by_id[id];
    const char *name = nf_intern_name(id);
    nf_rs_entry_t *e = nf_rs != NULL && name != NULL ? nf_rs_get(nf_rs, name) : NULL;
    if (e != NULL && nf_id_array_grow(&nf_rs_by_id, &nf_rs_by_id_cap, id, sizeof(e)) == 0)
        nf_rs_by_id[id] = e;
    return e;
}

void nf_regstats_add(uint32_t id, nf_route_t route, uint64_t elements, uint64_t upstream,
                     uint64_t total)
{
    pthread_mutex_lock(&nf_rs_lock);
    if (nf_rs == NULL)
        nf_rs = calloc(1, sizeof(*nf_rs));
    nf_rs_entry_t *e = nf_rs_of(id);
    if (e != NULL) {
        uint64_t *v = e->v[route];
        v[NF_RS_CALLS]++, v[NF_RS_ELEMS] += elements, v[NF_RS_UP] += upstream;
        v[NF_RS_TOTAL] += total;
    }
    pthread_mutex_unlock(&nf_rs_lock);
}

void nf_regstats_health(const char *name, nf_health_signal_t signal)
{
    pthread_mutex_lock(&nf_rs_lock);
    if (nf_rs == NULL)
        nf_rs = calloc(1, sizeof(*nf_rs));
    nf_rs_entry_t *e = nf_rs != NULL ? nf_rs_get(nf_rs, name) : NULL;
    if (e != NULL)
        e->health[signal]++;
    pthread_mutex_unlock(&nf_rs_lock);
}

/* This process's used entries, packed. */
static size_t nf_rs_pack(nf_rs_entry_t **out)
{
    size_t n = 0;
    *out = NULL;
    if (nf_rs == NULL || nf_rs->n == 0)
        return 0;
    *out = malloc(nf_rs->n * sizeof(nf_rs_entry_t));
    if (*out == NULL)
        return 0;
    for (unsigned i = 0; i < NF_RS_SLOTS; i++)
        if (nf_rs->slot[i].name[0] != '\0')
            (*out)[n++] = nf_rs->slot[i];
    return n;
}

static void nf_rs_merge(const nf_rs_entry_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        nf_rs_entry_t *e = nf_rs_get(nf_rs_sum, v[i].name);
        for (int r = 0; e != NULL && r < NF_ROUTE_COUNT; r++)
            for (int f = 0; f < NF_RS_N; f++)
                e->v[r][f] += v[i].v[r][f];
        for (int h = 0; e != NULL && h < NF_HEALTH_N; h++)
            e->health[h] += v[i].health[h];
    }
}

nf_status_t nf_regstats_gather(MPI_Comm comm)
{
    int rank, size, bytes;
    nf_rs_entry_t *mine, *all = NULL;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    pthread_mutex_lock(&nf_rs_lock);
    bytes = (int)(nf_rs_pack(&mine) * sizeof(nf_rs_entry_t));
    pthread_mutex_unlock(&nf_rs_lock);
    int *counts = rank == 0 ? calloc((size_t)size, 2 * sizeof(int)) : NULL;
    nf_status_t st = nf_mpi_status(PMPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, comm));
    size_t total = 0;
    for (int i = 0; rank == 0 && counts != NULL && i < size; i++)
        counts[size + i] = (int)total, total += (size_t)counts[i];
    if (rank == 0 && (counts == NULL || (all = malloc(total + 1)) == NULL))
        st = NF_ERR_NO_MEMORY; /* still take part below, receiving nothing */
    if (st == NF_OK || st == NF_ERR_NO_MEMORY) {
        nf_status_t g = nf_mpi_status(PMPI_Gatherv(mine, bytes, MPI_BYTE, all, counts,
                                                   counts != NULL ? counts + size : NULL,
                                                   MPI_BYTE, 0, comm));
        st = st == NF_OK ? g : st;
    }
    if (rank == 0 && st == NF_OK && (nf_rs_sum = calloc(1, sizeof(*nf_rs_sum))) != NULL)
        nf_rs_merge(all, total / sizeof(nf_rs_entry_t));
    free(mine);
    free(all);
    free(counts);
    return st;
}

static const char *const nf_rs_keys[NF_RS_N] = {"calls", "elements", "upstream_bytes",
                                                "total_bytes"};

void nf_regstats_table(FILE *fp)
{
    if (nf_rs_sum == NULL || nf_rs_sum->n == 0)
        return;
    fprintf(fp, "%-32s %-8s %10s %14s %14s %14s\n", "region", "route", "calls", "elements",
            "upstream", "total");
    for (unsigned i = 0; i < NF_RS_SLOTS; i++) {
        const nf_rs_entry_t *e = &nf_rs_sum->slot[i];
        for (int r = 0; e->name[0] != '\0' && r < NF_ROUTE_COUNT; r++) {
            const uint64_t *v = e->v[r];
            if (v[NF_RS_CALLS] == 0)
                continue;
            fprintf(fp, "%-32s %-8s %10llu %14llu %14llu %14llu\n", e->name,
                    nf_route_name((nf_route_t)r), (unsigned long long)v[NF_RS_CALLS],
                    (unsigned long long)v[NF_RS_ELEMS], (unsigned long long)v[NF_RS_UP],
                    (unsigned long long)v[NF_RS_TOTAL]);
        }
    }
}

static int nf_rs_any_calls(const nf_rs_entry_t *e)
{
    for (int r = 0; r < NF_ROUTE_COUNT; r++)
        if (e->v[r][NF_RS_CALLS] != 0)
            return 1;
    return 0;
}

static int nf_rs_any_health(const nf_rs_entry_t *e)
{
    for (int h = 0; h < NF_HEALTH_N; h++)
        if (e->health[h] != 0)
            return 1;
    return 0;
}

/* The health events: one line per segment that had any. */
void nf_regstats_health_table(FILE *fp)
{
    int first = 1;
    for (unsigned i = 0; nf_rs_sum != NULL && i < NF_RS_SLOTS; i++) {
        const nf_rs_entry_t *e = &nf_rs_sum->slot[i];
        if (e->name[0] == '\0' || !nf_rs_any_health(e))
            continue;
        if (first)
            fprintf(fp, "health events (summed over ranks):\n");
        fprintf(fp, "  %-32s", e->name);
        for (int h = 0; h < NF_HEALTH_N; h++)
            fprintf(fp, " %s=%llu", nf_health_names[h], (unsigned long long)e->health[h]);
        fprintf(fp, "\n");
        first = 0;
    }
}

void nf_regstats_health_json(FILE *fp)
{
    int first = 1;
    fprintf(fp, "{");
    for (unsigned i = 0; nf_rs_sum != NULL && i < NF_RS_SLOTS; i++) {
        const nf_rs_entry_t *e = &nf_rs_sum->slot[i];
        if (e->name[0] == '\0' || !nf_rs_any_health(e))
            continue;
        fprintf(fp, "%s\n    \"", first ? "" : ",");
        for (const char *p = e->name; *p != '\0'; p++)
            fprintf(fp, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
        fprintf(fp, "\": {");
        for (int h = 0; h < NF_HEALTH_N; h++)
            fprintf(fp, "%s\"%s\": %llu", h ? ", " : "", nf_health_names[h],
                    (unsigned long long)e->health[h]);
        fprintf(fp, "}");
        first = 0;
    }
    fprintf(fp, "%s}", first ? "" : "\n  ");
}

void nf_regstats_json(FILE *fp)
{
    int first = 1;
    fprintf(fp, "{");
    for (unsigned i = 0; nf_rs_sum != NULL && i < NF_RS_SLOTS; i++) {
        const nf_rs_entry_t *e = &nf_rs_sum->slot[i];
        if (e->name[0] == '\0' || !nf_rs_any_calls(e))
            continue;
        /* Region names are printable non-space ASCII: only " and \ need escaping. */
        fprintf(fp, "%s\n    \"", first ? "" : ",");
        for (const char *p = e->name; *p != '\0'; p++)
            fprintf(fp, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
        fprintf(fp, "\": {");
        int fr = 1;
        for (int r = 0; r < NF_ROUTE_COUNT; r++) {
            if (e->v[r][NF_RS_CALLS] == 0)
                continue;
            fprintf(fp, "%s\"%s\": {", fr ? "" : ", ", nf_route_name((nf_route_t)r));
            for (int f = 0; f < NF_RS_N; f++)
                fprintf(fp, "%s\"%s\": %llu", f ? ", " : "", nf_rs_keys[f],
                        (unsigned long long)e->v[r][f]);
            fprintf(fp, "}");
            fr = 0;
        }
        fprintf(fp, "}");
        first = 0;
    }
    fprintf(fp, "%s}", first ? "" : "\n  ");
}

void nf_regstats_reset(void)
{
    pthread_mutex_lock(&nf_rs_lock);
    free(nf_rs);
    free(nf_rs_sum);
    free(nf_rs_by_id);
    nf_rs = nf_rs_sum = NULL;
    nf_rs_by_id = NULL, nf_rs_by_id_cap = 0;
    pthread_mutex_unlock(&nf_rs_lock);
}

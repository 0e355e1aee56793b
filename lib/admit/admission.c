/*
 * Admission: which route a call takes and why. Asks the policy (loaded once
 * at init), applies what only libnfcoll knows (the call does not fit a
 * low-bit route, ranks hold different policies) and hands the call to
 * nf_allreduce_on. Decisions use only what every rank sees alike.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nf_core.h"
#include "nf_policy.h"

static nf_policy_t *nf_pol;
static int nf_pol_state; /* 0: none, 1: loaded, -1: failed to load */

/* NFCOLL_TRACE: one line per admitted call, buffered (no I/O per call until
 * the buffer fills). Lines carry what the policy matched on, so a trace
 * can be replayed against another policy. */
static FILE *nf_trace_fp;
static pthread_mutex_t nf_trace_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *nf_datatype_name(MPI_Datatype dt)
{
#define NF_T(x, s) {x, s}
    const struct { MPI_Datatype t; const char *n; } types[] = {
        NF_T(MPI_FLOAT, "float"), NF_T(MPI_DOUBLE, "double"), NF_T(MPI_INT, "int"),
        NF_T(MPI_LONG, "long"), NF_T(MPI_LONG_LONG, "long_long"), NF_T(MPI_UNSIGNED, "unsigned"),
        NF_T(MPI_UNSIGNED_LONG, "unsigned_long"), NF_T(MPI_SHORT, "short"), NF_T(MPI_CHAR, "char"),
        NF_T(MPI_BYTE, "byte"), NF_T(MPI_LONG_DOUBLE, "long_double"), NF_T(MPI_C_BOOL, "c_bool"),
        NF_T(MPI_INT8_T, "int8_t"), NF_T(MPI_INT16_T, "int16_t"), NF_T(MPI_INT32_T, "int32_t"),
        NF_T(MPI_INT64_T, "int64_t"), NF_T(MPI_UINT8_T, "uint8_t"), NF_T(MPI_UINT16_T, "uint16_t"),
        NF_T(MPI_UINT32_T, "uint32_t"), NF_T(MPI_UINT64_T, "uint64_t"),
        NF_T(MPI_FLOAT_INT, "float_int"), NF_T(MPI_DOUBLE_INT, "double_int"),
        NF_T(MPI_2INT, "2int"),
    };
#undef NF_T
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (types[i].t == dt)
            return types[i].n;
    int ni, na, nd, combiner;
    if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner) == MPI_SUCCESS &&
        combiner != MPI_COMBINER_NAMED)
        return "derived";
    return "other";
}

static const char *nf_op_name(MPI_Op op)
{
    const struct { MPI_Op o; const char *n; } ops[] = {
        {MPI_SUM, "sum"}, {MPI_PROD, "prod"}, {MPI_MAX, "max"}, {MPI_MIN, "min"},
        {MPI_LAND, "land"}, {MPI_LOR, "lor"}, {MPI_LXOR, "lxor"}, {MPI_BAND, "band"},
        {MPI_BOR, "bor"}, {MPI_BXOR, "bxor"}, {MPI_MAXLOC, "maxloc"}, {MPI_MINLOC, "minloc"},
        {MPI_REPLACE, "replace"}, {MPI_NO_OP, "no_op"},
    };
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (ops[i].o == op)
            return ops[i].n;
    return "user";
}

/* Every rank parses the same file: rank 0 reports what the parser found. */
static void nf_policy_diag(const nf_policy_diag_t *d, void *arg)
{
    (void)arg;
    if (nf_log_rank() > 0)
        return;
    if (d->severity == NF_POLICY_ERROR)
        nf_log_error("%s:%d: %s", d->file, d->line, d->message);
    else
        nf_log_warn("%s:%d: %s", d->file, d->line, d->message);
}

/* Called once from nf_init. A policy that does not load leaves every call
 * on pmpi: the parser has said why (file:line), we add what it means. */
void nf_admission_init(const char *path)
{
    if (path == NULL)
        return;
    nf_status_t st = nf_policy_load(path, nf_policy_diag, NULL, &nf_pol);
    nf_pol_state = st == NF_OK ? 1 : -1;
    if (st != NF_OK && nf_log_rank() <= 0)
        nf_log_warn("NFCOLL_POLICY=%s was not loaded (%s): every MPI_Allreduce goes to "
                    "PMPI_Allreduce", path, nf_strerror(st));
}

/* path with "%r" replaced by the rank, else path.RANK: one file per rank. */
static void nf_trace_open(const char *path, int rank)
{
    char name[4096];
    const char *r = strstr(path, "%r");
    if (r != NULL)
        snprintf(name, sizeof(name), "%.*s%d%s", (int)(r - path), path, rank, r + 2);
    else
        snprintf(name, sizeof(name), "%s.%d", path, rank);
    nf_trace_fp = fopen(name, "w");
    if (nf_trace_fp == NULL) {
        nf_log_warn("cannot open NFCOLL_TRACE file %s: %m; no trace is written", name);
        return;
    }
    setvbuf(nf_trace_fp, NULL, _IOFBF, 1 << 20);
    fprintf(nf_trace_fp, "# libnfcoll trace v1\n# rank call comm comm_size datatype op "
            "bytes route rule where\n");
}

void nf_admission_trace_init(const char *env, int rank)
{
    const char *path = env != NULL ? env : nf_policy_trace(nf_pol);
    if (path != NULL)
        nf_trace_open(path, rank);
}

static void nf_trace(int rank, const nf_policy_query_t *q, nf_route_t route,
                     const nf_policy_action_t *a)
{
    pthread_mutex_lock(&nf_trace_lock);
    if (nf_trace_fp != NULL)
        fprintf(nf_trace_fp, "%d %llu %s %d %s %s %llu %s %s %s:%d\n", rank,
                (unsigned long long)q->call, q->comm_name[0] ? q->comm_name : "-",
                q->comm_size, q->datatype, q->op, (unsigned long long)q->bytes,
                nf_route_name(route), a->rule, a->file[0] ? a->file : "-", a->line);
    pthread_mutex_unlock(&nf_trace_lock);
}

void nf_admission_finalize(void)
{
    pthread_mutex_lock(&nf_trace_lock);
    if (nf_trace_fp != NULL && fclose(nf_trace_fp) != 0)
        nf_log_warn("writing the NFCOLL_TRACE file failed: %m");
    nf_trace_fp = NULL;
    pthread_mutex_unlock(&nf_trace_lock);
    nf_policy_free(nf_pol);
    nf_pol = NULL;
    nf_pol_state = 0;
}

static int nf_engaged = -1; /* -1: not agreed (no MPI_Init through the shim) */

/* Collective on MPI_COMM_WORLD, from the shim at MPI_Init. A policy that
 * failed to load still engages: those ranks then differ in hash and every
 * call takes pmpi, instead of some ranks skipping nf_admit. */
void nf_admission_engage(void)
{
    int mine = nf_pol_state != 0 || nf_trace_fp != NULL || nf_g.settings->trace != NULL, any = 0;
    PMPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    nf_engaged = any;
}

int nf_admission_engaged(void)
{
    return nf_engaged >= 0 ? nf_engaged : (nf_pol_state == 1 || nf_trace_fp != NULL);
}

const nf_policy_t *nf_admission_policy(void) { return nf_pol; }

/* Where stats go: NFCOLL_STATS wins over the policy's `stats` setting. */
const char *nf_admission_stats_dest(void)
{
    const char *env = nf_g.settings != NULL ? nf_g.settings->stats : NULL;
    return env != NULL ? env : nf_policy_stats(nf_pol);
}

/* What ranks compare: 0 without a policy, a fixed value for one that
 * failed to load (so it differs from both), else the policy's hash. */
uint64_t nf_admission_hash(void)
{
    if (nf_pol_state < 0)
        return 0x6661696c6564ull; /* "failed" */
    return nf_policy_hash(nf_pol);
}

int nf_admit(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm)
{
    nf_comm_t *c = nf_comm_get(comm);
    if (c == NULL)
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    int tsize = 0;
    PMPI_Type_size(datatype, &tsize);
    nf_policy_query_t q = {
        .region = NULL,
        .comm_name = c->name,
        .comm_size = c->size,
        .datatype = nf_datatype_name(datatype),
        .op = nf_op_name(op),
        .bytes = (uint64_t)count * (uint64_t)tsize,
        .call = c->admitted++,
    };
    nf_policy_action_t a;
    nf_policy_match(nf_pol, &q, &a);
    nf_route_t route = a.route;
    if (route != NF_ROUTE_PMPI && (c->is_inter || c->size < 2)) {
        nf_stats_fallback(NF_FALLBACK_COMM);
        route = NF_ROUTE_PMPI;
    }
    /* Ranks that disagree on the policy or the communicator's name could
     * pick different routes: all of them take pmpi. */
    if (route != NF_ROUTE_PMPI && !c->policy_agreed) {
        nf_stats_fallback(NF_FALLBACK_POLICY);
        route = NF_ROUTE_PMPI;
    }
    if (nf_trace_fp != NULL)
        nf_trace(c->rank, &q, route, &a);
    return nf_allreduce_on(sendbuf, recvbuf, count, datatype, op, comm, route, a.ef, a.gamma);
}

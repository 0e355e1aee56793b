/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PMPI interposition: the MPI_* entry points libnfcoll defines, so that an
 * unmodified program uses it by relinking (-lnfcoll before -lmpi) or with
 * LD_PRELOAD=libnfcoll.so. The shim holds no arithmetic: it asks admission
 * and calls PMPI_* only. With no policy, MPI_Allreduce is one branch in
 * front of PMPI_Allreduce.
 *
 * The communicator constructors are wrapped so that each new communicator
 * gets its private duplicate inside the constructor, where every rank of
 * it is (docs/design.md, "Communicator setup"): libnfcoll never starts a
 * collective on a program's communicator anywhere else. MPI_Comm_free is
 * not wrapped: libnfcoll's state hangs off a communicator attribute whose
 * delete callback frees it, which also covers MPI_Comm_disconnect and
 * frees issued from Fortran.
 *
 * The Fortran entry points (fortran.c) convert their arguments and take the
 * same steps, declared in nf_shim.h.
 */
#include "config.h"

#include <math.h>

#include "nf_admit.h"
#include "nf_agree.h"
#include "nf_api.h"
#include "nf_async.h"
#include "nf_engine.h"
#include "nf_ctx.h"
#include "nf_export.h"
#include "nf_log.h"
#include "nf_shim.h"
#include "nf_stats.h"
#include "nf_util.h"

/* Set while libnfcoll runs a call on this thread: an MPI_Allreduce reached
 * from inside (a tool stacked under us) goes straight to PMPI. */
static __thread int nf_inside;

/* The level MPI_Init_thread reported to the program, when libnfcoll asked
 * MPI for more (its progress threads): MPI_Query_thread says the same. */
static int nf_shim_told = -1;

/* What a rank asks for, as flags agreed with a bitwise OR. */
enum {
    NF_WANT_ANY = 1u << 0,    /* NFCOLL_POLICY, _TRACE, _STATS or CXL=require */
    NF_WANT_FAILED = 1u << 1, /* nf_init failed here */
    NF_WANT_REQUIRE = 1u << 2,
    NF_WANT_STATS = 1u << 3,
    NF_WANT_ADMIT = 1u << 4,  /* a policy or a trace: admission decides calls */
    NF_WANT_NOTHREAD = 1u << 5 /* no progress thread here (nf_engine_local) */
};

/* This rank asks libnfcoll for something. */
static int nf_shim_wanted(const nf_settings_t *s)
{
    return s->policy != NULL || s->trace != NULL || s->stats != NULL || s->calibrate != NULL ||
           s->cxl == NF_CXL_REQUIRE;
}

/* The thread level to ask MPI for: the progress thread needs
 * MPI_THREAD_MULTIPLE (docs/design.md, "The progress engine"), asked for only
 * when this rank asks libnfcoll for something and NFCOLL_PROGRESS allows
 * it; otherwise what the program asked for. Before MPI_Init the rank is
 * unknown: the raw values, so that the settings are parsed (and a
 * malformed one reported, by rank 0 only) after it. */
static int nf_shim_level(int required)
{
    const char *cxl = nf_setting_raw(NF_SET_CXL), *progress = nf_setting_raw(NF_SET_PROGRESS);
    int want = nf_setting_raw(NF_SET_POLICY) != NULL || nf_setting_raw(NF_SET_TRACE) != NULL ||
               nf_setting_raw(NF_SET_STATS) != NULL || nf_setting_raw(NF_SET_CALIBRATE) != NULL ||
               (cxl != NULL && nf_strcaseeq(cxl, "require"));
    if (required >= MPI_THREAD_MULTIPLE || !want ||
        (progress != NULL && nf_strcaseeq(progress, "off")))
        return required;
    return MPI_THREAD_MULTIPLE;
}

/* After PMPI_Init: two small allreduces on MPI_COMM_WORLD, then nothing
 * until the first MPI_Allreduce. Without any NFCOLL_* request anywhere,
 * libnfcoll stays invisible (no topology load, no output). Agreed, so that
 * a setting or file present on some ranks only cannot make them take
 * different paths; the agreements themselves are in agree.c. */
void nf_shim_after_init(void)
{
    int rank = 0;
    unsigned all = 0;
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS)
        return; /* MPI_COMM_WORLD unusable: stay out of the way */
    nf_log_set_rank(rank);
    const nf_settings_t *s = nf_settings_load();
    unsigned want = nf_shim_wanted(s);
    if (nf_agree_any(MPI_COMM_WORLD, want ? NF_WANT_ANY : 0, &all) != NF_OK)
        return;
    if (!all) {
        nf_ctx.engaged = 0; /* NF_Allreduce too: pmpi, agreed */
        return;
    }
    nf_inside = 1;
    nf_status_t st = nf_init();
    unsigned mine = (st != NF_OK ? NF_WANT_FAILED : 0) |
                    (s->cxl == NF_CXL_REQUIRE ? NF_WANT_REQUIRE : 0) |
                    (nf_admit_stats_dest(s) != NULL ? NF_WANT_STATS : 0) |
                    (nf_admit_wanted() ? NF_WANT_ADMIT : 0) |
                    (st == NF_OK && !nf_engine_local() ? NF_WANT_NOTHREAD : 0);
    if (nf_agree_any(MPI_COMM_WORLD, mine, &all) != NF_OK)
        all = NF_WANT_FAILED;
    if ((all & NF_WANT_FAILED) && (all & NF_WANT_REQUIRE)) {
        if (rank == 0)
            nf_log_error("NFCOLL_CXL=require could not be met on every rank (see above); "
                         "aborting");
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    if ((all & NF_WANT_FAILED) && nf_ctx.state == NF_STATE_READY)
        nf_ctx.state = NF_STATE_DISABLED; /* one rank without libnfcoll means none uses it */
    nf_ctx.engaged = (all & NF_WANT_ADMIT) != 0;
    nf_ctx.report_stats = (all & NF_WANT_STATS) != 0;
    nf_engine_agreed((all & NF_WANT_NOTHREAD) == 0);
    nf_ctx.intercept = 1;
    /* Every rank is in MPI_Init: the two predefined communicators get their
     * state now, and the world's setup compares the policies. */
    nf_comm_t *c;
    if (nf_ctx_ready() && nf_comm_get(MPI_COMM_WORLD, &c) == NF_OK)
        nf_engine_drain(c);
    if (nf_ctx_ready() && nf_comm_get(MPI_COMM_SELF, &c) == NF_OK)
        nf_engine_drain(c);
    nf_inside = 0;
}

int nf_shim_init(int *argc, char ***argv, int required, int *provided)
{
    int ask = nf_shim_level(required), got = MPI_THREAD_SINGLE;
    int rc = ask == MPI_THREAD_SINGLE && provided == NULL ? PMPI_Init(argc, argv)
                                                         : PMPI_Init_thread(argc, argv, ask, &got);
    if (rc != MPI_SUCCESS)
        return rc;
    /* The program sees the level it asked for, capped by what MPI gave:
     * whether libnfcoll's thread can run is libnfcoll's business. */
    int told = ask != required && got > required ? required : got;
    if (provided != NULL)
        *provided = told;
    if (ask != required)
        nf_shim_told = told;
    nf_shim_after_init();
    return rc;
}

NF_EXPORT int MPI_Init(int *argc, char ***argv)
{
    return nf_shim_init(argc, argv, MPI_THREAD_SINGLE, NULL);
}

NF_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    return nf_shim_init(argc, argv, required, provided);
}

void nf_shim_before_finalize(void)
{
    nf_engine_finalize(); /* the queued calls run; their counts reach the report */
    if (nf_ctx.intercept && nf_ctx.report_stats) { /* collective: agreed at init */
        nf_inside = 1;
        nf_stats_report(MPI_COMM_WORLD, nf_admit_stats_dest(nf_settings_load()));
        nf_inside = 0;
    }
}

/* ---- communicator constructors ----
 *
 * After MPI's own constructor succeeded, every rank of the new
 * communicator is still inside the same call: its state and private
 * duplicate are made there (nf_comm_get; the rest of its setup runs on the
 * duplicate, later), when the ranks agreed at MPI_Init to engage
 * libnfcoll (some rank set an NFCOLL_ request): a rank's own later
 * initialization (its first NF_ call) is not agreed, and would start the
 * duplicate on some ranks of the new communicator only. A rank outside the
 * new communicator (MPI_COMM_NULL) does nothing. A failure leaves the communicator without state: its
 * calls fall back as for one libnfcoll did not see made. */
static int nf_shim_made(int rc, MPI_Comm newcomm)
{
    if (rc != MPI_SUCCESS || !nf_ctx.intercept || nf_inside || newcomm == MPI_COMM_NULL ||
        !nf_ctx_ready())
        return rc;
    nf_comm_t *c;
    nf_inside = 1;
    nf_comm_get(newcomm, &c);
    nf_inside = 0;
    return rc;
}

/* MPI's constructor CALL, which sets *OUT, then the state (nf_shim_made). */
#define NF_SHIM_MADE(call, out)                                                             \
    do {                                                                                    \
        int rc_ = (call);                                                                   \
        return nf_shim_made(rc_, rc_ == MPI_SUCCESS ? *(out) : MPI_COMM_NULL);              \
    } while (0)

NF_EXPORT int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    NF_SHIM_MADE(PMPI_Comm_dup(comm, newcomm), newcomm);
}

NF_EXPORT int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    NF_SHIM_MADE(PMPI_Comm_dup_with_info(comm, info, newcomm), newcomm);
}

NF_EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    NF_SHIM_MADE(PMPI_Comm_split(comm, color, key, newcomm), newcomm);
}

NF_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                                  MPI_Comm *newcomm)
{
    NF_SHIM_MADE(PMPI_Comm_split_type(comm, split_type, key, info, newcomm), newcomm);
}

NF_EXPORT int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    NF_SHIM_MADE(PMPI_Comm_create(comm, group, newcomm), newcomm);
}

NF_EXPORT int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm)
{
    NF_SHIM_MADE(PMPI_Comm_create_group(comm, group, tag, newcomm), newcomm);
}

NF_EXPORT int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm)
{
    NF_SHIM_MADE(PMPI_Intercomm_merge(intercomm, high, newintracomm), newintracomm);
}

NF_EXPORT int MPI_Finalize(void)
{
    nf_shim_before_finalize();
    return PMPI_Finalize();
}

/* Outside the fast path so that MPI_Allreduce without libnfcoll engaged is
 * a load, a test and a jump to PMPI_Allreduce (no frame, no TLS lookup). */
__attribute__((noinline)) int nf_shim_allreduce(const void *sendbuf, void *recvbuf, int count,
                                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    nf_run_args_t a = NF_RUN_ARGS(sendbuf, recvbuf, count, datatype, op, comm);
    /* Bad arguments: MPI reports them, its own way. */
    if (nf_inside || nf_api_check(&a) != MPI_SUCCESS)
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    nf_inside = 1;
    int rc = nf_api_allreduce(&a, -1);
    nf_inside = 0;
    return rc;
}

NF_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                            MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    if (__builtin_expect(!nf_ctx.intercept, 1))
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    return nf_shim_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

/* As nf_shim_allreduce; every call that does not reach admission is
 * PMPI_Iallreduce's, untouched. */
__attribute__((noinline)) int nf_shim_iallreduce(const void *sendbuf, void *recvbuf, int count,
                                                 MPI_Datatype datatype, MPI_Op op,
                                                 MPI_Comm comm, MPI_Request *request)
{
    nf_run_args_t a = NF_RUN_ARGS(sendbuf, recvbuf, count, datatype, op, comm);
    if (nf_inside || request == NULL || nf_api_check(&a) != MPI_SUCCESS)
        return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
    nf_inside = 1;
    int rc = nf_async_iallreduce(&a, -1, request);
    nf_inside = 0;
    return rc;
}

/* ---- completion: the MPI_Wait family ----
 *
 * A wait over an array that holds one of the engine's unfinished jobs
 * polls PMPI's test of the same kind, pausing between polls
 * (nf_engine_pause: yields, then sleeps woken by any job's completion), so
 * every request in the array, and any other the program has started,
 * keeps progressing while the caller waits; PMPI's blocking wait would
 * busy-poll against the workers for the core. Any other wait is PMPI's own,
 * after one atomic load when no job is queued. The MPI_Test family needs
 * nothing: PMPI's tests see a job's request complete. */

NF_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    if (request == NULL || !nf_engine_holds(request, 1))
        return PMPI_Wait(request, status);
    int flag = 0, rc;
    unsigned polls = 0;
    while ((rc = PMPI_Test(request, &flag, status)) == MPI_SUCCESS && !flag)
        nf_engine_pause(&polls);
    return rc;
}

NF_EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    if (count <= 0 || !nf_engine_holds(requests, count))
        return PMPI_Waitall(count, requests, statuses);
    int flag = 0, rc;
    unsigned polls = 0;
    while ((rc = PMPI_Testall(count, requests, &flag, statuses)) == MPI_SUCCESS && !flag)
        nf_engine_pause(&polls);
    return rc;
}

NF_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    if (count <= 0 || !nf_engine_holds(requests, count))
        return PMPI_Waitany(count, requests, index, status);
    int flag = 0, rc;
    unsigned polls = 0;
    while ((rc = PMPI_Testany(count, requests, index, &flag, status)) == MPI_SUCCESS && !flag)
        nf_engine_pause(&polls);
    return rc;
}

NF_EXPORT int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                           MPI_Status statuses[])
{
    if (incount <= 0 || !nf_engine_holds(requests, incount))
        return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
    int rc;
    unsigned polls = 0;
    while ((rc = PMPI_Testsome(incount, requests, outcount, indices, statuses)) ==
               MPI_SUCCESS &&
           *outcount == 0)
        nf_engine_pause(&polls);
    return rc;
}

int nf_shim_query_thread(int *provided)
{
    if (nf_shim_told < 0 || provided == NULL)
        return PMPI_Query_thread(provided);
    int up = 0;
    if (PMPI_Initialized(&up) == MPI_SUCCESS && !up)
        return PMPI_Query_thread(provided); /* MPI's own error */
    *provided = nf_shim_told;
    return MPI_SUCCESS;
}

NF_EXPORT int MPI_Query_thread(int *provided) { return nf_shim_query_thread(provided); }

NF_EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                             MPI_Request *request)
{
    if (__builtin_expect(!nf_ctx.intercept, 1))
        return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
    return nf_shim_iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* Process-wide setup, the composition root: settings, kernel choice,
 * admission's policy, then the process context below it, and a
 * MPI_COMM_SELF attribute whose deletion at MPI_Finalize tears it all down. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>

#include "nf_admit.h"
#include "nf_api.h"
#include "nf_comm.h"
#include "nf_ctx.h"
#include "nf_export.h"
#include "nf_log.h"

static pthread_mutex_t nf_init_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int nf_inited; /* set with release once nf_ctx is complete */
static int nf_self_keyval = MPI_KEYVAL_INVALID;
static void (*_Atomic nf_finalize_hook)(void);

void nf_init_at_finalize(void (*fn)(void))
{
    atomic_store(&nf_finalize_hook, fn);
}

static const nf_kernels_t *nf_pick_kernels(const nf_settings_t *s)
{
    nf_isa_t best = nf_isa_detect();
    nf_isa_t isa = (nf_isa_t)s->simd_cap < best ? (nf_isa_t)s->simd_cap : best;
    if (nf_setting_raw(NF_SET_SIMD) != NULL && (nf_isa_t)s->simd_cap > best)
        nf_log_warn("NFCOLL_SIMD=%s asks for more than this CPU (or build) offers; using %s",
                    nf_setting_raw(NF_SET_SIMD), nf_isa_name(best));
    nf_kernels_set_tune(s->simd_tune); /* off: the highest ISA, untimed */
    return nf_kernels_tuned(isa);
}

/* Runs at MPI_Finalize, while MPI is still usable. */
static int nf_self_delete(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm, (void)keyval, (void)attr, (void)extra;
    void (*hook)(void) = atomic_load(&nf_finalize_hook);
    if (hook != NULL)
        hook(); /* the progress thread, when MPI_Finalize did not come through the shim */
    nf_comm_finalize(); /* admission's per-communicator caches go with them */
    nf_ctx_finalize();
    nf_admit_finalize();
    atomic_store_explicit(&nf_inited, 0, memory_order_release);
    return MPI_SUCCESS;
}

static int nf_init_threads(const nf_settings_t *s)
{
    int level = MPI_THREAD_SINGLE;
    return s->progress == NF_PROGRESS_THREAD && PMPI_Query_thread(&level) == MPI_SUCCESS &&
           level == MPI_THREAD_MULTIPLE;
}

static nf_status_t nf_init_locked(void)
{
    int rank = 0;
    nf_status_t st = nf_mpi_status(PMPI_Comm_rank(MPI_COMM_WORLD, &rank));
    if (st != NF_OK)
        return st;
    nf_log_set_rank(rank);
    const nf_settings_t *s = nf_settings_load();
    nf_admit_init(s, rank);
    nf_config_t cfg = {
        .settings = s,
        .kernels = nf_pick_kernels(s),
        .policy_hash = nf_admit_hash(),
        .policy_cxl_node = nf_policy_cxl_node(nf_admit_policy()),
        .threads = nf_init_threads(s),
    };
    if ((st = nf_ctx_init(&cfg)) != NF_OK)
        return st;
    if ((st = nf_comm_init()) != NF_OK) {
        nf_ctx.state = NF_STATE_FAILED;
        return st;
    }
    if ((st = nf_mpi_status(PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, nf_self_delete,
                                                    &nf_self_keyval, NULL))) != NF_OK ||
        (st = nf_mpi_status(PMPI_Comm_set_attr(MPI_COMM_SELF, nf_self_keyval, NULL))) != NF_OK) {
        nf_log_error("cannot hook MPI_Finalize; libnfcoll disabled");
        nf_ctx.state = NF_STATE_FAILED;
        return st;
    }
    nf_log_info(1, "kernels %s", cfg.kernels->name);
    return NF_OK;
}

nf_status_t nf_init(void)
{
    /* Every call comes through here: no lock once initialized. */
    if (atomic_load_explicit(&nf_inited, memory_order_acquire))
        return nf_ctx.init_status;
    int mpi_up = 0, mpi_down = 0;
    PMPI_Initialized(&mpi_up);
    PMPI_Finalized(&mpi_down);
    if (!mpi_up || mpi_down)
        return NF_ERR_INVALID;
    pthread_mutex_lock(&nf_init_lock);
    if (!atomic_load_explicit(&nf_inited, memory_order_relaxed)) {
        nf_ctx.init_status = nf_init_locked();
        atomic_store_explicit(&nf_inited, 1, memory_order_release);
    }
    pthread_mutex_unlock(&nf_init_lock);
    return nf_ctx.init_status;
}

NF_EXPORT const char *nf_version(int *major, int *minor, int *patch)
{
    if (major != NULL)
        *major = NFCOLL_VERSION_MAJOR;
    if (minor != NULL)
        *minor = NFCOLL_VERSION_MINOR;
    if (patch != NULL)
        *patch = NFCOLL_VERSION_PATCH;
    return NFCOLL_VERSION_STRING;
}

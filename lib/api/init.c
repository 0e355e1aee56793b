/* Process-wide setup: settings, kernel dispatch, placement, keyvals, and a
 * MPI_COMM_SELF attribute whose deletion at MPI_Finalize tears it all down. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "nf_core.h"
#include "nf_export.h"
#include "nf_placement.h"
#include "nf_policy.h"

nf_global_t nf_g = {.comm_keyval = MPI_KEYVAL_INVALID, .line_type = MPI_DATATYPE_NULL,
                     .init_status = NF_ERR_INVALID};

static pthread_mutex_t nf_init_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int nf_inited; /* set with release once nf_g is complete */
static int nf_self_keyval = MPI_KEYVAL_INVALID;

static const nf_kernels_t *nf_pick_kernels(const nf_settings_t *s)
{
    nf_isa_t best = nf_isa_detect();
    nf_isa_t isa = (nf_isa_t)s->simd_cap < best ? (nf_isa_t)s->simd_cap : best;
    if (nf_setting_raw(NF_SET_SIMD) != NULL && (nf_isa_t)s->simd_cap > best)
        nf_log_warn("NFCOLL_SIMD=%s asks for more than this CPU (or build) offers; using %s",
                    nf_setting_raw(NF_SET_SIMD), nf_isa_name(best));
    return nf_kernels_for(isa);
}

static int nf_self_delete(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm, (void)keyval, (void)attr, (void)extra;
    nf_finalize();
    return MPI_SUCCESS;
}

static nf_status_t nf_init_locked(void)
{
    int rank;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    nf_log_set_rank(rank);
    nf_g.settings = nf_settings_load();
    nf_g.k = nf_pick_kernels(nf_g.settings);
    nf_admission_init(nf_g.settings->policy);
    nf_admission_trace_init(nf_g.settings->trace, rank);
    /* The policy's cxl_node; NFCOLL_CXL_NODE, when set, still wins. */
    nf_place_set_policy_node(nf_policy_cxl_node(nf_admission_policy()));
    /* Placement is set up with the first buffer it places; only a required
     * CXL node must be there from the start (init fails without it). */
    if (nf_g.settings->cxl == NF_CXL_REQUIRE) {
        nf_status_t st = nf_place_init();
        if (st != NF_OK)
            return st;
    }
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, nf_comm_delete_attr,
                                &nf_g.comm_keyval, NULL) != MPI_SUCCESS ||
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, nf_self_delete,
                                &nf_self_keyval, NULL) != MPI_SUCCESS ||
        PMPI_Type_contiguous(NF_LINE_BYTES, MPI_BYTE, &nf_g.line_type) != MPI_SUCCESS ||
        PMPI_Type_commit(&nf_g.line_type) != MPI_SUCCESS ||
        PMPI_Comm_set_attr(MPI_COMM_SELF, nf_self_keyval, NULL) != MPI_SUCCESS) {
        nf_log_error("cannot create MPI attribute keys; libnfcoll disabled");
        return NF_ERR_MPI;
    }
    nf_log_info(1, "kernels %s", nf_g.k->name);
    return NF_OK;
}

nf_status_t nf_init(void)
{
    /* Every call comes through here: no lock once initialized. */
    if (atomic_load_explicit(&nf_inited, memory_order_acquire))
        return (nf_status_t)nf_g.init_status;
    int mpi_up = 0, mpi_down = 0;
    PMPI_Initialized(&mpi_up);
    PMPI_Finalized(&mpi_down);
    if (!mpi_up || mpi_down)
        return NF_ERR_INVALID;
    pthread_mutex_lock(&nf_init_lock);
    if (!atomic_load_explicit(&nf_inited, memory_order_relaxed)) {
        nf_g.init_status = nf_init_locked();
        atomic_store_explicit(&nf_inited, 1, memory_order_release);
    }
    pthread_mutex_unlock(&nf_init_lock);
    return (nf_status_t)nf_g.init_status;
}

/* Runs from the MPI_COMM_SELF attribute delete at MPI_Finalize, while MPI
 * is still usable. */
void nf_finalize(void)
{
    nf_comm_free_all();
    if (nf_g.comm_keyval != MPI_KEYVAL_INVALID)
        PMPI_Comm_free_keyval(&nf_g.comm_keyval);
    if (nf_g.line_type != MPI_DATATYPE_NULL)
        PMPI_Type_free(&nf_g.line_type);
    nf_place_finalize();
    nf_admission_finalize();
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

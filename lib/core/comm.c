/* Per-communicator state: private duplicate, node/leader split, the shared
 * segment and its layout. Cached on the communicator with an attribute, so
 * it is freed with the communicator or at MPI_Finalize. */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nf_core.h"
#include "nf_export.h"
#include "nf_placement.h"

static pthread_mutex_t nf_comm_lock = PTHREAD_MUTEX_INITIALIZER;
static nf_comm_t *nf_comm_live;

static size_t nf_align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static void nf_comm_link(nf_comm_t *c)
{
    pthread_mutex_lock(&nf_comm_lock);
    c->prev = NULL;
    c->next = nf_comm_live;
    if (nf_comm_live != NULL)
        nf_comm_live->prev = c;
    nf_comm_live = c;
    pthread_mutex_unlock(&nf_comm_lock);
}

static void nf_comm_unlink(nf_comm_t *c)
{
    pthread_mutex_lock(&nf_comm_lock);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else if (nf_comm_live == c)
        nf_comm_live = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
    pthread_mutex_unlock(&nf_comm_lock);
}

static void nf_comm_destroy(nf_comm_t *c)
{
    nf_comm_unlink(c);
    nf_shm_destroy(&c->shm);
    nf_residual_table_free(&c->resid);
    free(c->xnode);
    free(c->scales);
    free(c->ptrs);
    if (c->leaders != MPI_COMM_NULL)
        PMPI_Comm_free(&c->leaders);
    if (c->node != MPI_COMM_NULL)
        PMPI_Comm_free(&c->node);
    if (c->priv != MPI_COMM_NULL)
        PMPI_Comm_free(&c->priv);
    free(c);
}

int nf_comm_delete_attr(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm, (void)keyval, (void)extra;
    nf_comm_destroy(attr);
    return MPI_SUCCESS;
}

void nf_comm_free_all(void)
{
    while (nf_comm_live != NULL) {
        nf_comm_t *c = nf_comm_live;
        /* Deleting the attribute runs nf_comm_delete_attr, which unlinks c. */
        if (PMPI_Comm_delete_attr(c->user, nf_g.comm_keyval) != MPI_SUCCESS)
            nf_comm_destroy(c);
    }
}

/* Carve the segment: slots | counters | fp32 results. */
static void nf_comm_layout(nf_comm_t *c, size_t cap, size_t *slot, size_t *cnt, size_t *total)
{
    size_t nlines = nf_lines(cap);
    size_t fp32 = 2 * (size_t)NF_FP32_CHUNK * sizeof(float);
    size_t lowbit = 2 * nlines * NF_LINE_BYTES;
    *slot = nf_align_up(lowbit > fp32 ? lowbit : fp32, 4096);
    *cnt = nf_align_up(2 * nlines * c->k * NF_LINE_BYTES, 4096);
    *total = (size_t)c->lsize * *slot + *cnt + fp32;
}

/* Agree on the worst status over the communicator: every rank must take the
 * same path, or some would wait in a collective the others skipped. */
static nf_status_t nf_comm_agree(nf_comm_t *c, nf_status_t st)
{
    int mine = st == NF_OK ? 0 : 1, any = 1;
    if (PMPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, c->priv) != MPI_SUCCESS)
        return NF_ERR_MPI;
    return any == 0 ? NF_OK : (st != NF_OK ? st : NF_ERR_NO_MEMORY);
}

/* A new segment for cap elements. The old one stays mapped until the new
 * one exists everywhere, so a failed growth leaves a working segment. */
static nf_status_t nf_comm_map(nf_comm_t *c, size_t cap)
{
    size_t slot, cnt, total;
    nf_shm_t shm;
    nf_comm_layout(c, cap, &slot, &cnt, &total);
    nf_status_t st = nf_comm_agree(c, nf_shm_create(&shm, total, c->node));
    if (st != NF_OK) {
        nf_shm_destroy(&shm);
        return st;
    }
    nf_shm_destroy(&c->shm);
    c->shm = shm;
    if (c->lrank == 0) /* one segment per node: counted once */
        nf_stats_placed(NF_PLACED_BUFFER, shm.bytes, shm.resident_frac);
    c->slot_bytes = slot;
    c->slots = c->shm.base;
    c->cnt = (uint64_t *)(c->slots + (size_t)c->lsize * slot);
    c->fp32_res = (float *)((uint8_t *)c->cnt + cnt);
    return NF_OK;
}

static nf_status_t nf_comm_xnode(nf_comm_t *c, size_t cap)
{
    if (c->leaders == MPI_COMM_NULL || c->nnodes < 2)
        return NF_OK;
    size_t per = 2 * nf_lines(cap) * c->k * NF_LINE_BYTES;
    if (per < NF_FP32_CHUNK * sizeof(float))
        per = NF_FP32_CHUNK * sizeof(float);
    size_t bytes = per * (size_t)c->nnodes;
    if (bytes <= c->xnode_bytes)
        return NF_OK;
    void *p = NULL;
    if (posix_memalign(&p, NF_LINE_BYTES, bytes) != 0) {
        nf_log_error("cannot allocate %zu bytes of inter-node scratch", bytes);
        return NF_ERR_NO_MEMORY;
    }
    free(c->xnode);
    c->xnode = p;
    c->xnode_bytes = bytes;
    return NF_OK;
}

nf_status_t nf_comm_reserve(nf_comm_t *c, size_t m)
{
    if (m <= c->cap_elems)
        return NF_OK;
    size_t cap = nf_align_up(m > 2 * c->cap_elems ? m : 2 * c->cap_elems, NF_LINE_BITS);
    /* The scratch first (a leader-local failure, agreed), then the segment:
     * cap_elems grows only when both hold the new size everywhere. */
    nf_status_t st = nf_comm_agree(c, nf_comm_xnode(c, cap));
    if (st == NF_OK)
        st = nf_comm_map(c, cap);
    if (st == NF_OK)
        c->cap_elems = cap;
    return st;
}

static nf_status_t nf_comm_split(nf_comm_t *c)
{
    if (PMPI_Comm_dup(c->user, &c->priv) != MPI_SUCCESS)
        return NF_ERR_MPI;
    PMPI_Comm_rank(c->priv, &c->rank);
    PMPI_Comm_size(c->priv, &c->size);
    int rpn = nf_g.settings->ranks_per_node;
    int rc = rpn > 0 ? PMPI_Comm_split(c->priv, c->rank / rpn, c->rank, &c->node)
                     : PMPI_Comm_split_type(c->priv, MPI_COMM_TYPE_SHARED, c->rank,
                                            MPI_INFO_NULL, &c->node);
    if (rc != MPI_SUCCESS)
        return NF_ERR_MPI;
    PMPI_Comm_rank(c->node, &c->lrank);
    PMPI_Comm_size(c->node, &c->lsize);
    if (PMPI_Comm_split(c->priv, c->lrank == 0 ? 0 : MPI_UNDEFINED, c->rank,
                        &c->leaders) != MPI_SUCCESS)
        return NF_ERR_MPI;
    if (c->leaders != MPI_COMM_NULL)
        PMPI_Comm_size(c->leaders, &c->nnodes);
    PMPI_Bcast(&c->nnodes, 1, MPI_INT, 0, c->node);
    return NF_OK;
}

static uint64_t nf_hash_str(const char *str)
{
    uint64_t h = 1469598103934665603ull;
    for (; *str != '\0'; str++)
        h = (h ^ (unsigned char)*str) * 1099511628211ull;
    return h;
}

/*
 * Everything a rank decides alone that changes which collectives it enters
 * is agreed here, in one allreduce: its policy (hash), the communicator's
 * name (rules match on it; MPI_Comm_set_name is local), whether the count
 * lanes fit (NFCOLL_COUNT_BITS is per process) and whether its own small
 * allocations worked. A difference turns the feature off for every rank.
 */
static void nf_comm_decide(nf_comm_t *c)
{
    uint64_t h = nf_admission_hash(), nh = nf_hash_str(c->name);
    uint64_t v[6] = {h, ~h, nh, ~nh, c->k > nf_g.settings->count_bits,
                     c->scales == NULL || c->ptrs == NULL};
    uint64_t w[6];
    if (PMPI_Allreduce(v, w, 6, MPI_UINT64_T, MPI_MAX, c->priv) != MPI_SUCCESS) {
        c->broken = 1;
        return;
    }
    int same_policy = w[0] == h && ~w[1] == h, same_name = w[2] == nh && ~w[3] == nh;
    c->policy_agreed = same_policy && same_name;
    c->lowbit_ok = w[4] == 0;
    c->broken = w[5] != 0;
    if (!same_policy)
        nf_log_warn_once_root(c->rank == 0, "ranks loaded different admission policies "
                              "(NFCOLL_POLICY): every call takes pmpi for this run");
    else if (!same_name)
        nf_log_warn_once_root(c->rank == 0, "communicator '%s' has different names on its "
                              "ranks: its calls take pmpi", c->name);
}

static nf_comm_t *nf_comm_new(MPI_Comm comm)
{
    nf_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->user = comm;
    c->priv = c->node = c->leaders = MPI_COMM_NULL;
    PMPI_Comm_test_inter(comm, &c->is_inter);
    if (c->is_inter)
        return c; /* never used for our routes; cached so we decide once */
    if (nf_comm_split(c) != NF_OK) {
        nf_log_warn_once("cannot split a communicator by node; libnfcoll passes its calls to PMPI");
        c->broken = 1;
        return c;
    }
    c->k = nf_count_planes((unsigned)c->size);
    c->scales = calloc((size_t)c->size, sizeof(double));
    c->ptrs = calloc((size_t)(c->lsize > c->nnodes ? c->lsize : c->nnodes), sizeof(void *));
    int rl;
    PMPI_Comm_get_name(comm, c->name, &rl);
    nf_comm_decide(c);
    return c;
}

int nf_comm_ready(nf_comm_t *c)
{
    if (c->broken)
        return -1;
    if (c->slots != NULL)
        return 0;
    /* Every rank sets placement up (not only the one that binds the
     * segment), so each can say where its buffers are. */
    nf_place_init();
    /* Collective: every rank reaches the first fp32/low-bit call alike. */
    nf_status_t st = nf_comm_reserve(c, NF_LINE_BITS);
    if (st != NF_OK) {
        nf_log_warn_once("cannot set up the shared aggregation buffer (%s); calls on this "
                         "communicator go to PMPI_Allreduce", nf_strerror(st));
        c->broken = 1;
        return -1;
    }
    return 0;
}

nf_comm_t *nf_comm_get(MPI_Comm comm)
{
    void *attr = NULL;
    int found = 0;
    if (PMPI_Comm_get_attr(comm, nf_g.comm_keyval, &attr, &found) != MPI_SUCCESS)
        return NULL;
    if (found)
        return attr;
    /* Collective on comm: every rank reaches this on its first call. */
    nf_comm_t *c = nf_comm_new(comm);
    if (c == NULL)
        return NULL;
    if (PMPI_Comm_set_attr(comm, nf_g.comm_keyval, c) != MPI_SUCCESS) {
        nf_comm_destroy(c);
        return NULL;
    }
    nf_comm_link(c);
    return c;
}

NF_EXPORT nf_status_t nf_placement_query(MPI_Comm comm, nf_placement_info_t *info)
{
    if (info == NULL || comm == MPI_COMM_NULL || nf_init() != NF_OK)
        return NF_ERR_INVALID;
    nf_comm_t *c = nf_comm_get(comm);
    if (c == NULL || c->is_inter || nf_comm_ready(c) != 0)
        return NF_ERR_UNSUPPORTED;
    info->node = nf_place_node();
    /* Without a node, the detail says why (e.g. "one NUMA node only"). */
    const char *detail = nf_place_detail();
    info->reason = info->node < 0 && detail != NULL && detail[0] != '\0' ? detail
                                                                           : nf_place_reason();
    info->bytes = c->shm.bytes;
    info->resident_frac = c->shm.resident_frac;
    return NF_OK;
}

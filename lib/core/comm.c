/* SPDX-License-Identifier: BSD-3-Clause */
/* Per-communicator state: private duplicate, node/leader split, the shared
 * segment and its layout. Cached on the communicator with an attribute, so
 * it is freed with the communicator or at MPI_Finalize. */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_agree.h"
#include "nf_comm.h"
#include "nf_ctx.h"
#include "nf_kernels.h"
#include "nf_log.h"
#include "nf_placement.h"
#include "nf_stats.h"
#include "nf_util.h"
#include "nf_xnode.h"

static pthread_mutex_t nf_comm_lock = PTHREAD_MUTEX_INITIALIZER;
_Atomic unsigned nf_comm_generation = 1;
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

static const nf_comm_slot_ops_t *nf_comm_slot_ops[NF_COMM_SLOTS];
static _Atomic int nf_comm_nslots;

nf_status_t nf_comm_slot_register(const nf_comm_slot_ops_t *ops, int *slot)
{
    pthread_mutex_lock(&nf_comm_lock);
    int n = atomic_load(&nf_comm_nslots);
    nf_status_t st = n < NF_COMM_SLOTS ? NF_OK : NF_ERR_NO_MEMORY;
    if (st == NF_OK) {
        nf_comm_slot_ops[n] = ops;
        atomic_store(&nf_comm_nslots, n + 1);
        *slot = n;
    }
    pthread_mutex_unlock(&nf_comm_lock);
    return st;
}

nf_status_t nf_comm_slots_save(nf_comm_t *c, unsigned char **buf, size_t *len)
{
    unsigned char *out = NULL;
    size_t n = 0;
    int ns = atomic_load(&nf_comm_nslots);
    *buf = NULL, *len = 0;
    for (int i = 0; i < ns; i++) {
        const nf_comm_slot_ops_t *o = nf_comm_slot_ops[i];
        unsigned char *part = NULL;
        size_t plen = 0;
        if (o->save == NULL)
            continue;
        nf_status_t st = o->save(c, atomic_load(&c->slot[i]), &part, &plen);
        size_t name = strlen(o->name);
        unsigned char *grown = st == NF_OK && plen > 0 ? realloc(out, n + 1 + name + 8 + plen)
                                                      : NULL;
        if (st == NF_OK && plen > 0 && grown == NULL)
            st = NF_ERR_NO_MEMORY;
        if (st != NF_OK) {
            free(part), free(out);
            return st;
        }
        if (plen > 0) {
            out = grown;
            out[n++] = (unsigned char)name;
            memcpy(out + n, o->name, name), n += name;
            for (int b = 0; b < 8; b++)
                out[n++] = (unsigned char)((uint64_t)plen >> (8 * b));
            memcpy(out + n, part, plen), n += plen;
        }
        free(part);
    }
    *buf = out, *len = n;
    return NF_OK;
}

nf_status_t nf_comm_slots_load(nf_comm_t *c, const unsigned char *buf, size_t len, int commit,
                               char *why, size_t whylen)
{
    int ns = atomic_load(&nf_comm_nslots), had[NF_COMM_SLOTS] = {0};
    for (size_t at = 0; at < len;) {
        size_t name = buf[at++], plen = 0;
        if (name == 0 || len - at < name + 8) {
            snprintf(why, whylen, "the layers' state: a part at byte %zu is cut short", at - 1);
            return NF_ERR_PARSE;
        }
        const char *tag = (const char *)buf + at;
        at += name;
        for (int b = 0; b < 8; b++)
            plen |= (size_t)buf[at + (size_t)b] << (8 * b);
        at += 8;
        if (plen > len - at) {
            snprintf(why, whylen, "the layers' state: part '%.*s' runs past the end",
                     (int)name, tag);
            return NF_ERR_PARSE;
        }
        int i;
        for (i = 0; i < ns; i++)
            if (strlen(nf_comm_slot_ops[i]->name) == name &&
                memcmp(nf_comm_slot_ops[i]->name, tag, name) == 0)
                break;
        if (i == ns || nf_comm_slot_ops[i]->load == NULL) {
            snprintf(why, whylen, "the layers' state: part '%.*s' belongs to no layer here",
                     (int)name, tag);
            return NF_ERR_PARSE;
        }
        nf_status_t st = nf_comm_slot_ops[i]->load(c, buf + at, plen, commit, why, whylen);
        if (st != NF_OK)
            return st;
        had[i] = 1;
        at += plen;
    }
    /* a slot the file kept nothing of starts over, as in a new process */
    for (int i = 0; commit && i < ns; i++)
        if (!had[i] && nf_comm_slot_ops[i]->load != NULL)
            nf_comm_slot_ops[i]->load(c, NULL, 0, 1, why, whylen);
    return NF_OK;
}

/* Every slot's quiesce, then every slot's release (nf_comm.h). */
static void nf_comm_slots_free(nf_comm_t *c)
{
    int n = atomic_load(&nf_comm_nslots);
    for (int i = 0; i < n; i++)
        if (nf_comm_slot_ops[i]->quiesce != NULL)
            nf_comm_slot_ops[i]->quiesce(c, atomic_load(&c->slot[i]));
    for (int i = 0; i < n; i++)
        if (nf_comm_slot_ops[i]->release != NULL)
            nf_comm_slot_ops[i]->release(c, atomic_exchange(&c->slot[i], NULL));
}

static void nf_comm_destroy(nf_comm_t *c)
{
    /* MPI_Comm_free and MPI_Finalize let pending operations complete: the
     * slots' quiesce waits for the calls queued on this state. */
    nf_comm_slots_free(c);
    atomic_fetch_add(&nf_comm_generation, 1u); /* before the memory can be reused */
    nf_comm_unlink(c);
    nf_shm_destroy(&c->shm);
    nf_residual_table_free(&c->resid);
    nf_xnode_tails_free(c);
    free(c->xnode);
    free(c->pcnt);
    free(c->scales);
    free(c->mine);
    free(c->gate);
    free(c->bmax);
    free(c->bmf);
    free(c->xv);
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
    /* libnfcoll starts no operation on the user's communicator that could
     * outlive the call that started it, so MPI runs this in the program's
     * MPI_Comm_free (or MPI_Finalize), never inside one of libnfcoll's
     * waits: the calls queued on the state are waited for first. */
    nf_comm_destroy(attr);
    return MPI_SUCCESS;
}

nf_status_t nf_comm_init(void)
{
    nf_status_t st = nf_mpi_status(PMPI_Comm_create_keyval(
        MPI_COMM_NULL_COPY_FN, nf_comm_delete_attr, &nf_ctx.comm_keyval, NULL));
    if (st != NF_OK)
        nf_log_error("cannot create an MPI attribute key; libnfcoll disabled");
    return st;
}

void nf_comm_finalize(void)
{
    while (nf_comm_live != NULL) {
        nf_comm_t *c = nf_comm_live;
        /* Deleting the attribute runs nf_comm_delete_attr, which unlinks c. */
        if (PMPI_Comm_delete_attr(c->user, nf_ctx.comm_keyval) != MPI_SUCCESS)
            nf_comm_destroy(c);
    }
    if (nf_ctx.comm_keyval != MPI_KEYVAL_INVALID)
        PMPI_Comm_free_keyval(&nf_ctx.comm_keyval);
}

/* Carve the segment: control blocks | slots | counters | fp32 results,
 * for cap low-bit elements and fp32 chunks of chunk floats. */
static void nf_comm_layout(nf_comm_t *c, size_t cap, size_t chunk, size_t *slot, size_t *cnt,
                           size_t *total)
{
    size_t nlines = nf_lines(cap);
    size_t fp32 = 2 * chunk * sizeof(float);
    size_t lowbit = 2 * nlines * NF_LINE_BYTES;
    *slot = nf_align_up(lowbit > fp32 ? lowbit : fp32, 4096);
    *cnt = nf_align_up(2 * nlines * c->k * NF_LINE_BYTES, 4096);
    *total = (size_t)c->lsize * (NF_CTL_BYTES + *slot) + *cnt +
             nf_fp32_nres(c) * chunk * sizeof(float);
}

/* A new segment for cap elements and chunk floats. The old one stays
 * mapped until the new one exists everywhere, so a failed growth leaves a
 * working segment. */
static nf_status_t nf_comm_map(nf_comm_t *c, size_t cap, size_t chunk)
{
    size_t slot, cnt, total;
    nf_shm_t shm;
    nf_comm_layout(c, cap, chunk, &slot, &cnt, &total);
    nf_status_t st = nf_agree_status(c->priv, nf_shm_create(&shm, total, c->node));
    if (st != NF_OK) {
        nf_shm_destroy(&shm);
        return st;
    }
    atomic_store(&c->remap, 1);
    while (atomic_load(&c->probe) != 0)
        sched_yield(); /* a stall report reading the old flags: a few loads */
    nf_shm_destroy(&c->shm);
    c->shm = shm;
    if (c->lrank == 0) /* one segment per node: counted once */
        nf_stats_placed(NF_PLACED_BUFFER, shm.bytes, shm.resident_frac);
    c->slot_bytes = slot;
    c->ctl = c->shm.base;
    c->gen = 0; /* every local rank maps the new segment: fresh flags */
    c->slots = c->ctl + (size_t)c->lsize * NF_CTL_BYTES;
    c->cnt = (uint64_t *)(c->slots + (size_t)c->lsize * slot);
    c->fp32_res = (float *)((uint8_t *)c->cnt + cnt);
    atomic_store(&c->remap, 0);
    return NF_OK;
}

static nf_status_t nf_comm_xnode(nf_comm_t *c, size_t cap, size_t chunk)
{
    if (c->leaders == MPI_COMM_NULL || c->nnodes < 2)
        return NF_OK;
    size_t bytes = nf_xnode_bytes(c, cap, chunk);
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

nf_status_t nf_comm_scales(nf_comm_t *c, unsigned n)
{
    if (n <= c->nscales)
        return NF_OK;
    unsigned cap = n > 2 * c->nscales ? n : 2 * c->nscales;
    double *all = realloc(c->scales, (size_t)c->size * cap * sizeof(double));
    if (all != NULL)
        c->scales = all;
    double *mine = realloc(c->mine, cap * sizeof(double));
    if (mine != NULL)
        c->mine = mine;
    float *gate = realloc(c->gate, cap * sizeof(float));
    if (gate != NULL)
        c->gate = gate;
    if (all == NULL || mine == NULL || gate == NULL)
        return NF_ERR_NO_MEMORY;
    c->nscales = cap;
    return NF_OK;
}

nf_status_t nf_comm_bmax(nf_comm_t *c, size_t n)
{
    if (n <= c->nbmax)
        return NF_OK;
    uint32_t *b = realloc(c->bmax, n * sizeof(uint32_t));
    if (b != NULL)
        c->bmax = b;
    float *f = realloc(c->bmf, n * sizeof(float));
    if (f != NULL)
        c->bmf = f;
    if (b == NULL || f == NULL)
        return NF_ERR_NO_MEMORY;
    c->nbmax = n;
    return NF_OK;
}

/* The scratch first (a leader-local failure, agreed), then the segment:
 * cap_elems and fp32_chunk grow only when both hold the new sizes
 * everywhere. Every rank passes the same sizes (the callers' arguments are
 * agreed), so every rank maps the same layout or keeps the old one. */
static nf_status_t nf_comm_grow(nf_comm_t *c, size_t cap, size_t chunk)
{
    nf_status_t st = nf_agree_status(c->priv, nf_comm_xnode(c, cap, chunk));
    if (st == NF_OK)
        st = nf_comm_map(c, cap, chunk);
    if (st == NF_OK) {
        c->cap_elems = cap;
        c->fp32_chunk = chunk;
    }
    return st;
}

nf_status_t nf_comm_reserve(nf_comm_t *c, size_t m)
{
    if (m <= c->cap_elems)
        return NF_OK;
    size_t cap = nf_align_up(m > 2 * c->cap_elems ? m : 2 * c->cap_elems, NF_LINE_BITS);
    return nf_comm_grow(c, cap, c->fp32_chunk);
}

nf_status_t nf_comm_reserve_fp32(nf_comm_t *c, size_t n)
{
    size_t most = nf_fp32_chunk_max(c);
    if (n <= c->fp32_chunk || c->fp32_chunk >= most || c->fp32_stuck)
        return NF_OK;
    size_t chunk = n > 2 * c->fp32_chunk ? n : 2 * c->fp32_chunk;
    chunk = nf_align_up(chunk < most ? chunk : most, NF_FP32_CHUNK_ALIGN);
    nf_status_t st = nf_comm_grow(c, c->cap_elems, chunk);
    if (st != NF_OK) /* the pass runs in the chunks it has: no need to retry each call */
        c->fp32_stuck = 1;
    return st;
}

/* Stops at the first failed MPI call: the caller marks the state broken.
 * The private communicators return their errors: the API layer raises
 * them once, on the user's communicator. */
static nf_status_t nf_comm_split(nf_comm_t *c)
{
    int rpn = nf_ctx.cfg.settings->ranks_per_node, rc;
    if (c->priv == MPI_COMM_NULL)
        return NF_ERR_MPI;
    if ((rc = PMPI_Comm_set_errhandler(c->priv, MPI_ERRORS_RETURN)) != MPI_SUCCESS ||
        (rc = PMPI_Comm_rank(c->priv, &c->rank)) != MPI_SUCCESS ||
        (rc = PMPI_Comm_size(c->priv, &c->size)) != MPI_SUCCESS)
        return nf_mpi_status(rc);
    rc = rpn > 0 ? PMPI_Comm_split(c->priv, c->rank / rpn, c->rank, &c->node)
                 : PMPI_Comm_split_type(c->priv, MPI_COMM_TYPE_SHARED, c->rank,
                                        MPI_INFO_NULL, &c->node);
    if (rc != MPI_SUCCESS ||
        (rc = PMPI_Comm_set_errhandler(c->node, MPI_ERRORS_RETURN)) != MPI_SUCCESS ||
        (rc = PMPI_Comm_rank(c->node, &c->lrank)) != MPI_SUCCESS ||
        (rc = PMPI_Comm_size(c->node, &c->lsize)) != MPI_SUCCESS ||
        (rc = PMPI_Comm_split(c->priv, c->lrank == 0 ? 0 : MPI_UNDEFINED, c->rank,
                              &c->leaders)) != MPI_SUCCESS)
        return nf_mpi_status(rc);
    if (c->leaders != MPI_COMM_NULL &&
        ((rc = PMPI_Comm_set_errhandler(c->leaders, MPI_ERRORS_RETURN)) != MPI_SUCCESS ||
         (rc = PMPI_Comm_size(c->leaders, &c->nnodes)) != MPI_SUCCESS ||
         (rc = PMPI_Comm_rank(c->leaders, &c->node_id)) != MPI_SUCCESS))
        return nf_mpi_status(rc);
    int most = 0;
    if ((rc = PMPI_Bcast(&c->nnodes, 1, MPI_INT, 0, c->node)) != MPI_SUCCESS ||
        (rc = PMPI_Allreduce(&c->lsize, &most, 1, MPI_INT, MPI_MAX, c->priv)) != MPI_SUCCESS)
        return nf_mpi_status(rc);
    c->kn = nf_count_planes((unsigned)most);
    return NF_OK;
}

/*
 * Everything a rank decides alone that changes which collectives it enters
 * is agreed before the first call: its policy (hash), the communicator's
 * name (rules match on it; MPI_Comm_set_name is local), whether the count
 * lanes fit (NFCOLL_COUNT_BITS is per process) and whether its own setup
 * worked. A difference turns the feature off for every rank. On the
 * private duplicate, which every rank has (nf_comm_new agreed it).
 */
static nf_status_t nf_comm_decide(nf_comm_t *c, int setup_ok)
{
    nf_agree_comm_in_t in = {
        .policy_hash = nf_ctx.cfg.policy_hash,
        .name_hash = nf_hash_str(NF_HASH_INIT, c->name),
        .lanes_fit = c->k <= nf_ctx.cfg.settings->count_bits,
        .alloc_ok = setup_ok && c->xv != NULL && c->ptrs != NULL,
    };
    nf_agree_comm_out_t out;
    nf_status_t st = nf_agree_comm(c->priv, &in, &out);
    if (st != NF_OK || !out.alloc_ok) {
        if (setup_ok)
            nf_log_warn_once("cannot set up libnfcoll's state for a communicator on some "
                             "rank; its calls go to PMPI_Allreduce");
        c->use = NF_COMM_BROKEN;
        return nf_status_mark_raised(st);
    }
    c->lowbit_ok = out.lanes_fit;
    c->use = out.same_policy && out.same_name ? NF_COMM_OK : NF_COMM_POLICY;
    if (!out.same_policy)
        nf_log_warn_once_root(c->rank == 0, "ranks loaded different admission policies "
                              "(NFCOLL_POLICY): every call admission decides takes pmpi");
    else if (!out.same_name)
        nf_log_warn_once_root(c->rank == 0, "communicator '%s' has different names on its "
                              "ranks: the calls admission decides on it take pmpi", c->name);
    return NF_OK;
}

/* The state's local part; NULL only when there is no memory for it (then
 * this rank cannot take part in the agreement either: the caller goes to
 * PMPI, and a program out of memory has bigger problems). An
 * intercommunicator's is complete here: never used for our routes, cached
 * so that we decide once. */
static nf_comm_t *nf_comm_alloc(MPI_Comm comm)
{
    nf_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->user = comm;
    c->priv = c->node = c->leaders = MPI_COMM_NULL;
    c->size = 1; /* the traffic model's size for an intercommunicator */
    if (PMPI_Comm_test_inter(comm, &c->is_inter) != MPI_SUCCESS || c->is_inter) {
        c->use = NF_COMM_BROKEN;
        return c;
    }
    PMPI_Comm_rank(comm, &c->rank);
    PMPI_Comm_size(comm, &c->size);
    return c;
}

/* The collective part, on the private duplicate: split, buffers,
 * agreement. */
static nf_status_t nf_comm_build(nf_comm_t *c)
{
    int rl;
    /* The name now, at the communicator's first use: a program names it
     * after making it (MPI_Comm_set_name), and rules match on it. */
    if (PMPI_Comm_get_name(c->user, c->name, &rl) != MPI_SUCCESS)
        c->name[0] = '\0';
    int ok = nf_comm_split(c) == NF_OK;
    if (!ok)
        nf_log_warn_once("cannot split a communicator by node; libnfcoll passes its calls to PMPI");
    c->k = nf_count_planes((unsigned)(c->size > 0 ? c->size : 1));
    if (ok) {
        c->xv = calloc(4 * (size_t)c->nnodes, sizeof(int));
        c->ptrs = calloc((size_t)(c->lsize > c->nnodes ? c->lsize : c->nnodes), sizeof(void *));
        void *p = NULL;
        if (posix_memalign(&p, NF_LINE_BYTES, (size_t)NF_SMALL_BYTES * c->k) == 0)
            c->pcnt = p;
        if (nf_comm_scales(c, 1) != NF_OK || c->pcnt == NULL)
            ok = 0;
    }
    return nf_comm_decide(c, ok);
}

nf_status_t nf_comm_ready(nf_comm_t *c)
{
    if (c->use == NF_COMM_BROKEN)
        return NF_ERR_UNSUPPORTED;
    if (c->slots != NULL)
        return NF_OK;
    /* Every rank sets placement up (not only the one that binds the
     * segment), so each can say where its buffers are. */
    nf_place_init();
    /* Collective: every rank reaches the first fp32/low-bit call alike.
     * Sized for small calls; the calls that need more grow it. */
    nf_status_t st = nf_comm_grow(c, NF_LINE_BITS, NF_FP32_CHUNK_MIN);
    if (st != NF_OK) {
        nf_log_warn_once("cannot set up the shared aggregation buffer (%s); calls on this "
                         "communicator go to PMPI_Allreduce", nf_strerror(st));
        c->use = NF_COMM_BROKEN;
        return st;
    }
    return NF_OK;
}

/* Cache c on comm and link it (its setup st, NF_OK so far); on failure
 * c is freed. */
static nf_status_t nf_comm_attach(MPI_Comm comm, nf_comm_t *c, nf_status_t st)
{
    if (st != NF_OK ||
        (st = nf_mpi_status_raised(PMPI_Comm_set_attr(comm, nf_ctx.comm_keyval, c))) != NF_OK) {
        nf_comm_destroy(c);
        return st;
    }
    nf_comm_link(c);
    return NF_OK;
}

static nf_status_t nf_comm_find(MPI_Comm comm, nf_comm_t **out, int *found)
{
    void *attr = NULL;
    nf_status_t st = nf_mpi_status_raised(
        PMPI_Comm_get_attr(comm, nf_ctx.comm_keyval, &attr, found));
    if (st == NF_OK && *found)
        *out = attr;
    return st;
}

/* Collective on comm, where every rank is in the same blocking call:
 * the private duplicate, agreed, and the state cached as NF_COMM_NEW. */
static nf_status_t nf_comm_new(MPI_Comm comm, nf_comm_t **out)
{
    /* One agreement: whether every rank has its duplicate and its state
     * (a rank out of memory still takes part, so none waits for it), and
     * whether every rank can run progress threads (the engine's,
     * nf_engine.h). An intercommunicator's state is complete and unused:
     * no collective. */
    enum { NF_MADE_FAILED = 1u, NF_MADE_NOTHREAD = 2u };
    int inter = 1;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS)
        inter = 1; /* MPI reports a bad handle its own way, in the caller's call */
    nf_comm_t *c = nf_comm_alloc(comm);
    if (c == NULL && inter)
        return NF_ERR_NO_MEMORY;
    if (inter) {
        atomic_init(&c->setup, NF_COMM_BUILT);
        nf_status_t st = nf_comm_attach(comm, c, NF_OK);
        if (st == NF_OK)
            *out = c;
        return st;
    }
    MPI_Comm priv = MPI_COMM_NULL;
    nf_status_t dup = nf_mpi_status(PMPI_Comm_dup(comm, &priv));
    if (dup != NF_OK)
        priv = MPI_COMM_NULL;
    /* attached (locally) before the agreement, so a failure is agreed too */
    nf_status_t att = c == NULL ? NF_ERR_NO_MEMORY : nf_comm_attach(comm, c, NF_OK);
    unsigned any = 0;
    nf_status_t st = nf_agree_any(comm, (dup != NF_OK || att != NF_OK ? NF_MADE_FAILED : 0u) |
                                            (nf_ctx.cfg.threads ? 0u : NF_MADE_NOTHREAD), &any);
    if (att != NF_OK) { /* no state here (the others' is broken): every call pmpi */
        if (priv != MPI_COMM_NULL)
            PMPI_Comm_free(&priv);
        return att;
    }
    c->priv = priv;
    c->threads_all = st == NF_OK && !(any & NF_MADE_NOTHREAD);
    if (st == NF_OK && (any & NF_MADE_FAILED))
        st = NF_ERR_MPI;
    if (st != NF_OK) { /* on every rank: broken, decided once */
        nf_log_warn_once("cannot set up libnfcoll's state for a communicator on some rank "
                         "(%s); its calls go to PMPI", nf_strerror(st));
        if (c->priv != MPI_COMM_NULL)
            PMPI_Comm_free(&c->priv);
        c->use = NF_COMM_BROKEN;
    }
    atomic_init(&c->setup, c->use == NF_COMM_BROKEN ? NF_COMM_BUILT : NF_COMM_NEW);
    *out = c;
    return NF_OK;
}

nf_status_t nf_comm_get(MPI_Comm comm, nf_comm_t **out)
{
    int found = 0;
    nf_status_t st = nf_comm_find(comm, out, &found);
    if (st != NF_OK || found)
        return st;
    /* Collective on comm: every rank reaches this in the same blocking call. */
    return nf_comm_new(comm, out);
}

nf_status_t nf_comm_lookup(MPI_Comm comm, nf_comm_t **out)
{
    int found = 0;
    *out = NULL;
    nf_status_t st = nf_comm_find(comm, out, &found);
    if (st == NF_OK && !found)
        *out = NULL;
    return st;
}

nf_status_t nf_comm_complete(nf_comm_t *c)
{
    if (atomic_load_explicit(&c->setup, memory_order_acquire) == NF_COMM_BUILT)
        return NF_OK;
    nf_status_t st = nf_comm_build(c);
    atomic_store_explicit(&c->setup, NF_COMM_BUILT, memory_order_release);
    return st;
}

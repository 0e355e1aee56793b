/* SPDX-License-Identifier: BSD-3-Clause */
/* The node-shared aggregation segment: a POSIX shm object created by local
 * rank 0 under an unpredictable name, opened by the other local ranks,
 * unlinked as soon as every one has it, and only then bound to the
 * placement node and first touched by rank 0. A rank killed during the
 * fill (a second for a large segment) leaves nothing in /dev/shm. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "nf_agree.h"
#include "nf_ctx.h"
#include "nf_log.h"
#include "nf_placement.h"
#include "nf_shm.h"

#define NF_SHM_NAME_MAX 64
#define NF_SHM_TRIES 8 /* names found taken, in a row, before giving up */

static atomic_uint nf_shm_seq; /* fallback names only */

/* What local rank 0 tells the others after creating the segment, and then
 * after filling it. */
typedef struct nf_shm_msg {
    int status;
    double resident_frac;
    char name[NF_SHM_NAME_MAX];
} nf_shm_msg_t;

static nf_status_t nf_shm_room(size_t bytes)
{
    struct statvfs sv;
    if (statvfs("/dev/shm", &sv) != 0)
        return NF_OK; /* not a tmpfs mount we can ask: let mmap/touch tell */
    unsigned long long avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
    if (avail < bytes) {
        nf_log_error("/dev/shm has %llu bytes free, the aggregation buffer needs %zu",
                     avail, bytes);
        return NF_ERR_NO_MEMORY;
    }
    return NF_OK;
}

static nf_status_t nf_shm_errno_status(int err)
{
    return err == ENOMEM || err == ENOSPC ? NF_ERR_NO_MEMORY : NF_ERR_IO;
}

/* Another job, another PID namespace or another user must not be able to
 * guess or collide with the name: 64 random bits. Before the kernel's pool
 * is ready (early boot) the name is only unique-ish; O_EXCL still holds. */
static void nf_shm_name(char *name)
{
    uint64_t r;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        r = ((uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec) * 0x9e3779b97f4a7c15ull;
        r ^= ((uint64_t)getpid() << 32) ^ atomic_fetch_add(&nf_shm_seq, 1u);
    }
    snprintf(name, NF_SHM_NAME_MAX, "/nfcoll.%016" PRIx64, r);
}

/* Local rank 0: a new object of `bytes` under a fresh name. A name found
 * taken is someone else's: it is left alone and another one is drawn. Only
 * a name this call created is ever unlinked. */
static nf_status_t nf_shm_new(size_t bytes, char *name, int *fdp)
{
    for (int i = 0; i < NF_SHM_TRIES; i++) {
        nf_shm_name(name);
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0) {
            int err = errno;
            nf_log_error("cannot create shared memory object %s: %m", name);
            return nf_shm_errno_status(err);
        }
        if (ftruncate(fd, (off_t)bytes) != 0) {
            int err = errno;
            nf_log_error("cannot size shared memory object %s to %zu bytes: %m", name, bytes);
            close(fd);
            shm_unlink(name);
            return nf_shm_errno_status(err);
        }
        *fdp = fd;
        return NF_OK;
    }
    nf_log_error("cannot create a shared memory object: %d fresh names in a row were taken "
                 "(last %s: %s)", NF_SHM_TRIES, name, strerror(EEXIST));
    return NF_ERR_IO;
}

/* Map, untouched. Closes fd. */
static nf_status_t nf_shm_map(nf_shm_t *shm, int fd, const char *name, size_t bytes)
{
    struct stat sb;
    nf_status_t st = NF_OK;
    if (fstat(fd, &sb) != 0) {
        nf_log_error("cannot stat shared memory object %s: %m", name);
        st = NF_ERR_IO;
    } else if ((uintmax_t)sb.st_size < bytes) {
        nf_log_error("shared memory object %s has %jd bytes, not %zu", name, (intmax_t)sb.st_size,
                     bytes);
        st = NF_ERR_IO;
    } else {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int err = errno;
            nf_log_error("mmap of %zu bytes of %s failed: %m", bytes, name);
            st = nf_shm_errno_status(err);
        } else {
            shm->base = p;
            shm->bytes = bytes;
        }
    }
    close(fd);
    return st;
}

static nf_status_t nf_shm_open(nf_shm_t *shm, const char *name, size_t bytes)
{
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        int err = errno;
        nf_log_error("cannot open shared memory object %s: %m", name);
        return nf_shm_errno_status(err);
    }
    return nf_shm_map(shm, fd, name, bytes);
}

/* After the name is gone: rank 0 binds and first-touches; the others wait
 * for its word before anyone touches a page. `agreed` is the node's
 * agreement on the mapping as rank 0 saw it: rank 0's verdict is every
 * rank's. */
static nf_status_t nf_shm_fill(nf_shm_t *shm, int lrank, nf_status_t agreed, MPI_Comm node)
{
    nf_shm_msg_t msg = {.status = agreed};
    if (lrank == 0 && agreed == NF_OK)
        msg.status = nf_place_bind_touch(shm->base, shm->bytes, &msg.resident_frac);
    nf_status_t st = nf_mpi_status(PMPI_Bcast(&msg, (int)sizeof(msg), MPI_BYTE, 0, node));
    if (st == NF_OK)
        st = (nf_status_t)msg.status;
    if (st != NF_OK) {
        nf_shm_destroy(shm);
        return st;
    }
    shm->resident_frac = msg.resident_frac;
    return NF_OK;
}

nf_status_t nf_shm_create(nf_shm_t *shm, size_t bytes, MPI_Comm node)
{
    nf_shm_msg_t msg = {.status = NF_OK};
    int lrank, fd = -1;
    memset(shm, 0, sizeof(*shm));
    nf_status_t st = nf_mpi_status(PMPI_Comm_rank(node, &lrank));
    if (st != NF_OK)
        return st;
    if (lrank == 0 && (msg.status = nf_shm_room(bytes)) == NF_OK)
        msg.status = nf_shm_new(bytes, msg.name, &fd);
    /* A failed broadcast fails on every rank of node alike. */
    st = nf_mpi_status(PMPI_Bcast(&msg, (int)sizeof(msg), MPI_BYTE, 0, node));
    if (st == NF_OK)
        st = (nf_status_t)msg.status;
    if (st != NF_OK) {
        if (fd >= 0) {
            close(fd);
            shm_unlink(msg.name);
        }
        return st;
    }
    st = lrank == 0 ? nf_shm_map(shm, fd, msg.name, bytes) : nf_shm_open(shm, msg.name, bytes);
    /* Once this returns on rank 0, every local rank has opened the object
     * (or failed to): its name can go, before the fill. */
    st = nf_agree_status(node, st);
    if (lrank == 0)
        shm_unlink(msg.name);
    if (st == NF_ERR_MPI) { /* the node's MPI failed alike everywhere */
        nf_shm_destroy(shm);
        return st;
    }
    return nf_shm_fill(shm, lrank, st, node);
}

void nf_shm_destroy(nf_shm_t *shm)
{
    if (shm->base != NULL)
        munmap(shm->base, shm->bytes);
    shm->base = NULL;
    shm->bytes = 0;
}

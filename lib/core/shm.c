/* The node-shared aggregation segment: a POSIX shm object created by local
 * rank 0, bound to the placement node before its first touch, mapped by the
 * other local ranks, unlinked once everyone has it mapped. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "nf_agree.h"
#include "nf_ctx.h"
#include "nf_log.h"
#include "nf_placement.h"
#include "nf_shm.h"

#define NF_SHM_NAME_MAX 64

static atomic_uint nf_shm_seq; /* threads may set up communicators at once */

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

static void *nf_shm_map(const char *name, size_t bytes, int create)
{
    int fd = shm_open(name, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
    if (fd < 0) {
        nf_log_error("shm_open(%s) failed: %m", name);
        return NULL;
    }
    if (create && ftruncate(fd, (off_t)bytes) != 0) {
        nf_log_error("ftruncate(%s, %zu) failed: %m", name, bytes);
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        nf_log_error("mmap of %zu bytes of %s failed: %m", bytes, name);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

/* Local rank 0: create, bind, touch. Returns the status the others see. */
static nf_status_t nf_shm_make(nf_shm_t *shm, size_t bytes, char *name)
{
    snprintf(name, NF_SHM_NAME_MAX, "/nfcoll.%ld.%u", (long)getpid(), atomic_fetch_add(&nf_shm_seq, 1u));
    nf_status_t st = nf_shm_room(bytes);
    if (st != NF_OK)
        return st;
    shm->base = nf_shm_map(name, bytes, 1);
    if (shm->base == NULL) {
        shm_unlink(name);
        return NF_ERR_NO_MEMORY;
    }
    shm->bytes = bytes;
    st = nf_place_bind_touch(shm->base, bytes, &shm->resident_frac);
    if (st != NF_OK) {
        nf_shm_destroy(shm);
        shm_unlink(name);
    }
    return st;
}

/* What local rank 0 tells the others after creating the segment. */
typedef struct nf_shm_msg {
    int status;
    double resident_frac;
    char name[NF_SHM_NAME_MAX];
} nf_shm_msg_t;

nf_status_t nf_shm_create(nf_shm_t *shm, size_t bytes, MPI_Comm node)
{
    nf_shm_msg_t msg = {.status = NF_OK};
    int lrank;
    memset(shm, 0, sizeof(*shm));
    nf_status_t st = nf_mpi_status(PMPI_Comm_rank(node, &lrank));
    if (st != NF_OK)
        return st;
    if (lrank == 0) {
        msg.status = nf_shm_make(shm, bytes, msg.name);
        msg.resident_frac = shm->resident_frac;
    }
    /* A failed broadcast fails on every rank of node alike. */
    if ((st = nf_mpi_status(PMPI_Bcast(&msg, (int)sizeof(msg), MPI_BYTE, 0, node))) != NF_OK) {
        nf_shm_destroy(shm);
        return st;
    }
    if (msg.status != NF_OK)
        return (nf_status_t)msg.status;
    if (lrank != 0) {
        shm->base = nf_shm_map(msg.name, bytes, 0);
        shm->bytes = shm->base != NULL ? bytes : 0;
        shm->resident_frac = msg.resident_frac;
    }
    /* Unlink only after every rank has mapped it; agree on success. */
    st = nf_agree_status(node, shm->base != NULL ? NF_OK : NF_ERR_NO_MEMORY);
    if (lrank == 0)
        shm_unlink(msg.name);
    if (st != NF_OK)
        nf_shm_destroy(shm);
    return st;
}

void nf_shm_destroy(nf_shm_t *shm)
{
    if (shm->base != NULL)
        munmap(shm->base, shm->bytes);
    shm->base = NULL;
    shm->bytes = 0;
}

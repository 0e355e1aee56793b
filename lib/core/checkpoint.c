/* SPDX-License-Identifier: BSD-3-Clause */
/* Residual checkpoints (nf_checkpoint.h): the file format, its reader, and
 * the collective save and load around them. docs/design.md, "Checkpoints".
 *
 * Every step that can fail on one rank is followed by an agreement before
 * anything changes, so a failure is the same error on every rank and
 * nobody waits in a collective the others left: load stages the residuals
 * it read and installs them only when every rank read its file; save
 * writes temp files everywhere and renames them only when every rank's
 * write worked. */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "nf_agree.h"
#include "nf_checkpoint.h"
#include "nf_ctx.h"
#include "nf_file.h"
#include "nf_log.h"
#include "nf_region.h"
#include "nf_util.h"

#define NF_CKPT_MAGIC "NFCRESID"
#define NF_CKPT_HEAD 64
#define NF_CKPT_ENTRY 32 /* before the name */
#define NF_CKPT_SUM 8    /* after the floats */

/* The checksums: XXH3-64 (libxxhash) from version 3, FNV-1a 64 in the
 * files of versions 1 and 2, which still load (docs/design.md,
 * "Checkpoints"). One running sum over the parts of an entry. */
typedef struct nf_sum {
    int xxh;
    XXH3_state_t x;
    uint64_t fnv;
} nf_sum_t;

static void nf_sum_begin(nf_sum_t *s, uint32_t version)
{
    s->xxh = version >= 3;
    if (s->xxh)
        XXH3_64bits_reset(&s->x);
    else
        s->fnv = NF_HASH_INIT;
}

static void nf_sum_add(nf_sum_t *s, const void *p, size_t n)
{
    if (s->xxh)
        XXH3_64bits_update(&s->x, p, n);
    else
        s->fnv = nf_hash_bytes(s->fnv, p, n);
}

static uint64_t nf_sum_end(const nf_sum_t *s)
{
    return s->xxh ? (uint64_t)XXH3_64bits_digest(&s->x) : s->fnv;
}

static uint64_t nf_sum_once(uint32_t version, const void *p, size_t n)
{
    return version >= 3 ? (uint64_t)XXH3_64bits(p, n) : nf_hash_bytes(NF_HASH_INIT, p, n);
}

/* ---------------------------------------------------------------- bytes */

static void nf_put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void nf_put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t nf_get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t nf_get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t nf_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

/* Floats are stored little-endian: swap them in place on other hosts. */
static void nf_floats_le(float *p, size_t n)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t j = 0; j < n; j++) {
        uint32_t u = nf_float_bits(p[j]);
        u = __builtin_bswap32(u);
        memcpy(&p[j], &u, sizeof(u));
    }
#else
    (void)p, (void)n;
#endif
}

static size_t nf_entry_bytes(size_t namelen, size_t count)
{
    return NF_CKPT_ENTRY + namelen + count * sizeof(float) + NF_CKPT_SUM;
}

/* ---------------------------------------------------------------- reader */

typedef struct nf_rd {
    const char *path;
    int fd;
    uint64_t size, pos;
    uint32_t version;     /* the file's, once its header is read */
    nf_sum_t sum;         /* of the current entry so far */
    char *why;
    size_t whylen;
} nf_rd_t;

static nf_status_t __attribute__((format(printf, 3, 4)))
nf_rd_bad(nf_rd_t *rd, nf_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rd->why, rd->whylen, fmt, ap);
    va_end(ap);
    return st;
}

/* n bytes at the current position, hashed into rd->hash. */
static nf_status_t nf_rd_bytes(nf_rd_t *rd, void *p, size_t n, const char *what)
{
    if (n > rd->size - rd->pos)
        return nf_rd_bad(rd, NF_ERR_PARSE, "truncated: %s at byte %llu needs %zu bytes, the "
                         "file ends at %llu", what, (unsigned long long)rd->pos, n,
                         (unsigned long long)rd->size);
    for (size_t done = 0; done < n;) {
        ssize_t got = read(rd->fd, (char *)p + done, n - done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return nf_rd_bad(rd, NF_ERR_IO, "read failed: %s", strerror(errno));
        if (got == 0)
            return nf_rd_bad(rd, NF_ERR_PARSE, "truncated while reading (the file shrank to "
                             "%llu bytes)", (unsigned long long)(rd->pos + done));
        done += (size_t)got;
    }
    rd->pos += n;
    nf_sum_add(&rd->sum, p, n);
    return NF_OK;
}

static nf_status_t nf_rd_open(nf_rd_t *rd)
{
    struct stat sb;
    /* O_NONBLOCK: a FIFO planted at the path must not block the open. */
    rd->fd = open(rd->path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (rd->fd < 0)
        return nf_rd_bad(rd, NF_ERR_IO, "cannot open: %s", strerror(errno));
    if (fstat(rd->fd, &sb) != 0)
        return nf_rd_bad(rd, NF_ERR_IO, "cannot stat: %s", strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return nf_rd_bad(rd, NF_ERR_PARSE, "not a regular file");
    rd->size = (uint64_t)sb.st_size;
    return NF_OK;
}

static nf_status_t nf_rd_head(nf_rd_t *rd, nf_ckpt_head_t *h)
{
    unsigned char b[NF_CKPT_HEAD];
    nf_status_t st = nf_rd_bytes(rd, b, sizeof(b), "the header");
    if (st != NF_OK)
        return st;
    if (memcmp(b, NF_CKPT_MAGIC, 8) != 0)
        return nf_rd_bad(rd, NF_ERR_PARSE, "not a libnfcoll residual checkpoint");
    *h = (nf_ckpt_head_t){
        .version = nf_get32(b + 8), .size = nf_get32(b + 16), .rank = nf_get32(b + 20),
        .id = nf_get64(b + 24), .file_bytes = nf_get64(b + 32), .region_hash = nf_get64(b + 40),
        .nregions = nf_get32(b + 48), .nentries = nf_get32(b + 52),
    };
    if (h->version < 1 || h->version > NF_CKPT_VERSION)
        return nf_rd_bad(rd, NF_ERR_PARSE, "format version %u; this libnfcoll reads versions "
                         "1 to %d", h->version, NF_CKPT_VERSION);
    rd->version = h->version;
    if (nf_get64(b + 56) != nf_sum_once(h->version, b, 56) ||
        nf_get32(b + 12) != NF_CKPT_HEAD)
        return nf_rd_bad(rd, NF_ERR_PARSE, "header checksum mismatch (corrupted)");
    if (h->file_bytes != rd->size)
        return nf_rd_bad(rd, NF_ERR_PARSE, "%s: %llu bytes, the header says %llu",
                         rd->size < h->file_bytes ? "truncated" : "bytes after the end",
                         (unsigned long long)rd->size, (unsigned long long)h->file_bytes);
    if (h->size == 0 || h->rank >= h->size ||
        h->nentries > (rd->size - NF_CKPT_HEAD) / nf_entry_bytes(0, 1))
        return nf_rd_bad(rd, NF_ERR_PARSE, "impossible header (rank %u of %u, %u entries in "
                         "%llu bytes)", h->rank, h->size, h->nentries,
                         (unsigned long long)rd->size);
    return NF_OK;
}

static int nf_name_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] > '~')
            return 0;
    return 1;
}

/* An entry's fixed part and name, bounded by what is left of the file. */
static nf_status_t nf_rd_entry(nf_rd_t *rd, uint32_t i, nf_ckpt_entry_t *e)
{
    unsigned char b[NF_CKPT_ENTRY];
    nf_sum_begin(&rd->sum, rd->version);
    nf_status_t st = nf_rd_bytes(rd, b, sizeof(b), "an entry");
    if (st != NF_OK)
        return st;
    unsigned kind = b[0], form = b[1], namelen = (unsigned)b[2] | (unsigned)b[3] << 8;
    uint32_t abits = nf_get32(b + 4);
    uint64_t count = nf_get64(b + 8), left = rd->size - rd->pos;
    uint32_t tbits = nf_get32(b + 24);
    if (kind > 1 || form > 2 || (form != 2 && tbits != 0) || nf_get32(b + 28) != 0 ||
        (kind == 1) != (namelen == 0) ||
        namelen >= NF_RES_NAME_MAX || count == 0 ||
        count > (left - (left < namelen + NF_CKPT_SUM ? left : namelen + NF_CKPT_SUM)) /
                    sizeof(float))
        return nf_rd_bad(rd, NF_ERR_PARSE, "entry %u: impossible fields (kind %u, form %u, "
                         "name of %u bytes, %llu floats with %llu bytes left)", i, kind, form,
                         namelen, (unsigned long long)count, (unsigned long long)left);
    memset(e, 0, sizeof(*e));
    e->unbound = kind == 1;
    e->form = form == 0 ? NF_RES_Y : form == 1 ? NF_RES_E : NF_RES_TY;
    memcpy(&e->aprev, &abits, sizeof(abits));
    memcpy(&e->tprev, &tbits, sizeof(tbits));
    e->count = (size_t)count;
    e->order = nf_get64(b + 16);
    if ((st = nf_rd_bytes(rd, e->name, namelen, "a region name")) != NF_OK)
        return st;
    if (!nf_name_ok(e->name, namelen))
        return nf_rd_bad(rd, NF_ERR_PARSE, "entry %u: the region name is not printable", i);
    return NF_OK;
}

/* The floats, into dest or through a scratch buffer, and the checksum. */
static nf_status_t nf_rd_floats(nf_rd_t *rd, uint32_t i, const nf_ckpt_entry_t *e, float *dest)
{
    enum { CHUNK = 16384 };
    float *scratch = dest == NULL ? malloc(CHUNK * sizeof(float)) : NULL;
    nf_status_t st = NF_OK;
    if (dest == NULL && scratch == NULL)
        return nf_rd_bad(rd, NF_ERR_NO_MEMORY, "no memory to check it");
    for (size_t done = 0; done < e->count && st == NF_OK;) {
        size_t n = e->count - done < CHUNK ? e->count - done : CHUNK;
        float *p = dest != NULL ? dest + done : scratch;
        st = nf_rd_bytes(rd, p, n * sizeof(float), "the floats");
        if (dest != NULL)
            nf_floats_le(p, n);
        done += n;
    }
    free(scratch);
    unsigned char b[NF_CKPT_SUM];
    uint64_t want = nf_sum_end(&rd->sum);
    if (st == NF_OK && (st = nf_rd_bytes(rd, b, sizeof(b), "a checksum")) == NF_OK &&
        nf_get64(b) != want)
        st = nf_rd_bad(rd, NF_ERR_PARSE, "entry %u (%s%s%s, %zu floats): checksum mismatch "
                       "(corrupted)", i, e->unbound ? "unbound" : "region '",
                       e->unbound ? "" : e->name, e->unbound ? "" : "'", e->count);
    return st;
}

/* Version 2's last part: the layers' state, bounded by the file. */
static nf_status_t nf_rd_state(nf_rd_t *rd, nf_ckpt_head_t *h)
{
    unsigned char b[8] = {0};
    nf_sum_begin(&rd->sum, rd->version);
    nf_status_t st = nf_rd_bytes(rd, b, sizeof(b), "the layers' state");
    uint64_t n = nf_get64(b);
    if (st == NF_OK && n > rd->size - rd->pos)
        return nf_rd_bad(rd, NF_ERR_PARSE, "the layers' state: %llu bytes with %llu left",
                         (unsigned long long)n, (unsigned long long)(rd->size - rd->pos));
    if (st == NF_OK && n > 0 && (h->state = malloc((size_t)n)) == NULL)
        return nf_rd_bad(rd, NF_ERR_NO_MEMORY, "no memory for the layers' state");
    if (st == NF_OK && (st = nf_rd_bytes(rd, h->state, (size_t)n, "the layers' state")) == NF_OK)
        h->state_len = (size_t)n;
    uint64_t want = nf_sum_end(&rd->sum);
    if (st == NF_OK && (st = nf_rd_bytes(rd, b, sizeof(b), "a checksum")) == NF_OK &&
        nf_get64(b) != want)
        st = nf_rd_bad(rd, NF_ERR_PARSE, "the layers' state: checksum mismatch (corrupted)");
    return st;
}

nf_status_t nf_ckpt_read(const char *path, nf_ckpt_head_t *head, nf_ckpt_sink_t sink,
                         void *arg, char *why, size_t whylen)
{
    nf_rd_t rd = {.path = path, .fd = -1, .why = why, .whylen = whylen};
    nf_ckpt_entry_t e;
    why[0] = '\0';
    memset(head, 0, sizeof(*head));
    nf_status_t st = nf_rd_open(&rd);
    if (st == NF_OK)
        st = nf_rd_head(&rd, head);
    for (uint32_t i = 0; st == NF_OK && i < head->nentries; i++) {
        if ((st = nf_rd_entry(&rd, i, &e)) != NF_OK)
            break;
        float *dest = sink != NULL ? sink(arg, head, &e, &st, why, whylen) : NULL;
        if (st != NF_OK)
            break;
        st = nf_rd_floats(&rd, i, &e, dest);
    }
    if (st == NF_OK && head->version >= 2)
        st = nf_rd_state(&rd, head);
    if (st == NF_OK && rd.pos != rd.size)
        st = nf_rd_bad(&rd, NF_ERR_PARSE, "%llu bytes after the last entry",
                       (unsigned long long)(rd.size - rd.pos));
    if (rd.fd >= 0)
        close(rd.fd);
    return st;
}

/* ---------------------------------------------------------------- regions */

static int nf_part_cmp(const void *a, const void *b)
{
    const nf_region_part_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c != 0 ? c : (x->m > y->m) - (x->m < y->m);
}

static int nf_str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The names of v's region residuals, sorted; *k of them. */
static const char **nf_ckpt_names(nf_residual_t *const *v, size_t n, size_t *k)
{
    const char **names = malloc((n > 0 ? n : 1) * sizeof(*names));
    *k = 0;
    if (names == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (v[i]->name[0] != '\0')
            names[(*k)++] = v[i]->name;
    if (*k > 0)
        qsort(names, *k, sizeof(*names), nf_str_cmp);
    return names;
}

/* The bound regions that v's residuals (a communicator's) use, as a set:
 * how many, and a hash of their names and counts in name order (addresses
 * change from run to run). Regions no residual of the communicator uses
 * are left out: another communicator's, or bound by another thread, they
 * do not decide whether these residuals fit. *missing: the name of a
 * residual whose region is not bound now, or NULL. */
static nf_status_t nf_ckpt_regions(nf_residual_t *const *v, size_t nv, uint32_t *n,
                                   uint64_t *hash, const char **missing)
{
    const size_t all = SIZE_MAX / sizeof(float); /* the whole address space */
    size_t k, want = nf_region_parts(NULL, all, NULL, 0);
    const char **names = nf_ckpt_names(v, nv, &k);
    nf_region_part_t *p = want > 0 ? malloc(want * sizeof(*p)) : NULL;
    if (names == NULL || (want > 0 && p == NULL)) {
        free(names);
        free(p);
        return NF_ERR_NO_MEMORY;
    }
    size_t got = nf_region_parts(NULL, all, p, want);
    got = got < want ? got : want;
    if (got > 0)
        qsort(p, got, sizeof(*p), nf_part_cmp);
    uint64_t h = NF_HASH_INIT;
    uint32_t used = 0;
    size_t j = 0;
    *missing = NULL;
    for (size_t i = 0; i < got; i++) { /* both in name order: one merge */
        int c = 1;
        for (; j < k && (c = strcmp(names[j], p[i].name)) < 0; j++)
            if (*missing == NULL)
                *missing = names[j];
        if (c != 0)
            continue;
        h = nf_hash_u64(nf_hash_str(nf_hash_u64(h, strlen(p[i].name)), p[i].name), p[i].m);
        used++;
        if (i + 1 == got || strcmp(p[i + 1].name, p[i].name) != 0)
            j++; /* every region of that name is in */
    }
    if (*missing == NULL && j < k)
        *missing = names[j];
    free(names);
    free(p);
    *n = used;
    *hash = h;
    return NF_OK;
}

/* ---------------------------------------------------------------- agreement */

/* Severities, worst last: the error every rank returns is the worst any
 * rank met. */
static const int nf_ckpt_codes[] = {MPI_SUCCESS, MPI_ERR_ARG, MPI_ERR_FILE, MPI_ERR_IO,
                                    MPI_ERR_NO_MEM, MPI_ERR_UNSUPPORTED_OPERATION,
                                    MPI_ERR_OTHER};
enum { NF_SEV_MAX = sizeof(nf_ckpt_codes) / sizeof(nf_ckpt_codes[0]) - 1 };

static unsigned nf_ckpt_severity(nf_status_t st)
{
    switch (st) {
    case NF_OK: return 0;
    case NF_ERR_INVALID: return 1;
    case NF_ERR_PARSE: return 2;
    case NF_ERR_IO: return 3;
    case NF_ERR_NO_MEMORY:
    case NF_ERR_CAPACITY: return 4;
    case NF_ERR_UNSUPPORTED: return 5;
    default: return NF_SEV_MAX;
    }
}

/* One agreement on (severity of mine, value); NF_OK when every rank is
 * fine, else the agreed code as a status, explained once by rank 0 when
 * another rank failed (that rank said why) with what stays as it was. */
static nf_status_t nf_ckpt_agree(nf_comm_t *c, const char *op, const char *prefix,
                                 nf_status_t mine, uint64_t value, const char *stays,
                                 nf_agree_worst_t *w)
{
    nf_status_t st = nf_agree_worst(c->priv, c->rank, nf_ckpt_severity(mine), value, w);
    if (st != NF_OK)
        return st;
    if (w->severity == 0)
        return NF_OK;
    if (c->rank == 0 && mine == NF_OK)
        nf_log_error("%s(%s): rank %d failed (see its message); %s", op, prefix, w->rank, stays);
    return nf_mpi_status(nf_ckpt_codes[w->severity <= NF_SEV_MAX ? w->severity : NF_SEV_MAX]);
}

static nf_status_t nf_ckpt_path(const nf_comm_t *c, const char *prefix, char *path, size_t n)
{
    if (prefix == NULL || prefix[0] == '\0') {
        nf_log_error("residual checkpoint: no file name prefix");
        return NF_ERR_INVALID;
    }
    if (snprintf(path, n, "%s.%d", prefix, c->rank) >= (int)n) {
        nf_log_error("residual checkpoint: prefix too long: %.64s...", prefix);
        return NF_ERR_INVALID;
    }
    return NF_OK;
}

/* What every collective step needs first: state the ranks agreed on. */
static nf_status_t nf_ckpt_usable(nf_comm_t *c)
{
    if (c->use == NF_COMM_BROKEN || c->is_inter)
        return NF_ERR_UNSUPPORTED; /* agreed, or alike on every rank */
    return nf_comm_ready(c) == NF_OK ? NF_OK : NF_ERR_UNSUPPORTED; /* agreed */
}

/* ---------------------------------------------------------------- save */

static int nf_first_cmp(const void *a, const void *b)
{
    const nf_residual_t *x = *(nf_residual_t *const *)a, *y = *(nf_residual_t *const *)b;
    return (x->first > y->first) - (x->first < y->first);
}

static nf_status_t nf_ckpt_put(nf_wfile_t *f, const void *p, size_t n, nf_sum_t *h)
{
    nf_sum_add(h, p, n);
    return fwrite(p, 1, n, f->fp) == n ? NF_OK : NF_ERR_IO;
}

static nf_status_t nf_ckpt_put_floats(nf_wfile_t *f, const float *p, size_t n, nf_sum_t *h)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    float tmp[1024];
    nf_status_t st = NF_OK;
    for (size_t done = 0; done < n && st == NF_OK; done += 1024) {
        size_t k = n - done < 1024 ? n - done : 1024;
        memcpy(tmp, p + done, k * sizeof(float));
        nf_floats_le(tmp, k);
        st = nf_ckpt_put(f, tmp, k * sizeof(float), h);
    }
    return st;
#else
    return nf_ckpt_put(f, p, n * sizeof(float), h);
#endif
}

/* A Y form with one a_i per scale block (binary's scale_block) has no
 * field in the format: its e goes out instead, in E form, which the next
 * call turns into the same bits (docs/design.md, "Checkpoints"). */
static nf_status_t nf_ckpt_put_e(nf_wfile_t *f, const nf_residual_t *r, nf_sum_t *h)
{
    float tmp[1024];
    nf_status_t st = NF_OK;
    for (size_t done = 0; done < r->count && st == NF_OK; done += 1024) {
        size_t k = r->count - done < 1024 ? r->count - done : 1024;
        nf_residual_e_copy(r, done, k, tmp);
        st = nf_ckpt_put_floats(f, tmp, k, h);
    }
    return st;
}

static nf_status_t nf_ckpt_put_entry(nf_wfile_t *f, const nf_residual_t *r, uint64_t order)
{
    unsigned char b[NF_CKPT_ENTRY] = {0}, sum[NF_CKPT_SUM];
    size_t namelen = strlen(r->name);
    nf_sum_t h;
    nf_sum_begin(&h, NF_CKPT_VERSION);
    int as_e = (r->form == NF_RES_Y && r->block > 0) || r->form == NF_RES_Q;
    b[0] = r->name[0] == '\0';
    b[1] = r->form == NF_RES_E || as_e ? 1 : r->form == NF_RES_TY ? 2 : 0;
    b[2] = (unsigned char)namelen, b[3] = (unsigned char)(namelen >> 8);
    nf_put32(b + 4, nf_float_bits(as_e ? 0.0f : r->aprev));
    nf_put64(b + 8, r->count);
    nf_put64(b + 16, order);
    if (r->form == NF_RES_TY)
        nf_put32(b + 24, nf_float_bits(r->tprev));
    nf_status_t st = nf_ckpt_put(f, b, sizeof(b), &h);
    if (st == NF_OK)
        st = nf_ckpt_put(f, r->name, namelen, &h);
    if (st == NF_OK)
        st = as_e ? nf_ckpt_put_e(f, r, &h) : nf_ckpt_put_floats(f, r->buf[r->cur], r->count, &h);
    nf_put64(sum, nf_sum_end(&h));
    return st == NF_OK && fwrite(sum, 1, sizeof(sum), f->fp) == sizeof(sum) ? NF_OK : NF_ERR_IO;
}

static nf_status_t nf_ckpt_put_head(nf_wfile_t *f, const nf_ckpt_head_t *hd)
{
    unsigned char b[NF_CKPT_HEAD];
    memcpy(b, NF_CKPT_MAGIC, 8);
    nf_put32(b + 8, hd->version);
    nf_put32(b + 12, NF_CKPT_HEAD);
    nf_put32(b + 16, hd->size);
    nf_put32(b + 20, hd->rank);
    nf_put64(b + 24, hd->id);
    nf_put64(b + 32, hd->file_bytes);
    nf_put64(b + 40, hd->region_hash);
    nf_put32(b + 48, hd->nregions);
    nf_put32(b + 52, hd->nentries);
    nf_put64(b + 56, nf_sum_once(hd->version, b, 56)); /* the header checks itself */
    return fwrite(b, 1, sizeof(b), f->fp) == sizeof(b) ? NF_OK : NF_ERR_IO;
}

/* The layers' state (version 2): length, bytes, checksum. */
static nf_status_t nf_ckpt_put_state(nf_wfile_t *f, const nf_ckpt_head_t *hd)
{
    unsigned char b[8];
    nf_sum_t h;
    nf_sum_begin(&h, hd->version);
    nf_put64(b, (uint64_t)hd->state_len);
    nf_status_t st = nf_ckpt_put(f, b, sizeof(b), &h);
    if (st == NF_OK && hd->state_len > 0)
        st = nf_ckpt_put(f, hd->state, hd->state_len, &h);
    nf_put64(b, nf_sum_end(&h));
    return st == NF_OK && fwrite(b, 1, sizeof(b), f->fp) != sizeof(b) ? NF_ERR_IO : st;
}

/* The header, entries of v (n residuals in order of first use) and the
 * layers' state. */
static nf_status_t nf_ckpt_put_all(nf_wfile_t *f, nf_ckpt_head_t *hd, nf_residual_t **v,
                                   size_t n)
{
    hd->file_bytes = NF_CKPT_HEAD + 16 + hd->state_len;
    for (size_t i = 0; i < n; i++)
        hd->file_bytes += nf_entry_bytes(strlen(v[i]->name), v[i]->count);
    nf_status_t st = nf_ckpt_put_head(f, hd);
    for (size_t i = 0, order = 0; i < n && st == NF_OK; i++) {
        int unbound = v[i]->name[0] == '\0';
        st = nf_ckpt_put_entry(f, v[i], unbound ? order : 0);
        order += (size_t)unbound;
    }
    if (st == NF_OK)
        st = nf_ckpt_put_state(f, hd);
    if (st == NF_OK && fflush(f->fp) != 0)
        st = NF_ERR_IO;
    if (st != NF_OK)
        nf_log_error("writing %s failed: %m", f->tmp);
    return st;
}

/* This rank's file, written to its temp name (renamed by the caller). A
 * refusal NFCOLL_CXL=require left in the table holds no state: not saved. */
static nf_status_t nf_ckpt_write(nf_comm_t *c, const char *path, uint64_t id, nf_wfile_t *f)
{
    nf_residual_table_t *t = &c->resid;
    nf_ckpt_head_t hd = {.version = NF_CKPT_VERSION, .size = (uint32_t)c->size,
                         .rank = (uint32_t)c->rank, .id = id};
    nf_residual_t **v = t->n > 0 ? malloc(t->n * sizeof(*v)) : NULL;
    const char *missing; /* a residual of a region unbound since: saved all the same */
    size_t n = 0;
    nf_status_t st = t->n > 0 && v == NULL ? NF_ERR_NO_MEMORY : NF_OK;
    for (size_t i = 0; st == NF_OK && i < t->n; i++)
        if (!t->v[i]->refused && !atomic_load(&t->v[i]->stale)) /* stale: its buffer is gone */
            v[n++] = t->v[i];
    hd.nentries = (uint32_t)n;
    if (st == NF_OK)
        st = nf_ckpt_regions(v, n, &hd.nregions, &hd.region_hash, &missing);
    if (st == NF_OK && (st = nf_comm_slots_save(c, &hd.state, &hd.state_len)) != NF_OK)
        nf_log_error("no memory to save the layers' state to %s", path);
    if (st == NF_OK)
        st = nf_wfile_open(f, path);
    if (st == NF_OK) {
        if (n > 0)
            qsort(v, n, sizeof(*v), nf_first_cmp);
        if ((st = nf_ckpt_put_all(f, &hd, v, n)) != NF_OK)
            nf_wfile_abort(f);
    } else if (st == NF_ERR_NO_MEMORY) {
        nf_log_error("no memory to save residuals to %s", path);
    }
    free(hd.state);
    free(v);
    return st;
}

/* Rank 0's: time and process, never 0 (the agreement's "nothing") and
 * below 2^63: the agreement's MAX must pick it over the others' 0s, and
 * MPICH 4.0 (Debian 12's) compares MPI_UINT64_T as signed under MPI_MAX
 * (docs/design.md, "MPI families"). */
static uint64_t nf_ckpt_new_id(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t h = nf_hash_u64(nf_hash_u64(nf_hash_u64(NF_HASH_INIT, (uint64_t)ts.tv_sec),
                                         (uint64_t)ts.tv_nsec), (uint64_t)getpid()) >> 1;
    return h != 0 ? h : 1;
}

/* The rename is durable once the directory is synced too. */
static nf_status_t nf_ckpt_commit(nf_wfile_t *f)
{
    nf_status_t st = nf_wfile_commit(f);
    char dir[sizeof(f->path)];
    snprintf(dir, sizeof(dir), "%s", f->path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash != NULL)
        *slash = '\0';
    else
        snprintf(dir, sizeof(dir), ".");
    int fd = st == NF_OK ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        if (fsync(fd) != 0)
            nf_log_warn("cannot sync directory %s after writing %s: %m", dir, f->path);
        close(fd);
    }
    return st;
}

nf_status_t nf_ckpt_save(nf_comm_t *c, const char *prefix)
{
    static const char op[] = "NF_Residuals_save";
    char path[4096];
    nf_agree_worst_t w;
    nf_wfile_t f;
    nf_status_t st = nf_ckpt_usable(c);
    if (st != NF_OK)
        return st;
    /* Arguments everywhere, and rank 0's save id for every file. */
    nf_status_t mine = nf_ckpt_path(c, prefix, path, sizeof(path));
    st = nf_ckpt_agree(c, op, prefix, mine, c->rank == 0 ? nf_ckpt_new_id() : 0,
                       "nothing written", &w);
    if (st != NF_OK)
        return st;
    nf_residual_table_pin(&c->resid, 1);
    mine = nf_ckpt_write(c, path, w.max, &f);
    st = nf_ckpt_agree(c, op, prefix, mine, 0, "no file replaced", &w);
    if (st != NF_OK && mine == NF_OK)
        nf_wfile_abort(&f);
    if (st == NF_OK)
        st = nf_ckpt_agree(c, op, prefix, nf_ckpt_commit(&f), 0,
                           "the other ranks' files were replaced: the set mixes two saves, "
                           "which NF_Residuals_load refuses", &w);
    nf_residual_table_pin(&c->resid, 0);
    return st;
}

/* ---------------------------------------------------------------- load */

typedef struct nf_stage {
    nf_residual_t **v;
    size_t n, cap;
    uint64_t unbound;     /* unbound entries so far: the next one's order */
} nf_stage_t;

static void nf_stage_free(nf_stage_t *sg)
{
    for (size_t i = 0; i < sg->n; i++)
        nf_residual_free(sg->v[i]);
    free(sg->v);
    memset(sg, 0, sizeof(*sg));
}

/* A region named twice would leave one of them unreachable. */
static int nf_stage_has(const nf_stage_t *sg, const char *name)
{
    for (size_t i = 0; i < sg->n; i++)
        if (strcmp(sg->v[i]->name, name) == 0)
            return 1;
    return 0;
}

/* The reader's sink: a residual for each entry, its floats read into its
 * current buffer. */
static float *nf_stage_take(void *arg, const nf_ckpt_head_t *head, const nf_ckpt_entry_t *e,
                            nf_status_t *st, char *why, size_t n)
{
    nf_stage_t *sg = arg;
    if (sg->v == NULL && (sg->v = calloc(head->nentries, sizeof(*sg->v))) == NULL) {
        snprintf(why, n, "no memory for %u residuals", head->nentries);
        *st = NF_ERR_NO_MEMORY;
        return NULL;
    }
    sg->cap = head->nentries;
    /* The writer never does these. */
    if (e->unbound && e->order != sg->unbound) {
        snprintf(why, n, "entry %zu: unbound residual number %llu, expected %llu", sg->n,
                 (unsigned long long)e->order, (unsigned long long)sg->unbound);
        *st = NF_ERR_PARSE;
        return NULL;
    }
    if (!e->unbound && nf_stage_has(sg, e->name)) {
        snprintf(why, n, "entry %zu: region '%s' again", sg->n, e->name);
        *st = NF_ERR_PARSE;
        return NULL;
    }
    nf_residual_t *r = nf_residual_make(e->count);
    if (r == NULL) {
        snprintf(why, n, "entry %zu: no memory for %zu floats (or no room on the CXL node "
                 "under NFCOLL_CXL=require)", sg->n, e->count);
        *st = NF_ERR_NO_MEMORY;
        return NULL;
    }
    nf_residual_restore(r, e->unbound ? "" : e->name, sg->n, e->form, e->aprev, e->tprev);
    sg->unbound += (uint64_t)e->unbound;
    sg->v[sg->n++] = r;
    return r->buf[r->cur];
}

/* Does the file fit this run: communicator, rank, the regions its
 * residuals use, memory? */
static nf_status_t nf_stage_fits(nf_comm_t *c, const nf_ckpt_head_t *h, const nf_stage_t *sg,
                                 char *why, size_t n)
{
    uint32_t nreg;
    uint64_t rhash, held, table, max;
    const char *missing;
    if (h->size != (uint32_t)c->size || h->rank != (uint32_t)c->rank) {
        snprintf(why, n, "written by rank %u of a communicator of %u ranks; this is rank %d "
                 "of %d", h->rank, h->size, c->rank, c->size);
        return NF_ERR_INVALID;
    }
    nf_status_t st = nf_ckpt_regions(sg->v, sg->n, &nreg, &rhash, &missing);
    if (st != NF_OK) {
        snprintf(why, n, "no memory to list the bound regions");
        return st;
    }
    if (nreg != h->nregions || rhash != h->region_hash) {
        if (missing != NULL)
            snprintf(why, n, "region '%s' of its residuals is not bound (bind it with "
                     "NF_Region_bind before loading)", missing);
        else
            snprintf(why, n, "the bound regions its residuals use differ: %u when it was "
                     "saved, %u now (other names or counts)", h->nregions, nreg);
        return NF_ERR_INVALID;
    }
    nf_residual_usage(&c->resid, &held, &table, &max);
    if (held - table > max) {
        snprintf(why, n, "its residuals need %llu bytes more than NFCOLL_RESIDUAL_MAX=%llu "
                 "allows", (unsigned long long)(held - table - max), (unsigned long long)max);
        return NF_ERR_CAPACITY;
    }
    return NF_OK;
}

/* Read and check this rank's file into sg. */
static nf_status_t nf_ckpt_stage(nf_comm_t *c, const char *path, nf_stage_t *sg,
                                 nf_ckpt_head_t *h)
{
    char why[512];
    nf_status_t st = nf_ckpt_read(path, h, nf_stage_take, sg, why, sizeof(why));
    if (st == NF_OK)
        st = nf_stage_fits(c, h, sg, why, sizeof(why));
    if (st == NF_OK)
        st = nf_comm_slots_load(c, h->state, h->state_len, 0, why, sizeof(why));
    if (st != NF_OK) {
        nf_log_error("residual checkpoint %s: %s; no residual changed", path, why);
        nf_stage_free(sg);
        free(h->state);
        h->state = NULL;
        return st;
    }
    return NF_OK;
}

nf_status_t nf_ckpt_load(nf_comm_t *c, const char *prefix)
{
    static const char op[] = "NF_Residuals_load";
    char path[4096];
    nf_stage_t sg = {0};
    nf_agree_worst_t w;
    nf_ckpt_head_t h = {0};
    nf_status_t st = nf_ckpt_usable(c);
    if (st != NF_OK)
        return st;
    nf_status_t mine = nf_ckpt_path(c, prefix, path, sizeof(path));
    if (mine == NF_OK)
        mine = nf_ckpt_stage(c, path, &sg, &h);
    st = nf_ckpt_agree(c, op, prefix, mine, h.id, "no residual changed", &w);
    if (st == NF_OK && !w.same) {
        if (c->rank == 0)
            nf_log_error("%s(%s): the ranks' files come from different saves; no residual "
                         "changed", op, prefix);
        st = nf_mpi_status(MPI_ERR_FILE);
    }
    if (st != NF_OK) {
        nf_stage_free(&sg);
        free(h.state);
        return st;
    }
    nf_residual_table_replace(&c->resid, sg.v, sg.n, sg.cap);
    char why[512];
    nf_comm_slots_load(c, h.state, h.state_len, 1, why, sizeof(why)); /* checked; says so itself */
    free(h.state);
    return NF_OK;
}

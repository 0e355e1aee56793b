/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Residual checkpoints (NF_Residuals_save/load), run under
 * tests/policy_shim/ckpt.policy on a duplicate of MPI_COMM_WORLD, so that
 * the first libnfcoll call on it may be a load. Each step reduces a fused
 * buffer (region wb binary | gap | region wt ternary | gap), two unbound
 * buffers of the same count (binary) and one unbound ternary buffer.
 *
 *   test_ckpt inproc DIR     save, run on, load, rerun: bit-identical; the
 *                            same with the file rewritten in the previous
 *                            format (version 2, FNV-1a checksums); then
 *                            every refused load fails alike on every rank,
 *                            once through the error handler, and leaves the
 *                            residuals as they were; a region of another
 *                            communicator or thread does not matter; save's
 *                            symlink, mode and failure behaviour
 *   test_ckpt save DIR       K steps, save DIR/ck, S more steps' results to
 *                            DIR/expect.RANK
 *   test_ckpt resume DIR     a new process, buffers elsewhere: load refused
 *                            before the regions are bound; bind, load, S
 *                            steps equal to DIR/expect.RANK
 *   test_ckpt wrongsize DIR  DIR/ck was saved on another number of ranks:
 *                            refused on every rank
 *
 * NF_TEST_LOSS=1: each step reports a loss (NF_Health_report), a spike at
 * step 2, so that under a health policy the save falls in a cool-down.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nfcoll.h>

#include "nf_ref.h"
#include "nf_testutil.h"

enum { M_F = 7000, M_U = 1234, M_T = 2345, K = 3, S = 3 };
enum { STEP = M_F + 2 * M_U + M_T }; /* floats recorded per step */

static int rank, n, handled;
static MPI_Comm cw;
static MPI_Errhandler eh;
static const char *dir;

typedef struct bufs {
    float *f, *u1, *u2, *t;
} bufs_t;

static void count_errors(MPI_Comm *comm, int *code, ...)
{
    (void)comm, (void)code;
    handled++;
}

static char *path(const char *name, int r)
{
    static char p[8][1024];
    static int k;
    char *s = p[k++ % 8];
    if (r >= 0)
        snprintf(s, sizeof(p[0]), "%s/%s.%d", dir, name, r);
    else
        snprintf(s, sizeof(p[0]), "%s/%s", dir, name);
    return s;
}

static int bind(bufs_t *b)
{
    int f = 0;
    f += nft_check(NF_Region_bind(b->f, 3000, MPI_FLOAT, "wb") == MPI_SUCCESS, "bind wb", "failed");
    f += nft_check(NF_Region_bind(b->f + 3500, 2500, MPI_FLOAT, "wt") == MPI_SUCCESS, "bind wt",
                   "failed");
    return f;
}

static int reduce(float *buf, int m, int step, unsigned seed, float *out)
{
    ref_input(buf, (size_t)m, rank, step, seed);
    int rc = NF_Allreduce(MPI_IN_PLACE, buf, m, MPI_FLOAT, MPI_SUM, cw);
    memcpy(out, buf, (size_t)m * sizeof(float));
    return nft_check(rc == MPI_SUCCESS, "NF_Allreduce", "step %d: %d", step, rc);
}

/* Steps k0..k0+ns-1; their results go to out (ns * STEP floats). */
static int steps(bufs_t *b, int k0, int ns, float *out)
{
    int f = 0;
    for (int k = k0; k < k0 + ns; k++, out += STEP) {
        if (getenv("NF_TEST_LOSS") != NULL) /* health: a loss spike at step 2 */
            NF_Health_report(k == 2 ? 100.0 : 1.0 + 0.01 * k);
        f += reduce(b->f, M_F, k, 1, out);
        f += reduce(b->u1, M_U, k, 2, out + M_F);
        f += reduce(b->u2, M_U, k, 3, out + M_F + M_U);
        f += reduce(b->t, M_T, k, 4, out + M_F + 2 * M_U);
        f += nft_identical_on_all(out, STEP * sizeof(float), "results");
    }
    return f;
}

/* rc is want on every rank, and the error handler ran once for it. */
static int refused(int rc, int want, int handled_before, const char *what)
{
    int lo, hi, f = 0;
    MPI_Allreduce(&rc, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&rc, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    f += nft_check(lo == hi, what, "ranks returned different codes (%d..%d)", lo, hi);
    f += nft_check(rc == want, what, "returned %d, expected %d", rc, want);
    f += nft_check(handled == handled_before + (want != MPI_SUCCESS), what,
                   "error handler ran %d times", handled - handled_before);
    return f;
}

static int load_expect(const char *prefix, int want, const char *what)
{
    int before = handled;
    return refused(NF_Residuals_load(cw, prefix), want, before, what);
}

static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t k;
    int ok = a != NULL && b != NULL;
    while (ok && (k = fread(buf, 1, sizeof(buf), a)) > 0)
        ok = fwrite(buf, 1, k, b) == k;
    if (a != NULL)
        fclose(a);
    if (b != NULL && fclose(b) != 0)
        ok = 0;
    return nft_check(ok, "copy", "%s -> %s", from, to);
}

/* The save id in a file's header (little-endian, at byte 24): 0 if unreadable. */
static uint64_t save_id(const char *p)
{
    unsigned char b[8];
    uint64_t id = 0;
    FILE *fp = fopen(p, "rb");
    if (fp != NULL && fseek(fp, 24, SEEK_SET) == 0 && fread(b, 1, 8, fp) == 8)
        for (int i = 7; i >= 0; i--)
            id = id << 8 | b[i];
    if (fp != NULL)
        fclose(fp);
    return id;
}

static long file_size(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 ? (long)sb.st_size : -1;
}

static int flip_byte(const char *p, long at)
{
    FILE *fp = fopen(p, "r+b");
    int c, ok = fp != NULL && fseek(fp, at, SEEK_SET) == 0 && (c = fgetc(fp)) != EOF &&
                fseek(fp, at, SEEK_SET) == 0 && fputc(c ^ 0x5a, fp) != EOF;
    if (fp != NULL && fclose(fp) != 0)
        ok = 0;
    return nft_check(ok, "flip", "%s at %ld", p, at);
}

static int same_file(const char *a, const char *b)
{
    FILE *x = fopen(a, "rb"), *y = fopen(b, "rb");
    int same = x != NULL && y != NULL, cx = 0;
    while (same && cx != EOF) {
        cx = fgetc(x);
        same = cx == fgetc(y);
    }
    if (x != NULL)
        fclose(x);
    if (y != NULL)
        fclose(y);
    return same;
}

static int mode_600(const char *p)
{
    struct stat sb;
    return nft_check(lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 07777) == 0600,
                     "file mode", "%s is not a regular file of mode 0600", p);
}

/* Loads that must be refused everywhere, each from a set of files made
 * from the good one at prefix "ok" (and "ok2", a second save of the same
 * residuals). */
static int refusals(bufs_t *b)
{
    int f = 0, last = n - 1;
    /* A flipped byte in the last rank's floats, then in rank 0's header. */
    f += copy_file(path("ok", rank), path("flip", rank));
    if (rank == last)
        f += flip_byte(path("flip", rank), file_size(path("flip", rank)) - 100);
    f += load_expect(path("flip", -1), MPI_ERR_FILE, "corrupted floats");
    f += copy_file(path("ok", rank), path("head", rank));
    if (rank == 0)
        f += flip_byte(path("head", rank), 21);
    f += load_expect(path("head", -1), MPI_ERR_FILE, "corrupted header");
    /* Truncated on rank 0. */
    f += copy_file(path("ok", rank), path("trunc", rank));
    if (rank == 0)
        f += nft_check(truncate(path("trunc", rank), file_size(path("ok", rank)) / 2) == 0,
                       "truncate", "failed");
    f += load_expect(path("trunc", -1), MPI_ERR_FILE, "truncated");
    /* Missing on the last rank, a FIFO on rank 0 (must not block). */
    if (rank != last)
        f += copy_file(path("ok", rank), path("gone", rank));
    f += load_expect(path("gone", -1), MPI_ERR_IO, "missing");
    if (rank == 0)
        f += nft_check(mkfifo(path("fifo", rank), 0600) == 0, "mkfifo", "failed");
    else
        f += copy_file(path("ok", rank), path("fifo", rank));
    f += load_expect(path("fifo", -1), MPI_ERR_FILE, "fifo");
    /* Rank 0's file from another save. */
    f += copy_file(path(rank == 0 ? "ok2" : "ok", rank), path("mixed", rank));
    f += load_expect(path("mixed", -1), MPI_ERR_FILE, "files of two saves");
    /* Files of one-process communicators. */
    char self[1100];
    snprintf(self, sizeof(self), "%s/self%d", dir, rank);
    f += nft_check(NF_Residuals_save(MPI_COMM_SELF, self) == MPI_SUCCESS, "save SELF", "failed");
    strncat(self, ".0", sizeof(self) - strlen(self) - 1);
    f += nft_check(rename(self, path("one", rank)) == 0, "rename", "failed");
    f += load_expect(path("one", -1), MPI_ERR_ARG, "other communicator size");
    /* Rank 0 binds other regions. */
    if (rank == 0) {
        NF_Region_unbind(b->f + 3500);
        NF_Region_bind(b->f + 3500, 2500, MPI_FLOAT, "wt2");
    }
    f += load_expect(path("ok", -1), MPI_ERR_ARG, "other bound regions");
    if (rank == 0) {
        NF_Region_unbind(b->f + 3500);
        NF_Region_bind(b->f + 3500, 2500, MPI_FLOAT, "wt");
    }
    /* Bad prefixes. */
    char longp[5000];
    memset(longp, 'x', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    f += load_expect(NULL, MPI_ERR_ARG, "NULL prefix");
    f += load_expect(rank == last ? longp : path("ok", -1), MPI_ERR_ARG, "prefix too long");
    return f;
}

static void *bind_other(void *p)
{
    return (void *)(intptr_t)NF_Region_bind(p, 100, MPI_FLOAT, "thread");
}

/* The region check covers the regions the communicator's residuals use
 * (issue 18, item 7): region wbo, used only on another communicator, and
 * a region another thread binds after the save, leave cw's checkpoint
 * loadable; the other communicator's checkpoint needs wbo. Saved and
 * loaded at the same state: the residuals do not change. */
static int scoped(void)
{
    MPI_Comm c2;
    float *o = malloc(1000 * sizeof(float)), *t = malloc(100 * sizeof(float));
    int f = 0, before;
    pthread_t th;
    void *trc = NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &c2);
    MPI_Comm_set_errhandler(c2, eh);
    f += nft_check(NF_Region_bind(o, 1000, MPI_FLOAT, "wbo") == MPI_SUCCESS, "bind wbo", "failed");
    ref_input(o, 1000, rank, 0, 5);
    f += nft_check(NF_Allreduce(MPI_IN_PLACE, o, 1000, MPI_FLOAT, MPI_SUM, c2) == MPI_SUCCESS,
                   "reduce on c2", "failed");
    f += nft_check(NF_Residuals_save(cw, path("scope", -1)) == MPI_SUCCESS, "save scope", "failed");
    f += nft_check(NF_Residuals_save(c2, path("scope2", -1)) == MPI_SUCCESS, "save scope2",
                   "failed");
    f += nft_check(NF_Region_unbind(o) == MPI_SUCCESS, "unbind wbo", "failed");
    f += nft_check(pthread_create(&th, NULL, bind_other, t) == 0 && pthread_join(th, &trc) == 0 &&
                       trc == (void *)(intptr_t)MPI_SUCCESS, "bind on a thread", "failed");
    f += load_expect(path("scope", -1), MPI_SUCCESS,
                     "load with a region of another communicator unbound and one more bound");
    before = handled;
    f += refused(NF_Residuals_load(c2, path("scope2", -1)), MPI_ERR_ARG, before,
                 "load of c2 with its region wbo unbound");
    f += nft_check(NF_Region_bind(o, 1000, MPI_FLOAT, "wbo") == MPI_SUCCESS, "rebind wbo",
                   "failed");
    before = handled;
    f += refused(NF_Residuals_load(c2, path("scope2", -1)), MPI_SUCCESS, before,
                 "load of c2 with wbo bound again");
    NF_Region_unbind(o);
    NF_Region_unbind(t);
    MPI_Comm_free(&c2);
    free(o);
    free(t);
    return f;
}

/* Save through a planted symlink, and a save that fails on one rank. */
static int saves(void)
{
    int f = 0, last = n - 1, before;
    FILE *v = fopen(path("victim", rank), "w");
    f += nft_check(v != NULL && fputs("precious\n", v) >= 0 && fclose(v) == 0, "victim", "");
    unlink(path("sl", rank));
    f += nft_check(symlink(path("victim", rank), path("sl", rank)) == 0, "symlink", "failed");
    f += nft_check(NF_Residuals_save(cw, path("sl", -1)) == MPI_SUCCESS, "save over symlink",
                   "failed");
    f += mode_600(path("sl", rank));
    v = fopen(path("victim", rank), "r");
    char line[32] = "";
    f += nft_check(v != NULL && fgets(line, sizeof(line), v) != NULL &&
                       strcmp(line, "precious\n") == 0, "symlink", "the save wrote through it");
    if (v != NULL)
        fclose(v);
    /* The last rank cannot create its file: every rank fails, and rank 0's
     * existing file stays as it was, with no temp file left. */
    f += copy_file(path("ok", rank), path("keep", rank));
    before = handled;
    f += refused(NF_Residuals_save(cw, rank == last ? path("nodir/keep", -1) : path("keep", -1)),
                 MPI_ERR_IO, before, "save failing on one rank");
    f += nft_check(same_file(path("ok", rank), path("keep", rank)), "failed save",
                   "replaced %s", path("keep", rank));
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "ls %s | grep -q tmp", dir);
    f += nft_check(system(cmd) != 0, "failed save", "left a temp file in %s", dir);
    return f;
}

/* ---- the previous format: version 2, FNV-1a 64 checksums ---- */

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Rewrite a version 3 file as the version 2 file of the same state: the
 * version field, and every checksum (header, each entry, the layers'
 * state) as FNV-1a 64 over the same bytes, as libnfcoll 0.1.0 wrote them.
 * 0 on success. */
static int downgrade(const char *from, const char *to)
{
    FILE *fp = fopen(from, "rb");
    long len = file_size(from);
    unsigned char *b = len > 64 ? malloc((size_t)len) : NULL;
    int ok = fp != NULL && b != NULL && fread(b, 1, (size_t)len, fp) == (size_t)len;
    if (fp != NULL)
        fclose(fp);
    ok = ok && get_le(b + 8, 4) == 3;
    if (ok) {
        b[8] = 2;
        put_le64(b + 56, fnv1a(0xcbf29ce484222325ull, b, 56));
        size_t at = 64, nent = get_le(b + 52, 4);
        for (size_t e = 0; ok && e < nent; e++) {
            size_t start = at, name = get_le(b + at + 2, 2), count = get_le(b + at + 8, 8);
            at += 32 + name + count * sizeof(float);
            ok = at + 8 <= (size_t)len;
            if (ok)
                put_le64(b + at, fnv1a(0xcbf29ce484222325ull, b + start, at - start));
            at += 8;
        }
        size_t state = ok && at + 16 <= (size_t)len ? get_le(b + at, 8) : (size_t)-1;
        ok = ok && at + 16 + state == (size_t)len;
        if (ok)
            put_le64(b + at + 8 + state, fnv1a(0xcbf29ce484222325ull, b + at, 8 + state));
    }
    FILE *out = ok ? fopen(to, "wb") : NULL;
    ok = out != NULL && fwrite(b, 1, (size_t)len, out) == (size_t)len;
    if (out != NULL)
        ok = fclose(out) == 0 && ok;
    free(b);
    return ok ? 0 : -1;
}

static int inproc(bufs_t *b)
{
    float *r1 = malloc(S * STEP * sizeof(float)), *r2 = malloc(S * STEP * sizeof(float));
    int f = bind(b);
    f += steps(b, 0, K, r1);
    f += nft_check(NF_Residuals_save(cw, path("ck", -1)) == MPI_SUCCESS, "save", "failed");
    f += mode_600(path("ck", rank));
    f += steps(b, K, S, r1);
    f += load_expect(path("ck", -1), MPI_SUCCESS, "load");
    f += steps(b, K, S, r2);
    f += nft_same_floats(r2, r1, S * STEP, "rerun after load");
    /* The same state in the previous format (version 2, FNV-1a) loads too. */
    f += nft_check(downgrade(path("ck", rank), path("v2", rank)) == 0, "version 2 file",
                   "cannot rewrite %s as version 2", path("ck", rank));
    f += load_expect(path("v2", -1), MPI_SUCCESS, "load of a version 2 file");
    f += steps(b, K, S, r2);
    f += nft_same_floats(r2, r1, S * STEP, "rerun after loading the version 2 file");
    /* and one flipped byte of its last part is still found (its checksum) */
    f += flip_byte(path("v2", rank), file_size(path("v2", rank)) - 9);
    f += load_expect(path("v2", -1), MPI_ERR_FILE, "corrupted version 2 file");

    /* Refused loads leave the residuals as they were. */
    f += nft_check(NF_Residuals_save(cw, path("ok", -1)) == MPI_SUCCESS, "save ok", "failed");
    f += nft_check(NF_Residuals_save(cw, path("ok2", -1)) == MPI_SUCCESS, "save ok2", "failed");
    /* Every save its own id, whichever way the MPI compares MPI_UINT64_T. */
    uint64_t id_ck = save_id(path("ck", rank)), id_ok = save_id(path("ok", rank)),
             id_ok2 = save_id(path("ok2", rank));
    f += nft_check(id_ck != 0 && id_ok != 0 && id_ok2 != 0 && id_ck != id_ok && id_ok != id_ok2 &&
                       id_ck != id_ok2,
                   "save ids", "ck %016llx ok %016llx ok2 %016llx: not three distinct non-zero",
                   (unsigned long long)id_ck, (unsigned long long)id_ok,
                   (unsigned long long)id_ok2);
    f += steps(b, K + S, S, r1);
    f += load_expect(path("ok", -1), MPI_SUCCESS, "load ok");
    f += scoped();
    f += refusals(b);
    f += steps(b, K + S, S, r2);
    f += nft_same_floats(r2, r1, S * STEP, "continuation after refused loads");
    f += saves();
    free(r1);
    free(r2);
    return f;
}

static int save_run(bufs_t *b)
{
    float *r = malloc(S * STEP * sizeof(float));
    int f = bind(b);
    f += steps(b, 0, K, r);
    f += nft_check(NF_Residuals_save(cw, path("ck", -1)) == MPI_SUCCESS, "save", "failed");
    f += steps(b, K, S, r);
    FILE *fp = fopen(path("expect", rank), "wb");
    f += nft_check(fp != NULL && fwrite(r, sizeof(float), S * STEP, fp) == S * STEP &&
                       fclose(fp) == 0, "expect file", "cannot write");
    free(r);
    return f;
}

static int resume(bufs_t *b)
{
    float *r = malloc(S * STEP * sizeof(float)), *want = malloc(S * STEP * sizeof(float));
    int f = load_expect(path("ck", -1), MPI_ERR_ARG, "load before binding");
    f += bind(b);
    f += load_expect(path("ck", -1), MPI_SUCCESS, "load");
    f += steps(b, K, S, r);
    FILE *fp = fopen(path("expect", rank), "rb");
    f += nft_check(fp != NULL && fread(want, sizeof(float), S * STEP, fp) == S * STEP,
                   "expect file", "cannot read");
    if (fp != NULL)
        fclose(fp);
    f += nft_same_floats(r, want, S * STEP, "resumed run");
    free(r);
    free(want);
    return f;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc != 3) {
        if (rank == 0)
            fprintf(stderr, "usage: test_ckpt inproc|save|resume|wrongsize DIR\n");
        MPI_Finalize();
        return 2;
    }
    dir = argv[2];
    MPI_Comm_dup(MPI_COMM_WORLD, &cw);
    MPI_Comm_create_errhandler(count_errors, &eh);
    MPI_Comm_set_errhandler(cw, eh);
    /* Another layout of the heap in each mode: addresses differ from the
     * saved run's. */
    nft_keep(malloc(strcmp(argv[1], "resume") == 0 ? 123457 : 17));
    bufs_t b = {nft_keep(malloc(M_F * sizeof(float))), nft_keep(malloc(M_U * sizeof(float))),
                nft_keep(malloc(M_U * sizeof(float))), nft_keep(malloc(M_T * sizeof(float)))};
    int f;
    if (strcmp(argv[1], "inproc") == 0)
        f = inproc(&b);
    else if (strcmp(argv[1], "save") == 0)
        f = save_run(&b);
    else if (strcmp(argv[1], "resume") == 0)
        f = resume(&b);
    else
        f = bind(&b) + load_expect(path("ck", -1), MPI_ERR_ARG, "other number of ranks");
    MPI_Comm_free(&cw);
    MPI_Errhandler_free(&eh);
    char name[64];
    snprintf(name, sizeof(name), "test_ckpt %s", argv[1]);
    return nft_finish(f, name);
}

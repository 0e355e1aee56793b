/* SPDX-License-Identifier: BSD-3-Clause */
/* The NFCOLL_TRACE reader (trace_read.h). Lines are read whole and split
 * on single spaces; a communicator name or a policy path may hold spaces,
 * so those two fields are found between the fields around them. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "nf_file.h"
#include "nf_tracefmt.h"
#include "nf_util.h"
#include "trace_read.h"

#define TR_MAGIC NF_TRACE_MAGIC
#define TR_VERSION NF_TRACE_VERSION
#define TR_FIELDS (NF_TRACE_NCOLUMNS - 3) /* before health (v4: health why fallback) */
#define TR_OLDEST 3                         /* v3: no why and fallback columns */
#define TR_COLUMNS NF_TRACE_COLUMNS
#define TR_MAX_TOKENS 256
/* Longer than any line libnfcoll writes (names of at most 127 bytes, a
 * policy path of at most 4095): what a line may cost, whatever the file. */
#define TR_LINE_MAX 65536

static int tr_err(const trace_reader_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int tr_err(const trace_reader_t *r, const char *fmt, ...)
{
    va_list ap;
    if (r->lineno > 0)
        fprintf(stderr, "%s:%ld: ", r->path, r->lineno);
    else
        fprintf(stderr, "%s: ", r->path);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return -1;
}

static int tr_bad(const trace_reader_t *r, const char *field, const char *v, const char *expected)
{
    return tr_err(r, "bad %s '%s' (expected %s)", field, v, expected);
}

/* A bad route field: the expected names are the library's route table
 * (nf_route_name in nf_route_t order), "pmpi, fp32, ... or int2". */
static int tr_bad_route(const trace_reader_t *r, const char *field, const char *v)
{
    char names[256];
    size_t o = 0;
    names[0] = '\0';
    for (int i = 0; i < NF_ROUTE_COUNT && o < sizeof(names); i++)
        o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s",
                              i == 0 ? "" : i == NF_ROUTE_COUNT - 1 ? " or " : ", ",
                              nf_route_name((nf_route_t)i));
    return tr_bad(r, field, v, names);
}

/* The next line without its newline: its length, EOF at the end, -2 on an
 * error (said). A last line without a newline was cut off mid-write. At
 * most TR_LINE_MAX bytes are kept. */
static long tr_getline(trace_reader_t *r)
{
    size_t n = 0;
    int c;
    if (r->line == NULL && (r->line = malloc(TR_LINE_MAX + 1)) == NULL) {
        tr_err(r, "out of memory");
        return -2;
    }
    errno = 0;
    while ((c = getc_unlocked(r->fp)) != EOF && c != '\n') {
        if (n == TR_LINE_MAX) {
            r->lineno++;
            tr_err(r, "line longer than %d bytes: not a libnfcoll trace", TR_LINE_MAX);
            return -2;
        }
        r->line[n++] = (char)c;
    }
    if (c == EOF && ferror(r->fp)) {
        tr_err(r, "read error: %s", strerror(errno ? errno : EIO));
        return -2;
    }
    if (c == EOF && n == 0)
        return EOF;
    r->lineno++;
    if (c == EOF) {
        tr_err(r, "truncated line (no newline at the end of the file): was the run killed "
               "while writing its trace?");
        return -2;
    }
    r->line[n] = '\0';
    if (strlen(r->line) != n) {
        tr_err(r, "NUL byte in the line: not a text trace");
        return -2;
    }
    return (long)n;
}

static int tr_header(trace_reader_t *r)
{
    long n = tr_getline(r), v = 0;
    if (n == EOF)
        return tr_err(r, "empty file, not a libnfcoll trace (did the run end before its "
                      "trace was written?)");
    if (n < 0)
        return -1;
    if (strncmp(r->line, TR_MAGIC, strlen(TR_MAGIC)) != 0 ||
        nf_parse_long(r->line + strlen(TR_MAGIC), 1, 1000000, &v) != 0)
        return tr_err(r, "not a libnfcoll trace (first line '%.60s', expected '" TR_MAGIC
                      "%d')", r->line, TR_VERSION);
    if (v < TR_OLDEST || v > TR_VERSION)
        return tr_err(r, "trace format v%ld; nfcoll_replay reads v%d and v%d (older ones lack "
                      "the segments, 'ran' or 'health' columns: record the run again)", v,
                      TR_OLDEST, TR_VERSION);
    r->version = (int)v;
    return 0;
}

int trace_read_open(trace_reader_t *r, const char *path)
{
    char why[512];
    int fd;
    size_t size;
    *r = (trace_reader_t){.path = path};
    /* Only a regular file: a FIFO would block the open, a device never ends. */
    if (nf_file_open(path, SIZE_MAX, &fd, &size, why, sizeof(why)) != NF_OK)
        return tr_err(r, "%s", why);
    r->fp = fdopen(fd, "r");
    if (r->fp == NULL) {
        close(fd);
        return tr_err(r, "cannot open: %s", strerror(errno));
    }
    if (tr_header(r) != 0) {
        trace_read_close(r);
        return -1;
    }
    return 0;
}

void trace_read_close(trace_reader_t *r)
{
    if (r->fp != NULL)
        fclose(r->fp);
    free(r->line);
    r->fp = NULL, r->line = NULL;
}

/* Decimal digits only: no sign, no spaces; 0 on success. */
static int tr_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (*s == '\0')
        return -1;
    for (; *s != '\0'; s++) {
        if (!nf_ascii_isdigit((unsigned char)*s) || v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

static int tr_int(const char *s, long lo, int *out)
{
    long v;
    if (nf_parse_long(s, lo, INT_MAX, &v) != 0 || !nf_ascii_isdigit((unsigned char)s[0]))
        return -1;
    *out = (int)v;
    return 0;
}

/* comm_size datatype op bytes route, from tok[0]: 0 when they parse. */
static int tr_middle(char **tok, trace_rec_t *rec)
{
    int dt = nf_dtype_parse(tok[1]), op = nf_opkind_parse(tok[2]);
    if (tr_int(tok[0], 1, &rec->comm_size) != 0 || dt < 0 || op < 0 ||
        tr_u64(tok[3], &rec->bytes) != 0 || nf_route_parse(tok[4], &rec->route) != NF_OK)
        return -1;
    rec->dt = (nf_dtype_t)dt, rec->op = (nf_opkind_t)op;
    return 0;
}

/* The same fields one by one, to say which is wrong. */
static int tr_middle_why(const trace_reader_t *r, char **tok)
{
    trace_rec_t x;
    if (tr_int(tok[0], 1, &x.comm_size) != 0)
        return tr_bad(r, "comm_size", tok[0], "a number 1 or more");
    if (nf_dtype_parse(tok[1]) < 0)
        return tr_bad(r, "datatype", tok[1], "a datatype name of nfcoll-policy(5)");
    if (nf_opkind_parse(tok[2]) < 0)
        return tr_bad(r, "op", tok[2], "an op name of nfcoll-policy(5)");
    if (tr_u64(tok[3], &x.bytes) != 0)
        return tr_bad(r, "bytes", tok[3], "a number");
    return tr_bad_route(r, "route", tok[4]);
}

/* Split the line on single spaces (runs of spaces inside a name survive as
 * empty tokens, so joining restores the name exactly). */
static int tr_split(trace_reader_t *r, char **tok)
{
    int t = 0;
    char *p = r->line;
    for (;;) {
        if (t == TR_MAX_TOKENS)
            return tr_err(r, "more than %d fields", TR_MAX_TOKENS);
        tok[t++] = p;
        p = strchr(p, ' ');
        if (p == NULL)
            return t;
        *p++ = '\0';
    }
}

static void tr_join(char **tok, int from, int to)
{
    for (int j = from + 1; j < to; j++)
        tok[j][-1] = ' ';
}

/* Index of comm_size: the first place after the name where the five
 * fixed fields parse (3 when the name has no space). */
static int tr_find_middle(const trace_reader_t *r, char **tok, int t, trace_rec_t *rec)
{
    if (t == TR_FIELDS)
        return tr_middle(tok + 3, rec) == 0 ? 3 : tr_middle_why(r, tok + 3);
    for (int i = 3; i <= t - 11; i++)
        if (tr_middle(tok + i, rec) == 0)
            return i;
    return tr_err(r, "cannot find 'comm_size datatype op bytes route' after the "
                  "communicator name (columns: " TR_COLUMNS ")");
}

/* "file:line", file "-" for the built-in default. */
static int tr_where_ok(const char *w)
{
    const char *c = strrchr(w, ':');
    uint64_t line;
    return c != NULL && c > w && tr_u64(c + 1, &line) == 0;
}

/* What the runtime guarantees: a float call's bytes are 4 per element, and
 * a segment is part of a sum of 4-byte floats (float, or a 4-byte real). */
static int tr_consistent(const trace_reader_t *r, const trace_rec_t *rec)
{
    int seg = rec->region != NULL || rec->offset > 0;
    if (rec->rank >= rec->comm_size)
        return tr_err(r, "rank %d is not below comm_size %d (a rank counts from 0 in its "
                      "communicator)", rec->rank, rec->comm_size);
    /* A call's count is an MPI int: a segment lies inside it. */
    if (rec->elements > INT_MAX || rec->offset > INT_MAX - rec->elements)
        return tr_err(r, "offset %llu + elements %llu is more than an MPI count (%d)",
                      (unsigned long long)rec->offset, (unsigned long long)rec->elements,
                      INT_MAX);
    int four = rec->elements <= UINT64_MAX / sizeof(float) &&
               rec->bytes == rec->elements * sizeof(float);
    if (seg && ((rec->dt != NF_DT_FLOAT && rec->dt != NF_DT_REAL) || rec->op != NF_OP_SUM))
        return tr_err(r, "a segment (region or offset) of a %s %s call: only float sums are "
                      "cut into segments", nf_dtype_name(rec->dt), nf_opkind_name(rec->op));
    if ((seg || rec->dt == NF_DT_FLOAT) && !four)
        return tr_err(r, "bytes %llu is not 4 x elements %llu for a float %s",
                      (unsigned long long)rec->bytes, (unsigned long long)rec->elements,
                      seg ? "segment" : "call");
    return 0;
}

static int tr_tail(const trace_reader_t *r, char **tok, int t, trace_rec_t *rec)
{
    if (tr_u64(tok[t - 3], &rec->offset) != 0)
        return tr_bad(r, "offset", tok[t - 3], "a number");
    if (tr_u64(tok[t - 2], &rec->elements) != 0)
        return tr_bad(r, "elements", tok[t - 2], "a number");
    if (nf_route_parse(tok[t - 1], &rec->ran) != NF_OK)
        return tr_bad_route(r, "ran", tok[t - 1]);
    rec->region = strcmp(tok[t - 4], "-") == 0 ? NULL : tok[t - 4];
    if (tok[t - 4][0] == '\0')
        return tr_bad(r, "region", "", "a region name or '-'");
    return 0;
}

/* v4's last two fields: why (a reason's name, figures after a colon) and
 * fallback ("-" or a fallback's name). */
static int tr_why(const trace_reader_t *r, char *why, char *fallback, trace_rec_t *rec)
{
    static const char *const whys[] = {"rule", "profile", "no-entry", "stale-entry",
                                       "calibrate"};
    size_t n = strcspn(why, ":"), k;
    for (k = 0; k < sizeof(whys) / sizeof(whys[0]); k++)
        if (strlen(whys[k]) == n && strncmp(why, whys[k], n) == 0)
            break;
    if (k == sizeof(whys) / sizeof(whys[0]))
        return tr_bad(r, "why", why, "rule, profile, no-entry, stale-entry or calibrate");
    rec->why = why;
    rec->fallback = strcmp(fallback, "-") == 0 ? NULL : fallback;
    for (int f = 0; rec->fallback != NULL && f < NF_FALLBACK_COUNT; f++)
        if (strcmp(fallback, nf_fallback_name((nf_fallback_t)f)) == 0)
            return 0;
    return rec->fallback == NULL ? 0 : tr_bad(r, "fallback", fallback, "- or a fallback name");
}

static int tr_parse(trace_reader_t *r, trace_rec_t *rec)
{
    char *tok[TR_MAX_TOKENS];
    int t = tr_split(r, tok), i, more = r->version >= 4 ? 2 : 0;
    if (t < 0)
        return -1;
    if (t < TR_FIELDS + 1 + more)
        return tr_err(r, "%d field%s, expected %d: " TR_COLUMNS, t, t == 1 ? "" : "s",
                      TR_FIELDS + 1 + more);
    rec->why = rec->fallback = NULL;
    if (more && tr_why(r, tok[t - 2], tok[t - 1], rec) != 0)
        return -1;
    t -= more;
    /* Then health: "-", the signal of a cool-down or "reentry"; the other
     * fields are read as before it. */
    rec->health = strcmp(tok[--t], "-") == 0 ? NULL : tok[t];
    if (rec->health != NULL && strcmp(rec->health, "nonfinite") != 0 &&
        strcmp(rec->health, "ef_growth") != 0 && strcmp(rec->health, "loss_spike") != 0 &&
        strcmp(rec->health, "reentry") != 0 && strcmp(rec->health, "warmup") != 0)
        return tr_bad(r, "health", rec->health,
                      "-, nonfinite, ef_growth, loss_spike, reentry or warmup");
    if (tr_int(tok[0], 0, &rec->rank) != 0)
        return tr_bad(r, "rank", tok[0], "a number 0 or more");
    if (tr_u64(tok[1], &rec->call) != 0)
        return tr_bad(r, "call", tok[1], "a number");
    if ((i = tr_find_middle(r, tok, t, rec)) < 0 || tr_tail(r, tok, t, rec) != 0)
        return -1;
    tr_join(tok, 2, i);
    tr_join(tok, i + 6, t - 4);
    if (tok[i + 5][0] == '\0')
        return tr_bad(r, "rule", "", "a rule name");
    if (!tr_where_ok(tok[i + 6]))
        return tr_bad(r, "where", tok[i + 6], "the rule's file:line");
    rec->rule = tok[i + 5];
    rec->comm = strcmp(tok[2], "-") == 0 ? "" : tok[2];
    return tr_consistent(r, rec);
}

int trace_read_next(trace_reader_t *r, trace_rec_t *rec)
{
    for (;;) {
        long n = tr_getline(r);
        if (n == EOF)
            return 0;
        if (n < 0)
            return -1;
        if (r->line[0] != '#')
            return tr_parse(r, rec) == 0 ? 1 : -1;
    }
}

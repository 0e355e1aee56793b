/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/util's shared helpers (nf_util.h): the parsers, table-driven, then
 * the number parsers again under a comma-decimal LC_NUMERIC, and the
 * FNV-1a hash against the published test vectors, the route names, and
 * the interned names and integer-keyed maps (nf_intern.h), and the
 * verdict's area across one-rank nodes (nf_traffic.h). No MPI.
 */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nfcoll.h"
#include "nf_fallback.h"
#include "nf_file.h"
#include "nf_intern.h"
#include "nf_route.h"
#include "nf_settings.h"
#include "nf_traffic.h"
#include "nf_util.h"

/* ------------------------------------------------------------ bool */

typedef struct bool_case { const char *s; nf_status_t rc; int v; } bool_case_t;

static const bool_case_t bool_cases[] = {
    {"on", NF_OK, 1}, {"ON", NF_OK, 1}, {"1", NF_OK, 1}, {"Yes", NF_OK, 1}, {"tRUE", NF_OK, 1},
    {"off", NF_OK, 0}, {"Off", NF_OK, 0}, {"0", NF_OK, 0}, {"NO", NF_OK, 0}, {"false", NF_OK, 0},
    {"", NF_ERR_INVALID, 0}, {"2", NF_ERR_INVALID, 0}, {"onn", NF_ERR_INVALID, 0},
    {"o", NF_ERR_INVALID, 0}, {" on", NF_ERR_INVALID, 0}, {"on ", NF_ERR_INVALID, 0},
    {"01", NF_ERR_INVALID, 0}, {"inherit", NF_ERR_INVALID, 0}, {NULL, NF_ERR_INVALID, 0},
};

START_TEST(test_bool)
{
    const bool_case_t *c = &bool_cases[_i];
    int v = 42;

    ck_assert_msg(nf_parse_bool(c->s, &v) == c->rc, "'%s': rc", c->s ? c->s : "NULL");
    ck_assert_int_eq(v, c->rc == NF_OK ? c->v : 42);
}
END_TEST

/* ------------------------------------------------------------ long */

typedef struct long_case { const char *s; long lo, hi; nf_status_t rc; long v; } long_case_t;

static const long_case_t long_cases[] = {
    {"0", 0, 10, NF_OK, 0}, {"10", 0, 10, NF_OK, 10}, {"007", 0, 10, NF_OK, 7},
    {"+3", 0, 10, NF_OK, 3}, {"-5", -5, 5, NF_OK, -5},
    {"11", 0, 10, NF_ERR_INVALID, 0}, {"-1", 0, 10, NF_ERR_INVALID, 0},
    {"-6", -5, 5, NF_ERR_INVALID, 0},
    {"9223372036854775807", LONG_MIN, LONG_MAX, NF_OK, LONG_MAX},
    {"-9223372036854775808", LONG_MIN, LONG_MAX, NF_OK, LONG_MIN},
    {"9223372036854775808", LONG_MIN, LONG_MAX, NF_ERR_CAPACITY, 0},
    {"-9223372036854775809", LONG_MIN, LONG_MAX, NF_ERR_CAPACITY, 0},
    {"99999999999999999999999", LONG_MIN, LONG_MAX, NF_ERR_CAPACITY, 0},
    {"", 0, 10, NF_ERR_INVALID, 0}, {"-", 0, 10, NF_ERR_INVALID, 0},
    {"+", 0, 10, NF_ERR_INVALID, 0}, {"1x", 0, 10, NF_ERR_INVALID, 0},
    {" 1", 0, 10, NF_ERR_INVALID, 0}, {"1 ", 0, 10, NF_ERR_INVALID, 0},
    {"0x10", 0, 100, NF_ERR_INVALID, 0}, {"1e3", 0, 5000, NF_ERR_INVALID, 0},
    {"--1", -5, 5, NF_ERR_INVALID, 0}, {"1.0", 0, 10, NF_ERR_INVALID, 0},
    {"\xd9\xa3", 0, 10, NF_ERR_INVALID, 0}, {NULL, 0, 10, NF_ERR_INVALID, 0},
};

static void check_long(int i)
{
    const long_case_t *c = &long_cases[i];
    long v = 42;

    ck_assert_msg(nf_parse_long(c->s, c->lo, c->hi, &v) == c->rc, "'%s': rc", c->s ? c->s : "NULL");
    ck_assert_int_eq(v, c->rc == NF_OK ? c->v : 42);
}

START_TEST(test_long)
{
    check_long(_i);
}
END_TEST

/* ------------------------------------------------------------ double */

typedef struct double_case { const char *s; nf_status_t rc; double v; } double_case_t;

static const double_case_t double_cases[] = {
    {"0", NF_OK, 0.0}, {"0.7", NF_OK, 0.7}, {"1.25e0", NF_OK, 1.25}, {"1E3", NF_OK, 1000.0},
    {"-2.5", NF_OK, -2.5}, {"+.5", NF_OK, 0.5}, {"5.", NF_OK, 5.0}, {"1e-3", NF_OK, 1e-3},
    {"12345678901234567890", NF_OK, 12345678901234567890.0}, {"2.5E+2", NF_OK, 250.0},
    {"", NF_ERR_INVALID, 0}, {".", NF_ERR_INVALID, 0}, {"-", NF_ERR_INVALID, 0},
    {"e3", NF_ERR_INVALID, 0}, {".e3", NF_ERR_INVALID, 0}, {"1e", NF_ERR_INVALID, 0},
    {"1e+", NF_ERR_INVALID, 0}, {"1.2.3", NF_ERR_INVALID, 0}, {"--1", NF_ERR_INVALID, 0},
    {"1,5", NF_ERR_INVALID, 0}, {" 1", NF_ERR_INVALID, 0}, {"1 ", NF_ERR_INVALID, 0},
    {"inf", NF_ERR_INVALID, 0}, {"-infinity", NF_ERR_INVALID, 0}, {"nan", NF_ERR_INVALID, 0},
    {"0x1p3", NF_ERR_INVALID, 0}, {"1e999", NF_ERR_INVALID, 0}, {"1e-999", NF_ERR_INVALID, 0},
    {NULL, NF_ERR_INVALID, 0},
};

static void check_double(int i)
{
    const double_case_t *c = &double_cases[i];
    double v = 42.0;

    ck_assert_msg(nf_parse_double(c->s, &v) == c->rc, "'%s': rc", c->s ? c->s : "NULL");
    ck_assert_msg(v == (c->rc == NF_OK ? c->v : 42.0), "'%s': got %g", c->s, v);
}

START_TEST(test_double)
{
    check_double(_i);
}
END_TEST

/* ------------------------------------------------------------ locale */

/* A locale whose decimal point is ',' (set for LC_NUMERIC), or NULL. */
static const char *comma_locale(void)
{
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "de_DE", "fr_FR"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (setlocale(LC_NUMERIC, names[i]) != NULL && strcmp(localeconv()->decimal_point, ",") == 0)
            return names[i];
    return NULL;
}

/* Check runs each test in a child: the locale set here stays there. */
static void locale_setup(void)
{
    if (comma_locale() == NULL)
        setlocale(LC_NUMERIC, "C.UTF-8");
}

START_TEST(test_double_locale)
{
    int comma = strcmp(localeconv()->decimal_point, ",") == 0;

    if (comma)          /* the locale bites: plain strtod stops at '.' */
        ck_assert(strtod("0.5", NULL) != 0.5);
    check_double(_i);
    ck_assert_int_eq(strcmp(localeconv()->decimal_point, ",") == 0, comma); /* restored */
}
END_TEST

START_TEST(test_long_locale)
{
    check_long(_i);
}
END_TEST

/* ------------------------------------------------------------ ASCII */

typedef struct case_eq { const char *a, *b; int eq; } case_eq_t;

static const case_eq_t case_eq_cases[] = {
    {"", "", 1}, {"abc", "ABC", 1}, {"MPI_Sum", "mpi_sUM", 1}, {"abc", "abd", 0},
    {"ab", "abc", 0}, {"abc", "ab", 0}, {"\xc4", "\xe4", 0}, {"[", "{", 0}, {"@", "`", 0},
};

START_TEST(test_strcaseeq)
{
    const case_eq_t *c = &case_eq_cases[_i];

    ck_assert_msg(nf_strcaseeq(c->a, c->b) == c->eq, "'%s' vs '%s'", c->a, c->b);
}
END_TEST

/* ------------------------------------------------------------ hash */

/* FNV-1a 64 test vectors (Noll's FNV test suite; Go's hash/fnv tests). */
typedef struct hash_case { const char *s; uint64_t h; } hash_case_t;

static const hash_case_t hash_cases[] = {
    {"", 0xcbf29ce484222325ull}, {"a", 0xaf63dc4c8601ec8cull}, {"ab", 0x089c4407b545986aull},
    {"abc", 0xe71fa2190541574bull}, {"foobar", 0x85944171f73967e8ull},
};

START_TEST(test_hash_vectors)
{
    const hash_case_t *c = &hash_cases[_i];

    ck_assert_uint_eq(nf_hash_str(NF_HASH_INIT, c->s), c->h);
    ck_assert_uint_eq(nf_hash_bytes(NF_HASH_INIT, c->s, strlen(c->s)), c->h);
}
END_TEST

START_TEST(test_hash_compose)
{
    static const unsigned char le[8] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};

    ck_assert_uint_eq(NF_HASH_INIT, 14695981039346656037ull);
    ck_assert_uint_eq(nf_hash_str(nf_hash_str(NF_HASH_INIT, "foo"), "bar"),
                      nf_hash_str(NF_HASH_INIT, "foobar"));
    ck_assert_uint_eq(nf_hash_u64(NF_HASH_INIT, 0x0102030405060708ull),
                      nf_hash_bytes(NF_HASH_INIT, le, sizeof(le)));
    ck_assert_uint_ne(nf_hash_u64(NF_HASH_INIT, 1), nf_hash_u64(NF_HASH_INIT, 1ull << 56));
}
END_TEST

/* ------------------------------------------------------------ size */

typedef struct size_case { const char *s; nf_status_t rc; uint64_t v; } size_case_t;

static const size_case_t size_cases[] = {
    {"0", NF_OK, 0}, {"4096", NF_OK, 4096}, {"1k", NF_OK, 1024}, {"1K", NF_OK, 1024},
    {"64M", NF_OK, 64ull << 20}, {"64MiB", NF_OK, 64ull << 20}, {"64mb", NF_OK, 64ull << 20},
    {"2G", NF_OK, 2ull << 30}, {"3T", NF_OK, 3ull << 40}, {"100B", NF_OK, 100},
    {"18446744073709551615", NF_OK, UINT64_MAX}, {"16777215T", NF_OK, 16777215ull << 40},
    {"18446744073709551616", NF_ERR_CAPACITY, 0}, {"16777216T", NF_ERR_CAPACITY, 0},
    {"", NF_ERR_INVALID, 0}, {"M", NF_ERR_INVALID, 0}, {"-1", NF_ERR_INVALID, 0},
    {"+1", NF_ERR_INVALID, 0}, {" 1", NF_ERR_INVALID, 0}, {"1 ", NF_ERR_INVALID, 0},
    {"1P", NF_ERR_INVALID, 0}, {"1.5G", NF_ERR_INVALID, 0}, {"1MM", NF_ERR_INVALID, 0},
    {"1iB", NF_ERR_INVALID, 0}, {"0x10", NF_ERR_INVALID, 0}, {NULL, NF_ERR_INVALID, 0},
};

START_TEST(test_size)
{
    const size_case_t *c = &size_cases[_i];
    uint64_t v = 42;

    ck_assert_msg(nf_parse_size(c->s, &v) == c->rc, "'%s': rc", c->s ? c->s : "NULL");
    ck_assert_uint_eq(v, c->rc == NF_OK ? c->v : 42);
}
END_TEST

#define NCASES(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ------------------------------------------------------------ files */

/* nf_file_read_all: regular files of bounded size only, whatever fstat
 * says about their size; the rest refused with a reason. */
typedef struct read_case {
    const char *path; /* "@name": a file in a temp directory holding .content */
    const char *content;
    size_t max;
    nf_status_t status;
    const char *why; /* prefix of the reason (errors), or of the text */
} read_case_t;

static const read_case_t read_cases[] = {
    {"@a", "abc", 16, NF_OK, "abc"},
    {"@empty", "", 16, NF_OK, ""},
    {"@exact", "abcd", 4, NF_OK, "abcd"},
    {"@big", "abcde", 4, NF_ERR_CAPACITY, "larger than 4 bytes"},
    {"/proc/self/status", NULL, 1 << 16, NF_OK, "Name:"}, /* st_size 0 */
    {"/nonexistent/x", NULL, 16, NF_ERR_IO, "cannot open: No such file or directory"},
    {"/", NULL, 16, NF_ERR_IO, "not a regular file (a directory)"},
    {"/dev/null", NULL, 16, NF_ERR_IO, "not a regular file (a character device)"},
};

static char file_dir[64];

static void file_setup(void)
{
    snprintf(file_dir, sizeof(file_dir), "/tmp/nfutilXXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(file_dir));
}

static void file_teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", file_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", file_dir);
}

static void put_file(const char *path, const char *content, mode_t mode)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(content, f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(path, mode), 0);
}

static char *get_file(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
    fclose(f);
    return buf;
}

START_TEST(test_read_all)
{
    const read_case_t *c = &read_cases[_i];
    char path[128], why[128] = "", *text = NULL;
    size_t len = 12345;

    snprintf(path, sizeof(path), "%s", c->path);
    if (c->path[0] == '@') {
        snprintf(path, sizeof(path), "%s/%s", file_dir, c->path + 1);
        put_file(path, c->content, 0600);
    }
    nf_status_t st = nf_file_read_all(path, c->max, &text, &len, why, sizeof(why));
    ck_assert_int_eq(st, c->status);
    if (st != NF_OK) {
        ck_assert_ptr_null(text);
        ck_assert_uint_eq(len, 12345);
        ck_assert_msg(strncmp(why, c->why, strlen(c->why)) == 0, "%s: got '%s'", path, why);
        return;
    }
    ck_assert_msg(strncmp(text, c->why, strlen(c->why)) == 0, "%s: read '%s'", path, text);
    ck_assert_uint_eq(len, strlen(text));
    if (c->content != NULL)
        ck_assert_uint_eq(len, strlen(c->content));
    free(text);
}
END_TEST

/* nf_wfile: a symlink planted at the path is replaced, not followed; an
 * existing file is replaced by rename (a new inode), never written
 * through; the result is 0600 and ours. Published (trace) and committed
 * at once (stats) alike. */
START_TEST(test_wfile_replace)
{
    char victim[128], path[128], link[256];
    struct stat sb, old;
    nf_wfile_t f;
    int publish = _i;

    snprintf(victim, sizeof(victim), "%s/victim", file_dir);
    snprintf(path, sizeof(path), "%s/out", file_dir);
    put_file(victim, "precious\n", 0644);
    ck_assert_int_eq(symlink(victim, path), 0);
    ck_assert_int_eq(nf_wfile_open(&f, path), NF_OK);
    if (publish)
        ck_assert_int_eq(nf_wfile_publish(&f), NF_OK);
    fputs("first\n", f.fp);
    ck_assert_int_eq(nf_wfile_commit(&f), NF_OK);
    ck_assert_str_eq(get_file(victim), "precious\n");
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert_msg(S_ISREG(sb.st_mode), "%s is not a regular file", path);
    ck_assert_int_eq(sb.st_mode & 07777, 0600);
    ck_assert_int_eq(sb.st_uid, geteuid());
    ck_assert_str_eq(get_file(path), "first\n");

    old = sb; /* an existing file: replaced, not written through */
    ck_assert_int_eq(nf_wfile_open(&f, path), NF_OK);
    if (publish)
        ck_assert_int_eq(nf_wfile_publish(&f), NF_OK);
    fputs("second\n", f.fp);
    ck_assert_int_eq(nf_wfile_commit(&f), NF_OK);
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert_msg(sb.st_ino != old.st_ino, "%s was written through (same inode)", path);
    ck_assert_str_eq(get_file(path), "second\n");
    ck_assert_int_eq(sb.st_mode & 07777, 0600);
    ck_assert_int_eq(readlink(path, link, sizeof(link)), -1);
}
END_TEST

/* ---------------------------------------------------------------- intern */

/* Names get dense ids once; the same name the same id; name and hash read
 * back; 50 000 names (the table grows) stay found. */
START_TEST(test_intern_ids)
{
    char name[32];
    uint32_t first = nf_intern("intern.a");
    ck_assert_uint_ne(first, 0);
    ck_assert_uint_eq(nf_intern("intern.a"), first);
    ck_assert_uint_eq(nf_intern("intern.b"), first + 1);
    ck_assert_str_eq(nf_intern_name(first), "intern.a");
    ck_assert(nf_intern_hash(first) == nf_hash_str(NF_HASH_INIT, "intern.a"));
    ck_assert_ptr_null(nf_intern_name(0));
    ck_assert_ptr_null(nf_intern_name(nf_intern_bound()));
    for (int i = 0; i < 50000; i++) {
        snprintf(name, sizeof(name), "layer%d.weight", i);
        ck_assert_uint_eq(nf_intern(name), first + 2 + (uint32_t)i);
    }
    for (int i = 0; i < 50000; i += 997) {
        snprintf(name, sizeof(name), "layer%d.weight", i);
        ck_assert_uint_eq(nf_intern(name), first + 2 + (uint32_t)i);
        ck_assert_str_eq(nf_intern_name(first + 2 + (uint32_t)i), name);
    }
    ck_assert_uint_eq(nf_intern_bound(), first + 2 + 50000);
}
END_TEST

/* Pairs of words to indices: absent is UINT32_MAX, a put replaces, growth
 * keeps every pair (keys differing in one word only included). */
START_TEST(test_keymap)
{
    nf_keymap_t m = {0};
    ck_assert_uint_eq(nf_keymap_get(&m, 1, 0), UINT32_MAX);
    for (uint32_t i = 0; i < 10000; i++) {
        ck_assert_int_eq(nf_keymap_put(&m, i, 0, i), 0);
        ck_assert_int_eq(nf_keymap_put(&m, 0, (uint64_t)i + 1, 100000 + i), 0);
    }
    ck_assert_int_eq(nf_keymap_put(&m, 7, 0, 77), 0);
    ck_assert_uint_eq(m.n, 20000);
    for (uint32_t i = 0; i < 10000; i++) {
        ck_assert_uint_eq(nf_keymap_get(&m, i, 0), i == 7 ? 77 : i);
        ck_assert_uint_eq(nf_keymap_get(&m, 0, (uint64_t)i + 1), 100000 + i);
    }
    ck_assert_uint_eq(nf_keymap_get(&m, 1, 1), UINT32_MAX);
    nf_keymap_free(&m);
    ck_assert_uint_eq(nf_keymap_get(&m, 1, 0), UINT32_MAX);
}
END_TEST

START_TEST(test_id_array)
{
    double *v = NULL;
    uint32_t cap = 0;
    ck_assert_int_eq(nf_id_array_grow(&v, &cap, 5, sizeof(*v)), 0);
    ck_assert_uint_gt(cap, 5);
    v[5] = 1.5;
    ck_assert_int_eq(nf_id_array_grow(&v, &cap, 1000, sizeof(*v)), 0);
    ck_assert_uint_gt(cap, 1000);
    ck_assert(v[5] == 1.5 && v[6] == 0.0 && v[1000] == 0.0);
    ck_assert_int_eq(nf_id_array_grow(&v, &cap, NF_INTERN_MAX, sizeof(*v)), NF_ERR_CAPACITY);
    free(v);
}
END_TEST

/* ------------------------------------------------------------ names */

/* Every route has its own name, which parses back to it, and the public
 * header's nf_route_name comment lists it (that list once lacked bf16). */
START_TEST(test_route_names)
{
    char *hdr = NULL, why[128] = "";
    size_t len;
    nf_route_t back;

    ck_assert_int_eq(nf_file_read_all(NF_PUBLIC_HEADER, 1 << 20, &hdr, &len, why, sizeof(why)), NF_OK);
    const char *doc = strstr(hdr, "/** Route name (");
    ck_assert_msg(doc != NULL, "%s: no nf_route_name comment", NF_PUBLIC_HEADER);
    const char *end = strstr(doc, "*/");
    ck_assert_ptr_nonnull(end);
    for (int r = 0; r < NF_ROUTE_COUNT; r++) {
        const char *name = nf_route_name((nf_route_t)r);
        char quoted[32];

        ck_assert_str_ne(name, "unknown");
        ck_assert_int_eq(nf_route_parse(name, &back), NF_OK);
        ck_assert_int_eq(back, r);
        snprintf(quoted, sizeof(quoted), "\"%s\"", name);
        const char *at = strstr(doc, quoted);
        ck_assert_msg(at != NULL && at < end, "nfcoll.h: nf_route_name's comment lacks %s", quoted);
    }
    ck_assert_str_eq(nf_route_name(NF_ROUTE_COUNT), "unknown");
    ck_assert_int_eq(nf_route_parse("fp16", &back), NF_ERR_INVALID);
    free(hdr);
}
END_TEST

/* The route table (nf_route.h): a row for every route; low-bit are the
 * sign formats and the integer ones, which keep residuals and send fewer
 * bits than fp32. */
START_TEST(test_route_table)
{
    for (int r = 0; r < NF_ROUTE_COUNT; r++) {
        const nf_route_info_t *i = nf_route_info((nf_route_t)r);
        ck_assert_ptr_nonnull(i);
        ck_assert_ptr_nonnull(i->name);
        ck_assert(i->bits >= 1 && i->bits <= 32);
        ck_assert_int_eq(nf_route_lowbit((nf_route_t)r), r == NF_ROUTE_BINARY ||
                                                         r == NF_ROUTE_TERNARY ||
                                                         r >= NF_ROUTE_INT4);
        /* an integer route's bit lines are its code's bits */
        ck_assert_uint_eq(nf_route_intk((nf_route_t)r), r >= NF_ROUTE_INT4 ? i->bits : 0);
        if (i->lowbit)
            ck_assert(i->residual && i->float_only && i->bits < nf_routes[NF_ROUTE_FP32].bits);
        for (int q = 0; q < r; q++)
            ck_assert_str_ne(i->name, nf_routes[q].name);
    }
    ck_assert_ptr_null(nf_route_info(NF_ROUTE_COUNT));
    ck_assert(!nf_route_lowbit(NF_ROUTE_COUNT) && !nf_route_residual((nf_route_t)-1));
    ck_assert_uint_eq(nf_routes[NF_ROUTE_BINARY].bits, 1);
    ck_assert_uint_eq(nf_routes[NF_ROUTE_TERNARY].bits, 2);
    ck_assert_uint_eq(nf_route_intk(NF_ROUTE_INT4), 4);
    ck_assert_uint_eq(nf_route_intk(NF_ROUTE_INT3), 3);
    ck_assert_uint_eq(nf_route_intk(NF_ROUTE_INT2), 2);
    ck_assert_uint_eq(nf_route_intk(NF_ROUTE_COUNT), 0);
    ck_assert(!nf_routes[NF_ROUTE_PMPI].float_only);
}
END_TEST

/* The runner's fallbacks as far as the call tells, one row per rule. */
static const struct fb_case {
    nf_route_t asked;
    nf_call_facts_t f;
    nf_route_t runs;
    int why;
} fb_cases[] = {
    {NF_ROUTE_BINARY, {0, 1, 1, 0, 1}, NF_ROUTE_BINARY, NF_FALLBACK_NONE},
    {NF_ROUTE_FP32, {0, 0, 1, 0, 1}, NF_ROUTE_PMPI, NF_FALLBACK_DATATYPE},
    {NF_ROUTE_BINARY, {0, 0, 0, 0, 1}, NF_ROUTE_PMPI, NF_FALLBACK_DATATYPE},
    {NF_ROUTE_TERNARY, {0, 1, 0, 0, 1}, NF_ROUTE_PMPI, NF_FALLBACK_OP},
    {NF_ROUTE_PMPI, {0, 0, 0, 0, 0}, NF_ROUTE_PMPI, NF_FALLBACK_NONE},
    {NF_ROUTE_PMPI, {1, 1, 1, 0, 1}, NF_ROUTE_FP32, NF_FALLBACK_NONE},
    {NF_ROUTE_BINARY, {0, 1, 1, 0, 0}, NF_ROUTE_FP32, NF_FALLBACK_CAPACITY},
    {NF_ROUTE_TERNARY, {1, 1, 1, 0, 0}, NF_ROUTE_FP32, NF_FALLBACK_CAPACITY},
    {NF_ROUTE_BF16, {0, 1, 1, 0, 0}, NF_ROUTE_BF16, NF_FALLBACK_NONE},
    {NF_ROUTE_BINARY, {0, 1, 1, 1, 0}, NF_ROUTE_BINARY, NF_FALLBACK_NONE},
    {NF_ROUTE_BINARY, {0, 0, 1, 1, 1}, NF_ROUTE_PMPI, NF_FALLBACK_DATATYPE},
};

START_TEST(test_fallback_route)
{
    const struct fb_case *c = &fb_cases[_i];
    int why = 12345;
    nf_route_t r = nf_fallback_route(c->asked, &c->f, &why);
    ck_assert_msg(r == c->runs && why == c->why, "case %d: %s asked runs %s (why %d), expected "
                  "%s (why %d)", _i, nf_route_name(c->asked), nf_route_name(r), why,
                  nf_route_name(c->runs), c->why);
}
END_TEST

/* NFCOLL_EF_DECAY: whether it was given (calibration's shadows run the
 * settings' decay only then); a bad value warns and counts as not given. */
static const struct { const char *env; double decay; int set; } decay_cases[] = {
    {NULL, 1.0, 0}, {"0.5", 0.5, 1}, {"1", 1.0, 1}, {"0", 0.0, 1}, {"2", 1.0, 0}, {"half", 1.0, 0},
};

START_TEST(test_ef_decay_setting)
{
    if (decay_cases[_i].env != NULL)
        setenv("NFCOLL_EF_DECAY", decay_cases[_i].env, 1);
    else
        unsetenv("NFCOLL_EF_DECAY");
    nf_settings_reset();
    const nf_settings_t *s = nf_settings_load();
    ck_assert_msg(s->ef_decay == decay_cases[_i].decay && s->ef_decay_set == decay_cases[_i].set,
                  "NFCOLL_EF_DECAY=%s: %g, set %d", decay_cases[_i].env ? decay_cases[_i].env : "(unset)",
                  s->ef_decay, s->ef_decay_set);
    unsetenv("NFCOLL_EF_DECAY");
    nf_settings_reset();
}
END_TEST

/* ------------------------------------------------------------ inline area */

/* The area follows the largest need of the last NF_INLINE_HIST calls, in
 * whole lines, between NF_INLINE_WORDS and NF_INLINE_MAX_WORDS; a need past
 * the most, or none (a bf16 call), asks for nothing. */
START_TEST(test_inline_area)
{
    nf_inline_hist_t h = {0};
    ck_assert_uint_eq(nf_inline_words(&h), NF_INLINE_WORDS);
    nf_inline_note(&h, 8); /* fits the least */
    ck_assert_uint_eq(nf_inline_words(&h), NF_INLINE_WORDS);
    nf_inline_note(&h, NF_INLINE_MAX_WORDS * 8u); /* the most */
    ck_assert_uint_eq(nf_inline_words(&h), NF_INLINE_MAX_WORDS);
    nf_inline_note(&h, 1025); /* 17 lines */
    nf_inline_note(&h, NF_INLINE_MAX_WORDS * 8u + 1); /* past the most: no area */
    nf_inline_note(&h, NF_INLINE_NONE);
    ck_assert_uint_eq(nf_inline_words(&h), NF_INLINE_MAX_WORDS);
    for (unsigned i = 0; i < NF_INLINE_HIST - 4; i++)
        nf_inline_note(&h, 0);
    ck_assert_uint_eq(nf_inline_words(&h), NF_INLINE_MAX_WORDS); /* still among the last */
    nf_inline_note(&h, 0); /* the most leaves them */
    ck_assert_uint_eq(nf_inline_words(&h), 17 * NF_LINE_WORDS);
    nf_inline_note(&h, 0);
    ck_assert_uint_eq(nf_inline_words(&h), NF_INLINE_WORDS);
    ck_assert_uint_eq(nf_inline_steady(NF_INLINE_MAX_WORDS * 8u), NF_INLINE_MAX_WORDS);
    ck_assert_uint_eq(nf_inline_steady(NF_INLINE_MAX_WORDS * 8u + 1), NF_INLINE_WORDS);
    ck_assert_uint_eq(nf_inline_steady(NF_INLINE_NONE), NF_INLINE_WORDS);
}
END_TEST

/* Which calls the wire model streams: two one-rank nodes' counts past
 * NF_CPAIR_LINES lines (binary 1 bit per element, ternary 2), as
 * lib/core/xnode.c sends them; more ranks per node, more nodes, or a
 * call with fewer lines cross in one exchange. Bytes are unchanged. */
START_TEST(test_wire_stream)
{
    nf_wire_t w;
    uint64_t big = 16u << 20, one = (uint64_t)NF_CPAIR_LINES * NF_LINE_BITS * 4;
    nf_traffic_internode(NF_ROUTE_BINARY, big, 2, 1, 1, &w);
    ck_assert_uint_eq(w.stream, 8192);
    ck_assert_uint_eq(w.bytes, 524416); /* counts, the scale's line, a header line */
    nf_traffic_internode(NF_ROUTE_TERNARY, big, 2, 1, 1, &w);
    ck_assert_uint_eq(w.stream, 16384);
    nf_traffic_internode(NF_ROUTE_BINARY, one, 2, 1, 1, &w); /* one message */
    ck_assert_uint_eq(w.stream, 0);
    nf_traffic_internode(NF_ROUTE_BINARY, one + 4, 2, 1, 1, &w);
    ck_assert_uint_eq(w.stream, NF_CPAIR_LINES + 1);
    nf_traffic_internode(NF_ROUTE_BINARY, big, 3, 1, 1, &w);
    ck_assert_uint_eq(w.stream, 0);
    nf_traffic_internode(NF_ROUTE_BINARY, big, 2, 2, 1, &w);
    ck_assert_uint_eq(w.stream, 0);
    nf_traffic_internode(NF_ROUTE_FP32, big, 2, 1, 1, &w);
    ck_assert_uint_eq(w.stream, 0);
}
END_TEST

/* Two one-rank nodes: each call's verdict carries its own area, all fp32
 * up to NF_PAIR_INLINE_BYTES, with low-bit lines up to NF_INLINE_MAX_WORDS
 * words (then the call ends there: one step); anything larger sends the
 * header's line alone. Three nodes keep the history's area. */
START_TEST(test_wire_pair)
{
    nf_wire_t w;
    uint64_t most = NF_PAIR_INLINE_BYTES, hdr = NF_LINE_BYTES;
    nf_traffic_internode(NF_ROUTE_FP32, most, 2, 1, 1, &w);
    ck_assert_uint_eq(w.steps, 1);
    ck_assert_uint_eq(w.bytes, hdr + most);
    nf_traffic_internode(NF_ROUTE_FP32, most + 4, 2, 1, 1, &w);
    ck_assert_uint_eq(w.steps, 2);
    ck_assert_uint_eq(w.bytes, hdr + most + 4);
    nf_traffic_internode(NF_ROUTE_FP32, 4, 2, 1, 1, &w); /* one float: a line */
    ck_assert_uint_eq(w.bytes, 2 * hdr);
    /* binary: 127 lines and the scale's line are 8 KiB; 128 are not */
    nf_traffic_internode(NF_ROUTE_BINARY, 127u * NF_LINE_BITS * 4, 2, 1, 1, &w);
    ck_assert_uint_eq(w.steps, 1);
    ck_assert_uint_eq(w.bytes, hdr + NF_INLINE_MAX_WORDS * 8u);
    nf_traffic_internode(NF_ROUTE_BINARY, 128u * NF_LINE_BITS * 4, 2, 1, 1, &w);
    ck_assert_uint_eq(w.steps, 2);
    ck_assert_uint_eq(w.bytes, hdr + 129u * NF_LINE_BYTES);
    /* three nodes: the history's area whatever the call */
    nf_traffic_internode(NF_ROUTE_FP32, most, 3, 1, 1, &w);
    ck_assert_uint_eq(w.steps, 3); /* the verdict, reduce-scatter, allgather */
    ck_assert_uint_eq(w.bytes, 2u * (NF_LINE_WORDS + NF_INLINE_WORDS) * 8 +
                                   (most / 4 - most / 12) * 4 + 2u * (most / 12) * 4);
    ck_assert_uint_eq(nf_pair_area_words(0, NF_INLINE_NONE), 0);
    ck_assert_uint_eq(nf_pair_area_words(1, NF_INLINE_MAX_WORDS * 8u + 1), 0);
    ck_assert_uint_eq(nf_pair_area_words(0, NF_INLINE_MAX_WORDS * 8u + 1), NF_INLINE_MAX_WORDS + 8);
}
END_TEST

static Suite *util_suite(void)
{
    Suite *s = suite_create("util");
    TCase *t = tcase_create("parse");

    tcase_add_loop_test(t, test_bool, 0, NCASES(bool_cases));
    tcase_add_loop_test(t, test_long, 0, NCASES(long_cases));
    tcase_add_loop_test(t, test_double, 0, NCASES(double_cases));
    tcase_add_loop_test(t, test_strcaseeq, 0, NCASES(case_eq_cases));
    tcase_add_loop_test(t, test_size, 0, NCASES(size_cases));
    suite_add_tcase(s, t);
    t = tcase_create("locale");
    tcase_add_checked_fixture(t, locale_setup, NULL);
    tcase_add_loop_test(t, test_double_locale, 0, NCASES(double_cases));
    tcase_add_loop_test(t, test_long_locale, 0, NCASES(long_cases));
    suite_add_tcase(s, t);
    t = tcase_create("hash");
    tcase_add_loop_test(t, test_hash_vectors, 0, NCASES(hash_cases));
    tcase_add_test(t, test_hash_compose);
    suite_add_tcase(s, t);
    t = tcase_create("file");
    tcase_add_checked_fixture(t, file_setup, file_teardown);
    tcase_add_loop_test(t, test_read_all, 0, NCASES(read_cases));
    tcase_add_loop_test(t, test_wfile_replace, 0, 2);
    suite_add_tcase(s, t);
    t = tcase_create("intern");
    tcase_add_test(t, test_intern_ids);
    tcase_add_test(t, test_keymap);
    tcase_add_test(t, test_id_array);
    suite_add_tcase(s, t);
    t = tcase_create("names");
    tcase_add_test(t, test_route_names);
    tcase_add_test(t, test_route_table);
    suite_add_tcase(s, t);
    t = tcase_create("fallback");
    tcase_add_loop_test(t, test_fallback_route, 0, NCASES(fb_cases));
    suite_add_tcase(s, t);
    t = tcase_create("inline");
    tcase_add_test(t, test_inline_area);
    tcase_add_test(t, test_wire_stream);
    tcase_add_test(t, test_wire_pair);
    suite_add_tcase(s, t);
    t = tcase_create("settings");
    tcase_add_loop_test(t, test_ef_decay_setting, 0, NCASES(decay_cases));
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    const char *comma = comma_locale();
    SRunner *sr = srunner_create(util_suite());
    int failed;

    if (comma != NULL)
        printf("number parsers also run under LC_NUMERIC=%s (decimal comma)\n", comma);
    else
        printf("SKIP: locale part: no decimal-comma locale (de_DE.UTF-8, fr_FR.UTF-8) installed; "
               "the number parsers run again under C.UTF-8 only\n");
    setlocale(LC_NUMERIC, "C");
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

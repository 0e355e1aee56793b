/*
 * Policy parser and matcher: malformed files (each with the file:line message
 * it must give) and matching semantics. Table-driven; no MPI.
 */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nf_policy.h"

#ifndef NF_POLICY_FIXTURES
#define NF_POLICY_FIXTURES "tests/policy"
#endif

/* Diagnostics collected as "file:line: message\n" lines. */
typedef struct diags {
    char text[8192];
    int count[3];
} diags_t;

static void collect(const nf_policy_diag_t *d, void *arg)
{
    diags_t *g = arg;
    size_t used = strlen(g->text);
    snprintf(g->text + used, sizeof(g->text) - used, "%s:%d: %s\n", d->file, d->line, d->message);
    g->count[d->severity]++;
}

static nf_status_t parse(const char *text, size_t len, diags_t *g, nf_policy_t **p)
{
    memset(g, 0, sizeof(*g));
    *p = NULL;
    return nf_policy_parse(text, len, "t.policy", collect, g, p);
}

#define HDR "[policy]\nversion = 1\n"

/* ------------------------------------------------------------ malformed */

enum { LOAD_FAILS, RULE_DROPPED, WARNS };

typedef struct bad_case {
    const char *what;
    const char *text;
    int outcome;
    const char *expect;  /* substring of the diagnostics, "file:line: ..." */
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"empty file", "", LOAD_FAILS, "t.policy:1: empty policy file"},
    {"only comments", "# nothing\n; here\n\n", LOAD_FAILS, "t.policy:1: empty policy file"},
    {"missing version", "[policy]\nstats = 1\n[default]\nroute = fp32\n", LOAD_FAILS,
     "t.policy:1: [policy] has no version (expected version = 1)"},
    {"no policy section", "[rule a]\nroute = fp32\n", LOAD_FAILS, "t.policy:1: no [policy] section"},
    {"bad version", "[policy]\nversion = 2\n", LOAD_FAILS,
     "t.policy:2: unsupported policy version '2' (expected version = 1)"},
    {"bad section", HDR "[rules a]\nroute = fp32\n", LOAD_FAILS,
     "t.policy:3: bad section header '[rules a]' (expected [policy], [rule NAME] or [default])"},
    {"unterminated section", HDR "\n[rule a\nroute = fp32\n", LOAD_FAILS,
     "t.policy:4: bad section header '[rule a' (missing ']')"},
    {"text after section", HDR "[rule a] x\n", LOAD_FAILS, "t.policy:3: bad section header '[rule a] x' (text after ']')"},
    {"rule without name", HDR "[rule]\nroute = fp32\n", LOAD_FAILS, "t.policy:3: bad section header '[rule]'"},
    {"bad rule name", HDR "[rule a/b]\nroute = fp32\n", LOAD_FAILS, "t.policy:3: bad rule name 'a/b'"},
    {"duplicate policy", HDR "[policy]\n", LOAD_FAILS, "t.policy:3: duplicate [policy] section (first at line 1)"},
    {"duplicate default", HDR "[default]\nroute = fp32\n[default]\n", LOAD_FAILS,
     "t.policy:5: duplicate [default] section (first at line 3)"},
    {"key outside section", "version = 1\n[policy]\n", LOAD_FAILS, "t.policy:1: key 'version' outside any section"},
    {"no equals sign", HDR "[rule a]\nroute fp32\n", LOAD_FAILS,
     "t.policy:4: expected 'key = value', '[section]' or a comment, found 'route fp32'"},
    {"binary junk", "[policy]\nversion = 1\n\x7f" "ELF\x02\x01\x01\x00\x00", LOAD_FAILS,
     "t.policy:3: binary data (byte 0x7f at column 1)"},
    {"NUL byte", HDR "[rule a]\nroute = fp\0" "32\n", LOAD_FAILS, "t.policy:4: binary data (byte 0x00 at column 11)"},
    {"unknown route", HDR "\n[rule a]\nbytes = 1M-\nroute = quaternary\n", RULE_DROPPED,
     "t.policy:6: unknown route 'quaternary' (expected pmpi|fp32|binary|ternary); rule 'a' disabled"},
    {"unknown key", HDR "[rule a]\nbyte = 1M-\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: unknown key 'byte' (expected region|comm|comm_size|datatype|op|bytes|calls|route|ef|gamma|segment); rule 'a' disabled"},
    {"bad number", HDR "[rule a]\nbytes = 12Q\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: bad bytes '12Q' (expected a size such as 4096, 64K or 1M"},
    {"number too large", HDR "[rule a]\ncalls = 99999999999999999999999\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: calls value '99999999999999999999999' out of range"},
    {"size overflow", HDR "[rule a]\nbytes = 20000000000G\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: bytes value '20000000000G' out of range"},
    {"comm_size zero", HDR "[rule a]\ncomm_size = 0-4\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: comm_size value '0-4' out of range (1..2147483647)"},
    {"inverted range", HDR "[rule a]\nbytes = 10-5\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: empty bytes range '10-5' (low end above high end); rule 'a' disabled"},
    {"overlapping ranges", HDR "[rule a]\ncalls = 0-10, 5-20\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: overlapping calls ranges '0-10' and '5-20'; rule 'a' disabled"},
    {"lone dash", HDR "[rule a]\ncalls = -\nroute = fp32\n", RULE_DROPPED, "t.policy:4: bad calls '-'"},
    {"empty list item", HDR "[rule a]\nop = sum,,max\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: empty item in the list for 'op'"},
    {"unknown datatype", HDR "[rule a]\ndatatype = flaot\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: unknown datatype 'flaot'"},
    {"unknown op", HDR "[rule a]\nop = avg\nroute = fp32\n", RULE_DROPPED, "t.policy:4: unknown op 'avg'"},
    {"bad ef", HDR "[rule a]\nroute = binary\nef = maybe\n", RULE_DROPPED,
     "t.policy:5: bad ef 'maybe' (expected on|off|inherit)"},
    {"negative gamma", HDR "[rule a]\nroute = ternary\ngamma = -1\n", RULE_DROPPED,
     "t.policy:5: bad gamma '-1' (expected a number >= 0"},
    {"gamma nan", HDR "[rule a]\nroute = ternary\ngamma = nan\n", RULE_DROPPED, "t.policy:5: bad gamma 'nan'"},
    {"bad segment", HDR "[rule a]\nroute = binary\nsegment = layer\n", RULE_DROPPED,
     "t.policy:5: bad segment 'layer' (expected region|buffer)"},
    {"bad glob", HDR "[rule a]\nregion = layer[0-3\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: unterminated '[' in region pattern 'layer[0-3'"},
    {"duplicate key", HDR "[rule a]\nroute = fp32\n\nroute = binary\n", RULE_DROPPED,
     "t.policy:6: duplicate key 'route' (first set at line 4)"},
    {"empty value", HDR "[rule a]\nroute =\n", RULE_DROPPED, "t.policy:4: empty value for 'route'"},
    {"no route", HDR "[rule a]\nbytes = 1K\n", RULE_DROPPED,
     "t.policy:3: rule 'a' has no route (expected route = pmpi|fp32|binary|ternary); rule 'a' disabled"},
    {"duplicate rule name", HDR "[rule a]\nroute = fp32\n[rule a]\nroute = binary\n", RULE_DROPPED,
     "t.policy:5: duplicate rule name 'a' (first at line 3)"},
    {"match key in default", HDR "[default]\nbytes = 1M-\nroute = fp32\n", RULE_DROPPED,
     "t.policy:4: key 'bytes' cannot be used in [default] (expected route|ef|gamma|segment); [default] disabled"},
    {"unknown policy key", HDR "colour = blue\n", RULE_DROPPED,
     "t.policy:3: unknown key 'colour' in [policy] (expected version|cxl_node|stats|trace); ignored"},
    {"bad cxl_node", HDR "cxl_node = -3\n", RULE_DROPPED, "t.policy:3: bad cxl_node '-3'"},
    {"shadowed rule", HDR "[rule big]\nbytes = 1M-\nroute = binary\n\n[rule huge]\nbytes = 64M-128M\nroute = fp32\n",
     WARNS, "t.policy:7: rule 'huge' is never used: rule 'big' (line 3) matches every call it matches"},
    {"shadowed by glob", HDR "[rule fc]\nregion = *.fc.*\nroute = fp32\n[rule one]\nregion = net.fc.w\nroute = binary\n",
     WARNS, "t.policy:6: rule 'one' is never used: rule 'fc' (line 3)"},
    {"gamma on binary", HDR "[rule a]\nroute = binary\ngamma = 0.5\n", WARNS,
     "t.policy:5: gamma has no effect on route binary"},
    {"low-bit on doubles", HDR "[rule a]\ndatatype = double\nroute = binary\n", WARNS,
     "t.policy:3: rule 'a' never runs binary: low-bit routes take only float sums"},
};

START_TEST(test_malformed)
{
    const bad_case_t *c = &bad_cases[_i];
    nf_policy_t *p;
    diags_t g;
    size_t len = strlen(c->text);
    nf_status_t rc;

    /* The NUL case has its NUL inside: measure to the last newline. */
    if (strcmp(c->what, "NUL byte") == 0)
        len = sizeof(HDR "[rule a]\nroute = fp\0" "32\n") - 1;
    rc = parse(c->text, len, &g, &p);
    ck_assert_msg(strstr(g.text, c->expect) != NULL, "%s: expected '%s' in:\n%s", c->what, c->expect, g.text);
    switch (c->outcome) {
    case LOAD_FAILS:
        ck_assert_msg(rc == NF_ERR_PARSE && p == NULL, "%s: should not load (rc %d)", c->what, rc);
        ck_assert_int_ge(g.count[NF_POLICY_ERROR], 1);
        break;
    case RULE_DROPPED:
        ck_assert_msg(rc == NF_OK && p != NULL, "%s: should load (rc %d):\n%s", c->what, rc, g.text);
        ck_assert_int_eq(g.count[NF_POLICY_ERROR], 0);
        ck_assert_int_ge(g.count[NF_POLICY_DISABLED], 1);
        break;
    case WARNS:
        ck_assert_msg(rc == NF_OK && p != NULL, "%s: should load (rc %d)", c->what, rc);
        ck_assert_int_eq(g.count[NF_POLICY_DISABLED] + g.count[NF_POLICY_ERROR], 0);
        ck_assert_int_ge(g.count[NF_POLICY_WARNING], 1);
        break;
    }
    nf_policy_free(p);
}
END_TEST

/* A rule with a bad value is dropped; the rest of the file still decides. */
START_TEST(test_bad_rule_rest_loads)
{
    static const char text[] = HDR "[rule a]\nroute = quaternary\n[rule b]\nroute = fp32\n";
    nf_policy_query_t q = {NULL, "w", 4, NF_DT_FLOAT, NF_OP_SUM, 64, 0};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;

    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_int_eq(nf_policy_rule_count(p), 2);
    ck_assert_int_eq(nf_policy_disabled_count(p), 1);
    nf_policy_match(p, &q, &a);
    ck_assert_str_eq(a.rule, "b");
    ck_assert_int_eq(a.route, NF_ROUTE_FP32);
    nf_policy_free(p);
}
END_TEST

/* Lines longer than inih's buffer are an error at their own line, and do
 * not shift the line numbers of what follows. */
START_TEST(test_long_lines)
{
    size_t n = 100000;
    char *text = malloc(n + 64), expect[64];
    nf_policy_t *p;
    diags_t g;

    strcpy(text, HDR "[rule a]\nregion = ");
    memset(text + strlen(text), 'x', n);
    strcpy(text + strlen(HDR "[rule a]\nregion = ") + n, "\nroute = fp32\n");
    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_ERR_PARSE);
    snprintf(expect, sizeof(expect), "t.policy:4: line too long (%zu characters", n + 9);
    ck_assert_msg(strstr(g.text, expect) != NULL, "got %s", g.text);

    /* A long comment is harmless, and line numbers stay right after it. */
    strcpy(text, "# ");
    memset(text + 2, 'c', n);
    strcpy(text + 2 + n, "\n" HDR "[rule a]\nroute = warp\n");
    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(strstr(g.text, "t.policy:5: unknown route 'warp'") != NULL, "got %s", g.text);
    nf_policy_free(p);
    free(text);
}
END_TEST

static char *fixture(const char *name)
{
    static char path[1024];
    snprintf(path, sizeof(path), "%s/%s", NF_POLICY_FIXTURES, name);
    return path;
}

/* A file is bounded: at most 1024 rules. */
START_TEST(test_too_many_rules)
{
    size_t cap = 1100 * 40, used;
    char *text = malloc(cap);
    nf_policy_t *p;
    diags_t g;

    used = (size_t)snprintf(text, cap, HDR);
    for (int i = 0; i < 1025; i++)
        used += (size_t)snprintf(text + used, cap - used, "[rule r%d]\ncalls = %d\nroute = fp32\n", i, i);
    ck_assert_int_eq(parse(text, used, &g, &p), NF_ERR_PARSE);
    ck_assert_msg(strstr(g.text, "t.policy:3075: too many rules (at most 1024)") != NULL, "got %s", g.text);
    free(text);
}
END_TEST

START_TEST(test_files)
{
    nf_policy_t *p = NULL;
    diags_t g;

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load("/nonexistent/x.policy", collect, &g, &p), NF_ERR_IO);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(g.text, "/nonexistent/x.policy:0: cannot open: No such file") != NULL,
                  "got %s", g.text);

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load(fixture("empty.policy"), collect, &g, &p), NF_ERR_PARSE);
    ck_assert_msg(strstr(g.text, "empty.policy:1: empty policy file") != NULL, "got %s", g.text);

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load(fixture("junk.policy"), collect, &g, &p), NF_ERR_PARSE);
    ck_assert_msg(strstr(g.text, "junk.policy:2: binary data (byte 0x1a at column 1)") != NULL, "got %s", g.text);

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load(fixture("bad_route.policy"), collect, &g, &p), NF_OK);
    ck_assert_msg(strstr(g.text, "bad_route.policy:6: unknown route 'quaternary'") != NULL, "got %s", g.text);
    nf_policy_free(p);

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load(fixture("example.policy"), collect, &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "example.policy should be clean, got %s", g.text);
    ck_assert_int_eq(nf_policy_cxl_node(p), 1);
    ck_assert_str_eq(nf_policy_stats(p), "1");
    ck_assert_ptr_null(nf_policy_trace(p));
    nf_policy_free(p);
}
END_TEST

/* Paths that are not regular files are refused at once, by name: a FIFO
 * must not block the open (it used to hang MPI_Init on every rank), a
 * device must not be read forever. Check's timeout catches a hang. */
static const struct special_case {
    const char *path; /* "@fifo", "@dir", "@big": made in a temp directory */
    nf_status_t status;
    const char *message;
} special_cases[] = {
    {"@fifo", NF_ERR_IO, ":0: not a regular file (a FIFO)"},
    {"@dir", NF_ERR_IO, ":0: not a regular file (a directory)"},
    {"/dev/zero", NF_ERR_IO, "/dev/zero:0: not a regular file (a character device)"},
    {"/dev/null", NF_ERR_IO, "/dev/null:0: not a regular file (a character device)"},
    {"@big", NF_ERR_PARSE, ":0: larger than 1048576 bytes"},
};

static const char *special_path(const char *what, char *dir, char *path, size_t n)
{
    if (what[0] != '@')
        return what;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, n, "%s/%s", dir, what + 1);
    if (strcmp(what, "@fifo") == 0) {
        ck_assert_int_eq(mkfifo(path, 0600), 0);
    } else if (strcmp(what, "@dir") == 0) {
        ck_assert_int_eq(mkdir(path, 0700), 0);
    } else {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        for (int i = 0; i <= (1 << 20) / 16; i++)
            fputs("# padding line.\n", f); /* 16 bytes */
        fclose(f);
    }
    return path;
}

START_TEST(test_special_files)
{
    const struct special_case *c = &special_cases[_i];
    char dir[] = "/tmp/nfpolXXXXXX", buf[256];
    const char *path = special_path(c->path, dir, buf, sizeof(buf));
    nf_policy_t *p = NULL;
    diags_t g;

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(nf_policy_load(path, collect, &g, &p), c->status);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(g.count[NF_POLICY_ERROR], 1);
    ck_assert_msg(strstr(g.text, path) == g.text && strstr(g.text, c->message) != NULL,
                  "%s: got %s", path, g.text);
    if (path == buf) {
        if (remove(buf) != 0 || rmdir(dir) != 0)
            ck_abort_msg("cannot clean up %s", dir);
    }
}
END_TEST

/* ------------------------------------------------------------ matching */

static const char match_text[] =
    "# matching fixture\n"
    "[policy]\n"
    "version = 1\n"
    "\n"
    "[rule warmup]\n"                 /* line 5 */
    "calls = 0-4\n"
    "route = fp32\n"
    "\n"
    "[rule head]\n"                   /* line 9 */
    "region = *.fc.*, cls?.[ab]*\n"
    "route = fp32\n"
    "ef = off\n"
    "\n"
    "[rule sub]\n"                    /* line 14 */
    "comm = sub_*\n"
    "comm_size = -8, 16, 32-\n"
    "route = pmpi\n"
    "\n"
    "[rule backbone]\n"               /* line 19 */
    "datatype = MPI_FLOAT\n"
    "op = sum\n"
    "bytes = 1M-\n"
    "comm_size = 2-64\n"
    "route = binary\n"
    "ef = on\n"
    "segment = region\n"
    "\n"
    "[rule mid]\n"                    /* line 28 */
    "datatype = float, double\n"
    "bytes = 4KiB - 1MB\n"
    "route = ternary\n"
    "gamma = 0.7\n"
    "\n"
    "[default]\n"                     /* line 34 */
    "route = fp32\n";

typedef struct match_case {
    const char *region, *comm;
    int size;
    nf_dtype_t dt;
    nf_opkind_t op;
    uint64_t bytes, call;
    const char *rule;
    nf_route_t route;
    int line;
} match_case_t;

#define MiB (UINT64_C(1) << 20)
static const match_case_t match_cases[] = {
    /* warm-up: the first 5 calls of a communicator are fp32, whatever else */
    {"x.fc.w", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 0, "warmup", NF_ROUTE_FP32, 5},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 4, "warmup", NF_ROUTE_FP32, 5},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 5, "backbone", NF_ROUTE_BINARY, 19},
    /* first match wins: the head glob beats the backbone */
    {"net.fc.weight", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "head", NF_ROUTE_FP32, 9},
    {"cls1.bias", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "head", NF_ROUTE_FP32, 9},
    {"cls1.cias", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    {"cls12.bias", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    {"net.fc", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    /* communicator glob and size list */
    {NULL, "sub_rows", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "sub", NF_ROUTE_PMPI, 14},
    {NULL, "sub_rows", 12, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    {NULL, "sub_rows", 16, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "sub", NF_ROUTE_PMPI, 14},
    {NULL, "sub_rows", 1000, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "sub", NF_ROUTE_PMPI, 14},
    {NULL, NULL, 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    /* size ranges are inclusive, K/M binary */
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, MiB - 1, 9, "mid", NF_ROUTE_TERNARY, 28},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4096, 9, "mid", NF_ROUTE_TERNARY, 28},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4095, 9, "default", NF_ROUTE_FP32, 34},
    {NULL, "w", 65, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "default", NF_ROUTE_FP32, 34},
    /* datatype and op lists (the rule says MPI_FLOAT: any case and prefix) */
    {NULL, "w", 8, NF_DT_DOUBLE, NF_OP_MAX, 8192, 9, "mid", NF_ROUTE_TERNARY, 28},
    {NULL, "w", 8, NF_DT_DOUBLE, NF_OP_SUM, 4 * MiB, 9, "default", NF_ROUTE_FP32, 34},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9, "backbone", NF_ROUTE_BINARY, 19},
    {NULL, "w", 8, NF_DT_FLOAT, NF_OP_USER, 4 * MiB, 9, "default", NF_ROUTE_FP32, 34},
    {NULL, "w", 8, NF_DT_INT, NF_OP_SUM, 8192, 9, "default", NF_ROUTE_FP32, 34},
    /* not known (out of the enums): matches no datatype or op condition */
    {NULL, "w", 8, NF_DT_N, NF_OP_N, 4 * MiB, 9, "default", NF_ROUTE_FP32, 34},
    {NULL, "w", 8, NF_DT_FLOAT, (nf_opkind_t)1000, 4 * MiB, 9, "default", NF_ROUTE_FP32, 34},
    {NULL, "w", 8, (nf_dtype_t)-1, NF_OP_SUM, 8192, 9, "default", NF_ROUTE_FP32, 34},
};

START_TEST(test_match)
{
    const match_case_t *c = &match_cases[_i];
    nf_policy_query_t q = {c->region, c->comm, c->size, c->dt, c->op, c->bytes, c->call};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;

    ck_assert_int_eq(parse(match_text, strlen(match_text), &g, &p), NF_OK);
    ck_assert_msg(g.text[0] == '\0', "fixture should be clean: %s", g.text);
    nf_policy_match(p, &q, &a);
    ck_assert_msg(strcmp(a.rule, c->rule) == 0, "case %d: rule %s, expected %s", _i, a.rule, c->rule);
    ck_assert_int_eq(a.route, c->route);
    ck_assert_int_eq(a.line, c->line);
    ck_assert_str_eq(a.file, "t.policy");
    nf_policy_free(p);
}
END_TEST

START_TEST(test_actions)
{
    static const char no_default[] = HDR "[rule a]\ncalls = 3\nroute = fp32\n";
    nf_policy_query_t q = {NULL, "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 9};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;

    ck_assert_int_eq(parse(match_text, strlen(match_text), &g, &p), NF_OK);
    nf_policy_match(p, &q, &a);
    ck_assert_int_eq(a.ef, 1);
    ck_assert(a.gamma < 0);
    ck_assert_int_eq(a.segment, NF_POLICY_SEGMENT_REGION);
    ck_assert_int_eq(a.index, 3);
    ck_assert_uint_eq(nf_policy_fields(p), 0x7f);
    ck_assert_uint_eq(nf_policy_fields(NULL), 0);
    q.bytes = 8192;
    nf_policy_match(p, &q, &a);
    ck_assert(a.gamma == 0.7);
    ck_assert_int_eq(a.ef, -1);
    q.region = "a.fc.b";
    nf_policy_match(p, &q, &a);
    ck_assert_int_eq(a.ef, 0);
    q.region = NULL;
    q.bytes = 10;
    nf_policy_match(p, &q, &a);
    ck_assert_str_eq(a.rule, "default");
    ck_assert_int_eq(a.index, -1);
    nf_policy_free(p);

    /* No policy, or no [default]: the built-in pmpi. */
    nf_policy_match(NULL, &q, &a);
    ck_assert_int_eq(a.route, NF_ROUTE_PMPI);
    ck_assert_int_eq(a.line, 0);
    ck_assert_int_eq(parse(no_default, strlen(no_default), &g, &p), NF_OK);
    ck_assert_uint_eq(nf_policy_fields(p), NF_POLICY_F_CALLS);
    nf_policy_match(p, &q, &a);
    ck_assert_str_eq(a.rule, "built-in");
    ck_assert_int_eq(a.route, NF_ROUTE_PMPI);
    q.call = 3;
    nf_policy_match(p, &q, &a);
    ck_assert_str_eq(a.rule, "a");
    nf_policy_free(p);
}
END_TEST

START_TEST(test_explain)
{
    nf_policy_query_t q = {"net.fc.w", "w", 8, NF_DT_FLOAT, NF_OP_SUM, 4 * MiB, 7};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;
    char buf[2048], small[16];
    size_t n;

    ck_assert_int_eq(parse(match_text, strlen(match_text), &g, &p), NF_OK);
    n = nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_msg(strstr(buf, "rule warmup (t.policy:5): no match: calls 7 NOT in 0-4\n") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "rule head (t.policy:9): match: region 'net.fc.w' in *.fc.*, cls?.[ab]*\n"), "%s", buf);
    ck_assert_msg(strstr(buf, "=> route fp32 (ef off, gamma inherit, segment inherit) from rule head (t.policy:9)"),
                  "%s", buf);
    ck_assert_uint_eq(nf_policy_explain(p, &q, &a, small, sizeof(small)), n);
    ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
    q.bytes = 1;
    q.region = NULL;
    nf_policy_explain(p, &q, &a, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "no rule matched: [default] applies\n=> route fp32") != NULL, "%s", buf);
    nf_policy_free(p);
}
END_TEST

/* ------------------------------------------------------------ cache keys */

START_TEST(test_size_class)
{
    /* bytes cut points of match_text: mid 4096 and 1M + 1, backbone 1M */
    static const struct { uint64_t bytes; unsigned cls; } cases[] = {
        {0, 0}, {4095, 0}, {4096, 1}, {MiB - 1, 1}, {MiB, 2}, {MiB + 1, 3}, {UINT64_MAX, 3}};
    static const char no_bytes[] = HDR "[rule a]\ncalls = 3\nroute = fp32\n"
                                   "[rule b]\nbytes = 0-\nroute = fp32\n";
    static const char disabled[] = HDR "[rule a]\nbytes = 1K-2K\nroute = warp\n";
    nf_policy_t *p;
    diags_t g;

    ck_assert_int_eq(parse(match_text, strlen(match_text), &g, &p), NF_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(nf_policy_size_class(p, cases[i].bytes) == cases[i].cls, "bytes %" PRIu64 ": class %u",
                      cases[i].bytes, nf_policy_size_class(p, cases[i].bytes));
    nf_policy_free(p);
    ck_assert_uint_eq(nf_policy_size_class(NULL, 123), 0);
    ck_assert_int_eq(parse(no_bytes, strlen(no_bytes), &g, &p), NF_OK);
    ck_assert_uint_eq(nf_policy_size_class(p, UINT64_MAX), 0);
    nf_policy_free(p);
    ck_assert_int_eq(parse(disabled, strlen(disabled), &g, &p), NF_OK);
    ck_assert_uint_eq(nf_policy_size_class(p, 1500), 0);
    nf_policy_free(p);
}
END_TEST

typedef struct settled_case { const char *calls; uint64_t settled; } settled_case_t;

static const settled_case_t settled_cases[] = {
    {NULL, 0}, {"0-", 0}, {"0-4", 5}, {"3", 4}, {"10-", 10}, {"3, 7-9", 10}, {"3, 7-9, 20-", 20},
    {"30-, 3", 30}, {"-5", 6}, {"18446744073709551615", 18446744073709551615ull},
};

START_TEST(test_calls_settled)
{
    const settled_case_t *c = &settled_cases[_i];
    char text[256];
    nf_policy_t *p;
    diags_t g;

    /* A disabled rule's calls never count; another rule without calls neither. */
    snprintf(text, sizeof(text), HDR "[rule off]\ncalls = 0-99\nroute = warp\n[rule b]\nbytes = 1K-\n"
             "route = fp32\n%s%s%s", c->calls ? "[rule a]\ncalls = " : "", c->calls ? c->calls : "",
             c->calls ? "\nroute = binary\n" : "");
    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(nf_policy_calls_settled(p) == c->settled, "calls = %s: settled %" PRIu64, c->calls,
                  nf_policy_calls_settled(p));
    nf_policy_free(p);
    ck_assert_uint_eq(nf_policy_calls_settled(NULL), 0);
}
END_TEST

/* Random policies and queries: sizes of one class, and calls past the
 * settled index, never change which rule decides. */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* "lo-hi, ..." over [0, max]: sorted distinct cut points, so no overlap;
 * the last range may be open. */
static void rnd_ranges(uint64_t *s, uint64_t max, char *out, size_t len)
{
    int n = 1 + (int)(rnd(s) % 3);
    uint64_t at = 0;
    size_t used = 0;

    for (int i = 0; i < n && at <= max; i++) {
        uint64_t lo = at + rnd(s) % (max / 4 + 1), hi = lo + rnd(s) % (max / 4 + 1);
        const char *sep = i ? ", " : "";
        if (i == n - 1 && rnd(s) % 4 == 0)
            used += (size_t)snprintf(out + used, len - used, "%s%" PRIu64 "-", sep, lo);
        else if (hi == lo)
            used += (size_t)snprintf(out + used, len - used, "%s%" PRIu64, sep, lo);
        else
            used += (size_t)snprintf(out + used, len - used, "%s%" PRIu64 "-%" PRIu64, sep, lo, hi);
        at = hi + 1 + rnd(s) % 8;
    }
}

static size_t rnd_rule(uint64_t *s, int i, char *out, size_t len)
{
    static const char *const dts[] = {"float", "double", "int, float"}, *const ops[] = {"sum", "max"};
    char r[128];
    size_t used = (size_t)snprintf(out, len, "[rule r%d]\nroute = %s\n", i, rnd(s) % 10 ? "fp32" : "warp");

    if (rnd(s) % 10 < 7) {
        rnd_ranges(s, 4000, r, sizeof(r));
        used += (size_t)snprintf(out + used, len - used, "bytes = %s\n", r);
    }
    if (rnd(s) % 10 < 3) {
        rnd_ranges(s, 12, r, sizeof(r));
        used += (size_t)snprintf(out + used, len - used, "calls = %s\n", r);
    }
    if (rnd(s) % 10 < 3)
        used += (size_t)snprintf(out + used, len - used, "datatype = %s\n", dts[rnd(s) % 3]);
    if (rnd(s) % 10 < 3)
        used += (size_t)snprintf(out + used, len - used, "op = %s\n", ops[rnd(s) % 2]);
    if (rnd(s) % 10 < 2)
        used += (size_t)snprintf(out + used, len - used, "comm_size = 2-%d\n", 2 + (int)(rnd(s) % 6));
    return used;
}

static void rnd_query(uint64_t *s, nf_policy_query_t *q)
{
    static const nf_dtype_t dts[] = {NF_DT_FLOAT, NF_DT_DOUBLE, NF_DT_INT};

    q->region = NULL;
    q->comm_name = "w";
    q->comm_size = 1 + (int)(rnd(s) % 9);
    q->datatype = dts[rnd(s) % 3];
    q->op = rnd(s) % 2 ? NF_OP_SUM : NF_OP_MAX;
    q->bytes = rnd(s) % 5000;
    q->call = rnd(s) % 40;
}

static int decider(const nf_policy_t *p, const nf_policy_query_t *q)
{
    nf_policy_action_t a;

    nf_policy_match(p, q, &a);
    return a.index;
}

START_TEST(test_cache_keys_random)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(_i + 1), same = 0;
    char text[8192];
    size_t used = (size_t)snprintf(text, sizeof(text), HDR);
    int nrules = 1 + (int)(rnd(&seed) % 8);
    nf_policy_t *p;
    diags_t g;

    for (int i = 0; i < nrules; i++)
        used += rnd_rule(&seed, i, text + used, sizeof(text) - used);
    ck_assert_msg(parse(text, used, &g, &p) == NF_OK, "%s\n%s", text, g.text);
    for (int n = 0; n < 4000; n++) {
        nf_policy_query_t q, q2;
        rnd_query(&seed, &q);
        q2 = q;
        q2.bytes = rnd(&seed) % 5000;
        if (nf_policy_size_class(p, q.bytes) == nf_policy_size_class(p, q2.bytes)) {
            same++;
            ck_assert_msg(decider(p, &q) == decider(p, &q2), "bytes %" PRIu64 " and %" PRIu64
                          " share class %u but not the rule in:\n%s", q.bytes, q2.bytes,
                          nf_policy_size_class(p, q.bytes), text);
        }
        q2 = q;
        q2.call = nf_policy_calls_settled(p) + rnd(&seed) % 50;
        q.call = nf_policy_calls_settled(p);
        ck_assert_msg(decider(p, &q) == decider(p, &q2), "calls %" PRIu64 " and %" PRIu64
                      " past settled decide differently in:\n%s", q.call, q2.call, text);
    }
    ck_assert_uint_gt(same, 0);
    nf_policy_free(p);
}
END_TEST

/* A class boundary is real: just below and at each bound differ in class. */
START_TEST(test_size_class_bounds)
{
    static const char text[] = HDR "[rule a]\nbytes = 10-19, 40\nroute = fp32\n[rule b]\nbytes = -15, 30-\n"
                               "route = binary\n";
    static const uint64_t bounds[] = {10, 16, 20, 30, 40, 41};
    nf_policy_t *p;
    diags_t g;

    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
        ck_assert_uint_eq(nf_policy_size_class(p, bounds[i]), i + 1);
        ck_assert_uint_eq(nf_policy_size_class(p, bounds[i] - 1), i);
    }
    nf_policy_free(p);
}
END_TEST

/* ------------------------------------------------------------ hash */

static uint64_t hash_of(const char *text)
{
    nf_policy_t *p;
    diags_t g;
    uint64_t h;

    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    h = nf_policy_hash(p);
    nf_policy_free(p);
    return h;
}

START_TEST(test_hash)
{
    static const char base[] = HDR "[rule a]\nbytes = 1M-\nroute = binary\n[default]\nroute = fp32\n";
    static const char *const same[] = {
        /* comments, spacing, key order, units, settings: same decisions */
        "# c\n[policy]\n  version=1\nstats = 1\n\n[rule a] ; x\nroute = binary ; y\nbytes = 1048576 -\n"
        "[default]\nroute=fp32\n",
        HDR "cxl_node = 3\n[rule a]\nbytes = 1MiB-\nROUTE = Binary\n[default]\nroute = fp32\n",
        "\xEF\xBB\xBF[policy]\r\nversion = 1\r\n[Rule a]\r\nbytes = 1M-\r\nroute = binary\r\n"
        "[DEFAULT]\r\nroute = fp32\r\n",
    };
    static const char *const differ[] = {
        HDR "[rule a]\nbytes = 1M-\nroute = ternary\n[default]\nroute = fp32\n",
        HDR "[rule a]\nbytes = 2M-\nroute = binary\n[default]\nroute = fp32\n",
        HDR "[rule b]\nbytes = 1M-\nroute = binary\n[default]\nroute = fp32\n",
        HDR "[rule a]\nbytes = 1M-\nroute = binary\n[default]\nroute = pmpi\n",
        HDR "[rule a]\nbytes = 1M-\nroute = binary\n",
        HDR "[rule a]\nbytes = 1M-\nroute = binary\nef = off\n[default]\nroute = fp32\n",
        HDR "[rule a]\nbytes = 1M-\nroute = binary\ngamma = 0\n[default]\nroute = fp32\n",
        HDR "[rule a]\nbytes = 1M-\nroute = binary\n[rule z]\nroute = binary\nfoo = 1\n[rule y]\nroute = fp32\n"
        "[default]\nroute = fp32\n",
    };
    uint64_t h = hash_of(base);

    ck_assert(h != 0);
    ck_assert(nf_policy_hash(NULL) == 0);
    ck_assert(hash_of(base) == h);
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
        ck_assert_msg(hash_of(same[i]) == h, "same[%zu] hashes differently", i);
    for (size_t i = 0; i < sizeof(differ) / sizeof(differ[0]); i++)
        ck_assert_msg(hash_of(differ[i]) != h, "differ[%zu] hashes the same", i);
}
END_TEST

/* Settings parse; numbers do not depend on the program's locale. */
START_TEST(test_settings)
{
    static const char text[] = "[policy]\nversion = 1\ncxl_node = auto\ntrace = /tmp/t.jsonl\nstats = out.json\n"
                               "[rule a]\nroute = ternary\ngamma = 1.25e0\n";
    nf_policy_query_t q = {NULL, "w", 2, NF_DT_FLOAT, NF_OP_SUM, 4, 0};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;
    uint64_t v;

    setlocale(LC_NUMERIC, "de_DE.UTF-8"); /* where installed: a decimal comma must not matter */
    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_int_eq(nf_policy_cxl_node(p), -1);
    ck_assert_str_eq(nf_policy_trace(p), "/tmp/t.jsonl");
    ck_assert_str_eq(nf_policy_stats(p), "out.json");
    nf_policy_match(p, &q, &a);
    ck_assert(a.gamma == 1.25);
    nf_policy_free(p);
    ck_assert_int_eq(nf_policy_parse_size("64K", &v), NF_OK);
    ck_assert_uint_eq(v, 65536);
    ck_assert_int_eq(nf_policy_parse_size("2GiB", &v), NF_OK);
    ck_assert_uint_eq(v, UINT64_C(2) << 30);
    ck_assert_int_eq(nf_policy_parse_size("1 K", &v), NF_ERR_INVALID);
    ck_assert_int_eq(nf_policy_parse_size("-1", &v), NF_ERR_INVALID);
}
END_TEST

/* Rules name datatypes and ops as nf_types.h parses them: any case, with or
 * without MPI_, aliases included; queries carry the enums. */
typedef struct name_case { const char *dt, *op; nf_dtype_t qdt; nf_opkind_t qop; int hit; } name_case_t;

static const name_case_t name_cases[] = {
    {"MPI_LONG_LONG_INT", "MPI_BXOR", NF_DT_LONG_LONG, NF_OP_BXOR, 1},
    {"long_long", "bxor", NF_DT_LONG_LONG, NF_OP_BXOR, 1},
    {"Mpi_Real4", "Sum", NF_DT_REAL, NF_OP_SUM, 1},
    {"c_complex, float", "no_op", NF_DT_C_FLOAT_COMPLEX, NF_OP_NO_OP, 1},
    {"bool", "user", NF_DT_C_BOOL, NF_OP_USER, 1},
    {"derived, other", "max", NF_DT_OTHER, NF_OP_MAX, 1},
    {"long_long", "bxor", NF_DT_LONG, NF_OP_BXOR, 0},
    {"float", "sum, max", NF_DT_FLOAT, NF_OP_MIN, 0},
};

START_TEST(test_names)
{
    const name_case_t *c = &name_cases[_i];
    nf_policy_query_t q = {NULL, "w", 2, c->qdt, c->qop, 4, 0};
    nf_policy_action_t a;
    nf_policy_t *p;
    diags_t g;
    char text[256];

    snprintf(text, sizeof(text), HDR "[rule a]\ndatatype = %s\nop = %s\nroute = fp32\n", c->dt, c->op);
    ck_assert_int_eq(parse(text, strlen(text), &g, &p), NF_OK);
    ck_assert_msg(g.count[NF_POLICY_DISABLED] == 0, "%s", g.text);
    nf_policy_match(p, &q, &a);
    ck_assert_msg(strcmp(a.rule, c->hit ? "a" : "built-in") == 0, "case %d: rule %s", _i, a.rule);
    nf_policy_free(p);
}
END_TEST

static Suite *policy_suite(void)
{
    Suite *s = suite_create("policy");
    TCase *t = tcase_create("parse");

    tcase_add_loop_test(t, test_malformed, 0, (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
    tcase_add_test(t, test_bad_rule_rest_loads);
    tcase_add_test(t, test_long_lines);
    tcase_add_test(t, test_too_many_rules);
    tcase_add_test(t, test_files);
    tcase_add_loop_test(t, test_special_files, 0,
                        (int)(sizeof(special_cases) / sizeof(special_cases[0])));
    tcase_add_test(t, test_settings);
    tcase_add_loop_test(t, test_names, 0, (int)(sizeof(name_cases) / sizeof(name_cases[0])));
    suite_add_tcase(s, t);
    t = tcase_create("match");
    tcase_add_loop_test(t, test_match, 0, (int)(sizeof(match_cases) / sizeof(match_cases[0])));
    tcase_add_test(t, test_actions);
    tcase_add_test(t, test_explain);
    tcase_add_test(t, test_hash);
    suite_add_tcase(s, t);
    t = tcase_create("cache keys");
    tcase_add_test(t, test_size_class);
    tcase_add_test(t, test_size_class_bounds);
    tcase_add_loop_test(t, test_calls_settled, 0, (int)(sizeof(settled_cases) / sizeof(settled_cases[0])));
    tcase_add_loop_test(t, test_cache_keys_random, 0, 64);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(policy_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

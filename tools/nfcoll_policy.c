/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nfcoll_policy: check an admission policy file (and the layout and profile
 * files it names), or explain the route it gives one call. A thin front end
 * to lib/policy; no MPI_Init.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_layout.h"
#include "nf_policy.h"
#include "nf_profile.h"

enum { EXIT_OK = 0, EXIT_PROBLEM = 1, EXIT_USAGE = 2 };

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: nfcoll_policy check FILE...\n"
            "       nfcoll_policy explain FILE --bytes N --comm-size P [--datatype T] [--op OP]\n"
            "                     [--comm-name NAME] [--region NAME] [--call K]\n"
            "       nfcoll_policy -h | --help | -V | --version\n"
            "\n"
            "Check or explain a libnfcoll admission policy file (see nfcoll-policy(5)).\n"
            "\n"
            "  check      report every problem as FILE:LINE, in the policy and in the\n"
            "             layout (regions =) and profile (profile =) files it names, and\n"
            "             count their entries; exit 1 if any of them does not load or a\n"
            "             rule, setting or layout line was dropped, 0 otherwise\n"
            "  explain    print the rules tried for one call, which fields matched, and\n"
            "             the route chosen with the rule (FILE:LINE) that chose it; for\n"
            "             route = auto, the profile's entry and the error-feedback decay\n"
            "             that runs (the rule's, the profile's or the settings')\n"
            "\n"
            "  --bytes N        message size in bytes (suffixes K, M, G: 1M = 1048576)\n"
            "  --comm-size P    processes in the communicator\n"
            "  --datatype T     MPI datatype name, e.g. float, double, int (default float)\n"
            "  --op OP          MPI op name, e.g. sum, max (default sum)\n"
            "  --comm-name NAME communicator name (default MPI_COMM_WORLD)\n"
            "  --region NAME    bound region name (default: none)\n"
            "  --call K         0-based call index on the communicator (default 0)\n"
            "  -h, --help       this text\n"
            "  -V, -v, --version\n"
            "                   the libnfcoll version and the MPI it was built with\n"
            "\n"
            "A FILE that begins with '-' is given as ./-FILE or after --.\n"
            "Exit status: 0 loads, 1 a problem (see above), 2 usage error.\n");
}

/* --version: as every nfcoll program and benchmark says it. */
static void print_version(void)
{
    printf("nfcoll_policy (libnfcoll) %s\nbuilt with %s\n", PACKAGE_VERSION,
           NF_MPI_VERSION_STRING);
}

/* -h/--help, -V/-v/--version: 1 (and answered), else 0. */
static int help_or_version(const char *a)
{
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
        usage(stdout);
        return 1;
    }
    if (strcmp(a, "-V") == 0 || strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0) {
        print_version();
        return 1;
    }
    return 0;
}

typedef struct tally { int errors, dropped, warnings; } tally_t;

/* GCC-style "file:line: severity: message", on stderr. */
static void print_diag(const nf_policy_diag_t *d, void *arg)
{
    static const char *const sev[] = {"warning", "warning", "error"};
    tally_t *t = arg;

    if (d->line > 0)
        fprintf(stderr, "%s:%d: %s: %s\n", d->file, d->line, sev[d->severity], d->message);
    else
        fprintf(stderr, "%s: %s: %s\n", d->file, sev[d->severity], d->message);
    if (d->severity == NF_POLICY_ERROR)
        t->errors++;
    else if (d->severity == NF_POLICY_DISABLED)
        t->dropped++;
    else
        t->warnings++;
}

/* The layout `regions` names: its problems, then one summary line. */
static int check_layout(const char *policy, const char *path)
{
    tally_t t = {0, 0, 0};
    nf_layout_t *l = NULL;
    size_t n;

    if (nf_layout_load(path, print_diag, &t, &l) != NF_OK) {
        printf("%s: regions %s: does not load: no buffer gets regions\n", policy, path);
        return EXIT_PROBLEM;
    }
    n = nf_layout_count(l);
    printf("%s: regions %s: %s: %zu entr%s, %d line%s dropped, hash %016" PRIx64 "\n", policy, path,
           t.dropped ? "loads with problems" : "ok", n, n == 1 ? "y" : "ies", t.dropped, t.dropped == 1 ? "" : "s",
           nf_layout_hash(l));
    nf_layout_free(l);
    return t.dropped ? EXIT_PROBLEM : EXIT_OK;
}

/* The profile `profile` names: its problems, then entries by route. */
static int check_profile(const char *policy, const char *path)
{
    tally_t t = {0, 0, 0};
    nf_profile_t *p = NULL;
    size_t n, by[NF_ROUTE_COUNT] = {0};

    if (nf_profile_load(path, print_diag, &t, &p) != NF_OK) {
        printf("%s: profile %s: does not load: route = auto would take fp32 everywhere\n", policy, path);
        return EXIT_PROBLEM;
    }
    n = nf_profile_count(p);
    size_t keep = 0, cut = 0;
    for (size_t i = 0; i < n; i++) {
        const nf_profile_entry_t *e = nf_profile_entry(p, i);
        by[e->route]++;
        keep += e->ef_decay >= 0 && e->ef_decay == NF_PROFILE_DECAY_KEEP;
        cut += e->ef_decay >= 0 && e->ef_decay != NF_PROFILE_DECAY_KEEP;
    }
    /* by route: the low-bit ones in the table's order, then fp32 (what a
     * profile may hold: nf_profile_route_ok) */
    printf("%s: profile %s: ok: %zu entr%s (", policy, path, n, n == 1 ? "y" : "ies");
    for (int r = 0; r < NF_ROUTE_COUNT; r++)
        if (r != NF_ROUTE_FP32 && nf_profile_route_ok((nf_route_t)r))
            printf("%zu %s, ", by[r], nf_route_name((nf_route_t)r));
    printf("%zu fp32; ef_decay: %zu whole, %zu cut, %zu the settings'), hash %016" PRIx64 "\n",
           by[NF_ROUTE_FP32], keep, cut, n - keep - cut, nf_profile_hash(p));
    nf_profile_free(p);
    return EXIT_OK;
}

static int check_one(const char *file)
{
    tally_t t = {0, 0, 0};
    nf_policy_t *p = NULL;
    int rc;

    if (nf_policy_load(file, print_diag, &t, &p) != NF_OK) {
        printf("%s: does not load: every call would take pmpi\n", file);
        return EXIT_PROBLEM;
    }
    printf("%s: %s: %d rule%s (%d disabled), %s, %d warning%s, hash %016" PRIx64 "\n", file,
           t.dropped ? "loads with problems" : "ok", nf_policy_rule_count(p),
           nf_policy_rule_count(p) == 1 ? "" : "s", nf_policy_disabled_count(p),
           t.dropped ? "some rules or settings dropped" : "nothing dropped", t.warnings,
           t.warnings == 1 ? "" : "s", nf_policy_hash(p));
    rc = t.dropped ? EXIT_PROBLEM : EXIT_OK;
    if (nf_policy_regions(p) != NULL && check_layout(file, nf_policy_regions(p)) != EXIT_OK)
        rc = EXIT_PROBLEM;
    if (nf_policy_profile(p) != NULL && check_profile(file, nf_policy_profile(p)) != EXIT_OK)
        rc = EXIT_PROBLEM;
    if (nf_policy_calibrate(p) != NULL)
        printf("%s: calibrate %s: written by a calibration run (%u calls per segment, admit_cosine %g)\n", file,
               nf_policy_calibrate(p), nf_policy_calibrate_calls(p), nf_policy_admit_cosine(p));
    nf_policy_free(p);
    return rc;
}

/* check [-h|-V] [--] FILE...: an option-like FILE is a usage error. */
static int cmd_check(int argc, char **argv)
{
    int rc = EXIT_OK, i = 0;

    if (argc >= 1 && help_or_version(argv[0]))
        return EXIT_OK;
    if (argc >= 1 && strcmp(argv[0], "--") == 0)
        i = 1;
    else
        for (int k = 0; k < argc; k++)
            if (argv[k][0] == '-' && argv[k][1] != '\0') {
                fprintf(stderr, "nfcoll_policy: check: unknown option '%s' (a file named so: "
                        "./%s, or after --)\n", argv[k], argv[k]);
                usage(stderr);
                return EXIT_USAGE;
            }
    if (argc - i < 1) {
        fprintf(stderr, "nfcoll_policy: check: no policy file\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    for (; i < argc; i++)
        if (check_one(argv[i]) != EXIT_OK)
            rc = EXIT_PROBLEM;
    return rc;
}

static int parse_u64_arg(const char *opt, const char *v, uint64_t *out)
{
    char *end;
    unsigned long long x;

    errno = 0;
    x = strtoull(v, &end, 10);
    if (v[0] == '-' || end == v || *end != '\0' || errno != 0) {
        fprintf(stderr, "nfcoll_policy: bad %s '%s' (expected a non-negative integer)\n", opt, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* "sum|prod|...|user" from the one table of ops (skip the first '|'). */
#define X_OP_NAME(e, s, h) "|" s
static const char op_list[] = NF_OPS(X_OP_NAME);
#undef X_OP_NAME

/* --datatype and --op take the names a policy file takes (nf_types.h). */
static int parse_name_arg(const char *opt, const char *v, int (*parse)(const char *),
                          const char *expected, int *out)
{
    int k = parse(v);

    if (k < 0) {
        fprintf(stderr, "nfcoll_policy: unknown %s '%s' (expected %s)\n", opt, v, expected);
        return -1;
    }
    *out = k;
    return 0;
}

/* One explain option into q; bit 1 of *have: --bytes seen, bit 2: --comm-size. */
static int explain_opt(int c, const char *arg, nf_policy_query_t *q, unsigned *have)
{
    uint64_t v;
    int k;

    switch (c) {
    case 'b':
        if (nf_policy_parse_size(arg, &q->bytes) != NF_OK) {
            fprintf(stderr, "nfcoll_policy: bad --bytes '%s' (expected e.g. 4096, 64K, 1M)\n", arg);
            return -1;
        }
        *have |= 1;
        return 0;
    case 'p':
        if (parse_u64_arg("--comm-size", arg, &v) != 0 || v < 1 || v > INT_MAX) {
            fprintf(stderr, "nfcoll_policy: --comm-size must be 1..%d\n", INT_MAX);
            return -1;
        }
        q->comm_size = (int)v;
        *have |= 2;
        return 0;
    case 't':
        if (parse_name_arg("--datatype", arg, nf_dtype_parse,
                           "an MPI datatype name such as float, double, int or MPI_INT32_T", &k) != 0)
            return -1;
        q->datatype = (nf_dtype_t)k;
        return 0;
    case 'o':
        if (parse_name_arg("--op", arg, nf_opkind_parse, op_list + 1, &k) != 0)
            return -1;
        q->op = (nf_opkind_t)k;
        return 0;
    case 'c': q->comm_name = arg; return 0;
    case 'r': q->region = arg; return 0;
    case 'k': return parse_u64_arg("--call", arg, &q->call);
    }
    return -1;
}

static int parse_explain_opts(int argc, char **argv, nf_policy_query_t *q)
{
    static const struct option opts[] = {
        {"bytes", required_argument, NULL, 'b'}, {"comm-size", required_argument, NULL, 'p'},
        {"datatype", required_argument, NULL, 't'}, {"op", required_argument, NULL, 'o'},
        {"comm-name", required_argument, NULL, 'c'}, {"region", required_argument, NULL, 'r'},
        {"call", required_argument, NULL, 'k'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0}};
    unsigned have = 0;
    int c;

    while ((c = getopt_long(argc, argv, "hVv", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            exit(EXIT_OK);
        }
        if (c == 'V' || c == 'v') {
            print_version();
            exit(EXIT_OK);
        }
        if (c == '?') {
            usage(stderr);
            return -1;
        }
        if (explain_opt(c, optarg, q, &have) != 0)
            return -1;
    }
    if (have != 3) {
        fprintf(stderr, "nfcoll_policy: explain needs --bytes and --comm-size\n");
        return -1;
    }
    return 0;
}

/* route = auto: the profile's entry for the call (its region, or
 * buffer:BYTES), the route and decay it gives, with their evidence. */
static void explain_profile(const nf_policy_t *pol, const nf_policy_query_t *q, const nf_policy_action_t *a)
{
    tally_t t = {0, 0, 0};
    nf_profile_t *p = NULL;
    char buf[48], seg[48];
    const char *path = nf_policy_profile(pol);
    const char *name = q->region;

    if (path == NULL) {
        printf("   profile: none named (profile =): every segment takes %s\n", nf_route_name(a->route));
        return;
    }
    if (nf_profile_load(path, print_diag, &t, &p) != NF_OK) {
        printf("   profile %s does not load (see above): every segment takes %s\n", path, nf_route_name(a->route));
        return;
    }
    if (name == NULL) {
        snprintf(buf, sizeof(buf), "buffer:%" PRIu64, q->bytes);
        name = buf;
    }
    const nf_profile_entry_t *e = nf_profile_find(p, name);
    uint64_t m = q->bytes / 4; /* the floats of a float call, as the library counts them */
    if (e == NULL) {
        printf("   profile %s: no entry for %s: %s\n", path, name, nf_route_name(a->route));
    } else if (e->elements != m) {
        printf("   profile %s:%d: %s was measured on %" PRIu64 " elements, this call has %" PRIu64
               ": a stale entry, %s (and no decay from it)\n", path, nf_profile_line(p, e), name,
               e->elements, m, nf_route_name(a->route));
    } else {
        printf("   profile %s:%d: %s: route %s (cos_binary %.4f, cos_ternary %.4f", path,
               nf_profile_line(p, e), name, nf_route_name(e->route), e->cos_binary, e->cos_ternary);
        if (!isnan(e->cos_int[0])) /* a v3 profile's entry: the cosine that admits int4 */
            printf(", cos_int4 %.4f", e->cos_int[0]);
        printf(" over %" PRIu64 " calls)", e->calls);
        if (isnan(e->lag_cosine))
            snprintf(seg, sizeof(seg), "not measured");
        else
            snprintf(seg, sizeof(seg), "%.4f", e->lag_cosine);
        printf(", lag_cosine %s: ef_decay ", seg);
        if (a->ef_decay >= 0)
            printf("%g from the rule (the profile's %s is not used)\n", a->ef_decay,
                   e->ef_decay >= 0 ? "choice" : "'-'");
        else if (e->ef_decay >= 0)
            printf("%g from the profile\n", e->ef_decay);
        else
            printf("the settings' (NFCOLL_EF_DECAY)\n");
    }
    nf_profile_free(p);
}

static int cmd_explain(int argc, char **argv)
{
    nf_policy_query_t q = {NULL, "MPI_COMM_WORLD", 0, NF_DT_FLOAT, NF_OP_SUM, 0, 0};
    nf_policy_action_t a;
    tally_t t = {0, 0, 0};
    nf_policy_t *p = NULL;
    const char *file;
    char *text;
    size_t n;
    int loaded;

    if (argc >= 1 && help_or_version(argv[0]))
        return EXIT_OK;
    if (argc < 1 || argv[0][0] == '-') {
        usage(stderr);
        return EXIT_USAGE;
    }
    file = argv[0];
    optind = 1;                 /* argv[0] is FILE: getopt starts after it */
    if (parse_explain_opts(argc, argv, &q) != 0)
        return EXIT_USAGE;
    if (optind != argc) {
        fprintf(stderr, "nfcoll_policy: unexpected argument '%s'\n", argv[optind]);
        return EXIT_USAGE;
    }
    loaded = nf_policy_load(file, print_diag, &t, &p) == NF_OK;
    printf("call: region %s, comm '%s' of size %d, datatype %s, op %s, %" PRIu64 " bytes, call %" PRIu64
           "\n", q.region != NULL ? q.region : "(none)", q.comm_name, q.comm_size,
           nf_dtype_name(q.datatype), nf_opkind_name(q.op), q.bytes, q.call);
    n = nf_policy_explain(p, &q, &a, NULL, 0);
    text = malloc(n + 1);
    if (text == NULL) {
        nf_policy_free(p);
        return EXIT_PROBLEM;
    }
    nf_policy_explain(p, &q, &a, text, n + 1);
    if (!loaded)
        printf("%s does not load (see above): libnfcoll would send every call to pmpi\n", file);
    fputs(text, stdout);
    free(text);
    if (loaded && a.route_auto)
        explain_profile(p, &q, &a);
    nf_policy_free(p);
    return loaded ? EXIT_OK : EXIT_PROBLEM;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "help") == 0 || help_or_version(argv[1])) {
        if (argv[1][0] != '-')
            usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "check") == 0)
        return cmd_check(argc - 2, argv + 2);
    if (strcmp(argv[1], "explain") == 0)
        return cmd_explain(argc - 2, argv + 2);
    fprintf(stderr, "nfcoll_policy: unknown command '%s' (expected check or explain)\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}

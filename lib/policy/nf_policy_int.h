/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inside the policy layer: what its modules share. parse.c builds a policy
 * from text (and hashes it), match.c decides per call from it, lint.c warns
 * about rules that never apply and explains decisions. layout.c and
 * profile.c read the two data files a policy names (regions, profile)
 * with text.c's reader, lines and fields. Not for other layers: they use
 * nf_policy.h, nf_layout.h and nf_profile.h.
 *
 * Object dependencies run one way, layout, profile -> text -> parse -> lint
 * -> match (check_layers.sh rejects cycles between objects): lint reports
 * through the public nf_policy_diag_fn, never by calling back into parse.c.
 */
#ifndef NF_POLICY_INT_H
#define NF_POLICY_INT_H

#include <stddef.h>
#include <stdint.h>

#include "nf_policy.h"

#define NF_POL_MAX_LIST 16           /* values per key */
#define NF_POL_MAX_FILE (1u << 20)   /* bytes */
#define NF_POL_MAX_NAME 64           /* rule name length */
#define NF_POL_MAX_RULES 1024        /* keeps load-time checks quadratic but small */

/* Bit i of a 64-bit mask. */
#define NF_BIT(i) (UINT64_C(1) << (i))

typedef struct { uint64_t lo, hi; } nf_range_t;
typedef struct { int n; nf_range_t r[NF_POL_MAX_LIST]; } nf_ranges_t;
typedef struct { int n; char *g[NF_POL_MAX_LIST]; } nf_globs_t;

/* Keys, in the order the hash and explain visit them. Match keys first. */
typedef enum nf_key {
    K_REGION, K_COMM, K_COMM_SIZE, K_DATATYPE, K_OP, K_BYTES, K_CALLS,
    K_NMATCH,
    K_ROUTE = K_NMATCH, K_EF, K_EF_DECAY, K_GAMMA, K_SEGMENT, K_WARMUP,
    K_SCALE_BLOCK, K_BLOCK,
    K_NKEYS
} nf_key_t;

typedef struct nf_rule {
    char *name;
    int line;
    int disabled;
    unsigned set;                 /* bit per nf_key_t seen */
    int key_line[K_NKEYS];
    char *text[K_NKEYS];          /* values as written, for explain */
    nf_globs_t region, comm;
    nf_ranges_t comm_size, bytes, calls;
    uint64_t datatypes, ops;      /* bit per nf_dtype_t / nf_opkind_t */
    nf_route_t route;             /* NF_ROUTE_FP32 when route_auto */
    int route_auto;
    int ef;
    double ef_decay;
    long scale_block;             /* < 0 inherit */
    long block;                   /* integer routes' scale block; 0: not set (the default) */
    double gamma;
    nf_policy_segment_t segment;
    uint64_t warmup;              /* calls a low-bit segment runs fp32 first */
} nf_rule_t;

struct nf_policy {
    char *file;
    nf_rule_t *rules;
    int nrules, cap, ndisabled;
    nf_rule_t dflt;
    int has_default;              /* a [default] section exists and is enabled */
    int cxl_node;
    char *stats, *trace;
    char *regions, *calibrate, *profile; /* resolved against the policy file's directory */
    unsigned calibrate_calls;
    double admit_cosine;
    nf_policy_health_t health;
    uint64_t hash;
    uint64_t *bounds;             /* sorted, distinct: where some enabled rule's bytes test flips */
    unsigned nbounds;
    uint64_t calls_settled;
};

/* Key names by nf_key_t (match.c): parse.c looks keys up, explain prints them. */
extern const char *const nf_pol_key_names[K_NKEYS];

/* ---------------------------------------------------------------- parse.c */

/* Unsigned decimal, nothing else (no sign, no spaces); with suffix, also a
 * binary suffix (K, KB, KiB, M, ... T). NF_OK, NF_ERR_INVALID, or
 * NF_ERR_CAPACITY above UINT64_MAX. */
nf_status_t nf_pol_parse_u64(const char *s, int suffix, uint64_t *v);

/* Where diagnostics go when the caller gives no nf_policy_diag_fn:
 * nf_log_error or nf_log_warn as "file:line: message". */
void nf_pol_default_diag(const nf_policy_diag_t *d, void *arg);

/* ---------------------------------------------------------------- match.c */

/* fnmatch(3) without flags: locale-free, allocation-free, linear. */
int nf_pol_glob_match(const char *pattern, const char *s);

/* 0 when pattern has an unterminated '[' (parse.c rejects it). */
int nf_pol_glob_valid(const char *pattern);

/* One condition of r (k < K_NMATCH) against q; all of r's conditions. */
int nf_pol_match_key(const nf_rule_t *r, int k, const nf_policy_query_t *q);
int nf_pol_match_rule(const nf_rule_t *r, const nf_policy_query_t *q);

/* Once the rules are final: the size-class bounds and calls_settled.
 * NF_OK or NF_ERR_NO_MEMORY. */
nf_status_t nf_pol_index(nf_policy_t *p);

/* ----------------------------------------------------------------- lint.c */

/* Warnings about enabled rules that do nothing (gamma off ternary, ef_decay
 * off the routes with a residual or with ef = off, warmup off the low-bit
 * routes, scale_block off binary, block off the integer routes, low-bit
 * routes on types that cannot go low-bit, rules an earlier rule shadows,
 * route = auto without a profile), each through fn as an NF_POLICY_WARNING. */
void nf_pol_lint(const nf_policy_t *p, nf_policy_diag_fn fn, void *arg);

/* ----------------------------------------------------------------- text.c */

/* The layer's line-oriented data files: layout.c and profile.c. */

#define NF_POL_MAX_DATA (16u << 20)  /* bytes of a layout or profile file */
#define NF_POL_MAX_SEGNAME 128       /* region or segment name, with its NUL */

/* One diagnostic through fn (NULL: nf_pol_default_diag). */
void nf_pol_diagf(nf_policy_diag_fn fn, void *arg, nf_policy_severity_t sev, const char *file, int line,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Read a whole file into *text (malloc'd, NUL-terminated; it may hold NULs
 * of its own) and *len. Opened O_RDONLY|O_NONBLOCK and refused unless fstat
 * says it is a regular file (a FIFO or a device could block or never end).
 * `what` names it in messages ("layout file"). Errors are said through fn
 * at line 0: NF_ERR_IO (open, read, not a regular file), NF_ERR_PARSE (more
 * than NF_POL_MAX_DATA bytes), NF_ERR_NO_MEMORY. */
nf_status_t nf_pol_read_file(const char *path, const char *what, nf_policy_diag_fn fn, void *arg,
                             char **text, size_t *len);

/* Lines of text in memory: set pos and end, line = 0; each call gives the
 * next line without its '\n' (nor a '\r' before it) and counts it in line.
 * 0 at the end. */
typedef struct nf_pol_lines { const char *pos, *end; int line; } nf_pol_lines_t;
int nf_pol_next_line(nf_pol_lines_t *it, const char **s, size_t *len);

/* A blank line, or one whose first non-blank character is '#'. */
int nf_pol_comment(const char *s, size_t len);

/* The whitespace-separated fields of a line, pointing into it. Returns how
 * many there are; only the first max are stored. */
typedef struct nf_pol_field { const char *s; size_t len; } nf_pol_field_t;
int nf_pol_fields(const char *s, size_t len, nf_pol_field_t *f, int max);

/* A field (or line) for a message: at most size - 4 bytes, bytes outside
 * printable ASCII and space as '?', "..." when cut. Returns buf. */
const char *nf_pol_field_show(const nf_pol_field_t *f, char *buf, size_t size);

/* A field as an unsigned decimal (nf_pol_parse_u64 without suffix): NF_OK,
 * or its error when it is not one (NF_ERR_INVALID, also for a field of 32
 * bytes or more; NF_ERR_CAPACITY above UINT64_MAX). */
nf_status_t nf_pol_field_u64(const nf_pol_field_t *f, uint64_t *v);

/* A region or segment name: 1 to NF_POL_MAX_SEGNAME - 1 bytes of printable
 * ASCII other than space (0x21-0x7e). NF_OK, or NF_ERR_INVALID with the
 * reason, naming the field `label`, in why. */
nf_status_t nf_pol_name_check(const nf_pol_field_t *f, const char *label, char *why, size_t size);

#endif /* NF_POLICY_INT_H */

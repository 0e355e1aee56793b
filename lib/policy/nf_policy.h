/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Admission policy file: parser, matcher and linter. No MPI calls: the
 * checker tool, the unit tests and the fuzzer link this alone (with
 * lib/util and libinih). The file format is documented in
 * man/nfcoll-policy.5; datatype and op names are nf_types.h's. The two
 * data files a policy names have their own modules in this layer:
 * nf_layout.h (`regions`) and nf_profile.h (`calibrate`, `profile`); their
 * loaders report through this header's nf_policy_diag_fn.
 *
 * Lifecycle: load once (nf_policy_load), match per call (nf_policy_match:
 * no allocation, no I/O, no locale dependence), free at finalize. A loaded
 * policy is immutable, so concurrent matching from several threads is safe.
 */
#ifndef NF_POLICY_H
#define NF_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "nfcoll.h"
#include "nf_types.h"

typedef struct nf_policy nf_policy_t;

/** Versions of the file format this library reads: 1; 2, which adds the
 * rule key ef_decay; 3, which adds warmup and scale_block; 4, which adds
 * the integer routes (route = int4, int3, int2: the route table's rows with
 * an integer code) and their key block. A file that uses a key or such a
 * route must say at least the version that brought it, so that a library
 * without it refuses the whole file (every call pmpi) rather than dropping
 * those rules and running the rest. */
#define NF_POLICY_VERSION 4
#define NF_POLICY_VERSION_MIN 1
#define NF_POLICY_VERSIONS "1, 2, 3 or 4"
/** The version that brought the integer routes and `block`. */
#define NF_POLICY_VERSION_INT 4

/** The largest `warmup` (calls). */
#define NF_POLICY_WARMUP_MAX 1000000000u

/** What a call looks like to the matcher. A NULL string matches no rule that
 * constrains that field (e.g. a buffer without a bound region never matches
 * a rule with a `region` key); so does a datatype or op outside its enum
 * (NF_DT_N, NF_OP_N: "not known"). Matching compares enum bits: no string
 * work per call for datatypes and ops. */
typedef struct nf_policy_query {
    const char *region;    /* bound region name, or NULL */
    const char *comm_name; /* communicator name, or NULL */
    int comm_size;
    nf_dtype_t datatype;   /* from nf_types.h */
    nf_opkind_t op;
    uint64_t bytes;
    uint64_t call;
} nf_policy_query_t;

/** Scale segment requested by a rule. */
typedef enum nf_policy_segment {
    NF_POLICY_SEGMENT_INHERIT = 0, /**< not set: the library's default */
    NF_POLICY_SEGMENT_REGION = 1,  /**< one scale per bound region */
    NF_POLICY_SEGMENT_BUFFER = 2   /**< one scale for the whole buffer */
} nf_policy_segment_t;

/** What the policy decides for a call. Strings point into the policy (or to
 * static storage for the built-in default) and live as long as it does. */
typedef struct nf_policy_action {
    nf_route_t route;            /**< with route_auto: NF_ROUTE_FP32 */
    int route_auto;              /**< 1 for `route = auto`: each segment takes the
                                      profile's route (nf_profile_find), and `route`,
                                      fp32, where the profile has no entry */
    int ef;                      /**< error feedback: -1 inherit (NFCOLL_EF), 0 off, 1 on */
    double ef_decay;             /**< the residual's factor when the next call adds it, in
                                      [0, 1]; < 0: inherit (NFCOLL_EF_DECAY, default 1) */
    double gamma;                /**< ternary gate; < 0: inherit (default 1.0) */
    nf_policy_segment_t segment;
    uint64_t warmup;             /**< a low-bit segment's first `warmup` calls run fp32
                                      (docs/design.md, "Warm-up"); 0: none */
    const char *rule;            /**< rule name, "default" or "built-in" */
    int index;                   /**< rule index in file order; -1 for a default */
    const char *file;            /**< file the rule came from; "" for built-in */
    int line;                    /**< line of the rule's header; 0 for built-in */
    long scale_block;            /**< binary: elements per scale (a multiple of 512), 0
                                      one per segment; < 0: inherit (NFCOLL_SCALE_BLOCK,
                                      default 0). Policy version 3. */
    long block;                  /**< integer routes: elements per scale block, a power
                                      of two from NF_INT_BLOCK_MIN to NF_INT_BLOCK_MAX
                                      (32 to 4096); 0: not set, the default
                                      (NF_INT_BLOCK_DEFAULT, 128). Policy version 4. */
} nf_policy_action_t;

/** Diagnostic severities, least to most severe. */
typedef enum nf_policy_severity {
    NF_POLICY_WARNING = 0,  /**< advisory: nothing was dropped */
    NF_POLICY_DISABLED = 1, /**< a rule or setting was dropped; the rest loads */
    NF_POLICY_ERROR = 2     /**< the policy does not load */
} nf_policy_severity_t;

typedef struct nf_policy_diag {
    nf_policy_severity_t severity;
    const char *file; /**< the name given to the parser */
    int line;         /**< 1-based; 0 when no line applies (unreadable file) */
    const char *message;
} nf_policy_diag_t;

/** Receives each diagnostic as it is found. Pointers are valid only during
 * the call. */
typedef void (*nf_policy_diag_fn)(const nf_policy_diag_t *diag, void *arg);

/**
 * Read and parse a policy file. Diagnostics go to `fn` (NULL: nf_log_warn and
 * nf_log_error as "file:line: message"). Returns NF_OK with *out set when the
 * policy loaded, possibly with some rules disabled; NF_ERR_IO when the file
 * cannot be read or is not a regular file (a FIFO, device or directory is
 * refused without blocking: nf_file_read_all), NF_ERR_PARSE when it is
 * malformed or over 1 MiB, NF_ERR_NO_MEMORY. *out is set only on success.
 */
nf_status_t nf_policy_load(const char *path, nf_policy_diag_fn fn, void *arg,
                           nf_policy_t **out);

/** Same as nf_policy_load on `len` bytes of text (need not be NUL-terminated);
 * `name` is the file name used in diagnostics. */
nf_status_t nf_policy_parse(const char *text, size_t len, const char *name,
                            nf_policy_diag_fn fn, void *arg, nf_policy_t **out);

/** Decide for one call: first enabled rule that matches, else [default], else
 * route pmpi. p == NULL (no policy) gives the built-in pmpi action. No
 * allocation, system call or locale use: safe on the hot path. */
void nf_policy_match(const nf_policy_t *p, const nf_policy_query_t *q,
                     nf_policy_action_t *out);

/**
 * Like nf_policy_match, and also writes into buf (snprintf-style: at most
 * len bytes, always terminated when len > 0) one line per rule tried, saying
 * which fields matched and which did not. Returns the length the full text
 * needs, excluding the terminating NUL.
 */
size_t nf_policy_explain(const nf_policy_t *p, const nf_policy_query_t *q,
                         nf_policy_action_t *out, char *buf, size_t len);

/** 64-bit hash of what decides routes (rules in order with their names,
 * conditions and actions, and [default]) and of the calibration settings
 * (calibrate_calls, admit_cosine); comments, blank lines, spacing, key order
 * and the other [policy] settings do not change it. 0 for NULL, never 0
 * otherwise. Ranks compare it to detect different policy files. */
uint64_t nf_policy_hash(const nf_policy_t *p);

/** Query fields some enabled rule tests, as a mask of NF_POLICY_F_*: a
 * caller may cache a decision keyed on these fields alone (no F_CALLS: the
 * call index never matters; no F_REGION: no need to split fused buffers). */
enum {
    NF_POLICY_F_REGION = 1u << 0,
    NF_POLICY_F_COMM = 1u << 1,
    NF_POLICY_F_COMM_SIZE = 1u << 2,
    NF_POLICY_F_DATATYPE = 1u << 3,
    NF_POLICY_F_OP = 1u << 4,
    NF_POLICY_F_BYTES = 1u << 5,
    NF_POLICY_F_CALLS = 1u << 6
};
unsigned nf_policy_fields(const nf_policy_t *p);

/* Keys for a per-communicator decision cache; both are precomputed at load,
 * cost no allocation and give 0 for p == NULL. */

/** Index of the interval of `bytes` among the sorted boundaries of every
 * enabled rule's bytes ranges: two sizes with the same class get the same
 * decision from every rule (all else equal). */
unsigned nf_policy_size_class(const nf_policy_t *p, uint64_t bytes);

/** The smallest size in class cls (0 for class 0): with
 * nf_policy_size_class, what lets a caller try every class up to a size. */
uint64_t nf_policy_size_class_low(const nf_policy_t *p, unsigned cls);

/** The first call index from which the call index no longer changes any
 * decision (0 when no enabled rule tests `calls`; UINT64_MAX never happens:
 * open ranges end at their low bound). */
uint64_t nf_policy_calls_settled(const nf_policy_t *p);

/** Number of rules (enabled or not) and of disabled rules. */
int nf_policy_rule_count(const nf_policy_t *p);
int nf_policy_disabled_count(const nf_policy_t *p);

/** [policy] settings: cxl_node (-1 when unset), stats and trace (NULL when
 * unset). NULL p behaves as an empty policy. */
int nf_policy_cxl_node(const nf_policy_t *p);
const char *nf_policy_stats(const nf_policy_t *p);
const char *nf_policy_trace(const nf_policy_t *p);

/** Training-health monitoring ([policy] health and its numbers): an
 * unhealthy low-bit segment runs fp32 for `cooldown` calls, a repeat
 * doubles that up to `cooldown_max`. Signals: the error-feedback residual
 * over the gradient (mean |e| / mean |x|, the ranks' mean) above
 * `ef_growth`; the ranks' mean reported loss above `loss_spike` times its
 * average over the last `loss_window` reports. All enter the hash. */
typedef struct nf_policy_health {
    int on;                 /* health = on|off (default off) */
    unsigned cooldown;      /* default 50 */
    unsigned cooldown_max;  /* default 800 */
    double loss_spike;      /* default 2.0 */
    unsigned loss_window;   /* default 20 */
    double ef_growth;       /* default 4.0 */
} nf_policy_health_t;

extern const nf_policy_health_t nf_policy_health_defaults;

/** The policy's health settings (the defaults for NULL). */
const nf_policy_health_t *nf_policy_health(const nf_policy_t *p);

/** Defaults of calibrate_calls and admit_cosine. */
#define NF_POLICY_CALIBRATE_CALLS 20
#define NF_POLICY_ADMIT_COSINE 0.5

/** [policy] settings of model-aware admission; NULL p behaves as an empty
 * policy. The paths are resolved: a relative path is taken from the
 * directory of the policy file (the name given to the parser; as written
 * when that name has no '/'). NULL when unset.
 *  - regions: the layout file (nf_layout_load) that binds regions in the
 *    buffers of unmodified programs;
 *  - calibrate: where a calibration run writes its profile
 *    (nf_profile_write);
 *  - profile: the profile that `route = auto` reads (nf_profile_load).
 * The files are not read here, and the paths do not enter nf_policy_hash:
 * the caller hashes what it loads (nf_layout_hash, nf_profile_hash). */
const char *nf_policy_regions(const nf_policy_t *p);
const char *nf_policy_calibrate(const nf_policy_t *p);
const char *nf_policy_profile(const nf_policy_t *p);

/** Calls a calibration run measures per segment (>= 1, default 20), and the
 * cosine int4's result must reach for calibration to admit int4 (in
 * [-1, 1], default 0.5; see nf_profile_choose). Both enter nf_policy_hash. */
unsigned nf_policy_calibrate_calls(const nf_policy_t *p);
double nf_policy_admit_cosine(const nf_policy_t *p);

/** Name of the file the policy was parsed from. */
const char *nf_policy_file(const nf_policy_t *p);

/** Parse a byte count as the `bytes` key does ("4096", "64K", "1MiB", "2G";
 * K = 1024). */
nf_status_t nf_policy_parse_size(const char *text, uint64_t *bytes);

void nf_policy_free(nf_policy_t *p);

#endif /* NF_POLICY_H */

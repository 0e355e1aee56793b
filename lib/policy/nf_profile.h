/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Profile files (profile.c; format also in nfcoll-policy(5)). No MPI calls.
 * What a calibration run measured per segment, written by it (to the
 * `[policy] calibrate` path) and read by `route = auto` (from the
 * `profile` path):
 *
 *     # libnfcoll profile v3
 *     # segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary route lag_cosine ef_decay cos_int4 cos_int3 cos_int2 relerr_int4 relerr_int3 relerr_int2
 *     fc1.weight 200704 20 0.9312 0.9501 0.3671 0.3102 int4 0.1843 - 0.9954 0.9801 0.9102 0.0961 0.1990 0.4143
 *
 * The first line is exactly NF_PROFILE_HEADER (v3), NF_PROFILE_HEADER_V2
 * (whose entries stop after ef_decay) or NF_PROFILE_HEADER_V1 (whose
 * entries stop after the route); other lines starting with '#', and blank
 * lines, are comments. A v3 entry has 16 whitespace-separated fields: the
 * segment (a region name, or "buffer:BYTES" for a buffer with no region;
 * 1-127 printable non-space bytes, ':' allowed), elements and calls
 * (unsigned decimal), the cosines of the binary and ternary results with
 * the exact sum (in [-1, 1]) and their relative errors (>= 0), the route
 * calibration chose (a low-bit route of the table, nf_route_lowbit: binary,
 * ternary, int4, int3, int2; or fp32), the lag cosine (in [-1, 1],
 * or '-' when not measured: the evidence for the next field), the
 * error-feedback decay calibration chose (in [0, 1], or '-': the
 * settings'), then the cosines of the int4, int3 and int2 results (in
 * [-1, 1]) and their relative errors (>= 0). A segment appears once.
 * docs/design.md, "Calibration".
 *
 * A profile is written by a program, so any bad line is an error
 * (NF_POLICY_ERROR, file:line) and the profile does not load.
 */
#ifndef NF_PROFILE_H
#define NF_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nfcoll.h"
#include "nf_policy.h"

#define NF_PROFILE_HEADER "# libnfcoll profile v3"
#define NF_PROFILE_HEADER_V2 "# libnfcoll profile v2"
#define NF_PROFILE_HEADER_V1 "# libnfcoll profile v1"

typedef struct nf_profile nf_profile_t;

typedef struct nf_profile_entry {
    const char *segment;        /**< region name or "buffer:BYTES" */
    uint64_t elements, calls;   /**< floats in the segment; calls measured */
    double cos_binary, cos_ternary;
    double relerr_binary, relerr_ternary;
    nf_route_t route;           /**< a low-bit route or fp32 (nf_profile_route_ok) */
    double lag_cosine;          /**< mean cosine of the binary shadow's residual with
                                     the next call's input; NaN: not measured ('-') */
    double ef_decay;            /**< chosen from lag_cosine; < 0: the settings' ('-') */
    /** The integer routes' figures, as cos_binary and relerr_binary are
     * binary's: index 0 int4, 1 int3, 2 int2 (nf_route_intk 4, 3, 2).
     * NaN in an entry of a v1 or v2 profile, which has no such columns. */
    double cos_int[3], relerr_int[3];
} nf_profile_entry_t;

/** Read and parse a profile. Diagnostics go to fn as for nf_policy_load.
 * NF_OK with *out set; NF_ERR_IO when the file cannot be opened or read or
 * is not a regular file, NF_ERR_PARSE when it is too large or malformed,
 * NF_ERR_NO_MEMORY. *out is set only on success. */
nf_status_t nf_profile_load(const char *path, nf_policy_diag_fn fn, void *arg, nf_profile_t **out);

/** The same on len bytes of text (need not be NUL-terminated); name is the
 * file name for diagnostics. */
nf_status_t nf_profile_parse(const char *text, size_t len, const char *name, nf_policy_diag_fn fn, void *arg,
                             nf_profile_t **out);

/** The profile's entry for a segment name; NULL when absent (the segment
 * then takes fp32) or when p or segment is NULL. A hash-table lookup: no
 * allocation. */
const nf_profile_entry_t *nf_profile_find(const nf_profile_t *p, const char *segment);

/** Hash of the entries (every field), independent of their order, comments
 * and the spelling of numbers; a v1 or v2 profile's (no integer columns:
 * NaN, not hashed) is what it was before v3. 0 for NULL; never 0 otherwise. */
uint64_t nf_profile_hash(const nf_profile_t *p);

/** Number of entries, and entry i in file order (NULL past the end). */
size_t nf_profile_count(const nf_profile_t *p);
const nf_profile_entry_t *nf_profile_entry(const nf_profile_t *p, size_t i);

/** The file name the profile was loaded from, and the line of one of its
 * entries (0 when e is not p's): where a decision's evidence is. */
const char *nf_profile_file(const nf_profile_t *p);
int nf_profile_line(const nf_profile_t *p, const nf_profile_entry_t *e);

void nf_profile_free(nf_profile_t *p);

/** Whether a profile entry may name route: fp32 or a low-bit route
 * (nf_route_lowbit); never pmpi, bf16 or auto. */
int nf_profile_route_ok(nf_route_t route);

/** The route calibration chooses for an entry at admit_cosine admit: int4
 * when e->cos_int[0] (int4's cosine) >= admit, else fp32 (a NaN cosine or
 * admit admits nothing, so an entry of a v1 or v2 profile, or NULL, gives
 * fp32). Never a cheaper route (binary, ternary, int3, int2): no signal
 * calibration measures has been shown to pick one safely, on the training
 * check's models and on models it was not tuned on; their cosines are
 * written as evidence only. docs/design.md, "Calibration". */
nf_route_t nf_profile_choose(const nf_profile_entry_t *e, double admit);

/** The error-feedback decay calibration chooses from a lag cosine measured
 * over `calls` calls: NF_PROFILE_DECAY_KEEP (1, the whole residual) when
 * the residual opposes the next input (lag < 0), NF_PROFILE_DECAY_CUT when
 * it repeats it (lag >= 0: an optimizer with memory re-applies what the
 * residual carries); -1 (the settings') with fewer than
 * NF_PROFILE_LAG_MIN calls or a NaN. docs/design.md, "Calibration".
 * Calibration writes '-' instead for an entry whose route is an integer
 * route (nf_route_intk > 0), keeping the lag cosine as evidence: those
 * routes take the whole residual (the settings' decay where the user set
 * one, NFCOLL_EF_DECAY). */
#define NF_PROFILE_LAG_MIN 10
#define NF_PROFILE_DECAY_KEEP 1.0
#define NF_PROFILE_DECAY_CUT 0.25
double nf_profile_choose_decay(double lag_cosine, uint64_t calls);

/** Write the two header lines and one line per entry, in the format above,
 * always v3 (numbers as %.4f, a NaN lag cosine and a negative decay as '-',
 * with '.' whatever the locale; the integer columns must be numbers, so an
 * entry read from a v1 or v2 profile is refused until they are set). The text is checked with
 * nf_profile_parse before anything reaches fp: an entry the parser would
 * refuse (a bad name, a NaN, a duplicate segment, route pmpi) writes nothing
 * and fails with EINVAL (logged). Returns NF_OK, or with errno set
 * NF_ERR_INVALID (EINVAL: bad arguments, or such an entry), NF_ERR_NO_MEMORY
 * (the text could not be made) or NF_ERR_IO (writing fp failed). */
nf_status_t nf_profile_write(FILE *fp, const nf_profile_entry_t *e, size_t n);

#endif /* NF_PROFILE_H */
